//! Redis servers that speak TLS, with certificates made for the run: a CA,
//! a server certificate for `127.0.0.1` signed by it, a client certificate
//! for mutual TLS, and an unrelated CA to trust by mistake.

use rcgen::{
    BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tempfile::TempDir;

use crate::RedisServer;

/// A certificate and its private key, PEM.
#[derive(Debug, Clone)]
pub struct Pem {
    /// The certificate.
    pub cert: String,
    /// Its private key.
    pub key: String,
}

/// A CA made for the run.
pub struct TestCa {
    params: CertificateParams,
    key: KeyPair,
    /// The CA's certificate, to trust.
    pub cert_pem: String,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

impl TestCa {
    /// A new CA named `name`.
    ///
    /// # Panics
    /// If rcgen cannot make it (it always can with its default features).
    pub fn new(name: &str) -> TestCa {
        let mut params =
            CertificateParams::new(Vec::<String>::new()).expect("CA parameters are valid");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("rcgen makes a key pair");
        let cert_pem = params.self_signed(&key).expect("rcgen signs the CA").pem();
        TestCa {
            params,
            key,
            cert_pem,
        }
    }

    /// A certificate signed by this CA, for `names` (IP addresses or DNS
    /// names), for a server or a client.
    ///
    /// # Panics
    /// If rcgen cannot make it.
    pub fn issue(&self, names: &[&str], usage: ExtendedKeyUsagePurpose) -> Pem {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("certificate names are valid");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "redlock test");
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().expect("rcgen makes a key pair");
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params
            .signed_by(&key, &issuer)
            .expect("rcgen signs the certificate");
        Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

/// Whether a TLS server asks clients for a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `tls-auth-clients no`: any client that trusts the server.
    Off,
    /// `tls-auth-clients yes`: only clients with a certificate of the CA.
    Required,
}

/// A `redis-server` with a TLS port beside its plain one (which the harness
/// uses to see it is up), and the certificates to reach it.
pub struct TlsRedis {
    /// The server; its plain port is [`RedisServer::url`].
    pub server: RedisServer,
    tls_port: u16,
    /// The certificate of the CA that signed the server's: trust it.
    pub ca_pem: String,
    /// A client certificate signed by the CA, for mutual TLS.
    pub client: Pem,
    _dir: TempDir,
}

impl std::fmt::Debug for TlsRedis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsRedis")
            .field("tls_port", &self.tls_port)
            .finish_non_exhaustive()
    }
}

impl TlsRedis {
    /// Starts a TLS server with a new CA.
    ///
    /// # Panics
    /// As [`RedisServer::start`], and if the server's `redis-server` was
    /// built without TLS (the log says so).
    pub async fn start(auth: ClientAuth) -> TlsRedis {
        Self::start_signed_by(&TestCa::new("redlock test CA"), auth).await
    }

    /// Starts a TLS server whose certificate `ca` signs (several servers
    /// can share one CA).
    ///
    /// # Panics
    /// As [`TlsRedis::start`].
    pub async fn start_signed_by(ca: &TestCa, auth: ClientAuth) -> TlsRedis {
        let dir = tempfile::Builder::new()
            .prefix("redlock-tls-")
            .tempdir()
            .expect("could not create a temporary directory for the certificates");
        let server_pem = ca.issue(
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let client = ca.issue(&["redlock-client"], ExtendedKeyUsagePurpose::ClientAuth);
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("could not write a certificate file");
            path.to_string_lossy().into_owned()
        };
        let cert = write("server.crt", &server_pem.cert);
        let key = write("server.key", &server_pem.key);
        let ca_file = write("ca.crt", &ca.cert_pem);
        let auth = match auth {
            ClientAuth::Off => "no",
            ClientAuth::Required => "yes",
        };
        // The TLS port is chosen afresh on each start attempt, like the plain one.
        let (server, tls_port) = RedisServer::start_with_second_port(|tls_port| {
            [
                "--tls-port",
                &tls_port.to_string(),
                "--tls-cert-file",
                &cert,
                "--tls-key-file",
                &key,
                "--tls-ca-cert-file",
                &ca_file,
                "--tls-auth-clients",
                auth,
            ]
            .map(str::to_owned)
            .into()
        })
        .await;
        TlsRedis {
            server,
            tls_port,
            ca_pem: ca.cert_pem.clone(),
            client,
            _dir: dir,
        }
    }

    /// `rediss://127.0.0.1:<tls port>`.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.tls_port)
    }
}
