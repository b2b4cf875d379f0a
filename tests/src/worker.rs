//! A synchronizer used by another process: the `sync_worker` child binary.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A running `sync_worker` child. Killed on drop, so a failing test leaves
/// no process behind.
#[derive(Debug)]
pub struct SyncWorker {
    child: Child,
    /// The line the child printed once ready (`READY`, `DONE <n>`).
    line: String,
}

impl SyncWorker {
    /// Starts `sync_worker` (pass `env!("CARGO_BIN_EXE_sync_worker")` as
    /// `binary`) with `args` (see the binary's docs) and returns once it
    /// printed its first line.
    ///
    /// # Panics
    /// When the child cannot start or prints nothing (it failed: its
    /// error went to stderr).
    pub fn spawn(binary: &str, args: &[&str]) -> SyncWorker {
        let mut child = Command::new(binary)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the sync_worker child process");
        let stdout = child.stdout.take().expect("child stdout");
        // Bounded: the child either prints within its timeouts or exits.
        let line = BufReader::new(stdout)
            .lines()
            .next()
            .unwrap_or_else(|| panic!("sync_worker {args:?} printed nothing (see its stderr)"))
            .expect("read sync_worker's output");
        SyncWorker { child, line }
    }

    /// The first line the child printed.
    pub fn line(&self) -> &str {
        &self.line
    }

    /// Kills the child (SIGKILL) and reaps it: a crash, with no release.
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL the worker");
        self.child.wait().expect("reap the worker");
    }

    /// Waits for a child that ends by itself (a count-down); whether it
    /// succeeded.
    pub fn finish(&mut self) -> bool {
        self.child.wait().expect("reap the worker").success()
    }
}

impl Drop for SyncWorker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
