//! A lost answer is not a lost lock (issue 32, part 1), on real processes:
//! every kind of end of a lease (plain, fenced, fair, read, write, permit,
//! multi-lock group, the end of a `hold_at_least`, `run()`, an idempotency
//! record's completion) is sent while the proxy holds Redis's replies; once
//! Redis answered (the end ran), every proxied connection is cut and the
//! replies flow again, so the client sends the end again on a new
//! connection and finds the lease gone. The end must report `Ok` (and
//! `run()` the body's value), on one Redis and on a Cluster whose nodes are
//! reached through proxies (Redis and Valkey), and for a Valkey user
//! without `+@scripting` (plain locks). A lease that truly ran out
//! before its release still reports `Lost`. And an extend whose answer is
//! lost (or whose future was dropped on its way) may have landed: the
//! guard counts on no more than its ttl.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redlock_runtime::records::{Claimed, Completion, RecordKeys, Records};
use redlock_runtime::{LockClient, LockError, LostReason};
use redlock_tests::{FaultProxy, RedisCluster, RedisServer, Server};
use rstest::rstest;

/// A long lease: nothing in these tests may end it by running out.
const TTL: Duration = Duration::from_secs(20);
/// Bound on the end reaching Redis once replies are held.
const REACH: Duration = Duration::from_secs(10);

/// The proxies between one client and its Redis (one, or one per cluster
/// node), with the servers they front.
struct Net {
    proxies: Vec<FaultProxy>,
    _single: Option<RedisServer>,
    _cluster: Option<RedisCluster>,
}

impl Net {
    async fn single(server: Server) -> (Net, LockClient) {
        Self::single_as(server, false).await
    }

    /// [`single`](Self::single), the client a user without `+@scripting`
    /// when `without_scripting`.
    async fn single_as(server: Server, without_scripting: bool) -> (Net, LockClient) {
        let server = RedisServer::start_on(server, &[]).await;
        let proxy = FaultProxy::start(server.addr()).await;
        let url = if without_scripting {
            let _: () = redis::cmd("ACL")
                .arg(&["SETUSER", "noscripts", "on", "nopass", "~*", "&*", "+@all"])
                .arg("-@scripting")
                .query_async(&mut redlock_tests::raw_connection(server.url()).await)
                .await
                .expect("ACL SETUSER");
            format!("redis://noscripts:any@127.0.0.1:{}", proxy.port())
        } else {
            proxy.url()
        };
        let locks = LockClient::builder()
            .url(url)
            .pool_size(1)
            .build()
            .await
            .expect("connect through the proxy");
        let net = Net {
            proxies: vec![proxy],
            _single: Some(server),
            _cluster: None,
        };
        (net, locks)
    }

    async fn cluster(server: Server) -> (Net, LockClient) {
        let cluster = RedisCluster::start_on(server, 3, 0, &[]).await;
        let proxies = cluster.behind_proxies().await;
        let locks = LockClient::builder()
            .cluster(proxies.iter().map(FaultProxy::url))
            .pool_size(1)
            .build()
            .await
            .expect("connect to the cluster through the proxies");
        let net = Net {
            proxies,
            _single: None,
            _cluster: Some(cluster),
        };
        (net, locks)
    }

    /// Holds every reply from now on (after any still on its way is
    /// delivered, so that only answers to what is sent next are held).
    async fn hold_replies(&self) {
        for _ in 0..500 {
            if self.proxies.iter().all(|p| p.replies_waiting() == 0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        for proxy in &self.proxies {
            proxy.hold_replies(true);
        }
    }

    /// Once Redis has answered something sent while replies were held,
    /// loses that answer: cuts every connection, then lets replies flow.
    async fn lose_the_answer(&self) {
        let deadline = tokio::time::Instant::now() + REACH;
        while self.proxies.iter().all(|p| p.replies_waiting() == 0) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the end did not reach Redis within {REACH:?}"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        for proxy in &self.proxies {
            proxy.cut_all();
        }
        for proxy in &self.proxies {
            proxy.hold_replies(false);
        }
    }

    /// Runs `end` with its answer lost (see the module docs).
    async fn with_answer_lost<T>(&self, end: impl Future<Output = T>) -> T {
        self.hold_replies().await;
        let (answer, ()) = tokio::join!(end, self.lose_the_answer());
        answer
    }
}

/// Each kind of end of a lease: takes a lease on `key`, ends it with its
/// answer lost, and returns what the end reported.
#[derive(Debug, Clone, Copy)]
enum End {
    Plain,
    Fenced,
    Fair,
    Read,
    Write,
    Permit,
    Group,
    HoldAtLeast,
    Run,
    RecordCompletion,
}

const ENDS: [End; 10] = [
    End::Plain,
    End::Fenced,
    End::Fair,
    End::Read,
    End::Write,
    End::Permit,
    End::Group,
    End::HoldAtLeast,
    End::Run,
    End::RecordCompletion,
];

impl End {
    /// Takes a lease on `key` and ends it, with the end's answer lost when
    /// `net` is given. `Err` describes what the end reported wrongly.
    async fn cycle(self, locks: &LockClient, key: &str, net: Option<&Net>) -> Result<(), String> {
        let lost = |answer: Result<(), LockError>| answer.map_err(|e| format!("{self:?}: {e:?}"));
        match self {
            End::Plain | End::Fenced | End::Fair | End::HoldAtLeast => {
                let mut request = locks.lock(key).ttl(TTL);
                request = match self {
                    End::Fenced => request.fenced(),
                    End::Fair => request.fair(),
                    End::HoldAtLeast => request.hold_at_least(Duration::from_millis(20)),
                    _ => request,
                };
                let guard = request.acquire().await.map_err(|e| e.to_string())?;
                if let End::HoldAtLeast = self {
                    // The minimum hold is over: the end deletes the lock.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                lost(maybe_lost(net, guard.release()).await)
            }
            End::Read | End::Write => {
                let rw = locks.rw_lock(key);
                let request = if let End::Read = self {
                    rw.read()
                } else {
                    rw.write()
                };
                let guard = request
                    .ttl(TTL)
                    .acquire()
                    .await
                    .map_err(|e| e.to_string())?;
                lost(maybe_lost(net, guard.release()).await)
            }
            End::Permit => {
                let permit = locks
                    .semaphore(key, 2)
                    .ttl(TTL)
                    .acquire()
                    .await
                    .map_err(|e| e.to_string())?;
                lost(maybe_lost(net, permit.release()).await)
            }
            End::Group => {
                let group = locks
                    .multi_lock([format!("{key}:a"), format!("{key}:b")])
                    .ttl(TTL)
                    .acquire()
                    .await
                    .map_err(|e| e.to_string())?;
                lost(maybe_lost(net, group.release()).await)
            }
            End::Run => {
                let started = Arc::new(tokio::sync::Notify::new());
                let body = {
                    let started = Arc::clone(&started);
                    async move {
                        // The body ends here: the release that follows is
                        // the one whose answer is lost.
                        if let Some(net) = net {
                            net.hold_replies().await;
                        }
                        started.notify_one();
                        42
                    }
                };
                let run = locks.lock(key).ttl(TTL).run(body);
                let value = match net {
                    Some(net) => {
                        let fault = async {
                            started.notified().await;
                            net.lose_the_answer().await;
                        };
                        tokio::join!(run, fault).0
                    }
                    None => run.await,
                };
                match value {
                    Ok(42) => Ok(()),
                    other => Err(format!("Run: {other:?} instead of the body's 42")),
                }
            }
            End::RecordCompletion => {
                let records = Records::new(locks);
                // A record of its own each time, in the key's slot.
                let round = if net.is_some() { "lost" } else { "warm-up" };
                let keys = RecordKeys::new(
                    "record".to_owned(),
                    format!("rec:{{{key}}}:{round}"),
                    format!("rec-fence:{{{key}}}:{round}"),
                );
                let limit = Duration::from_secs(2);
                let claimed = records
                    .claim(&keys, "fp", TTL, Duration::from_secs(60), limit)
                    .await
                    .map_err(|e| e.to_string())?;
                let Claimed::Claimed(mut lease) = claimed else {
                    return Err(format!("RecordCompletion: claim found {claimed:?}"));
                };
                let result = Completion {
                    replayable: true,
                    status: 201,
                    headers: Vec::new(),
                    body: b"stored".to_vec(),
                };
                let retention = Duration::from_secs(60);
                let stored = maybe_lost(net, lease.complete(&result, retention, limit)).await;
                match stored {
                    Ok(true) => {}
                    other => return Err(format!("RecordCompletion: {other:?}")),
                }
                // The result is there for a retry, whatever the answer said.
                match records
                    .claim(&keys, "fp", TTL, Duration::from_secs(60), limit)
                    .await
                {
                    Ok(Claimed::Completed(done)) if done.body == b"stored" => Ok(()),
                    other => Err(format!("RecordCompletion: a retry found {other:?}")),
                }
            }
        }
    }
}

/// `end`, with its answer lost when `net` is given.
async fn maybe_lost<T>(net: Option<&Net>, end: impl Future<Output = T>) -> T {
    match net {
        Some(net) => net.with_answer_lost(end).await,
        None => end.await,
    }
}

/// Every kind of end: once without faults (which also loads its scripts on
/// the key's node, so the end really runs its script and not a `NOSCRIPT`
/// answer), then on the same key with its answer lost.
async fn every_end_reports_ok(net: Net, locks: LockClient) {
    ends_report_ok(net, locks, &ENDS).await;
}

/// [`every_end_reports_ok`] for the `ends` given.
async fn ends_report_ok(net: Net, locks: LockClient, ends: &[End]) {
    let mut wrong = Vec::new();
    for &end in ends {
        let key = format!("last-reply-{end:?}");
        end.cycle(&locks, &key, None)
            .await
            .unwrap_or_else(|e| panic!("{end:?} without faults: {e}"));
        if let Err(e) = end.cycle(&locks, &key, Some(&net)).await {
            wrong.push(e);
        }
    }
    assert!(
        wrong.is_empty(),
        "ends whose lost answer was reported wrongly: {wrong:#?}"
    );
    // Nothing stays held: each key is free for another owner at once.
    for &end in ends.iter().filter(|end| {
        matches!(
            end,
            End::Plain | End::Fenced | End::Fair | End::HoldAtLeast | End::Run
        )
    }) {
        let key = format!("last-reply-{end:?}");
        let again = locks.lock(&key).try_acquire().await.expect("try_acquire");
        assert!(again.is_some(), "{end:?}: the lock is still held");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_end_whose_answer_is_lost_reports_ok_on_one_redis() {
    let (net, locks) = Net::single(Server::Redis).await;
    every_end_reports_ok(net, locks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_end_whose_answer_is_lost_reports_ok_on_a_cluster() {
    let (net, locks) = Net::cluster(Server::Redis).await;
    every_end_reports_ok(net, locks).await;
}

/// On Valkey 9.1 a plain lock's release is `DELIFEQ`, not the script
/// (`conditional.rs`): its re-sent answer must read the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_end_whose_answer_is_lost_reports_ok_on_one_valkey() {
    let (net, locks) = Net::single(Server::Valkey).await;
    every_end_reports_ok(net, locks).await;
}

/// A user without `+@scripting` (Valkey 9.1) ends plain locks only (the
/// rest needs a script, refused at once: `conditional.rs`): the release
/// is `DELIFEQ`, and its re-send finds the lock gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_ends_whose_answer_is_lost_report_ok_for_a_user_without_scripting() {
    let (net, locks) = Net::single_as(Server::Valkey, true).await;
    ends_report_ok(net, locks, &[End::Plain, End::Run]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_end_whose_answer_is_lost_reports_ok_on_a_valkey_cluster() {
    let (net, locks) = Net::cluster(Server::Valkey).await;
    every_end_reports_ok(net, locks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_ran_out_before_its_release_still_reports_lost() {
    let (net, locks) = Net::single(Server::Redis).await;
    // Warm-up: the release script is in Redis's cache.
    let guard = locks.lock("ran-out").acquire().await.expect("acquire");
    guard.release().await.expect("release");
    let guard = locks
        .lock("ran-out")
        .ttl(Duration::from_millis(300))
        .renew(false)
        .acquire()
        .await
        .expect("acquire");
    let reason = tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("the unrenewed lease runs out");
    assert_eq!(reason, LostReason::Expired);
    // Redis's copy is gone too (its clock may lag ours a little).
    tokio::time::sleep(Duration::from_millis(100)).await;
    match net.with_answer_lost(guard.release()).await {
        Err(LockError::Lost { .. }) => {}
        other => panic!("a release after the lease ran out answered {other:?}, not Lost"),
    }
}

/// An extend whose answer is lost may have landed, and may still land
/// later: without a script it sets the lease to its ttl whatever was left
/// (as an extend to a shorter ttl does with the script). The guard counts
/// on no more than it leaves, then and after later renewals (the doubt of
/// `model/src/extend.rs`), on both servers.
#[rstest]
#[case::redis(Server::Redis)]
#[case::valkey(Server::Valkey)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extend_whose_answer_is_lost_counts_no_more_than_its_ttl(#[case] server: Server) {
    let redis = RedisServer::start_on(server, &[]).await;
    let proxy = FaultProxy::start(redis.addr()).await;
    let client = LockClient::builder()
        .url(proxy.url())
        .command_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("connect");
    let guard = client
        .lock("doubted")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .expect("free");
    let name = server.name();
    assert!(guard.remaining() > Duration::from_secs(9), "{name}");
    proxy.hold_replies(true);
    let extended = guard.extend(Duration::from_secs(2)).await;
    assert!(extended.is_err(), "{name}: no answer came: {extended:?}");
    let left = guard.remaining();
    assert!(
        left <= Duration::from_secs(2),
        "{name}: the extend may have landed: counts {left:?}, not the 10 s lease"
    );
    proxy.hold_replies(false);
    // Renewals go on with the 10 s ttl; each counts no more than 2 s.
    tokio::time::sleep(Duration::from_millis(4_000)).await;
    assert!(guard.is_held(), "{name}: renewed meanwhile");
    let left = guard.remaining();
    assert!(
        left <= Duration::from_secs(2),
        "{name}: after renewals, still counts {left:?}"
    );
    guard.release().await.expect("release");

    // The same when the caller drops the extend on its way (its own
    // timeout, shorter than the client's command timeout).
    let guard = client
        .lock("dropped")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .expect("free");
    proxy.hold_replies(true);
    let dropped = tokio::time::timeout(
        Duration::from_millis(100),
        guard.extend(Duration::from_secs(2)),
    )
    .await;
    assert!(dropped.is_err(), "{name}: the extend was still waiting");
    proxy.hold_replies(false);
    tokio::time::sleep(Duration::from_millis(4_000)).await;
    assert!(guard.is_held(), "{name}: renewed meanwhile");
    let left = guard.remaining();
    assert!(
        left <= Duration::from_secs(2),
        "{name}: a dropped extend may still land; the guard counts {left:?}"
    );
    guard.release().await.expect("release");
}
