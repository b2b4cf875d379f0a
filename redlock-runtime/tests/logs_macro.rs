//! `on_busy = "skip"` logs nothing above debug level when another node has
//! the job: scheduled jobs skip on most nodes every tick, and that is not
//! news. A test binary of its own, as `logs.rs` explains.

use redlock_runtime::{LockClient, distributed_lock};
use redlock_tests::{LogCapture, RedisServer};

#[distributed_lock(key = "job:<name>", on_busy = "skip", client = locks)]
async fn job(locks: &LockClient, name: &str) -> Option<&'static str> {
    Some("ran")
}

#[test]
fn a_skipped_job_logs_at_debug_level_only() {
    let (captured, _capturing) = LogCapture::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let server = RedisServer::start().await;
        let node_a = LockClient::connect(server.url()).await.expect("connect");
        let node_b = LockClient::connect(server.url()).await.expect("connect");
        let held = node_a.lock("job:cleanup").acquire().await.expect("acquire");
        for _ in 0..3 {
            assert_eq!(job(&node_b, "cleanup").await, None, "skipped");
        }
        held.release().await.expect("release");
        assert_eq!(job(&node_b, "cleanup").await, Some("ran"));
    });
    let logs = captured.text();
    let skipped = logs.lines().filter(|l| l.contains("body skipped")).count();
    assert_eq!(skipped, 3, "each skip is logged at debug level:\n{logs}");
    for line in logs.lines().filter(|l| l.contains("body skipped")) {
        assert!(line.contains("DEBUG"), "{line}");
    }
    let loud: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains(" INFO ") || l.contains(" WARN ") || l.contains(" ERROR "))
        .collect();
    assert!(loud.is_empty(), "logged above debug: {loud:#?}");
}
