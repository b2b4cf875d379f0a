//! End-to-end tests of the example binaries `manual_guard`,
//! `redlock_cluster`, `scheduler_node` and `cluster_failover`: each runs as a child process
//! against `redis-server` processes started by the test harness, and its
//! output is checked.
//!
//! Every run is bounded ([`RUN_TIMEOUT`]): a child still running then is
//! killed, and so is any child whose test fails first (a drop guard).
//! Failures quote the children's stdout and stderr.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redlock_tests::RedisServer;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// The longest any example may run in these tests.
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

/// The environment variables the examples read: cleared for each child, so
/// the developer's own settings do not leak into the tests.
const EXAMPLE_VARS: [&str; 9] = [
    "REDIS_URL",
    "REDIS_CLUSTER_URLS",
    "REDIS_SENTINEL_URLS",
    "REDIS_SENTINEL_MASTER",
    "REDIS_URLS",
    "NODE",
    "TICKS",
    "PERIOD_MS",
    "FROM_TICK",
];

/// A running example; killed (and reaped) if dropped before it exited.
struct Running {
    name: String,
    child: Child,
    stdout: Option<oneshot::Receiver<String>>,
    stderr: Option<oneshot::Receiver<String>>,
}

/// How an example's run ended.
struct Finished {
    name: String,
    /// `None` when it was killed at the timeout.
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
}

impl Running {
    fn start(name: &str, program: &str, env: &[(&str, &str)]) -> Running {
        Running::start_with_args(name, program, &[], env)
    }

    fn start_with_args(name: &str, program: &str, args: &[&str], env: &[(&str, &str)]) -> Running {
        let mut command = Command::new(program);
        for var in EXAMPLE_VARS {
            command.env_remove(var);
        }
        command
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {name} ({program}): {e}"));
        let stdout = child.stdout.take().map(read_all);
        let stderr = child.stderr.take().map(read_all);
        Running {
            name: name.to_owned(),
            child,
            stdout,
            stderr,
        }
    }

    /// Waits until the example exits (its pipes close, then its status),
    /// killing it at `deadline`.
    async fn finish(mut self, deadline: Instant) -> Finished {
        let stdout = self.stdout.take();
        let stderr = self.stderr.take();
        let outputs = async {
            let out = match stdout {
                Some(rx) => rx.await.unwrap_or_default(),
                None => String::new(),
            };
            let err = match stderr {
                Some(rx) => rx.await.unwrap_or_default(),
                None => String::new(),
            };
            (out, err)
        };
        tokio::pin!(outputs);
        let collected = tokio::time::timeout_at(deadline, &mut outputs).await.ok();
        let mut status = None;
        if collected.is_some() {
            // Both pipes closed: the process is exiting. Reap it.
            while Instant::now() < deadline {
                match self.child.try_wait() {
                    Ok(Some(exit)) => {
                        status = Some(exit);
                        break;
                    }
                    Ok(None) => tokio::time::sleep(Duration::from_millis(5)).await,
                    Err(e) => panic!("could not wait for {}: {e}", self.name),
                }
            }
        }
        if status.is_none() {
            // Timed out: kill it; its pipes then close and give what it wrote.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let (stdout, stderr) = match collected {
            Some(outputs) => outputs,
            None => tokio::time::timeout(Duration::from_secs(5), outputs)
                .await
                .unwrap_or_default(),
        };
        Finished {
            name: self.name.clone(),
            status,
            stdout,
            stderr,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Nothing to do (an error) when it already exited and was reaped.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads a pipe to its end on a thread of its own.
fn read_all(mut pipe: impl Read + Send + 'static) -> oneshot::Receiver<String> {
    let (tx, rx) = oneshot::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    rx
}

impl Finished {
    fn succeeded(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// Everything about the run, for failure messages.
    fn report(&self) -> String {
        let status = match self.status {
            Some(status) => status.to_string(),
            None => "killed: still running at its deadline".to_owned(),
        };
        format!(
            "--- {} ({status})\n--- stdout:\n{}--- stderr:\n{}",
            self.name, self.stdout, self.stderr
        )
    }

    fn assert_success(&self) {
        assert!(
            self.succeeded(),
            "{} did not exit 0\n{}",
            self.name,
            self.report()
        );
    }

    fn assert_line(&self, wanted: &str) {
        assert!(
            self.stdout.lines().any(|line| line.contains(wanted)),
            "no line of {}'s output contains {wanted:?}\n{}",
            self.name,
            self.report()
        );
    }
}

fn run_deadline() -> Instant {
    Instant::now() + RUN_TIMEOUT
}

fn now_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    u64::try_from(since.as_millis()).expect("milliseconds fit in u64")
}

/// The numbers after every `fencing token ` in `text`, in order.
fn fencing_tokens(text: &str) -> Vec<u64> {
    text.split("fencing token ")
        .skip(1)
        .filter_map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_guard_walks_through_the_plain_api_on_redis() {
    let redis = RedisServer::start().await;
    let url = redis.url();
    let run = Running::start(
        "manual_guard",
        env!("CARGO_BIN_EXE_manual_guard"),
        &[("REDIS_URL", url.as_str())],
    )
    .finish(run_deadline())
    .await;

    run.assert_success();
    let first = run.stdout.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!("manual_guard: using Redis at {url}"),
        "{}",
        run.report()
    );
    for wanted in [
        "   key            invoice:7",
        "   fencing token  ",
        "3. client B try_acquire while A holds it: None (busy)",
        // On Redis, tokens are at least Redis's clock in microseconds: the
        // example itself checks that each is larger than the last.
        "4. A releases; B try_acquire again: got it, fencing token ",
        "5. run: the body ran holding invoice:7 with fencing token ",
        "   try_run while A holds the lock: None (busy, the body did not run)",
        "   error: gave up on lock `invoice:7` after waiting 200ms",
        "   is_busy() = true, is_transient() = false, key() = Some(\"invoice:7\")",
        "   error: lock `invoice:7` is held by another owner",
    ] {
        run.assert_line(wanted);
    }
    // The extended lease counts from when the extend was sent (a lost or
    // late answer must not lengthen it), so what is left right after it is
    // 10 s less the round trip: 10.00 s on an idle machine, a little less
    // on a loaded one.
    let left: f64 = run
        .stdout
        .lines()
        .find_map(|line| {
            line.strip_prefix("2. A extends the lease to 10 s: lease left ")?
                .strip_suffix(" s, still held = true")
        })
        .and_then(|left| left.parse().ok())
        .unwrap_or_else(|| panic!("no line of the extend, held\n{}", run.report()));
    assert!(
        (9.0..=10.0).contains(&left),
        "lease left after extending to 10 s: {left}\n{}",
        run.report()
    );
    // The holder by name (the default: host and process id), never the
    // owner token.
    let holder = run
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix("   holder         "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no holder line\n{}", run.report()));
    assert!(
        holder.contains(':'),
        "host:pid, got {holder}\n{}",
        run.report()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_guard_says_when_it_runs_in_memory() {
    let run = Running::start("manual_guard", env!("CARGO_BIN_EXE_manual_guard"), &[])
        .finish(run_deadline())
        .await;
    run.assert_success();
    let first = run.stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("manual_guard: using the in-memory backend (REDIS_URL is not set"),
        "{}",
        run.report()
    );
}

/// Checks what `redlock_cluster` prints: each write accepted until the late
/// one, which is rejected, and tokens strictly increasing.
/// `turns` is how many acquisitions precede the stale holder's.
fn check_cluster_run(run: &Finished, turns: usize) {
    run.assert_success();
    let accepted = run
        .stdout
        .lines()
        .filter(|line| line.ends_with(": accepted"))
        .count();
    assert_eq!(accepted, turns + 1, "writes accepted\n{}", run.report());

    // "A writes "balance=0 by A" with fencing token 6: rejected, token 6 < 7, the highest seen"
    let rejected = run
        .stdout
        .lines()
        .find(|line| line.contains("A writes \"balance=0 by A\"") && line.contains(": rejected"))
        .unwrap_or_else(|| panic!("no rejected late write\n{}", run.report()));
    let late = fencing_tokens(rejected);
    assert_eq!(late.len(), 1, "{rejected}");

    let summary = run
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix("fencing tokens in order: "))
        .unwrap_or_else(|| panic!("no token summary\n{}", run.report()));
    let tokens: Vec<u64> = summary
        .split_whitespace()
        .map(|t| t.parse().expect("a token"))
        .collect();
    assert_eq!(tokens.len(), turns + 2, "{summary}\n{}", run.report());
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens strictly increase: {tokens:?}\n{}",
        run.report()
    );
    // The stale holder's token is the second to last, beaten by the last.
    assert_eq!(late[0], tokens[turns], "{}", run.report());
    assert!(
        rejected.contains(&format!("token {} < {}", tokens[turns], tokens[turns + 1])),
        "{rejected}"
    );
    // Every hold line shows the tokens of the summary, in order.
    let holds: Vec<u64> = run
        .stdout
        .lines()
        .filter(|line| line.contains(" holds account:42 with fencing token "))
        .flat_map(fencing_tokens)
        .collect();
    assert_eq!(holds, tokens, "{}", run.report());
    run.assert_line("A learns after ");
    run.assert_line("A releases: lock `account:42` was lost");
}

/// Three nodes started through the harness, and their URLs.
async fn three_nodes() -> ([RedisServer; 3], Vec<String>) {
    let servers = [
        RedisServer::start().await,
        RedisServer::start().await,
        RedisServer::start().await,
    ];
    let urls = servers.iter().map(RedisServer::url).collect();
    (servers, urls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_cluster_on_three_given_nodes_rejects_the_late_write() {
    let (servers, urls) = three_nodes().await;
    let args: Vec<&str> = urls.iter().map(String::as_str).collect();
    let run = Running::start_with_args(
        "redlock_cluster",
        env!("CARGO_BIN_EXE_redlock_cluster"),
        &args,
        &[],
    )
    .finish(run_deadline())
    .await;

    run.assert_line("redlock_cluster: locking over 3 nodes");
    for (i, url) in urls.iter().enumerate() {
        run.assert_line(&format!("   node {}: {url} answers", i + 1));
    }
    run.assert_line("a lock is held while 2 of them grant it");
    check_cluster_run(&run, 4);
    for server in &servers {
        assert!(
            server.is_running(),
            "the example never stops the nodes it is given"
        );
    }
}

/// Node 3 is stopped before the run: every step still goes through on
/// the other two. The URLs come through `REDIS_URLS` here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_cluster_locks_with_one_node_of_three_down() {
    let (mut servers, urls) = three_nodes().await;
    servers[2].kill().await;
    let list = urls.join(",");
    let run = Running::start(
        "redlock_cluster",
        env!("CARGO_BIN_EXE_redlock_cluster"),
        &[("REDIS_URLS", list.as_str())],
    )
    .finish(run_deadline())
    .await;

    run.assert_line(&format!("   node 1: {} answers", urls[0]));
    run.assert_line(&format!("   node 2: {} answers", urls[1]));
    run.assert_line(&format!("   node 3: {} does not answer (", urls[2]));
    check_cluster_run(&run, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_cluster_without_nodes_says_how_to_pass_them() {
    for (args, wanted) in [
        (&[][..], "redlock_cluster: no Redis nodes given"),
        (
            &["redis://127.0.0.1:1", "redis://127.0.0.1:2"][..],
            "redlock_cluster: three Redis URLs needed, 2 given as arguments",
        ),
    ] {
        let run = Running::start_with_args(
            "redlock_cluster",
            env!("CARGO_BIN_EXE_redlock_cluster"),
            args,
            &[],
        )
        .finish(run_deadline())
        .await;
        assert_eq!(
            run.status.and_then(|s| s.code()),
            Some(2),
            "{}",
            run.report()
        );
        assert_eq!(run.stderr.lines().next(), Some(wanted), "{}", run.report());
        assert!(
            run.stderr
                .contains("usage: redlock_cluster REDIS_URL REDIS_URL REDIS_URL"),
            "{}",
            run.report()
        );
        assert!(run.stdout.is_empty(), "{}", run.report());
    }
}

/// One `tick ...` line of `scheduler_node`.
#[derive(Debug)]
struct TickLine {
    tick: u64,
    outcome: String,
    node: String,
    fencing_token: Option<u64>,
}

fn tick_lines(run: &Finished) -> Vec<TickLine> {
    run.stdout
        .lines()
        .filter(|line| line.starts_with("tick "))
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let parsed = match words.as_slice() {
                ["tick", tick, outcome, "on", node, ..] => tick.parse().ok().map(|tick| TickLine {
                    tick,
                    outcome: (*outcome).to_owned(),
                    node: node.trim_end_matches(':').to_owned(),
                    fencing_token: fencing_tokens(line).first().copied(),
                }),
                _ => None,
            };
            parsed.unwrap_or_else(|| panic!("unparsable line {line:?}\n{}", run.report()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_scheduler_nodes_run_each_tick_exactly_once() {
    const PERIOD_MS: u64 = 500;
    const TICKS: u64 = 5;
    let redis = RedisServer::start().await;
    let url = redis.url();
    // At least a second ahead: every node is up before the first tick.
    let from_tick = now_ms() / PERIOD_MS + 3;
    let (period, ticks, from) = (
        PERIOD_MS.to_string(),
        TICKS.to_string(),
        from_tick.to_string(),
    );
    let nodes = ["a", "b", "c"].map(|node| {
        Running::start(
            &format!("scheduler_node {node}"),
            env!("CARGO_BIN_EXE_scheduler_node"),
            &[
                ("NODE", node),
                ("REDIS_URL", url.as_str()),
                ("PERIOD_MS", period.as_str()),
                ("TICKS", ticks.as_str()),
                ("FROM_TICK", from.as_str()),
            ],
        )
    });
    let deadline = run_deadline();
    let [a, b, c] = nodes;
    let (a, b, c) = tokio::join!(a.finish(deadline), b.finish(deadline), c.finish(deadline));
    let runs = [a, b, c];
    let all: String = runs.iter().map(Finished::report).collect();
    for run in &runs {
        assert!(run.succeeded(), "{} did not exit 0\n{all}", run.name);
    }

    let expected: Vec<u64> = (from_tick..from_tick + TICKS).collect();
    // tick -> (node, outcome, fencing token)
    let mut by_tick: BTreeMap<u64, Vec<(String, String, Option<u64>)>> = BTreeMap::new();
    for (run, name) in runs.iter().zip(["a", "b", "c"]) {
        let lines = tick_lines(run);
        let seen: Vec<u64> = lines.iter().map(|l| l.tick).collect();
        assert_eq!(
            seen, expected,
            "node {name} saw other ticks than the rest\n{all}"
        );
        for line in lines {
            assert_eq!(line.node, name, "{line:?}\n{all}");
            by_tick.entry(line.tick).or_default().push((
                line.node,
                line.outcome,
                line.fencing_token,
            ));
        }
    }
    let mut tokens = Vec::new();
    for (tick, outcomes) in &by_tick {
        let ran: Vec<_> = outcomes.iter().filter(|(_, o, _)| o == "ran").collect();
        let skipped = outcomes.iter().filter(|(_, o, _)| o == "skipped").count();
        assert_eq!(
            ran.len(),
            1,
            "tick {tick} ran on exactly one node: {outcomes:?}\n{all}"
        );
        assert_eq!(
            skipped, 2,
            "tick {tick} skipped on the two others: {outcomes:?}\n{all}"
        );
        tokens.push(
            ran[0]
                .2
                .unwrap_or_else(|| panic!("tick {tick}: no fencing token\n{all}")),
        );
    }
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "each run has a larger fencing token: {tokens:?}\n{all}"
    );
}

/// `cluster_failover` starts its own cluster (6 processes), kills the
/// lock's master and shows the lock held through the failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_failover_shows_a_lock_surviving_its_masters_death() {
    let run = Running::start(
        "cluster_failover",
        env!("CARGO_BIN_EXE_cluster_failover"),
        &[],
    )
    .finish(Instant::now() + Duration::from_secs(90))
    .await;
    run.assert_success();
    for wanted in [
        "1. A takes account:42 (ttl 6s), acknowledged by one replica",
        "   ok: B is refused while A holds it",
        "   ok: B's token is larger than A's, across the failover",
        "done",
    ] {
        run.assert_line(wanted);
    }
    assert!(
        run.stdout.contains("(longer than its ttl)") && !run.stdout.contains("UNEXPECTED"),
        "{}",
        run.report()
    );
    let tokens = fencing_tokens(&run.stdout);
    assert_eq!(tokens.len(), 2, "{}", run.report());
    assert!(tokens[1] > tokens[0], "{}", run.report());
}

/// Checks what `queue_consumer` prints: every message applied once by one
/// worker, duplicates replayed, the summary line.
fn check_queue_consumer_run(run: &Finished, messages: usize) {
    run.assert_success();
    run.assert_line("applied, each exactly once");
    let applied: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.contains(" applied by worker ") && !line.contains(" replayed "))
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    let mut distinct = applied.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        (applied.len(), distinct.len()),
        (messages, messages),
        "each message applied by exactly one run\n{}",
        run.report()
    );
    assert!(
        run.stdout.contains(" replayed to worker "),
        "duplicates are replayed\n{}",
        run.report()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_consumer_applies_each_message_once_across_three_workers_on_redis() {
    let redis = RedisServer::start().await;
    let url = redis.url();
    let run = Running::start(
        "queue_consumer",
        env!("CARGO_BIN_EXE_queue_consumer"),
        &[("REDIS_URL", url.as_str()), ("MESSAGES", "40")],
    )
    .finish(run_deadline())
    .await;
    run.assert_line("3 workers, each with its own client");
    check_queue_consumer_run(&run, 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_consumer_runs_in_memory_without_redis() {
    let run = Running::start("queue_consumer", env!("CARGO_BIN_EXE_queue_consumer"), &[])
        .finish(run_deadline())
        .await;
    run.assert_line("3 workers on one in-memory client");
    check_queue_consumer_run(&run, 30);
}
