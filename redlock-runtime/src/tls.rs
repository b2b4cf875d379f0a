//! Certificates for TLS connections (`rediss://` URLs, the `tls` feature).

use std::fmt;

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
/// Nothing of them is ever printed: `Debug` shows only which are set.
///
/// ```
/// use redlock_runtime::TlsCertificates;
///
/// # fn read(_: &str) -> Vec<u8> { Vec::new() }
/// let certificates = TlsCertificates::new()
///     .root_ca_pem(read("/etc/redis/tls/ca.crt"))
///     .client_cert_pem(read("/etc/redis/tls/client.crt"), read("/etc/redis/tls/client.key"));
/// assert!(format!("{certificates:?}").contains("set"));
/// ```
#[derive(Clone, Default)]
pub struct TlsCertificates {
    root_ca: Option<Vec<u8>>,
    client: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsCertificates {
    /// No certificate of its own: the system's roots, no client certificate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trust the server certificates this CA signed (PEM), and no other.
    pub fn root_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_ca = Some(pem.into());
        self
    }

    /// Present this client certificate and its private key (both PEM) to
    /// servers that ask for one.
    pub fn client_cert_pem(mut self, cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.client = Some((cert.into(), key.into()));
        self
    }

    /// As the driver takes them.
    #[cfg(feature = "tls")]
    pub(crate) fn to_redis(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: self
                .client
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.root_ca.clone(),
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
