//! One node of a scheduled job that runs once per tick across all nodes.
//!
//! Start several nodes against the same Redis; at every tick each node
//! calls the job, and exactly one of them runs it:
//!
//! ```text
//! export REDIS_URL=redis://127.0.0.1:6379
//! NODE=a cargo run -p redlock-examples --bin scheduler_node &
//! NODE=b cargo run -p redlock-examples --bin scheduler_node &
//! NODE=c cargo run -p redlock-examples --bin scheduler_node
//! ```
//!
//! Settings, from the environment:
//!
//! - `REDIS_URL`: the Redis the nodes share. Without it the node uses
//!   in-memory locks and says so: they dedupe within this process only, so
//!   every node would run every tick.
//! - `NODE`: this node's name in the output. Defaults to `node-<pid>`.
//! - `PERIOD_MS`: the tick period, at least 500. Defaults to 1000.
//! - `TICKS`: stop after this many ticks. Defaults to running until Ctrl-C.
//! - `FROM_TICK`: the first tick to take part in, so that nodes started one
//!   after the other begin with the same tick (the tests use it). Defaults
//!   to the next one.
//!
//! A tick is the wall-clock period number, `unix_millis / PERIOD_MS`: the
//! nodes agree on it without talking to each other. Each node sleeps until
//! the next period boundary, calls the job, and prints exactly one line for
//! the tick, which people and scripts can both read:
//!
//! ```text
//! # node a: Redis at redis://127.0.0.1:6379, period 1000 ms, job "job:report" (runs 150 ms, held at least 250 ms), until Ctrl-C
//! tick 1763712345 ran on a (fencing token 41)
//! tick 1763712346 skipped on a (ran elsewhere)
//! tick 1763712347 skipped on a (ran elsewhere)
//! tick 1763712348 ran on a (fencing token 44)
//! ^C# node a: stopped by Ctrl-C after 4 ticks: ran 2, skipped 2, failed 0
//! ```
//!
//! Lines for ticks start with `tick <number> <ran|skipped|failed> on <node>`;
//! other lines start with `#`. A tick whose job failed (Redis unreachable)
//! is `tick N failed on a: <error>`; the node goes on with the next tick,
//! and exits 1 at the end if any tick failed. A node that wakes too late
//! for some ticks (it was paused, or its job overran) says
//! `# node a missed tick N` (or `ticks N..=M`) and goes on with the next one.
//!
//! # The job: one fixed key, held for at least half a period
//!
//! ```ignore
//! #[distributed_lock(key = "job:report", ttl = "2s", on_busy = "skip", hold_at_least = "250ms")]
//! async fn report(tick: u64) -> Result<Option<Report>, LockError>
//! ```
//!
//! At each tick every node calls `report`. The first to reach Redis takes
//! `job:report` and runs the body; the others find it held, skip the body,
//! and get `Ok(None)` (`on_busy = "skip"`). A Redis failure is not "busy":
//! it comes back as `Err`.
//!
//! **Why `hold_at_least`.** The job takes 150 ms. Without a minimum hold
//! the winner would release the key after 150 ms, and a node that woke
//! 200 ms late (a slow start, a loaded machine, a clock 200 ms behind)
//! would find it free and run the same tick a second time. With
//! `hold_at_least = "250ms"` the key stays taken 250 ms after the acquire,
//! measured on Redis's clock however long the job takes, so nodes up to
//! 250 ms late skip. The hold must also end before the next tick, with the
//! same margin for nodes that are early: about half the period is the
//! balanced choice. The attribute's durations are compile-time literals, so
//! this example fixes the hold at 250 ms and requires `PERIOD_MS` >= 500;
//! for a job that runs every minute, write `hold_at_least = "30s"`.
//!
//! **Why not a key per tick** (`key = "job:report:<tick>"`). It looks more
//! exact, and a run that overruns its period would not make the next tick
//! skip. But it needs the hold all the same (after the winner released
//! `job:report:N`, a late node would find it free and run tick N again),
//! and every distinct key leaves its fencing counter in Redis for the
//! fencing retention (a day by default): one more Redis key per tick,
//! 86,400 at a time at one-second ticks. The fixed key gives "once per
//! tick" with one lock key and one counter, and its fencing tokens order
//! the runs.
//!
//! Its limits, which the per-tick key shares: a node more than the hold
//! late runs the tick again (keep the nodes' clocks in sync with NTP; they
//! are then within milliseconds). And a run longer than the period makes
//! the next tick skip on every node, since the lock is still held (and
//! renewed): ticks never overlap. The ttl (2 s) is how long a node that
//! crashed mid-run keeps the job from the others.

use std::pin::pin;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redlock_runtime::{LockClient, LockError, current_lock, distributed_lock};

/// The job's lock key, as in its attribute (for the output).
const JOB_KEY: &str = "job:report";
/// How long the job works.
const WORK: Duration = Duration::from_millis(150);
/// The client's default command timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);
/// The smallest period: twice the job's minimum hold (250 ms).
const MIN_PERIOD_MS: u64 = 500;

/// What one run of the job produced.
#[derive(Debug)]
struct Report {
    fencing_token: u64,
}

/// The scheduled job: one node in all runs it per tick (see the crate docs).
#[distributed_lock(
    key = "job:report",
    ttl = "2s",
    on_busy = "skip",
    hold_at_least = "250ms"
)]
async fn report(tick: u64) -> Result<Option<Report>, LockError> {
    let fencing_token = match current_lock() {
        Some(held) => held.fencing_token().await?,
        None => 0,
    };
    tracing::debug!(tick, fencing_token, "building the report");
    tokio::time::sleep(WORK).await; // the work
    Ok(Some(Report { fencing_token }))
}

#[derive(Debug)]
struct Config {
    node: String,
    redis_url: Option<String>,
    period_ms: u64,
    ticks: Option<u64>,
    from_tick: Option<u64>,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scheduler_node: error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let config = config()?;
    let node = config.node.as_str();
    let ticks = match config.ticks {
        Some(n) => format!("{n} ticks"),
        None => "until Ctrl-C".to_owned(),
    };
    let client = match &config.redis_url {
        Some(url) => {
            let client = LockClient::builder()
                .url(url.as_str())
                .key_prefix("redlock-example:")
                // A tick that fails on a Redis outage ends well before the
                // next one (the default is 500 ms).
                .command_timeout(Duration::from_millis(config.period_ms / 4).min(DEFAULT_TIMEOUT))
                .build()
                .await
                .map_err(|e| e.to_string())?;
            println!(
                "# node {node}: Redis at {}, period {} ms, job {JOB_KEY:?} (runs {} ms, held \
                 at least 250 ms), {ticks}",
                redlock_runtime::redact_url(url),
                config.period_ms,
                WORK.as_millis()
            );
            client
        }
        None => {
            println!(
                "# node {node}: REDIS_URL is not set: in-memory locks, which dedupe only within \
                 this process (set REDIS_URL=redis://host:port to dedupe across nodes); period \
                 {} ms, {ticks}",
                config.period_ms
            );
            LockClient::in_memory()
        }
    };
    // The client `#[distributed_lock]` functions without `client = ..` use.
    redlock_runtime::install(client);

    let period = config.period_ms;
    let mut stop = pin!(tokio::signal::ctrl_c());
    let mut next = (now_ms()? / period + 1).max(config.from_tick.unwrap_or(0));
    let (mut ran, mut skipped, mut failed, mut done) = (0u64, 0u64, 0u64, 0u64);
    let mut stopped = false;
    while config.ticks.is_none_or(|n| done < n) {
        let at = next.checked_mul(period).ok_or("FROM_TICK is too large")?;
        let wait = Duration::from_millis(at.saturating_sub(now_ms()?));
        tokio::select! {
            signal = &mut stop => {
                signal.map_err(|e| format!("cannot listen for Ctrl-C: {e}"))?;
                stopped = true;
                break;
            }
            () = tokio::time::sleep(wait) => {}
        }
        match report(next).await {
            Ok(Some(report)) => {
                ran += 1;
                println!(
                    "tick {next} ran on {node} (fencing token {})",
                    report.fencing_token
                );
            }
            Ok(None) => {
                skipped += 1;
                println!("tick {next} skipped on {node} (ran elsewhere)");
            }
            Err(e) => {
                failed += 1;
                println!("tick {next} failed on {node}: {e}");
            }
        }
        done += 1;
        // The next boundary still ahead: ticks that passed while this one
        // ran (a pause, an overrun) are missed, not run late, since the
        // other nodes have run them already.
        let current = now_ms()? / period;
        if current == next + 1 {
            println!("# node {node} missed tick {current}");
        } else if current > next + 1 {
            println!("# node {node} missed ticks {}..={current}", next + 1);
        }
        next = next.max(current) + 1;
    }

    let how = if stopped {
        format!("stopped by Ctrl-C after {done} ticks")
    } else {
        format!("done after {done} ticks")
    };
    println!("# node {node}: {how}: ran {ran}, skipped {skipped}, failed {failed}");
    if failed > 0 {
        return Err(format!(
            "{failed} of {done} ticks failed (see the `failed` lines)"
        ));
    }
    Ok(())
}

fn config() -> Result<Config, String> {
    let var = |name: &str| match std::env::var(name) {
        Ok(value) if !value.trim().is_empty() => Ok(Some(value.trim().to_owned())),
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{name} is not valid UTF-8")),
    };
    let number = |name: &str| -> Result<Option<u64>, String> {
        var(name)?
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|e| format!("{name}={v:?} is not a whole number: {e}"))
            })
            .transpose()
    };
    let period_ms = number("PERIOD_MS")?.unwrap_or(1000);
    if period_ms < MIN_PERIOD_MS {
        return Err(format!(
            "PERIOD_MS={period_ms} is too short: at least {MIN_PERIOD_MS}, so the job's 250 ms \
             minimum hold ends before the next tick"
        ));
    }
    let ticks = number("TICKS")?;
    if ticks == Some(0) {
        return Err(
            "TICKS=0: give a positive number of ticks, or unset it to run until Ctrl-C".into(),
        );
    }
    Ok(Config {
        node: var("NODE")?.unwrap_or_else(|| format!("node-{}", std::process::id())),
        redis_url: var("REDIS_URL")?,
        period_ms,
        ticks,
        from_tick: number("FROM_TICK")?,
    })
}

/// Milliseconds since the Unix epoch, on this machine's clock.
fn now_ms() -> Result<u64, String> {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|_| "the system clock is set before 1970")?;
    u64::try_from(since.as_millis()).map_err(|_| "the system clock is out of range".to_owned())
}
