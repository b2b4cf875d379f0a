//! The JSON lines: one record per measurement, each an object whose
//! `scenario` field says what it is (`meta`, `uncontended`,
//! `uncontended_keys`, `acquire_candidates`, `contended`, `renewal`,
//! `cluster`, `cluster_renewal`, `sync_read`, `sync_permits`, `sync_latch`,
//! `target`, `run`).
//!
//! Floats are rounded to 3 decimals, a whole number is written without a
//! fraction (`1`, not `1.0`), and NaN (a ratio with nothing to divide by)
//! is `null`.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

use crate::baselines::{RSLOCK_RETRY_DELAY, RSLOCK_VERSION};
use crate::candidates::ratio_to_set_nx;
use crate::cluster::{ClusterRun, MASTERS};
use crate::config::Config;
use crate::contended::{CONTENDED_HOLD, CONTENDED_WORKERS, Contended};
use crate::renewal::{RENEWAL_TTL, Renewal};
use crate::support::{FutureSizes, cores, percentile};
use crate::sync::{
    LATCH_COUNT, LATCH_SETTLE, LATCH_WAITERS, PERMIT_CLIENTS, PERMIT_HOLD, PERMIT_LIMIT,
    PERMIT_WORKERS, SyncRun,
};
use crate::targets::Target;
use crate::uncontended::{KeySpace, Measured, ratio_to_raw, ratio_to_rslock};

#[derive(Serialize)]
#[serde(tag = "scenario", rename_all = "lowercase")]
enum Record<'a> {
    Meta(Meta<'a>),
    Uncontended(UncontendedRow<'a>),
    #[serde(rename = "uncontended_keys")]
    UncontendedKeys(UncontendedKeysRow<'a>),
    #[serde(rename = "acquire_candidates")]
    AcquireCandidates(CandidateRow<'a>),
    Contended(ContendedRow<'a>),
    Renewal(RenewalRow<'a>),
    Cluster(ClusterRow<'a>),
    #[serde(rename = "cluster_renewal")]
    ClusterRenewal(ClusterRenewalRow<'a>),
    #[serde(rename = "sync_read")]
    SyncRead(SyncReadRow<'a>),
    #[serde(rename = "sync_permits")]
    SyncPermits(SyncPermitsRow<'a>),
    #[serde(rename = "sync_latch")]
    SyncLatch(SyncLatchRow<'a>),
    Target(TargetRow<'a>),
    #[serde(rename = "future_sizes")]
    FutureSizes {
        acquire_bytes: usize,
        release_bytes: usize,
    },
    Run {
        #[serde(serialize_with = "num")]
        seconds: f64,
    },
}

#[derive(Serialize)]
struct ClusterRow<'a> {
    #[serde(rename = "impl")]
    implementation: &'a str,
    masters: usize,
    concurrency: usize,
    pairs: usize,
    #[serde(serialize_with = "num")]
    seconds: f64,
    #[serde(serialize_with = "num")]
    pairs_per_sec: f64,
    p50_us: u32,
    p99_us: u32,
    #[serde(serialize_with = "num")]
    ratio_to_single: f64,
}

#[derive(Serialize)]
struct ClusterRenewalRow<'a> {
    masters: usize,
    locks: usize,
    #[serde(serialize_with = "num")]
    periods: f64,
    pipelines: &'a BTreeMap<String, u64>,
    #[serde(serialize_with = "num")]
    max_pipelines_per_master_per_period: f64,
    held_at_end: usize,
}

#[derive(Serialize)]
struct SyncReadRow<'a> {
    #[serde(rename = "impl")]
    implementation: &'a str,
    concurrency: usize,
    pairs: usize,
    #[serde(serialize_with = "num")]
    seconds: f64,
    #[serde(serialize_with = "num")]
    pairs_per_sec: f64,
    p50_us: u32,
    p99_us: u32,
    #[serde(serialize_with = "num")]
    ratio_to_plain: f64,
}

#[derive(Serialize)]
struct SyncPermitsRow<'a> {
    #[serde(rename = "impl")]
    implementation: &'a str,
    workers: usize,
    clients: usize,
    /// The semaphore's limit, or the number of plain locks.
    limit: u32,
    #[serde(serialize_with = "num")]
    hold_ms: f64,
    #[serde(serialize_with = "num")]
    seconds: f64,
    acquisitions: u64,
    #[serde(serialize_with = "num")]
    acquisitions_per_sec: f64,
    #[serde(serialize_with = "num")]
    ratio_to_locks: f64,
    wait_p50_us: u32,
    wait_p99_us: u32,
    wait_max_us: u32,
    max_inside: usize,
    #[serde(serialize_with = "num")]
    mean_hold_us: f64,
    errors: u64,
    first_error: Option<&'a str>,
}

#[derive(Serialize)]
struct SyncLatchRow<'a> {
    waiters: usize,
    count: u64,
    rounds: usize,
    settle_ms: u64,
    /// Where each wake is timed from.
    from: &'a str,
    wakes: usize,
    wake_p50_us: u32,
    wake_p99_us: u32,
    wake_max_us: u32,
    count_down_p50_us: u32,
    count_down_max_us: u32,
    early: usize,
    errors: usize,
    first_error: Option<&'a str>,
}

#[derive(Serialize)]
struct Meta<'a> {
    redis_version: &'a str,
    cores: usize,
    pool_size: u32,
    rslock_version: &'a str,
    rslock_retry_delay_ms: u64,
    #[serde(serialize_with = "num")]
    uncontended_secs: f64,
    #[serde(serialize_with = "num")]
    contended_secs: f64,
    #[serde(serialize_with = "num")]
    renewal_secs: f64,
    renewal_locks: usize,
    latch_rounds: usize,
    /// Whether our clients coalesced the calls of fenced locks.
    coalesce: bool,
    /// Whether our clients released plain locks with the server's
    /// conditional delete where it has one.
    conditional: bool,
    /// The server program: `redis` or `valkey` (`redis_version` is then
    /// Valkey's own version).
    server: &'static str,
}

#[derive(Serialize)]
struct UncontendedRow<'a> {
    #[serde(rename = "impl")]
    implementation: &'a str,
    concurrency: usize,
    pairs: usize,
    #[serde(serialize_with = "num")]
    seconds: f64,
    #[serde(serialize_with = "num")]
    pairs_per_sec: f64,
    p50_us: u32,
    p99_us: u32,
    #[serde(serialize_with = "num")]
    ratio_to_raw: f64,
    #[serde(serialize_with = "num")]
    ratio_to_rslock: f64,
    /// This process's CPU µs per pair (its threads' schedstat).
    #[serde(serialize_with = "num")]
    client_cpu_us_per_pair: f64,
    /// redis-server's CPU µs per pair (`INFO cpu`).
    #[serde(serialize_with = "num")]
    server_cpu_us_per_pair: f64,
}

/// The server's keys and memory after the uncontended group.
#[derive(Serialize)]
struct UncontendedKeysRow<'a> {
    keys: u64,
    keys_before: u64,
    keys_by_impl: &'a BTreeMap<&'static str, u64>,
    used_memory_bytes: u64,
    used_memory_before_bytes: u64,
    used_memory_human: &'a str,
    pairs_measured: usize,
    pairs_by_impl: &'a BTreeMap<&'static str, usize>,
    /// Untimed pairs per implementation, which leave keys as well.
    warm_up_pairs_per_impl: u64,
    /// Our clients' batches of coalesced calls, and the calls in them.
    coalesced_batches_by_impl: BTreeMap<&'static str, u64>,
    coalesced_calls_by_impl: BTreeMap<&'static str, u64>,
}

#[derive(Serialize)]
struct CandidateRow<'a> {
    candidate: &'a str,
    concurrency: usize,
    pairs: usize,
    #[serde(serialize_with = "num")]
    seconds: f64,
    #[serde(serialize_with = "num")]
    pairs_per_sec: f64,
    p50_us: u32,
    p99_us: u32,
    #[serde(serialize_with = "num")]
    ratio_to_set_nx: f64,
    /// This process's CPU µs per pair (its threads' schedstat).
    #[serde(serialize_with = "num")]
    client_cpu_us_per_pair: f64,
    /// redis-server's CPU µs per pair (`INFO cpu`).
    #[serde(serialize_with = "num")]
    server_cpu_us_per_pair: f64,
}

#[derive(Serialize)]
struct ContendedRow<'a> {
    #[serde(rename = "impl")]
    implementation: &'a str,
    workers: usize,
    #[serde(serialize_with = "num")]
    hold_ms: f64,
    #[serde(serialize_with = "num")]
    seconds: f64,
    acquisitions: u64,
    #[serde(serialize_with = "num")]
    acquisitions_per_sec: f64,
    #[serde(serialize_with = "num")]
    handoff_share: f64,
    wait_p50_us: u32,
    wait_p99_us: u32,
    wait_max_us: u32,
    violations: u64,
    per_worker: &'a [u64],
    #[serde(serialize_with = "num")]
    mean_hold_us: f64,
    errors: u64,
    first_error: Option<&'a str>,
}

#[derive(Serialize)]
struct RenewalRow<'a> {
    #[serde(rename = "impl")]
    implementation: &'a str,
    locks: usize,
    ttl_ms: u64,
    #[serde(serialize_with = "num")]
    acquire_secs: f64,
    #[serde(serialize_with = "num")]
    window_secs: f64,
    #[serde(serialize_with = "num")]
    commands_per_sec: f64,
    #[serde(serialize_with = "num")]
    all_calls_per_sec: f64,
    #[serde(serialize_with = "num")]
    evalsha_per_sec: f64,
    #[serde(serialize_with = "num")]
    eval_per_sec: f64,
    #[serde(serialize_with = "num")]
    commands_per_period: f64,
    #[serde(serialize_with = "num")]
    commands_per_lock_per_period: f64,
    calls: &'a BTreeMap<String, u64>,
    renewal_round_trips: u64,
    #[serde(serialize_with = "num")]
    periods: f64,
    #[serde(serialize_with = "num")]
    round_trips_per_period: f64,
    /// redis-server's CPU time per period (µs).
    #[serde(serialize_with = "num")]
    server_us_per_period: f64,
    watched_at_end: usize,
    #[serde(serialize_with = "opt_num")]
    rss_before_mib: Option<f64>,
    #[serde(serialize_with = "opt_num")]
    rss_holding_mib: Option<f64>,
    held_at_end: usize,
    release_errors: usize,
}

#[derive(Serialize)]
struct TargetRow<'a> {
    target: &'a str,
    measured: &'a str,
    pass: Option<bool>,
}

/// `x` rounded to 3 decimals; whole numbers as integers, NaN and infinities
/// as `null`.
fn num<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    if !x.is_finite() {
        return s.serialize_none();
    }
    let rounded = (x * 1000.0).round() / 1000.0;
    // Below 2^53 every whole f64 is exactly an i64.
    if rounded.fract() == 0.0 && rounded.abs() < 9_007_199_254_740_992.0 {
        s.serialize_i64(rounded as i64)
    } else {
        s.serialize_f64(rounded)
    }
}

fn opt_num<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    num(&x.unwrap_or(f64::NAN), s)
}

fn emit(record: &Record<'_>) {
    let line = serde_json::to_string(record).expect("the records serialize");
    println!("{line}");
}

pub(crate) fn meta(redis_version: &str, cfg: &Config) {
    emit(&Record::Meta(Meta {
        redis_version,
        cores: cores(),
        pool_size: cfg.pool_size,
        rslock_version: RSLOCK_VERSION,
        rslock_retry_delay_ms: RSLOCK_RETRY_DELAY.as_millis() as u64,
        uncontended_secs: cfg.uncontended_secs.as_secs_f64(),
        contended_secs: cfg.contended_secs.as_secs_f64(),
        renewal_secs: cfg.renewal_secs.as_secs_f64(),
        renewal_locks: cfg.renewal_locks,
        latch_rounds: cfg.latch_rounds,
        coalesce: cfg.coalesce,
        conditional: cfg.conditional,
        server: cfg.server.name(),
    }));
}

pub(crate) fn uncontended(results: &[Measured]) {
    for r in results {
        emit(&Record::Uncontended(UncontendedRow {
            implementation: r.name,
            concurrency: r.concurrency,
            pairs: r.pairs,
            seconds: r.elapsed.as_secs_f64(),
            pairs_per_sec: r.per_sec().round(),
            p50_us: percentile(&r.latencies_us, 0.50),
            p99_us: percentile(&r.latencies_us, 0.99),
            ratio_to_raw: ratio_to_raw(results, r),
            ratio_to_rslock: ratio_to_rslock(results, r),
            client_cpu_us_per_pair: r.client_us_per_pair(),
            server_cpu_us_per_pair: r.server_us_per_pair(),
        }));
    }
}

pub(crate) fn key_space(k: &KeySpace) {
    emit(&Record::UncontendedKeys(UncontendedKeysRow {
        keys: k.keys,
        keys_before: k.keys_before,
        keys_by_impl: &k.by_impl,
        used_memory_bytes: k.used_memory,
        used_memory_before_bytes: k.used_memory_before,
        used_memory_human: &k.used_memory_human,
        pairs_measured: k.pairs_measured,
        pairs_by_impl: &k.pairs_by_impl,
        warm_up_pairs_per_impl: k.warm_up_pairs,
        coalesced_batches_by_impl: k.coalesced.iter().map(|(i, (b, _))| (*i, *b)).collect(),
        coalesced_calls_by_impl: k.coalesced.iter().map(|(i, (_, c))| (*i, *c)).collect(),
    }));
}

pub(crate) fn candidates(results: &[Measured]) {
    for r in results {
        emit(&Record::AcquireCandidates(CandidateRow {
            candidate: r.name,
            concurrency: r.concurrency,
            pairs: r.pairs,
            seconds: r.elapsed.as_secs_f64(),
            pairs_per_sec: r.per_sec().round(),
            p50_us: percentile(&r.latencies_us, 0.50),
            p99_us: percentile(&r.latencies_us, 0.99),
            ratio_to_set_nx: ratio_to_set_nx(results, r),
            client_cpu_us_per_pair: r.client_us_per_pair(),
            server_cpu_us_per_pair: r.server_us_per_pair(),
        }));
    }
}

pub(crate) fn contended(results: &[Contended]) {
    for r in results {
        emit(&Record::Contended(ContendedRow {
            implementation: r.name,
            workers: CONTENDED_WORKERS,
            hold_ms: CONTENDED_HOLD.as_secs_f64() * 1000.0,
            seconds: r.seconds,
            acquisitions: r.acquisitions(),
            acquisitions_per_sec: r.per_sec(),
            handoff_share: r.handoff_share(),
            wait_p50_us: percentile(&r.waits_us, 0.50),
            wait_p99_us: percentile(&r.waits_us, 0.99),
            wait_max_us: r.wait_max_us(),
            violations: r.violations,
            per_worker: &r.per_worker,
            mean_hold_us: r.mean_hold_us.round(),
            errors: r.errors,
            first_error: r.first_error.as_deref(),
        }));
    }
}

pub(crate) fn renewal(r: &Renewal) {
    emit(&Record::Renewal(RenewalRow {
        implementation: r.implementation,
        locks: r.locks,
        ttl_ms: RENEWAL_TTL.as_millis() as u64,
        acquire_secs: r.acquire_secs,
        window_secs: r.window_secs,
        commands_per_sec: r.sent_per_sec().round(),
        all_calls_per_sec: r.all_calls_per_sec().round(),
        evalsha_per_sec: r.per_sec("evalsha").round(),
        eval_per_sec: r.per_sec("eval").round(),
        commands_per_period: r.per_period().round(),
        commands_per_lock_per_period: r.per_period() / r.locks as f64,
        calls: &r.calls,
        renewal_round_trips: r.round_trips,
        periods: r.periods(),
        round_trips_per_period: r.round_trips_per_period(),
        server_us_per_period: r.server_us_per_period().round(),
        watched_at_end: r.watched,
        rss_before_mib: r.rss_before_mib,
        rss_holding_mib: r.rss_holding_mib,
        held_at_end: r.held_at_end,
        release_errors: r.release_errors,
    }));
}

pub(crate) fn cluster(c: &ClusterRun) {
    for r in &c.cells {
        emit(&Record::Cluster(ClusterRow {
            implementation: r.name,
            masters: if r.name.ends_with("cluster") {
                MASTERS
            } else {
                1
            },
            concurrency: r.concurrency,
            pairs: r.pairs,
            seconds: r.elapsed.as_secs_f64(),
            pairs_per_sec: r.per_sec().round(),
            p50_us: percentile(&r.latencies_us, 0.50),
            p99_us: percentile(&r.latencies_us, 0.99),
            ratio_to_single: c.vs_single(r.name, r.concurrency),
        }));
    }
    emit(&Record::ClusterRenewal(ClusterRenewalRow {
        masters: MASTERS,
        locks: c.renewal_locks,
        periods: c.renewal_periods,
        pipelines: &c.pipelines,
        max_pipelines_per_master_per_period: c.max_pipelines_per_period(),
        held_at_end: c.renewal_held_at_end,
    }));
}

pub(crate) fn sync(run: &SyncRun) {
    for r in &run.read {
        emit(&Record::SyncRead(SyncReadRow {
            implementation: r.name,
            concurrency: r.concurrency,
            pairs: r.pairs,
            seconds: r.elapsed.as_secs_f64(),
            pairs_per_sec: r.per_sec().round(),
            p50_us: percentile(&r.latencies_us, 0.50),
            p99_us: percentile(&r.latencies_us, 0.99),
            ratio_to_plain: run.vs_plain(r.name, r.concurrency),
        }));
    }
    for r in &run.permits {
        emit(&Record::SyncPermits(SyncPermitsRow {
            implementation: r.name,
            workers: PERMIT_WORKERS,
            clients: PERMIT_CLIENTS,
            limit: PERMIT_LIMIT,
            hold_ms: PERMIT_HOLD.as_secs_f64() * 1000.0,
            seconds: r.seconds,
            acquisitions: r.acquisitions,
            acquisitions_per_sec: r.per_sec(),
            ratio_to_locks: run.vs_locks(r.name),
            wait_p50_us: percentile(&r.waits_us, 0.50),
            wait_p99_us: percentile(&r.waits_us, 0.99),
            wait_max_us: r.wait_max_us(),
            max_inside: r.max_inside,
            mean_hold_us: r.mean_hold_us().round(),
            errors: r.errors,
            first_error: r.first_error.as_deref(),
        }));
    }
    let l = &run.latch;
    emit(&Record::SyncLatch(SyncLatchRow {
        waiters: LATCH_WAITERS,
        count: LATCH_COUNT,
        rounds: l.rounds,
        settle_ms: LATCH_SETTLE.as_millis() as u64,
        from: "just before the last count_down is sent",
        wakes: l.wakes_us.len(),
        wake_p50_us: percentile(&l.wakes_us, 0.50),
        wake_p99_us: percentile(&l.wakes_us, 0.99),
        wake_max_us: l.wake_max_us(),
        count_down_p50_us: percentile(&l.count_down_us, 0.50),
        count_down_max_us: l.count_down_us.last().copied().unwrap_or(0),
        early: l.early,
        errors: l.errors,
        first_error: l.first_error.as_deref(),
    }));
}

pub(crate) fn targets(targets: &[Target]) {
    for t in targets {
        emit(&Record::Target(TargetRow {
            target: &t.what,
            measured: &t.measured,
            pass: t.pass,
        }));
    }
}

pub(crate) fn run(seconds: f64) {
    emit(&Record::Run { seconds });
}

pub(crate) fn future_sizes(f: FutureSizes) {
    emit(&Record::FutureSizes {
        acquire_bytes: f.acquire_bytes,
        release_bytes: f.release_bytes,
    });
}
