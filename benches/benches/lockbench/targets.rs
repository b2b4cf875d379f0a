//! The targets, judged against this run's measurements.

use crate::cluster::ClusterRun;
use crate::contended::Contended;
use crate::renewal::Renewal;
use crate::support::{ms, percentile};
use crate::sync::{PERMIT_LIMIT, SyncRun};
use crate::uncontended::{CONCURRENCIES, Measured, ratio_to_raw, ratio_to_rslock};

pub(crate) struct Target {
    pub(crate) what: String,
    pub(crate) measured: String,
    /// `None`: not measured in this run.
    pub(crate) pass: Option<bool>,
}

pub(crate) fn targets(
    uncontended: &[Measured],
    contended: &[Contended],
    renewal: Option<&Renewal>,
    renewal_scripts: Option<&Renewal>,
) -> Vec<Target> {
    let mut out = Vec::new();
    for c in CONCURRENCIES {
        let find = |name| {
            uncontended
                .iter()
                .find(|m| m.name == name && m.concurrency == c)
        };
        let ours = find("ours");
        let ratio = ours.map(|m| ratio_to_raw(uncontended, m));
        out.push(Target {
            what: format!("uncontended ours/raw >= 0.85 at concurrency {c}"),
            measured: ratio.map_or_else(|| "not run".into(), |r| format!("{r:.2}")),
            pass: ratio.map(|r| r >= 0.85),
        });
        let vs = ours
            .zip(find("rslock"))
            .map(|(o, r)| o.per_sec() / r.per_sec());
        out.push(Target {
            what: format!("uncontended ours ahead of rslock at concurrency {c}"),
            measured: vs.map_or_else(|| "not run".into(), |v| format!("ours/rslock {v:.2}")),
            pass: vs.map(|v| v > 1.0),
        });
    }
    // Issue 17: the default configuration (a plain `SET NX PX`, the token
    // issued on first ask) against rslock, and the price of a token on
    // every acquire.
    let vs_rslock = |name: &str, c: usize| {
        uncontended
            .iter()
            .find(|m| m.name == name && m.concurrency == c)
            .map(|m| ratio_to_rslock(uncontended, m))
    };
    for c in CONCURRENCIES {
        let v = vs_rslock("ours", c);
        out.push(Target {
            what: format!(
                "uncontended ours/rslock >= 1.0 at concurrency {c} (default configuration)"
            ),
            measured: v.map_or_else(|| "not run".into(), |v| format!("{v:.2}")),
            pass: v.map(|v| v >= 1.0),
        });
    }
    let v = vs_rslock("ours_fenced", 32);
    out.push(Target {
        what: "uncontended ours_fenced/rslock >= 0.75 at concurrency 32 (a fencing token on every acquire)".into(),
        measured: v.map_or_else(|| "not run".into(), |v| format!("{v:.2}")),
        pass: v.map(|v| v >= 0.75),
    });

    // Issue 34 §3: what the server spends on a pair (goal on Valkey 9.1,
    // where a plain lock runs no script: see `ours_scripts` for the same
    // client with the scripts), and what the client spends.
    let at_32 = |name: &str| {
        uncontended
            .iter()
            .find(|m| m.name == name && m.concurrency == 32 && m.pairs > 0)
    };
    let server = at_32("ours")
        .zip(at_32("rslock"))
        .map(|(o, r)| (o.server_us_per_pair(), r.server_us_per_pair()));
    out.push(Target {
        what: "uncontended server us/pair of ours <= 0.85 x rslock's at concurrency 32 (on Valkey 9.1)"
            .into(),
        measured: server.map_or_else(
            || "not run".into(),
            |(o, r)| format!("{:.2} ({o:.2} us, rslock {r:.2} us)", o / r),
        ),
        pass: server.map(|(o, r)| o <= 0.85 * r),
    });
    let client = at_32("ours")
        .zip(at_32("raw"))
        .map(|(o, r)| (o.client_us_per_pair(), r.client_us_per_pair()));
    out.push(Target {
        what: "uncontended client us/pair of ours <= 1.10 x raw's at concurrency 32".into(),
        measured: client.map_or_else(
            || "not run".into(),
            |(o, r)| format!("{:.2} ({o:.2} us, raw {r:.2} us)", o / r),
        ),
        pass: client.map(|(o, r)| o <= 1.10 * r),
    });

    // The targets are for fair mode; until it runs, show the default mode.
    let fair = contended.iter().find(|r| r.name == "ours-fair");
    let (row, mode) = match fair {
        Some(r) => (Some(r), "fair mode"),
        None => (
            contended.iter().find(|r| r.name == "ours"),
            "DEFAULT mode, fair mode not run",
        ),
    };
    let mut check = |what: &str, value: Option<(f64, String)>, ok: fn(f64) -> bool| {
        out.push(Target {
            what: format!("contended {what} ({mode})"),
            measured: value
                .as_ref()
                .map_or_else(|| "not run".into(), |(_, s)| s.clone()),
            pass: value.map(|(v, _)| ok(v)),
        });
    };
    check(
        ">= 700 acquisitions/s",
        row.map(|r| (r.per_sec(), format!("{:.0}/s", r.per_sec()))),
        |v| v >= 700.0,
    );
    // The same goal as a ratio to the raw `SET NX` loop of this run, which
    // the machine's speed of the day cancels out of.
    let raw = contended.iter().find(|r| r.name == "raw");
    check(
        ">= 0.85 x raw's acquisitions/s",
        row.zip(raw).map(|(r, raw)| {
            let v = r.per_sec() / raw.per_sec();
            (
                v,
                format!("{v:.2} ({:.0}/s, raw {:.0}/s)", r.per_sec(), raw.per_sec()),
            )
        }),
        |v| v >= 0.85,
    );
    check(
        ">= 90% handoffs to another worker",
        row.map(|r| {
            let s = r.handoff_share() * 100.0;
            (s, format!("{s:.1}%"))
        }),
        |v| v >= 90.0,
    );
    check(
        "acquire wait p99 <= 20 ms",
        row.map(|r| {
            let v = ms(percentile(&r.waits_us, 0.99));
            (v, format!("{v:.2} ms"))
        }),
        |v| v <= 20.0,
    );
    check(
        "acquire wait max <= 100 ms",
        row.map(|r| {
            let v = ms(r.wait_max_us());
            (v, format!("{v:.2} ms"))
        }),
        |v| v <= 100.0,
    );
    check(
        "zero mutual-exclusion violations",
        row.map(|r| (r.violations as f64, r.violations.to_string())),
        |v| v == 0.0,
    );

    let server = renewal
        .zip(renewal_scripts)
        .map(|(o, s)| (o.server_us_per_period(), s.server_us_per_period()));
    out.push(Target {
        what: "renewal: server us per period <= 0.6 x the scripts' (on Valkey 9.1)".into(),
        measured: server.map_or_else(
            || "not run".into(),
            |(o, s)| format!("{:.2} ({o:.0} us, scripts {s:.0} us)", o / s),
        ),
        pass: server.map(|(o, s)| o <= 0.6 * s),
    });
    out.push(Target {
        what: "renewal: all locks in <= 2 round trips per period".into(),
        measured: renewal.map_or_else(
            || "not run".into(),
            |r| {
                format!(
                    "{:.2} round trips/period for {} locks ({:.0} commands/period)",
                    r.round_trips_per_period(),
                    r.locks,
                    r.per_period()
                )
            },
        ),
        pass: renewal.map(|r| r.round_trips_per_period() <= 2.0),
    });
    out.push(Target {
        what: "renewal: resident memory < 50 MiB while holding".into(),
        measured: renewal
            .and_then(|r| r.rss_holding_mib)
            .map_or_else(|| "not measured".into(), |m| format!("{m:.1} MiB")),
        pass: renewal.and_then(|r| r.rss_holding_mib).map(|m| m < 50.0),
    });
    out
}

/// The cluster group's targets: routing costs little, renewals stay batched.
pub(crate) fn cluster_targets(run: Option<&ClusterRun>) -> Vec<Target> {
    let ratio = run.map(|c| (c.ratio(32), c.raw_ratio(32)));
    let pipelines = run.map(ClusterRun::max_pipelines_per_period);
    vec![
        Target {
            what: "cluster/single >= 0.8 at concurrency 32".into(),
            measured: ratio.map_or_else(
                || "not run".into(),
                |(r, raw)| format!("{r:.2} (raw commands on the same machine: {raw:.2})"),
            ),
            pass: ratio.map(|(r, _)| r >= 0.8),
        },
        // What the goal is about: our routing and redirection, with the
        // machine's own cluster/single cap (the raw commands') divided out.
        Target {
            what: "cluster routing overhead: ours cluster/single over raw cluster/single >= 0.8 at concurrency 32".into(),
            measured: ratio.map_or_else(|| "not run".into(), |(r, raw)| format!("{:.2}", r / raw)),
            pass: ratio.map(|(r, raw)| r / raw >= 0.8),
        },
        Target {
            what: "cluster renewal: <= 2 pipelines per master per period".into(),
            measured: run.zip(pipelines).map_or_else(
                || "not run".into(),
                |(c, p)| format!("{p:.2} at most, {} locks", c.renewal_locks),
            ),
            pass: pipelines.map(|p| p <= 2.0),
        },
    ]
}

/// The sync group's targets: the synchronizers cost about what a lock
/// costs, the semaphore admits no more than its limit, the latch wakes
/// fast.
pub(crate) fn sync_targets(run: Option<&SyncRun>) -> Vec<Target> {
    let not_run = || "not run".to_owned();
    let mut out = Vec::new();
    for c in CONCURRENCIES {
        let ratio = run.map(|r| r.read_ratio(c));
        out.push(Target {
            what: format!("uncontended read lock/plain lock >= 0.8 at concurrency {c}"),
            measured: ratio.map_or_else(not_run, |r| format!("{r:.2}")),
            pass: ratio.map(|r| r >= 0.8),
        });
    }
    let ratio = run.map(SyncRun::semaphore_ratio);
    out.push(Target {
        what: format!(
            "semaphore (limit {PERMIT_LIMIT})/{PERMIT_LIMIT} plain locks >= 0.8 acquisitions/s"
        ),
        measured: ratio.map_or_else(not_run, |r| format!("{r:.2}")),
        pass: ratio.map(|r| r >= 0.8),
    });
    let inside = run.and_then(SyncRun::semaphore).map(|s| s.max_inside);
    out.push(Target {
        what: format!("semaphore: never more than {PERMIT_LIMIT} holders inside at once"),
        measured: inside.map_or_else(not_run, |n| format!("{n} at most")),
        pass: inside.map(|n| n <= PERMIT_LIMIT as usize),
    });
    let latch = run.map(|r| &r.latch);
    let p99 = latch.map(|l| ms(percentile(&l.wakes_us, 0.99)));
    out.push(Target {
        what: "latch wake-up p99 <= 20 ms (every waiter woken, none early)".into(),
        measured: latch.zip(p99).map_or_else(not_run, |(l, p)| {
            format!(
                "{p:.2} ms ({} wakes, {} early, {} errors)",
                l.wakes_us.len(),
                l.early,
                l.errors
            )
        }),
        pass: latch
            .zip(p99)
            .map(|(l, p)| p <= 20.0 && l.early == 0 && l.errors == 0 && !l.wakes_us.is_empty()),
    });
    out
}

fn status(pass: Option<bool>) -> &'static str {
    match pass {
        Some(true) => "PASS",
        Some(false) => "MISS",
        None => "----",
    }
}

pub(crate) fn print_targets(targets: &[Target]) {
    println!("\ntargets");
    for t in targets {
        println!("  {}  {:<88} {}", status(t.pass), t.what, t.measured);
    }
}
