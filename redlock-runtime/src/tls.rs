//! Certificates for TLS connections (`rediss://` URLs, the `tls` feature).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::ConfigError;

/// The certificates a client's TLS connections use, beyond the defaults:
/// give them to [`LockClientBuilder::tls_certificates`](crate::LockClientBuilder::tls_certificates).
///
/// Without them, a `rediss://` URL trusts the system's root certificates
/// (what a managed Redis with a public certificate needs). With a
/// [`root_ca_pem`](Self::root_ca_pem), it trusts that CA **only**: a
/// private CA for a self-hosted Redis. With a
/// [`client_cert_pem`](Self::client_cert_pem), it also proves who it is
/// (mutual TLS, `tls-auth-clients yes` on the server).
///
/// Give them as files (read when the client is built) or as PEM text.
/// [`build`](crate::LockClientBuilder::build) checks them before it
/// connects: a file that cannot be read, or that is empty or holds no PEM
/// block (a DER file, a path passed as the text), is a
/// [`ConfigError::InvalidCertificate`] naming it, not a failed handshake
/// later. Nothing of them is ever printed: `Debug` shows only which are set.
///
/// ```
/// use redlock_runtime::TlsCertificates;
///
/// let certificates = TlsCertificates::new()
///     .root_ca_pem_file("/etc/redis/tls/ca.crt")
///     .client_cert_pem_files("/etc/redis/tls/client.crt", "/etc/redis/tls/client.key");
/// assert!(format!("{certificates:?}").contains("set"));
/// ```
#[derive(Clone, Default)]
pub struct TlsCertificates {
    root_ca: Option<Pem>,
    client: Option<(Pem, Pem)>,
}

/// A certificate or key as given: its PEM text, or the file to read it from.
#[derive(Clone)]
enum Pem {
    Text(Vec<u8>),
    File(PathBuf),
}

impl Pem {
    /// Its PEM text, checked: read from its file, not empty, and holding
    /// the block `marker` names (`CERTIFICATE` or `PRIVATE KEY`).
    fn checked(
        &self,
        what: &'static str,
        given_to: &str,
        marker: &str,
    ) -> Result<Pem, ConfigError> {
        let (text, origin) = match self {
            Pem::Text(text) => (text.clone(), format!("given to `{given_to}`")),
            Pem::File(path) => {
                let origin = format!("file {}", path.display());
                let text = std::fs::read(path).map_err(|e| ConfigError::InvalidCertificate {
                    what,
                    origin: origin.clone(),
                    reason: format!("cannot be read: {e}"),
                })?;
                (text, origin)
            }
        };
        let invalid = |reason: &str| ConfigError::InvalidCertificate {
            what,
            origin: origin.clone(),
            reason: reason.to_owned(),
        };
        if text.iter().all(u8::is_ascii_whitespace) {
            return Err(invalid("is empty"));
        }
        let has_block = String::from_utf8_lossy(&text).lines().any(|line| {
            line.starts_with("-----BEGIN ") && line.trim_end().ends_with(&format!("{marker}-----"))
        });
        if !has_block {
            return Err(invalid(&format!("holds no PEM `{marker}` block")));
        }
        Ok(Pem::Text(text))
    }

    /// The PEM text (of a [`checked`](Self::checked) one; a file not read
    /// yet gives nothing).
    #[cfg(feature = "tls")]
    fn text(&self) -> Vec<u8> {
        match self {
            Pem::Text(text) => text.clone(),
            Pem::File(_) => Vec::new(),
        }
    }
}

impl TlsCertificates {
    /// No certificate of its own: the system's roots, no client certificate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trust the server certificates this CA signed (PEM text), and no other.
    pub fn root_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_ca = Some(Pem::Text(pem.into()));
        self
    }

    /// Trust the server certificates the CA in this PEM file signed, and no
    /// other; the file is read when the client is built.
    pub fn root_ca_pem_file(mut self, path: impl AsRef<Path>) -> Self {
        self.root_ca = Some(Pem::File(path.as_ref().to_owned()));
        self
    }

    /// Present this client certificate and its private key (both PEM text)
    /// to servers that ask for one.
    pub fn client_cert_pem(mut self, cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.client = Some((Pem::Text(cert.into()), Pem::Text(key.into())));
        self
    }

    /// Present the client certificate and private key in these PEM files
    /// to servers that ask for one; the files are read when the client is
    /// built.
    pub fn client_cert_pem_files(mut self, cert: impl AsRef<Path>, key: impl AsRef<Path>) -> Self {
        self.client = Some((
            Pem::File(cert.as_ref().to_owned()),
            Pem::File(key.as_ref().to_owned()),
        ));
        self
    }

    /// The same certificates, their files read and every one checked (see
    /// the type's docs).
    pub(crate) fn checked(&self) -> Result<TlsCertificates, ConfigError> {
        let root_ca = (self.root_ca.as_ref())
            .map(|ca| ca.checked("root CA", "root_ca_pem", "CERTIFICATE"))
            .transpose()?;
        let client = (self.client.as_ref())
            .map(|(cert, key)| {
                Ok::<_, ConfigError>((
                    cert.checked("client certificate", "client_cert_pem", "CERTIFICATE")?,
                    key.checked("client key", "client_cert_pem", "PRIVATE KEY")?,
                ))
            })
            .transpose()?;
        Ok(TlsCertificates { root_ca, client })
    }

    /// As the driver takes them (once [`checked`](Self::checked)).
    #[cfg(feature = "tls")]
    pub(crate) fn to_redis(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: self
                .client
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.text(),
                    client_key: key.text(),
                }),
            root_cert: self.root_ca.as_ref().map(Pem::text),
        }
    }
}

impl fmt::Debug for TlsCertificates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |is: bool| if is { "set" } else { "none" };
        f.debug_struct("TlsCertificates")
            .field("root_ca", &set(self.root_ca.is_some()))
            .field("client_cert", &set(self.client.is_some()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

    fn refused(certificates: &TlsCertificates) -> String {
        match certificates.checked() {
            Err(e @ ConfigError::InvalidCertificate { .. }) => e.to_string(),
            other => panic!("refused as an invalid certificate: {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn an_empty_missing_or_non_pem_certificate_is_refused_naming_it() {
        let dir = std::env::temp_dir().join(format!("redlock-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (empty, der, good) = (
            dir.join("empty.crt"),
            dir.join("ca.der"),
            dir.join("ca.crt"),
        );
        std::fs::write(&empty, "").expect("write");
        std::fs::write(&der, [0x30, 0x82, 0x01, 0x0a]).expect("write");
        std::fs::write(&good, CA).expect("write");

        let message = refused(&TlsCertificates::new().root_ca_pem_file(&empty));
        assert!(
            message.contains("root CA") && message.contains("empty.crt"),
            "{message}"
        );
        assert!(
            message.contains("is empty") && message.contains("PEM"),
            "{message}"
        );
        let message = refused(&TlsCertificates::new().root_ca_pem_file(&der));
        assert!(
            message.contains("ca.der") && message.contains("no PEM"),
            "{message}"
        );
        let message = refused(&TlsCertificates::new().root_ca_pem_file(dir.join("missing.crt")));
        assert!(
            message.contains("missing.crt") && message.contains("cannot be read"),
            "{message}"
        );
        // A path passed where the text goes.
        let message = refused(&TlsCertificates::new().root_ca_pem("/etc/redis/tls/ca.crt"));
        assert!(message.contains("given to `root_ca_pem`"), "{message}");
        // A certificate where the key goes.
        let message = refused(&TlsCertificates::new().client_cert_pem(CA, CA));
        assert!(
            message.contains("client key") && message.contains("PRIVATE KEY"),
            "{message}"
        );

        let checked = TlsCertificates::new()
            .root_ca_pem_file(&good)
            .client_cert_pem(CA, KEY)
            .checked()
            .expect("PEM files pass");
        assert!(matches!(&checked.root_ca, Some(Pem::Text(text)) if text == CA.as_bytes()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
