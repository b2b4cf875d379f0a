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
    /// refused, or one side does not speak TLS. Permanent. (A `rediss://`
    /// URL to a plain-text port gets no answer at all: when its handshake
    /// times out, a plain-text `PING` to the port tells it from a silent
    /// server, and a port that answers is this failure.)
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

    /// The failure of a topology none of whose servers could serve a call,
    /// from each failed server's own (`failures`), where `spare` servers
    /// may fail without failing the topology (a Redlock quorum's nodes
    /// beyond a majority):
    /// - more than `spare` servers failed for good: that permanent kind
    ///   ([`Auth`](Self::Auth) before [`Tls`](Self::Tls)), as no retry can
    ///   bring enough of them back;
    /// - else, every server failed the same way: that way;
    /// - else [`Other`](Self::Other) (the detail lists each server's).
    pub(crate) fn of_servers(failures: &[Self], spare: usize) -> Self {
        let permanent = failures.iter().filter(|f| f.is_permanent()).count();
        if permanent > spare {
            return if failures.contains(&Self::Auth) {
                Self::Auth
            } else {
                Self::Tls
            };
        }
        match failures.split_first() {
            Some((first, rest)) if rest.iter().all(|f| f == first) => *first,
            _ => Self::Other,
        }
    }

    /// Classifies a driver error met while connecting.
    pub(crate) fn of(e: &redis::RedisError) -> Self {
        if e.kind() == redis::ErrorKind::AuthenticationFailed
            || e.code()
                .is_some_and(|code| matches!(code, "WRONGPASS" | "NOAUTH" | "NOPERM"))
        {
            return Self::Auth;
        }
        // The driver's own verdicts first: the TLS test below reads words,
        // which a refusal or a timeout never needs.
        if e.is_connection_refusal() {
            return Self::Refused;
        }
        if e.is_timeout() {
            return Self::Timeout;
        }
        if is_tls_failure(e) {
            return Self::Tls;
        }
        // The driver keeps the I/O error behind an `Arc` that hides its
        // kind from `source()`; its text says it.
        let text = e.to_string().to_ascii_lowercase();
        if e.is_io_error()
            && [
                "unreachable",
                "no route to host",
                "network is down",
                "lookup address",
                "name or service not known",
                "no such host",
            ]
            .iter()
            .any(|w| text.contains(w))
        {
            return Self::Unreachable;
        }
        Self::Other
    }
}

/// A TLS handshake that failed, by the words the TLS stacks use (the
/// driver's I/O error carries rustls's message, not its type).
fn is_tls_failure(e: &redis::RedisError) -> bool {
    let text = e.to_string().to_ascii_lowercase();
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

#[cfg(test)]
mod tests {
    use std::io;

    use super::ConnectFailure;

    fn io_error(kind: io::ErrorKind) -> redis::RedisError {
        redis::RedisError::from(io::Error::from(kind))
    }

    #[test]
    fn driver_errors_are_classified() {
        let wrongpass =
            redis::make_extension_error("WRONGPASS".to_owned(), Some("invalid".to_owned()));
        let noauth = redis::make_extension_error("NOAUTH".to_owned(), None);
        let auth_kind =
            redis::RedisError::from((redis::ErrorKind::AuthenticationFailed, "rejected"));
        let tls = redis::RedisError::from(io::Error::new(
            io::ErrorKind::InvalidData,
            "invalid peer certificate: UnknownIssuer",
        ));
        let lookup = redis::RedisError::from(io::Error::other(
            "failed to lookup address information: Name or service not known",
        ));
        for (error, want) in [
            (
                io_error(io::ErrorKind::ConnectionRefused),
                ConnectFailure::Refused,
            ),
            (
                io_error(io::ErrorKind::HostUnreachable),
                ConnectFailure::Unreachable,
            ),
            (
                io_error(io::ErrorKind::NetworkUnreachable),
                ConnectFailure::Unreachable,
            ),
            (lookup, ConnectFailure::Unreachable),
            (io_error(io::ErrorKind::TimedOut), ConnectFailure::Timeout),
            (wrongpass, ConnectFailure::Auth),
            (noauth, ConnectFailure::Auth),
            (auth_kind, ConnectFailure::Auth),
            (tls, ConnectFailure::Tls),
            (io_error(io::ErrorKind::BrokenPipe), ConnectFailure::Other),
        ] {
            assert_eq!(ConnectFailure::of(&error), want, "{error}");
        }
    }

    #[test]
    fn several_servers_failures_make_one() {
        use ConnectFailure::{Auth, Other, Refused, Timeout, Tls};
        // (failures, spare, overall)
        for (failures, spare, want) in [
            (vec![Refused, Refused, Refused], 1, Refused),
            (vec![Timeout, Timeout], 0, Timeout),
            (vec![Refused, Timeout], 0, Other),
            // One wrong password among Sentinels (none spare) is enough.
            (vec![Auth, Refused, Refused], 0, Auth),
            (vec![Tls, Timeout], 0, Tls),
            (vec![Tls, Auth], 0, Auth),
            // A quorum that can spare one node: one barred node is not
            // enough to rule out a majority.
            (vec![Auth, Refused], 1, Other),
            (vec![Auth, Auth, Refused], 1, Auth),
            (vec![Tls, Tls], 1, Tls),
            (vec![], 0, Other),
        ] {
            assert_eq!(
                ConnectFailure::of_servers(&failures, spare),
                want,
                "{failures:?}, spare {spare}"
            );
        }
    }

    #[test]
    fn only_auth_and_tls_are_permanent() {
        for failure in [
            ConnectFailure::Refused,
            ConnectFailure::Unreachable,
            ConnectFailure::Timeout,
            ConnectFailure::Other,
        ] {
            assert!(!failure.is_permanent(), "{failure}");
        }
        assert!(ConnectFailure::Auth.is_permanent());
        assert!(ConnectFailure::Tls.is_permanent());
    }
}
