//! A lock held by another process: the `lock_holder` child binary.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A running `lock_holder` child that holds a lock. Killed (and resumed
/// first, if stopped) on drop, so a failing test leaves no process behind.
#[derive(Debug)]
pub struct LockHolder {
    child: Child,
    fence: u64,
}

impl LockHolder {
    /// Starts `lock_holder` (pass `env!("CARGO_BIN_EXE_lock_holder")` as
    /// `binary`) on `url` (several URLs joined by commas: Redlock) and
    /// returns once it printed that it holds `key`.
    ///
    /// # Panics
    /// When the child cannot start or does not take the lock.
    pub fn spawn(binary: &str, url: &str, key: &str, ttl: Duration, watchdog: bool) -> LockHolder {
        let mut child = Command::new(binary)
            .args([
                url,
                key,
                &ttl.as_millis().to_string(),
                if watchdog { "on" } else { "off" },
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the lock_holder child process");
        let stdout = child.stdout.take().expect("child stdout");
        let mut holder = LockHolder { child, fence: 0 };
        // Bounded: the child either prints within its connection timeout or exits.
        let line = BufReader::new(stdout)
            .lines()
            .next()
            .expect("lock_holder printed nothing (did it fail to acquire?)")
            .expect("read lock_holder's output");
        holder.fence = line
            .strip_prefix("ACQUIRED ")
            .and_then(|f| f.parse().ok())
            .unwrap_or_else(|| panic!("unexpected lock_holder output {line:?}"));
        holder
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The fencing token the child holds.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits"))
    }

    /// Stops the child (SIGSTOP): a stop-the-world pause; its watchdog stops too.
    pub fn pause(&self) {
        kill(self.pid(), Signal::SIGSTOP).expect("SIGSTOP the holder");
    }

    /// Lets a paused child run again (SIGCONT).
    pub fn resume(&self) {
        kill(self.pid(), Signal::SIGCONT).expect("SIGCONT the holder");
    }

    /// Kills the child (SIGKILL) and reaps it: a crash, with no release.
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL the holder");
        self.child.wait().expect("reap the holder");
    }
}

impl Drop for LockHolder {
    fn drop(&mut self) {
        let _ = kill(self.pid(), Signal::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
