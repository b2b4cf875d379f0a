//! The human-readable tables, one per scenario.

use crate::candidates::{CANDIDATES, ratio_to_set_nx};
use crate::cluster::{ClusterRun, MASTERS};
use crate::config::Config;
use crate::contended::{CONTENDED_HOLD, CONTENDED_WORKERS, Contended};
use crate::renewal::{RENEWAL_TTL, Renewal};
use crate::support::{FutureSizes, ms, percentile};
use crate::sync::{
    LATCH_COUNT, LATCH_WAITERS, PERMIT_CLIENTS, PERMIT_HOLD, PERMIT_LIMIT, PERMIT_WORKERS, SyncRun,
};
use crate::uncontended::{KeySpace, Measured, ratio_to_raw, ratio_to_rslock};

pub(crate) fn print_uncontended(results: &[Measured], cfg: &Config) {
    println!(
        "\nuncontended: acquire+release pairs on distinct keys, {:.1} s per cell (in interleaved slices)",
        cfg.uncontended_secs.as_secs_f64()
    );
    println!(
        "{:<15} {:>11} {:>10} {:>8} {:>8} {:>7} {:>9} {:>11} {:>11}",
        "impl",
        "concurrency",
        "pairs/s",
        "p50 us",
        "p99 us",
        "vs raw",
        "vs rslock",
        "client us/p",
        "server us/p"
    );
    for r in results {
        println!(
            "{:<15} {:>11} {:>10.0} {:>8} {:>8} {:>7.2} {:>9.2} {:>11.2} {:>11.2}",
            r.name,
            r.concurrency,
            r.per_sec(),
            percentile(&r.latencies_us, 0.50),
            percentile(&r.latencies_us, 0.99),
            ratio_to_raw(results, r),
            ratio_to_rslock(results, r),
            r.client_us_per_pair(),
            r.server_us_per_pair()
        );
    }
    println!(
        "  client us/p: this process's CPU time per pair (its threads' schedstat), server us/p: redis-server's (INFO cpu), both over the cell's slices"
    );
    // Our client against the same commands sent by hand (Valkey 9): what
    // the client itself costs, the protocol aside.
    let at_32 = |name: &str| {
        results
            .iter()
            .find(|r| r.name == name && r.concurrency == 32)
    };
    if let (Some(ours), Some(floor)) = (at_32("ours"), at_32("raw_conditional")) {
        println!(
            "  ours over raw_conditional (the same commands by hand) at concurrency 32: client us/p {:.2}, pairs/s {:.2}",
            ours.client_us_per_pair() / floor.client_us_per_pair(),
            ours.per_sec() / floor.per_sec()
        );
    }
}

pub(crate) fn print_key_space(k: &KeySpace) {
    let by_impl: Vec<String> = k.by_impl.iter().map(|(i, n)| format!("{i} {n}")).collect();
    let pairs: Vec<String> = k
        .pairs_by_impl
        .iter()
        .map(|(i, n)| format!("{i} {n}"))
        .collect();
    println!(
        "  keys on the server after the group: {} (before: {}); by implementation: {}",
        k.keys,
        k.keys_before,
        by_impl.join(", ")
    );
    println!(
        "  used memory: {} ({} bytes; before: {} bytes)",
        k.used_memory_human, k.used_memory, k.used_memory_before
    );
    println!(
        "  pairs measured: {} ({}; plus {} warm-up pairs per implementation). A released lock leaves a fencing counter only when a token was issued: ours_fenced one per key, ours/ours_scripts/raw/rslock none",
        k.pairs_measured,
        pairs.join(", "),
        k.warm_up_pairs
    );
    let coalesced: Vec<String> = k
        .coalesced
        .iter()
        .map(|(i, (batches, calls))| {
            let per = if *batches == 0 {
                0.0
            } else {
                *calls as f64 / *batches as f64
            };
            format!("{i} {batches} batches of {calls} calls ({per:.1} per batch)")
        })
        .collect();
    println!(
        "  coalesced: {} (calls of fenced locks only; the rest went alone)",
        coalesced.join(", ")
    );
}

pub(crate) fn print_candidates(results: &[Measured], cfg: &Config) {
    println!(
        "\nacquire: candidate acquire+release commands on one MultiplexedConnection (no lock client), pairs on distinct keys, {:.1} s per cell (in interleaved slices)",
        cfg.uncontended_secs.as_secs_f64()
    );
    println!(
        "{:<22} {:>11} {:>10} {:>8} {:>8} {:>9} {:>11} {:>11}",
        "candidate",
        "concurrency",
        "pairs/s",
        "p50 us",
        "p99 us",
        "vs set_nx",
        "client us/p",
        "server us/p"
    );
    for r in results {
        println!(
            "{:<22} {:>11} {:>10.0} {:>8} {:>8} {:>9.2} {:>11.2} {:>11.2}",
            r.name,
            r.concurrency,
            r.per_sec(),
            percentile(&r.latencies_us, 0.50),
            percentile(&r.latencies_us, 0.99),
            ratio_to_set_nx(results, r),
            r.client_us_per_pair(),
            r.server_us_per_pair()
        );
    }
    for (name, what) in CANDIDATES {
        println!("  {name:<22} {what}");
    }
}

pub(crate) fn print_contended(results: &[Contended]) {
    let Some(first) = results.first() else { return };
    println!(
        "\ncontended: {CONTENDED_WORKERS} workers on one key, acquire (waiting) -> hold {CONTENDED_HOLD:?} -> release, {:.1} s each",
        first.seconds
    );
    println!(
        "{:<10} {:>7} {:>8} {:>9} {:>9} {:>9} {:>10} {:>10} {:>8} {:>6}",
        "impl",
        "acq/s",
        "handoff",
        "wait p50",
        "wait p99",
        "wait max",
        "violations",
        "per-worker",
        "hold",
        "errors"
    );
    println!(
        "{:<10} {:>7} {:>8} {:>9} {:>9} {:>9} {:>10} {:>10} {:>8} {:>6}",
        "", "", "%", "ms", "ms", "ms", "", "min-max", "mean ms", ""
    );
    for r in results {
        let min = r.per_worker.iter().min().copied().unwrap_or(0);
        let max = r.per_worker.iter().max().copied().unwrap_or(0);
        println!(
            "{:<10} {:>7.0} {:>8.1} {:>9.2} {:>9.2} {:>9.2} {:>10} {:>10} {:>8.2} {:>6}",
            r.name,
            r.per_sec(),
            r.handoff_share() * 100.0,
            ms(percentile(&r.waits_us, 0.50)),
            ms(percentile(&r.waits_us, 0.99)),
            ms(r.wait_max_us()),
            r.violations,
            format!("{min}-{max}"),
            r.mean_hold_us / 1000.0,
            r.errors
        );
    }
    for r in results {
        if let Some(e) = &r.first_error {
            println!("  {}: first error: {e}", r.name);
        }
    }
}

fn mib(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |m| format!("{m:.1} MiB"))
}

pub(crate) fn print_renewal(r: &Renewal) {
    println!(
        "\nrenewal: {} locks, ttl {RENEWAL_TTL:?} (renewed every ttl/3), held {:.1} s by our client ({})",
        r.locks, r.window_secs, r.implementation
    );
    println!("  acquired all in                  {:.2} s", r.acquire_secs);
    println!(
        "  Redis commands/s while holding   {:.0} sent (evalsha {:.0}, eval {:.0}); {:.0} incl. those run inside scripts",
        r.sent_per_sec(),
        r.per_sec("evalsha"),
        r.per_sec("eval"),
        r.all_calls_per_sec()
    );
    println!(
        "  commands sent per period         {:.0} ({:.2} per lock)",
        r.per_period(),
        r.per_period() / r.locks as f64
    );
    println!(
        "  renewal round trips              {} in {:.1} periods: {:.2} per period (client counter)",
        r.round_trips,
        r.periods(),
        r.round_trips_per_period()
    );
    println!(
        "  server CPU per period            {:.0} us (INFO cpu)",
        r.server_us_per_period()
    );
    let calls: Vec<String> = r.calls.iter().map(|(c, n)| format!("{c} {n}")).collect();
    println!("  calls in the window              {}", calls.join(", "));
    println!(
        "  resident memory                  {} before acquiring, {} while holding",
        mib(r.rss_before_mib),
        mib(r.rss_holding_mib)
    );
    println!(
        "  still held at the end            {} of {} (client watches {}); release errors {}",
        r.held_at_end, r.locks, r.watched, r.release_errors
    );
}

pub(crate) fn print_cluster(c: &ClusterRun) {
    println!(
        "\ncluster: our client on {MASTERS} masters (one machine) against our client on one Redis"
    );
    println!(
        "{:<11} {:>11} {:>10} {:>8} {:>8} {:>10}",
        "impl", "concurrency", "pairs/s", "p50 us", "p99 us", "vs single"
    );
    for r in &c.cells {
        let vs = format!("{:.2}", c.vs_single(r.name, r.concurrency));
        println!(
            "{:<11} {:>11} {:>10.0} {:>8} {:>8} {:>10}",
            r.name,
            r.concurrency,
            r.per_sec(),
            percentile(&r.latencies_us, 0.50),
            percentile(&r.latencies_us, 0.99),
            vs
        );
    }
    let per_node: Vec<String> = c
        .pipelines
        .iter()
        .map(|(node, n)| format!("{node} {:.2}", *n as f64 / c.renewal_periods))
        .collect();
    println!(
        "  renewal: {} locks over {MASTERS} masters, {:.1} periods: pipelines per master per period {}; {} still held",
        c.renewal_locks,
        c.renewal_periods,
        per_node.join(", "),
        c.renewal_held_at_end
    );
}

pub(crate) fn print_sync(run: &SyncRun) {
    println!(
        "\nsync read: rw_lock(k).read() against lock(k), acquire+release pairs on distinct keys, one client (interleaved slices)"
    );
    println!(
        "{:<9} {:>11} {:>10} {:>8} {:>8} {:>9}",
        "impl", "concurrency", "pairs/s", "p50 us", "p99 us", "vs plain"
    );
    for r in &run.read {
        println!(
            "{:<9} {:>11} {:>10.0} {:>8} {:>8} {:>9.2}",
            r.name,
            r.concurrency,
            r.per_sec(),
            percentile(&r.latencies_us, 0.50),
            percentile(&r.latencies_us, 0.99),
            run.vs_plain(r.name, r.concurrency)
        );
    }

    if let Some(first) = run.permits.first() {
        println!(
            "\nsync permits: {PERMIT_WORKERS} workers on {PERMIT_CLIENTS} clients, a semaphore of limit {PERMIT_LIMIT} against {PERMIT_LIMIT} plain locks (worker w on key w/{PERMIT_CLIENTS}), acquire (waiting) -> hold {PERMIT_HOLD:?} -> release, {:.1} s each (interleaved slices)",
            first.seconds
        );
        println!(
            "{:<10} {:>8} {:>8} {:>9} {:>9} {:>9} {:>10} {:>8} {:>6}",
            "impl",
            "acq/s",
            "vs locks",
            "wait p50",
            "wait p99",
            "wait max",
            "max inside",
            "hold",
            "errors"
        );
        println!(
            "{:<10} {:>8} {:>8} {:>9} {:>9} {:>9} {:>10} {:>8} {:>6}",
            "", "", "", "ms", "ms", "ms", "", "mean ms", ""
        );
        for r in &run.permits {
            println!(
                "{:<10} {:>8.0} {:>8.2} {:>9.2} {:>9.2} {:>9.2} {:>10} {:>8.2} {:>6}",
                r.name,
                r.per_sec(),
                run.vs_locks(r.name),
                ms(percentile(&r.waits_us, 0.50)),
                ms(percentile(&r.waits_us, 0.99)),
                ms(r.wait_max_us()),
                r.max_inside,
                r.mean_hold_us() / 1000.0,
                r.errors
            );
        }
        for r in &run.permits {
            if let Some(e) = &r.first_error {
                println!("  {}: first error: {e}", r.name);
            }
        }
    }

    let l = &run.latch;
    println!(
        "\nsync latch: {LATCH_WAITERS} waiters on one latch (count {LATCH_COUNT}), {} rounds; wake from just before the last count_down is sent",
        l.rounds
    );
    println!(
        "  wake p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms over {} wakes; the last count_down itself p50 {:.2} ms; early {}, errors {}",
        ms(percentile(&l.wakes_us, 0.50)),
        ms(percentile(&l.wakes_us, 0.99)),
        ms(l.wake_max_us()),
        l.wakes_us.len(),
        ms(percentile(&l.count_down_us, 0.50)),
        l.early,
        l.errors
    );
    if let Some(e) = &l.first_error {
        println!("  first error: {e}");
    }
}

pub(crate) fn print_future_sizes(f: FutureSizes) {
    println!(
        "  futures of ours (bytes): a plain lock's acquire {}, its release {}",
        f.acquire_bytes, f.release_bytes
    );
}
