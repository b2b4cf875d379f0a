//! Capturing what `tracing` logs, for tests that check log content.

use std::sync::{Arc, Mutex};

use tracing::subscriber::DefaultGuard;

/// Everything a thread-local `tracing` subscriber (all levels, no colours)
/// writes while the guard from [`LogCapture::start`] lives.
///
/// `tracing` caches per call site whether anyone listens, so a test that
/// checks logs should run in a test binary of its own, on the thread that
/// called `start` (a current-thread runtime).
#[derive(Clone, Default, Debug)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// Starts capturing on this thread until the returned guard is dropped.
    pub fn start() -> (LogCapture, DefaultGuard) {
        let captured = LogCapture::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .finish();
        (captured, tracing::subscriber::set_default(subscriber))
    }

    /// What was logged so far.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl std::io::Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
