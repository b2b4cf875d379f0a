//! [`ConnectFailure`]: why no connection to Redis could be made, told
//! apart from the driver's error so that permanent failures (a wrong
//! password, a TLS failure) fail at once.

use std::fmt;

/// Why no connection to Redis could be made, classified so that a caller,
/// and a log line, can tell a server that is down from a wrong password.
///
/// [`Auth`](Self::Auth) and [`Tls`](Self::Tls) are permanent: retrying
/// cannot help, so a build or an operation fails with them at once instead
/// of retrying until its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectFailure {
    /// Nothing listens on the port: Redis is down or restarting, or the
    /// port is wrong.
    Refused,
    /// The host could not be reached: its name did not resolve, or there
    /// is no route to it.
    Unreachable,
    /// The server rejected the user name or password (`WRONGPASS`,
    /// `NOAUTH`, `NOPERM`). Permanent.
    Auth,
    /// The TLS handshake failed: the server's certificate is not trusted
    /// (wrong CA) or is for another name, the client certificate was
    /// refused, or one side does not speak TLS. Permanent.
    Tls,
    /// The connect or its handshake got no answer in time (the server is
    /// paused or overloaded, or a firewall drops the packets).
    Timeout,
    /// Another failure; the detail says which.
    Other,
}

impl ConnectFailure {
    /// True for the failures a retry cannot fix: [`Auth`](Self::Auth) and
    /// [`Tls`](Self::Tls).
    pub fn is_permanent(self) -> bool {
        matches!(self, Self::Auth | Self::Tls)
    }

    /// What to do about it, for the error messages.
    pub(crate) fn advice(self) -> &'static str {
        match self {
            Self::Refused => "check that Redis runs and listens on that host and port",
            Self::Unreachable => "check the host name and that the network reaches it",
            Self::Auth => {
                "check the user name and password in the URL (`redis://user:password@host`) and \
                 the user's ACL"
            }
            Self::Tls => {
                "check that the URL is `rediss://` exactly when the server's port is TLS, and \
                 the CA and client certificate given with `tls_certificates`"
            }
            Self::Timeout => {
                "Redis may be paused or overloaded, or a firewall drops the connection; raise \
                 `connection_timeout` if it is just slow"
            }
            Self::Other => "check the URL and that Redis runs",
        }
    }

    /// Classifies a driver error met while connecting.
    pub(crate) fn of(e: &redis::RedisError) -> Self {
        use std::io::ErrorKind as Io;
        if e.kind() == redis::ErrorKind::AuthenticationFailed
            || e.code()
                .is_some_and(|code| matches!(code, "WRONGPASS" | "NOAUTH" | "NOPERM"))
        {
            return Self::Auth;
        }
        if is_tls_failure(e) {
            return Self::Tls;
        }
        if e.is_connection_refusal() {
            return Self::Refused;
        }
        if e.is_timeout() {
            return Self::Timeout;
        }
        let io = std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .map(std::io::Error::kind);
        match io {
            Some(Io::ConnectionRefused) => Self::Refused,
            Some(Io::TimedOut) => Self::Timeout,
            Some(Io::HostUnreachable | Io::NetworkUnreachable | Io::NetworkDown) => {
                Self::Unreachable
            }
            _ if e.to_string().contains("lookup address") => Self::Unreachable,
            _ => Self::Other,
        }
    }
}

/// A TLS handshake that failed: rustls's own error inside the I/O error, or
/// the words the TLS stacks use.
fn is_tls_failure(e: &redis::RedisError) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        #[cfg(feature = "tls")]
        if s.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
        {
            #[cfg(feature = "tls")]
            if inner.downcast_ref::<rustls::Error>().is_some() {
                return true;
            }
            if looks_like_tls(&inner.to_string()) {
                return true;
            }
        }
        source = s.source();
    }
    looks_like_tls(&e.to_string())
}

fn looks_like_tls(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    ["certificate", "handshake", "tls", "ssl", "corrupt message"]
        .iter()
        .any(|w| text.contains(w))
}

impl fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Refused => "connection refused",
            Self::Unreachable => "host unreachable",
            Self::Auth => "authentication failed",
            Self::Tls => "TLS handshake failed",
            Self::Timeout => "connect timed out",
            Self::Other => "connection failed",
        })
    }
}
