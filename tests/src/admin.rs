//! Plumbing shared by the cluster and sentinel harnesses: one-shot commands with a
//! deadline, `INFO`-style field lookup, and running `redis-cli` with a bound.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use redis::FromRedisValue;
use tokio::time::Instant;

/// Bound on one administrative command (connect + reply). A paused (SIGSTOPped)
/// server accepts the connection and never answers; this turns that into an error.
pub(crate) const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// Delay between two polls of a bounded wait.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Sends `cmd` on a fresh connection to `url` and reads the reply, within
/// [`QUERY_TIMEOUT`]. The error names the URL and the command.
pub(crate) async fn query<T: FromRedisValue>(url: &str, cmd: &redis::Cmd) -> Result<T, String> {
    let name = command_name(cmd);
    let exchange = async {
        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        cmd.query_async::<T>(&mut conn)
            .await
            .map_err(|e| e.to_string())
    };
    match tokio::time::timeout(QUERY_TIMEOUT, exchange).await {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(e)) => Err(format!("{name} on {url} failed: {e}")),
        Err(_) => Err(format!(
            "{name} on {url} got no answer within {QUERY_TIMEOUT:?}"
        )),
    }
}

/// The first two words of a command (e.g. `CLUSTER INFO`), for messages.
fn command_name(cmd: &redis::Cmd) -> String {
    cmd.args_iter()
        .take(2)
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            _ => "<cursor>".to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The value of `field:` in an `INFO` or `CLUSTER INFO` reply.
pub(crate) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        line.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

/// Runs `redis-cli` with `args`, waiting at most `limit`; returns its output (stdout
/// and stderr together).
///
/// # Panics
///
/// If `redis-cli` is missing (the message says what to install), cannot run, exits
/// with an error, or is still running after `limit` (it is killed). The message
/// quotes its output, then `context()` (the servers' logs).
pub(crate) async fn run_redis_cli(
    args: &[String],
    limit: Duration,
    context: impl Fn() -> String,
) -> String {
    let binary = crate::server::redis_cli_binary().unwrap_or_else(|m| panic!("{m}"));
    let out_dir = tempfile::Builder::new()
        .prefix("redlock-redis-cli-")
        .tempdir()
        .expect("could not create a temporary directory for redis-cli's output");
    let out_path = out_dir.path().join("output.log");
    let out = std::fs::File::create(&out_path).expect("could not create redis-cli's output file");
    let err = out
        .try_clone()
        .expect("could not share redis-cli's output file with its stderr");
    let mut child = Command::new(&binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("could not execute redis-cli at `{}`: {e}", binary.display()));
    let output = || read_lossy(&out_path);
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => tokio::time::sleep(POLL_INTERVAL).await,
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "`redis-cli {}` did not finish within {limit:?}; its output:\n{}\n{}",
                    args.join(" "),
                    output(),
                    context()
                );
            }
            Err(e) => panic!("could not wait for redis-cli (pid {}): {e}", child.id()),
        }
    };
    if !status.success() {
        panic!(
            "`redis-cli {}` failed ({status}); its output:\n{}\n{}",
            args.join(" "),
            output(),
            context()
        );
    }
    output()
}

fn read_lossy(path: &Path) -> String {
    std::fs::read(path).map_or_else(
        |e| format!("(could not read {}: {e})", path.display()),
        |bytes| String::from_utf8_lossy(&bytes).into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_found_by_exact_name() {
        let info = "# Cluster\r\ncluster_state:ok\r\ncluster_slots_ok:16384\r\n";
        assert_eq!(info_field(info, "cluster_state"), Some("ok"));
        assert_eq!(info_field(info, "cluster_slots_ok"), Some("16384"));
        assert_eq!(info_field(info, "cluster_slots"), None);
    }
}
