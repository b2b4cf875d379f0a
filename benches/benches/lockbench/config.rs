//! The run's settings: defaults, `--quick`, the environment, the flags.

use std::time::Duration;

use redlock_tests::Server;

pub(crate) const USAGE: &str = "\
usage: cargo bench -p redlock-benches --bench lockbench -- [--quick] [--only GROUPS]
         [--uncontended-secs S] [--contended-secs S] [--renewal-secs S] [--renewal-locks N]
         [--latch-rounds N] [--uncontended-impls IMPLS] [--coalesce on|off]
         [--server redis|valkey] [--conditional on|off]

  --quick               about 1 s per cell, renewal of 1,000 locks for 2 s (smoke run)
  --only GROUPS         comma-separated subset of:
                        uncontended,acquire,contended,renewal,cluster,sync
  --uncontended-secs S  seconds per uncontended cell (default 3; also the acquire group's
                        cells and the sync group's read/plain cells)
  --contended-secs S    seconds per contended implementation (default 5; also the sync
                        group's semaphore and 4-locks runs)
  --renewal-secs S      seconds the renewal locks are held (default 10)
  --renewal-locks N     locks held in the renewal scenario (default 10000)
  --latch-rounds N      rounds of the sync group's latch wake-up (default 20)
  --uncontended-impls IMPLS
                        comma-separated subset of raw,ours,ours_scripts,ours_fenced,rslock,
                        raw_conditional run by the uncontended group (default all; e.g. one of
                        them under a profiler; a ratio without its raw or rslock cell is null;
                        raw_conditional runs only on a server with DELIFEQ)
  --coalesce on|off     whether our clients coalesce the calls of fenced locks (default on,
                        the client's default; off measures what coalescing brings)
  --conditional on|off  whether our clients release plain locks with the server's conditional
                        delete where it has one (DELIFEQ on Valkey 9, DELEX on Redis 8.4;
                        default on, the client's default; off sends the release script)
  --server redis|valkey the server program every group starts (default redis: redis-server
                        on PATH or REDLOCK_REDIS_SERVER; valkey: VALKEY_SERVER or
                        valkey-server on PATH, `bash scripts/install-valkey.sh` prints one)

Environment: LOCKBENCH_QUICK=1, LOCKBENCH_ONLY, LOCKBENCH_UNCONTENDED_SECS,
LOCKBENCH_CONTENDED_SECS, LOCKBENCH_RENEWAL_SECS, LOCKBENCH_RENEWAL_LOCKS,
LOCKBENCH_LATCH_ROUNDS, LOCKBENCH_UNCONTENDED_IMPLS, LOCKBENCH_COALESCE, LOCKBENCH_SERVER,
LOCKBENCH_CONDITIONAL (flags win),
and LOCKBENCH_POOL_SIZE: connections of each of our clients (default 1, the
client's own default without replicas).
Needs redis-server on PATH, or REDLOCK_REDIS_SERVER set to one (with --server valkey,
valkey-server on PATH, or VALKEY_SERVER set to one).

`cargo bench` passes --bench; without it (`cargo test --benches`) the
defaults are those of a test-sized run: 0.1 s per cell, 100 renewal locks
held 0.2 s, 2 latch rounds.";

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) uncontended_secs: Duration,
    pub(crate) contended_secs: Duration,
    pub(crate) renewal_secs: Duration,
    pub(crate) renewal_locks: usize,
    /// Rounds of the sync group's latch wake-up (16 waiters each).
    pub(crate) latch_rounds: usize,
    pub(crate) pool_size: u32,
    /// The implementations the uncontended group runs (all by default).
    pub(crate) uncontended_impls: Vec<&'static str>,
    /// Our clients coalesce the calls of fenced locks (their default).
    pub(crate) coalesce: bool,
    /// Our clients release plain locks with the server's conditional
    /// delete where it has one (their default).
    pub(crate) conditional: bool,
    /// The server program every group starts.
    pub(crate) server: Server,
    pub(crate) run_uncontended: bool,
    /// The acquire group: candidate acquire and release commands on a
    /// plain connection, no lock client.
    pub(crate) run_acquire: bool,
    pub(crate) run_contended: bool,
    pub(crate) run_renewal: bool,
    /// The cluster group: ours on 3 masters against ours on one Redis.
    pub(crate) run_cluster: bool,
    /// The sync group: read lock, semaphore and latch against the plain
    /// lock.
    pub(crate) run_sync: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            uncontended_secs: Duration::from_secs(3),
            contended_secs: Duration::from_secs(5),
            renewal_secs: Duration::from_secs(10),
            renewal_locks: 10_000,
            latch_rounds: 20,
            pool_size: 1,
            uncontended_impls: crate::uncontended::UNCONTENDED_IMPLS.to_vec(),
            coalesce: true,
            conditional: true,
            server: Server::Redis,
            run_uncontended: true,
            run_acquire: true,
            run_contended: true,
            run_renewal: true,
            run_cluster: true,
            run_sync: true,
        }
    }
}

impl Config {
    /// What `cargo test --benches` runs (no `--bench` argument): every
    /// scenario once, as briefly as it still works, to catch a benchmark
    /// that no longer runs. Its numbers mean nothing.
    fn test_sized() -> Self {
        Self {
            uncontended_secs: Duration::from_millis(100),
            contended_secs: Duration::from_millis(100),
            renewal_secs: Duration::from_millis(200),
            renewal_locks: 100,
            latch_rounds: 2,
            ..Self::default()
        }
    }

    /// Defaults (test-sized without `--bench`), then `--quick`, then the
    /// environment, then the flags.
    pub(crate) fn from_env_and_args() -> Result<Self, String> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let bench = args.iter().any(|a| a == "--bench");
        let mut cfg = match bench {
            true => Config::default(),
            false => Config::test_sized(),
        };
        if args.iter().any(|a| a == "--quick") || env("LOCKBENCH_QUICK").is_some_and(|v| v != "0") {
            cfg.uncontended_secs = Duration::from_secs(1);
            cfg.contended_secs = Duration::from_secs(1);
            // A renewal period is ttl/3 = 1 s: hold for two of them.
            cfg.renewal_secs = Duration::from_secs(2);
            cfg.renewal_locks = 1_000;
        }
        for (name, flag) in [
            ("LOCKBENCH_ONLY", "--only"),
            ("LOCKBENCH_UNCONTENDED_SECS", "--uncontended-secs"),
            ("LOCKBENCH_CONTENDED_SECS", "--contended-secs"),
            ("LOCKBENCH_RENEWAL_SECS", "--renewal-secs"),
            ("LOCKBENCH_RENEWAL_LOCKS", "--renewal-locks"),
            ("LOCKBENCH_LATCH_ROUNDS", "--latch-rounds"),
            ("LOCKBENCH_UNCONTENDED_IMPLS", "--uncontended-impls"),
            ("LOCKBENCH_COALESCE", "--coalesce"),
            ("LOCKBENCH_SERVER", "--server"),
            ("LOCKBENCH_CONDITIONAL", "--conditional"),
        ] {
            if let Some(value) = env(name) {
                cfg.set(flag, &value).map_err(|e| format!("{name}: {e}"))?;
            }
        }
        if let Some(value) = env("LOCKBENCH_POOL_SIZE") {
            cfg.pool_size = value.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                format!("LOCKBENCH_POOL_SIZE: `{value}` is not a positive integer")
            })?;
        }
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" | "--bench" => {}
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                flag if flag.starts_with("--") => {
                    let (flag, value) = match flag.split_once('=') {
                        Some((f, v)) => (f.to_owned(), v.to_owned()),
                        None => (
                            flag.to_owned(),
                            args.next().ok_or_else(|| format!("{flag} needs a value"))?,
                        ),
                    };
                    cfg.set(&flag, &value)?;
                }
                other => return Err(format!("unexpected argument `{other}`")),
            }
        }
        if !bench {
            eprintln!(
                "lockbench: no --bench argument (not run by `cargo bench`): a test-sized run"
            );
        }
        Ok(cfg)
    }

    fn set(&mut self, flag: &str, value: &str) -> Result<(), String> {
        let secs = |value: &str| {
            value
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| format!("{flag}: `{value}` is not a positive number of seconds"))
        };
        let count = |value: &str| {
            value
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{flag}: `{value}` is not a positive integer"))
        };
        match flag {
            "--uncontended-secs" => self.uncontended_secs = secs(value)?,
            "--contended-secs" => self.contended_secs = secs(value)?,
            "--renewal-secs" => self.renewal_secs = secs(value)?,
            "--renewal-locks" => self.renewal_locks = count(value)?,
            "--latch-rounds" => self.latch_rounds = count(value)?,
            "--coalesce" => self.coalesce = on_off(flag, value)?,
            "--conditional" => self.conditional = on_off(flag, value)?,
            "--server" => {
                self.server = match value {
                    "redis" => Server::Redis,
                    "valkey" => Server::Valkey,
                    other => return Err(format!("{flag}: `{other}` is not redis or valkey")),
                }
            }
            "--uncontended-impls" => {
                let all = crate::uncontended::UNCONTENDED_IMPLS;
                let mut chosen = Vec::new();
                for name in value.split(',').map(str::trim) {
                    let Some(&known) = all.iter().find(|&&n| n == name) else {
                        return Err(format!(
                            "{flag}: unknown implementation `{name}` (expected {})",
                            all.join(", ")
                        ));
                    };
                    if !chosen.contains(&known) {
                        chosen.push(known);
                    }
                }
                self.uncontended_impls = chosen;
            }
            "--only" => {
                self.run_uncontended = false;
                self.run_acquire = false;
                self.run_contended = false;
                self.run_renewal = false;
                self.run_cluster = false;
                self.run_sync = false;
                for group in value.split(',').map(str::trim) {
                    match group {
                        "uncontended" => self.run_uncontended = true,
                        "acquire" => self.run_acquire = true,
                        "contended" => self.run_contended = true,
                        "renewal" => self.run_renewal = true,
                        "cluster" => self.run_cluster = true,
                        "sync" => self.run_sync = true,
                        other => {
                            return Err(format!(
                                "{flag}: unknown group `{other}` (expected uncontended, acquire, contended, renewal, cluster, sync)"
                            ));
                        }
                    }
                }
            }
            other => return Err(format!("unknown flag `{other}`")),
        }
        Ok(())
    }
}

/// `on` or `off` (also `1`/`0`, `true`/`false`).
fn on_off(flag: &str, value: &str) -> Result<bool, String> {
    match value {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        other => Err(format!("{flag}: `{other}` is not on or off")),
    }
}
