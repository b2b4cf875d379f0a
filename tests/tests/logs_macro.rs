//! `on_busy = "skip"` logs nothing above debug level when another node has
//! the job: scheduled jobs skip on most nodes every tick, and that is not
//! news. A test binary of its own, as `logs.rs` explains.

use std::sync::Arc;

use redlock_runtime::{LockClient, distributed_lock};
use redlock_tests::RedisServer;

#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[distributed_lock(key = "job:<name>", on_busy = "skip", client = locks)]
async fn job(locks: &LockClient, name: &str) -> Option<&'static str> {
    Some("ran")
}

#[test]
fn a_skipped_job_logs_at_debug_level_only() {
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
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
    let logs = String::from_utf8(captured.0.lock().expect("log buffer").clone()).expect("utf-8");
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
