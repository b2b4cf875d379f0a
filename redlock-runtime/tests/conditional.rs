//! A plain lock without scripts (issue "valkey" §2): renewed with `SET ..
//! IFEQ .. PX` and released with the server's conditional delete where it
//! has one (`DELIFEQ` on Valkey 9.1, the one these tests start; `DELEX` on
//! Redis 8.4 and Valkey 9.2 takes the same path and is not tested here, no
//! such server being installable), the scripts on servers without them
//! (Redis 7.0), and the scripts again whenever the server refuses the
//! command (an ACL) or the write (`OOM`).
//!
//! What each test counts is `INFO commandstats` of the servers it starts,
//! which only its clients use.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redlock_runtime::records::{RecordKeys, Records};
use redlock_runtime::{LockClient, LockClientBuilder, LockError, LockGuard, RetryPolicy};
use redlock_tests::{
    Backend, FaultProxy, RedisCluster, RedisServer, Server, Started, raw_connection,
};
use rstest::rstest;

/// `cmdstat_<command>`'s `field` (`calls`, `rejected_calls`), 0 when the
/// server has not seen the command.
async fn stat(admin: &mut MultiplexedConnection, command: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(admin)
        .await
        .expect("INFO commandstats");
    let prefix = format!("cmdstat_{command}:");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| {
            rest.split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{field}=")[..]))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The calls of `EVALSHA` and `EVAL` (a script sent after `NOSCRIPT`).
async fn scripts_run(admin: &mut MultiplexedConnection) -> u64 {
    stat(admin, "evalsha", "calls").await + stat(admin, "eval", "calls").await
}

/// Takes and releases `n` plain locks, each released while held.
async fn plain_pairs(client: &LockClient, name: &str, n: usize) {
    for i in 0..n {
        let guard = client
            .lock(format!("{name}:{i}"))
            .acquire()
            .await
            .expect("free");
        guard.release().await.expect("held, released");
    }
}

/// What [`plain_locks_use_the_conditional_commands_on_every_topology`]
/// leaves out, on one server of each program: a release after the lease
/// ran out and another owner took the lock (the conditional delete, or the
/// script, leaves the new owner's lock), and a fenced lock, released by its
/// script whatever the server has.
#[rstest]
#[case::valkey(Server::Valkey)]
#[case::redis(Server::Redis)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_leaves_another_owners_lock_and_a_fenced_one_runs_its_script(
    #[case] server: Server,
) {
    let redis = RedisServer::start_on(server, &[]).await;
    let mut admin = raw_connection(redis.url()).await;
    let client = LockClient::connect(redis.url()).await.expect("connect");
    let name = server.name();

    // Another owner's lock is never deleted: a guard whose lease ran out
    // and was taken over finds it lost, and the new holder keeps it.
    let first = client
        .lock("taken-over")
        .ttl(Duration::from_millis(300))
        .renew(false)
        .acquire()
        .await
        .expect("free");
    let other = LockClient::connect(redis.url()).await.expect("connect");
    let second = other
        .lock("taken-over")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("free once the first lease ran out");
    let lost = first.release().await;
    assert!(
        matches!(lost, Err(LockError::Lost { .. })),
        "{name}: releasing a lock taken over: {lost:?}"
    );
    assert!(
        other
            .inspect("taken-over")
            .await
            .expect("inspect")
            .holder
            .is_some(),
        "{name}: the new holder's lock was deleted"
    );
    second.release().await.expect("the new holder's to release");
    assert!(
        other
            .inspect("taken-over")
            .await
            .expect("inspect")
            .holder
            .is_none()
    );

    // A lock with a fencing token is released by its script (which the
    // counter needs), conditional commands or not. (A first fenced pair
    // loads the scripts: no NOSCRIPT adds to the count.)
    let warm = client.lock("fenced-warm-up").fenced().acquire().await;
    warm.expect("free").release().await.expect("release");
    let before = scripts_run(&mut admin).await;
    let fenced = client
        .lock("fenced")
        .fenced()
        .acquire()
        .await
        .expect("free");
    fenced.release().await.expect("release");
    assert_eq!(
        scripts_run(&mut admin).await - before,
        2,
        "{name}: a fenced lock's acquire and release are scripts"
    );
}

/// The servers of `b` whose `INFO commandstats` count each of its
/// commands once: every node of Redlock (each lock call goes to all) and
/// Cluster (to the key's master), the primary of Sentinel and of
/// Replicas (a replica counts what it replays).
fn counted(b: &Started) -> Vec<String> {
    let mut urls = b.urls();
    if matches!(b.backend(), Backend::Sentinel | Backend::Replicas) {
        urls.truncate(1);
    }
    urls
}

/// [`stat`], summed over `urls`.
async fn stat_on(urls: &[String], command: &str, field: &str) -> u64 {
    let mut total = 0;
    for url in urls {
        total += stat(&mut raw_connection(url.as_str()).await, command, field).await;
    }
    total
}

/// [`scripts_run`], summed over `urls`.
async fn scripts_on(urls: &[String]) -> u64 {
    stat_on(urls, "evalsha", "calls").await + stat_on(urls, "eval", "calls").await
}

/// The longest `PTTL` of `key` on `urls` (-2 where it is absent, and on a
/// cluster node that does not own it).
async fn longest_pttl(urls: &[String], key: &str) -> i64 {
    let mut longest = -2;
    for url in urls {
        let pttl: redis::RedisResult<i64> = redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut raw_connection(url.as_str()).await)
            .await;
        longest = longest.max(pttl.unwrap_or(-2));
    }
    longest
}

/// The conditional path on every topology and connection kind it runs
/// on: a plain lock's release is one `DELIFEQ` per node it is held on, its
/// renewals and extend are `SET .. IFEQ`, no script runs; a lock taken
/// over is found lost by the renewal, whose `SET .. IFEQ` leaves the other
/// owner's value as it was. On Redis 7.0 (and its Cluster) the same
/// scenario runs the scripts.
#[rstest]
#[case::redis(Backend::Redis)]
#[case::cluster(Backend::Cluster)]
#[case::valkey(Backend::Valkey)]
#[case::valkey_manager(Backend::ValkeyManager)]
#[case::valkey_redlock(Backend::ValkeyRedlock)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::valkey_sentinel(Backend::ValkeySentinel)]
#[case::replicas(Backend::Replicas)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
fn plain_locks_use_the_conditional_commands_on_every_topology(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let name = b.name();
        let conditional = b.server() == Server::Valkey;
        // Each lock call goes to every Redlock node, to one node elsewhere.
        let per_call: u64 = if b.backend() == Backend::Redlock {
            redlock_tests::REDLOCK_NODES as u64
        } else {
            1
        };
        let urls = counted(&b);
        let client = b.client().await;
        // Connections open and scripts loaded on every node (30 keys
        // reach each of a cluster's masters), so no NOSCRIPT is counted.
        plain_pairs(&client, "warm-up", 30).await;
        for i in 0..30 {
            let guard = client.lock(format!("warm-up-renewal:{i}")).acquire().await;
            let guard = guard.expect("free");
            guard.extend(Duration::from_secs(5)).await.expect("extend");
            guard.release().await.expect("release");
        }

        let (scripts, deletes) = (
            scripts_on(&urls).await,
            stat_on(&urls, "delifeq", "calls").await,
        );
        plain_pairs(&client, "plain", 20).await;
        let scripts = scripts_on(&urls).await - scripts;
        let deletes = stat_on(&urls, "delifeq", "calls").await - deletes;
        // Redlock issues a fencing token with every acquire (its release
        // raises every node's counter to the largest): there, both the
        // acquire and the release are scripts, whatever the server. With
        // replicas, `WAIT` follows the same commands as on one server.
        let scripted = b.backend() == Backend::Redlock;
        let (want_deletes, want_scripts) = match (conditional, scripted) {
            (_, true) => (0, 2 * 20 * per_call),
            (true, false) => (20, 0),
            (false, false) => (0, 20),
        };
        assert_eq!(
            deletes, want_deletes,
            "{name}: DELIFEQ calls for 20 releases"
        );
        assert_eq!(scripts, want_scripts, "{name}: scripts run for 20 pairs");

        let (scripts, sets) = (
            scripts_on(&urls).await,
            stat_on(&urls, "set", "calls").await,
        );
        let guard = client
            .lock("renewed")
            .ttl(Duration::from_millis(600))
            .acquire()
            .await
            .expect("free");
        // About six watchdog renewals (every third of the ttl), each
        // setting a lease of the ttl.
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        assert!(guard.is_held(), "{name}: renewed");
        let pttl = longest_pttl(&urls, "lock:{renewed}").await;
        assert!(
            pttl > 0 && pttl <= 600,
            "{name}: a lease of the ttl: {pttl} ms"
        );
        guard.extend(Duration::from_secs(5)).await.expect("extend");
        let scripts = scripts_on(&urls).await - scripts;
        let sets = stat_on(&urls, "set", "calls").await - sets;
        // The acquire: a SET NX, or the script. The renewals and the
        // extend: SETs where the server has `SET .. IFEQ`, else scripts.
        let (acquire_scripts, acquire_sets) = if scripted {
            (per_call, 0)
        } else {
            (0, per_call)
        };
        if conditional {
            assert_eq!(
                scripts, acquire_scripts,
                "{name}: renewals and the extend ran no script"
            );
            assert!(
                sets >= acquire_sets + 3 * per_call,
                "{name}: the renewals and the extend were SETs: {sets}"
            );
        } else {
            assert!(
                scripts >= acquire_scripts + 3 * per_call,
                "{name}: renewals and the extend are scripts: {scripts}"
            );
            // Redis counts the commands a script runs with the others:
            // the acquire script's own SETs are not compared.
            if !scripted {
                assert_eq!(sets, acquire_sets, "{name}: only the acquire is a SET");
            }
        }

        // Taken over on every node that holds it (a cluster node that does
        // not own the key answers MOVED): the renewal finds it lost and
        // leaves the other owner's value.
        let mut overwritten = 0;
        for url in &urls {
            let written: redis::RedisResult<Option<String>> = redis::cmd("SET")
                .arg("lock:{renewed}")
                .arg("someone-else")
                .arg("XX")
                .query_async(&mut raw_connection(url.as_str()).await)
                .await;
            overwritten += u64::from(matches!(written, Ok(Some(_))));
        }
        assert_eq!(
            overwritten, per_call,
            "{name}: the lock was held where expected"
        );
        let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost())
            .await
            .unwrap_or_else(|_| panic!("{name}: a renewal finds the lock lost"));
        assert_eq!(
            reason,
            redlock_runtime::LostReason::TakenOver,
            "{name}: lost to another owner"
        );
        let mut kept = 0;
        for url in &urls {
            let value: redis::RedisResult<Option<String>> = redis::cmd("GET")
                .arg("lock:{renewed}")
                .query_async(&mut raw_connection(url.as_str()).await)
                .await;
            if let Ok(Some(value)) = value {
                assert_eq!(
                    value, "someone-else",
                    "{name}: the other owner's value was changed"
                );
                kept += 1;
            }
        }
        assert_eq!(kept, per_call, "{name}: the other owner's lock was deleted");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turned_off_the_release_is_the_script() {
    let valkey = RedisServer::start_on(Server::Valkey, &[]).await;
    let mut admin = raw_connection(valkey.url()).await;
    let client = LockClient::builder()
        .url(valkey.url())
        .conditional_commands(false)
        .build()
        .await
        .expect("connect");
    plain_pairs(&client, "warm-up", 2).await;
    let before = scripts_run(&mut admin).await;
    plain_pairs(&client, "scripts", 10).await;
    assert_eq!(scripts_run(&mut admin).await - before, 10);
    assert_eq!(stat(&mut admin, "delifeq", "calls").await, 0);
    assert_eq!(
        stat(&mut admin, "command|info", "calls").await,
        0,
        "turned off, nothing is probed"
    );
}

/// A client whose user may run every command but `DELIFEQ`: the probe
/// finds the command, the first release on each connection is refused
/// (`NOPERM`) and sent again as the script, and that connection sends
/// scripts from then on: on one server, and on each cluster master (one
/// connection per node). (Redlock sends no conditional delete: see
/// [`plain_locks_use_the_conditional_commands_on_every_topology`].)
#[rstest]
#[case::valkey(Backend::Valkey)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
fn a_refused_conditional_delete_falls_back_to_the_script(#[case] backend: Backend) {
    backend.run_threaded(|b| async move {
        let name = b.name();
        let urls = counted(&b);
        for url in &urls {
            let _: () = redis::cmd("ACL")
                .arg(&[
                    "SETUSER", "locker", "on", "nopass", "~*", "&*", "+@all", "-delifeq",
                ])
                .query_async(&mut raw_connection(url.as_str()).await)
                .await
                .expect("ACL SETUSER");
        }
        let as_locker: Vec<String> = b
            .servers()
            .iter()
            .map(|s| format!("redis://locker:any@127.0.0.1:{}", s.port()))
            .collect();
        let builder = match b.backend() {
            Backend::Redis => LockClient::builder().url(&as_locker[0]),
            Backend::Cluster => LockClient::builder().cluster(as_locker),
            other => unreachable!("no case runs on {other:?}"),
        };
        let client = builder
            .pool_size(1)
            .build()
            .await
            .expect("connect as locker");
        // Fenced pairs load the release script on every node (and use no
        // DELIFEQ), so no NOSCRIPT adds to the count below.
        for i in 0..30 {
            let warm = client.lock(format!("warm-up:{i}")).fenced().acquire().await;
            warm.expect("free").release().await.expect("release");
        }
        assert_eq!(stat_on(&urls, "delifeq", "calls").await, 0, "{name}");
        let before = scripts_on(&urls).await;
        plain_pairs(&client, "refused", 10).await;
        let rejected = stat_on(&urls, "delifeq", "rejected_calls").await;
        if b.backend() == Backend::Cluster {
            assert!(
                (1..=urls.len() as u64).contains(&rejected),
                "{name}: refused once per master reached, then scripts: {rejected}"
            );
        } else {
            assert_eq!(
                rejected, 1,
                "{name}: refused once on the one connection, then scripts"
            );
        }
        assert_eq!(
            scripts_on(&urls).await - before,
            10,
            "{name}: every release ran the script"
        );
        for i in 0..10 {
            let left = client
                .inspect(&format!("refused:{i}"))
                .await
                .expect("inspect");
            assert!(
                left.holder.is_none(),
                "{name}: refused:{i} was not released"
            );
        }
    });
}

/// A user whose ACL forbids scripts (`-@scripting`) on a server with the
/// conditional commands (one server, every master of a Cluster, a primary
/// whose writes a replica acknowledges): plain
/// locks are taken (`SET NX`), renewed by the
/// watchdog and extended (`SET .. IFEQ`) and released (`DELIFEQ`); what
/// needs a script fails at once with [`LockError::NotPermitted`], which
/// names the command and the permission, and is not retried.
#[rstest]
#[case::valkey(Backend::Valkey)]
#[case::valkey_cluster(Backend::ValkeyCluster)]
#[case::valkey_replicas(Backend::ValkeyReplicas)]
fn without_scripting_a_plain_lock_works_and_a_fenced_one_fails_at_once(#[case] backend: Backend) {
    backend.run_threaded(|b| async move { without_scripting(&b).await });
}

/// Adds the user `noscripts` (every command but the scripts', any
/// password) on `urls`; the URLs of `b`'s servers as that user.
async fn noscripts_user(b: &Started, urls: &[String]) -> Vec<String> {
    for url in urls {
        deny_scripts(url).await;
    }
    b.servers().iter().map(|s| as_noscripts(s.port())).collect()
}

/// Adds the user `noscripts` (see [`noscripts_user`]) on the server at
/// `url`.
async fn deny_scripts(url: &str) {
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "noscripts",
            "on",
            "nopass",
            "~*",
            "&*",
            "+@all",
            "-@scripting",
        ])
        .query_async(&mut raw_connection(url).await)
        .await
        .expect("ACL SETUSER");
}

/// The URL of loopback `port` as the user `noscripts`.
fn as_noscripts(port: u16) -> String {
    format!("redis://noscripts:any@127.0.0.1:{port}")
}

/// `err`'s text, once it is seen to be the typed refusal of a script
/// (`evalsha`), which no retry fixes.
fn refused_script(err: &LockError) -> String {
    assert!(
        matches!(err, LockError::NotPermitted { command, .. } if command == "evalsha"),
        "a typed error naming the refused command: {err:?}"
    );
    assert!(!err.is_transient(), "no retry gets a permission");
    err.to_string()
}

/// [`refused_script`], whose message says what to grant and shows no
/// password (the user's is `any`).
fn says_what_to_grant(err: &LockError) {
    let text = refused_script(err);
    assert!(
        text.contains("+@scripting") && !text.contains("any"),
        "the message says what to grant, and shows no password: {text}"
    );
}

/// A plain lock `renewed` held past three of its leases (renewed by the
/// watchdog), then extended to 5 s, as `urls` show: no script needed.
async fn renewed_and_extended(client: &LockClient, urls: &[String]) -> LockGuard {
    let guard = client
        .lock("renewed")
        .ttl(Duration::from_millis(600))
        .acquire()
        .await
        .expect("free");
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert!(guard.is_held(), "renewed without a script");
    guard
        .extend(Duration::from_secs(5))
        .await
        .expect("extended without a script");
    let pttl = longest_pttl(urls, "lock:{renewed}").await;
    assert!(pttl > 4_000, "the extend set the lease: {pttl} ms left");
    guard
}

/// A fenced acquire (a script) of `fenced`, refused at once, not retried
/// for its wait.
async fn fenced_refused_at_once(client: &LockClient) {
    let started = Instant::now();
    let fenced = client
        .lock("fenced")
        .fenced()
        .wait(Duration::from_secs(10))
        .acquire()
        .await;
    let err = fenced.expect_err("a fenced acquire is a script");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once, not retried for the wait: {:?}",
        started.elapsed()
    );
    says_what_to_grant(&err);
}

/// Valkey servers for a user without `+@scripting` (`noscripts`), each
/// behind a fault proxy: one server (`"one"`), Redlock's three masters
/// (`"redlock"`) or a Cluster of three masters (`"cluster"`).
struct Proxied {
    topology: &'static str,
    servers: Vec<RedisServer>,
    cluster: Option<RedisCluster>,
    proxies: Vec<FaultProxy>,
    /// The proxies' URLs as `noscripts`.
    as_user: Vec<String>,
}

impl Proxied {
    async fn start(topology: &'static str) -> Self {
        let (mut servers, mut proxies, mut cluster) = (Vec::new(), Vec::new(), None);
        if topology == "cluster" {
            let started = RedisCluster::start_on(Server::Valkey, 3, 0, &[]).await;
            for url in started.urls() {
                deny_scripts(&url).await;
            }
            proxies = started.behind_proxies().await;
            cluster = Some(started);
        } else {
            for _ in 0..if topology == "one" { 1 } else { 3 } {
                let server = RedisServer::start_on(Server::Valkey, &[]).await;
                deny_scripts(&server.url()).await;
                proxies.push(FaultProxy::start(server.addr()).await);
                servers.push(server);
            }
        }
        let as_user = proxies.iter().map(|p| as_noscripts(p.port())).collect();
        Proxied {
            topology,
            servers,
            cluster,
            proxies,
            as_user,
        }
    }

    /// A client of this topology, as `noscripts`, through the proxies.
    fn builder(&self) -> LockClientBuilder {
        match self.topology {
            "one" => LockClient::builder().url(&self.as_user[0]),
            "redlock" => LockClient::builder().redlock(self.as_user.clone()),
            _ => LockClient::builder().cluster(self.as_user.clone()),
        }
    }

    /// The servers' own URLs (not the Cluster's).
    fn urls(&self) -> Vec<String> {
        self.servers.iter().map(RedisServer::url).collect()
    }
}

/// An acquire whose answer is lost (its connections cut once every server
/// it went to has answered), for a `-@scripting` user on Valkey. The
/// re-send on a new connection is the acquire script, which finds its own
/// token where the first send landed; refused, the acquire goes on with
/// the conditional attempt (`SET .. NX GET`), which finds it as well. The
/// lock is held, not reported refused (one server, a Cluster) or busy
/// (Redlock, whose nodes take plain locks once they refused the script),
/// and its release frees it.
#[rstest]
#[case::one_valkey("one")]
#[case::valkey_redlock("redlock")]
#[case::valkey_cluster("cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_scripting_an_acquire_whose_answer_is_lost_is_held(#[case] topology: &'static str) {
    let net = Proxied::start(topology).await;
    let proxies = &net.proxies;
    let builder = || net.builder();
    let client = builder().build().await.expect("connect as noscripts");
    // Connections made and probed; on Redlock, each node's refusal of the
    // script noted.
    let warm = client.lock("warm").acquire().await.expect("free");
    warm.release().await.expect("released");
    // The servers the acquire goes to, and where to look for the lock.
    let (reached, urls): (Vec<&FaultProxy>, Vec<String>) = match &net.cluster {
        Some(cluster) => {
            let owner = cluster
                .master_of_slot(cluster.slot_of("lock:{lost}").await)
                .await;
            (vec![&proxies[owner]], vec![cluster.node(owner).url()])
        }
        None => (proxies.iter().collect(), net.urls()),
    };

    for proxy in proxies {
        proxy.hold_replies(true);
    }
    let lose = async {
        let deadline = Instant::now() + Duration::from_secs(10);
        while reached.iter().any(|p| p.replies_waiting() == 0) {
            assert!(
                Instant::now() < deadline,
                "the acquire reached every server it goes to"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        for proxy in proxies {
            proxy.cut_all();
            proxy.hold_replies(false);
        }
    };
    let (acquired, ()) = tokio::join!(client.lock("lost").acquire(), lose);
    let guard = acquired.expect("the lock the lost answer took is held");
    assert!(guard.is_held());
    assert!(longest_pttl(&urls, "lock:{lost}").await > 0, "held");

    let other = builder().build().await.expect("connect as noscripts");
    let taken = other.lock("lost").try_acquire().await.expect("asked");
    assert!(taken.is_none(), "held on the servers: no one else takes it");
    guard.release().await.expect("released without a script");
    assert_eq!(longest_pttl(&urls, "lock:{lost}").await, -2, "released");
}

/// A `-@scripting` user on `b`'s servers (see the test above).
async fn without_scripting(b: &Started) {
    let urls = counted(b);
    let as_user = noscripts_user(b, &urls).await;
    let builder = || match b.backend() {
        Backend::Redis => LockClient::builder().url(&as_user[0]),
        Backend::Cluster => LockClient::builder().cluster(as_user.clone()),
        Backend::Replicas => LockClient::builder()
            .url(&as_user[0])
            .replicas(1, redlock_tests::REPLICA_TIMEOUT),
        other => unreachable!("no case runs on {other:?}"),
    };
    let client = builder().build().await.expect("connect as noscripts");
    for i in 0..5 {
        let guard = client
            .lock(format!("plain:{i}"))
            .acquire()
            .await
            .expect("a plain lock needs no script");
        guard.release().await.expect("nor does its release");
    }
    let guard = renewed_and_extended(&client, &urls).await;
    guard.release().await.expect("released without a script");

    // A waiter's attempts after its first busy one, and its wake-up.
    let other = builder().build().await.expect("connect as noscripts");
    let holder = client.lock("waited").acquire().await.expect("free");
    let waiting = tokio::spawn(async move {
        let guard = other
            .lock("waited")
            .wait(Duration::from_secs(10))
            .acquire()
            .await;
        guard.map(|g| (Instant::now(), g))
    });
    let signal_set = async {
        while longest_pttl(&urls, "lock:{waited}:waited").await == -2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), signal_set)
        .await
        .expect("the waiter signalled without a script");
    holder.release().await.expect("release");
    let released = Instant::now();
    let (taken, guard) = waiting
        .await
        .expect("task")
        .expect("the waiter takes the lock without a script");
    assert!(
        taken.saturating_duration_since(released) < Duration::from_secs(1),
        "woken {:?} after the release",
        taken.saturating_duration_since(released)
    );
    guard.release().await.expect("release");
    assert_eq!(scripts_on(&urls).await, 0, "no script was sent");
    assert_eq!(stat_on(&urls, "evalsha", "rejected_calls").await, 0);

    let started = Instant::now();
    fenced_refused_at_once(&client).await;

    // Fair mode and the synchronizers alike; a record says which command.
    let fair = client
        .lock("fair")
        .fair()
        .wait(Duration::from_secs(10))
        .acquire()
        .await;
    assert!(
        matches!(&fair, Err(LockError::NotPermitted { command, .. }) if command == "evalsha"),
        "fair: {fair:?}"
    );
    let permit = client.semaphore("permits", 2).acquire().await;
    assert!(
        matches!(&permit, Err(LockError::NotPermitted { command, .. }) if command == "evalsha"),
        "semaphore: {:?}",
        permit.err()
    );
    let records = Records::new(&client);
    let keys = RecordKeys::new(
        "payment:7".to_owned(),
        "idem:{payment:7}".to_owned(),
        "idem:{payment:7}:fence".to_owned(),
    );
    let second = Duration::from_secs(1);
    let claimed = records
        .claim(&keys, "fp", second * 30, second * 60, second)
        .await;
    let refused = claimed.expect_err("a record's claim is a script");
    assert_eq!(refused.refused_command().as_deref(), Some("evalsha"));
    assert!(!refused.is_transient());
    // A run-once call, on the same records: refused before the work.
    let once = client
        .idempotent("payment:8")
        .wait(Duration::from_secs(10))
        .run(|_| async { panic!("the work must not run") as Result<(), String> })
        .await;
    match once {
        Err(e @ redlock_runtime::IdempotentError::Store(_)) => {
            assert!(!e.is_transient(), "no retry gets a permission: {e}");
            assert!(
                e.to_string().contains("+@scripting"),
                "says what to grant: {e}"
            );
        }
        other => panic!("expected a store error naming the permission, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "each refused at once: {:?}",
        started.elapsed()
    );
}

/// Redlock for a `-@scripting` user: each node refuses the acquire
/// script once, and the client remembers it. Plain locks are then taken
/// (`SET NX`, then the conditional attempt for a waiter), renewed by the
/// watchdog and extended (`SET .. IFEQ`) and released (`DELIFEQ`) on
/// every node, without a fencing token: the lock's `fencing_token()` is
/// refused at once with [`LockError::NotPermitted`], and so is a fenced
/// acquire, which leaves nothing held.
#[test]
fn without_scripting_a_redlock_plain_lock_works_without_a_token() {
    Backend::ValkeyRedlock.run_threaded(|b| async move {
        let urls = counted(&b);
        let as_user = noscripts_user(&b, &urls).await;
        let builder = || LockClient::builder().redlock(as_user.clone());
        let client = builder().build().await.expect("connect as noscripts");
        for i in 0..5 {
            let guard = client
                .lock(format!("plain:{i}"))
                .acquire()
                .await
                .expect("a plain Redlock lock needs no script");
            guard.release().await.expect("nor does its release");
        }
        assert_eq!(
            stat_on(&urls, "evalsha", "rejected_calls").await,
            urls.len() as u64,
            "each node refused the acquire script once, and was not asked again"
        );

        let guard = renewed_and_extended(&client, &urls).await;

        // No token: refused at once, naming the permission; still held.
        let started = Instant::now();
        let err = guard
            .fencing_token()
            .await
            .expect_err("a lock granted without the script has no token");
        assert!(started.elapsed() < Duration::from_secs(1), "at once");
        says_what_to_grant(&err);
        assert!(guard.is_held(), "the refused token does not lose the lock");
        guard.release().await.expect("released without a script");
        assert_eq!(
            longest_pttl(&urls, "lock:{renewed}").await,
            -2,
            "released on every node"
        );

        // A waiter's later attempts (the conditional attempt on each node).
        let other = builder().build().await.expect("connect as noscripts");
        let holder = client.lock("waited").acquire().await.expect("free");
        let waiting = tokio::spawn(async move {
            other
                .lock("waited")
                .wait(Duration::from_secs(10))
                .acquire()
                .await
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        holder.release().await.expect("release");
        let guard = waiting
            .await
            .expect("task")
            .expect("the waiter takes the lock without a script");
        guard.release().await.expect("release");
        assert_eq!(scripts_on(&urls).await, 0, "no script ran");

        // A fenced lock wants its token with the acquire: refused at once.
        fenced_refused_at_once(&client).await;
        assert_eq!(
            longest_pttl(&urls, "lock:{fenced}").await,
            -2,
            "nothing held on any node"
        );
    });
}

/// Redlock over servers without the conditional delete (Redis 7.0) for a
/// `-@scripting` user: a lock taken there could not be released without a
/// script, so even a plain acquire fails at once with
/// [`LockError::NotPermitted`], and nothing is left held on any node.
#[test]
fn without_scripting_a_redlock_lock_on_redis_7_fails_at_once() {
    Backend::Redlock.run_threaded(|b| async move {
        let urls = counted(&b);
        let as_user = noscripts_user(&b, &urls).await;
        redlock_refused_at_once(as_user, &urls).await;
    });
}

/// A plain Redlock acquire by a `-@scripting` user over `as_user`'s
/// nodes (the same servers as `urls`), of which too few have the
/// conditional delete to grant a majority: refused at once (not retried
/// for its wait), naming the permission, and nothing held on any node.
async fn redlock_refused_at_once(as_user: Vec<String>, urls: &[String]) {
    let client = LockClient::builder()
        .redlock(as_user)
        .build()
        .await
        .expect("connect as noscripts");
    let started = Instant::now();
    let refused = client
        .lock("refused")
        .wait(Duration::from_secs(10))
        .acquire()
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once, not retried for the wait: {:?}",
        started.elapsed()
    );
    says_what_to_grant(&refused.expect_err("too few nodes release without a script"));
    assert_eq!(
        longest_pttl(urls, "lock:{refused}").await,
        -2,
        "nothing held on any node"
    );
}

/// An acquire for a `-@scripting` user on Valkey, dropped at each point of
/// its life, each time by a new client (connected) over proxies that then
/// delay every chunk by 100 ms: (Redlock) the acquire script on its way
/// and refused, the plain `SET NX` on its way or landed, its answer on its
/// way, the lock held (the guard dropped). The lock never stays: the give-back (or the
/// dropped guard's release) needs no script, and waits for the plain
/// attempt sent after the refusal.
#[rstest]
#[case::one_valkey("one")]
#[case::valkey_redlock("redlock")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_scripting_an_acquire_dropped_at_every_point_leaves_nothing_held(
    #[case] topology: &'static str,
) {
    let net = Proxied::start(topology).await;
    let (proxies, urls) = (&net.proxies, net.urls());
    // One round trip is 200 ms: one server answers the `SET NX` at 200 ms;
    // Redlock's nodes refuse the script at 200 ms, and answer the plain
    // attempt at 400 ms.
    let (mut completed, mut cut_short) = (0, 0);
    for (i, cut) in [1u64, 150, 199, 201, 299, 301, 399, 401, 450, 1_000]
        .into_iter()
        .enumerate()
    {
        // A new client, whose Redlock nodes have not refused the script
        // yet; connected (and probed) before the delay.
        let builder = match topology {
            "redlock" => net.builder().node_timeout(Duration::from_secs(1)),
            _ => net.builder(),
        };
        let client = builder.pool_size(1).build().await.expect("connect");
        client.ping().await.expect("connected");
        for proxy in proxies {
            proxy.set_latency(Duration::from_millis(100));
        }
        let key = format!("cut:{i}");
        let acquire = client
            .lock(key.as_str())
            .ttl(Duration::from_secs(30))
            .acquire();
        let outcome = tokio::time::timeout(Duration::from_millis(cut), acquire).await;
        // The guard, if the acquire completed, is dropped too.
        match outcome {
            Ok(Ok(_guard)) => completed += 1,
            Ok(Err(e)) => panic!("cut after {cut} ms: {e:?}"),
            Err(_) => cut_short += 1,
        }
        for proxy in proxies {
            proxy.set_latency(Duration::ZERO);
        }
        for proxy in proxies {
            assert!(
                proxy
                    .await_quiet(Duration::from_millis(300), Duration::from_secs(10))
                    .await,
                "the proxy went quiet within 10 s"
            );
        }
        let lock = format!("lock:{{{key}}}");
        let deadline = Instant::now() + Duration::from_secs(3);
        while longest_pttl(&urls, &lock).await != -2 {
            assert!(
                Instant::now() < deadline,
                "cut after {cut} ms: the lock stayed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert!(
        completed > 0 && cut_short > 0,
        "cut short {cut_short} times, completed {completed} times: both were tested"
    );
}

/// Redlock over a mix of servers for a `-@scripting` user: two Valkey 9.1
/// nodes (with the conditional delete) and one Redis 7.0 (without). The
/// Valkey nodes grant plain locks; Redis 7.0 refuses the script and is
/// counted as a failed node, as a node that is down: the majority of two
/// holds the lock, the watchdog renews it there, its release reports
/// `Ok` and frees both, and it has no token. With a second Redis 7.0 in
/// place of a Valkey node no majority can grant: the acquire fails at
/// once, naming the permission, and leaves nothing held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_scripting_a_redlock_over_mixed_servers_holds_by_the_capable_majority() {
    let mut servers = Vec::new();
    for server in [Server::Valkey, Server::Valkey, Server::Redis, Server::Redis] {
        let server = RedisServer::start_on(server, &[]).await;
        deny_scripts(&server.url()).await;
        servers.push(server);
    }
    let url = |i: usize| as_noscripts(servers[i].port());
    let urls =
        |nodes: &[usize]| -> Vec<String> { nodes.iter().map(|&i| servers[i].url()).collect() };

    let client = LockClient::builder()
        .redlock([url(0), url(1), url(2)])
        .build()
        .await
        .expect("connect as noscripts");
    let mixed = urls(&[0, 1, 2]);
    let guard = client
        .lock("mixed")
        .ttl(Duration::from_millis(600))
        .acquire()
        .await
        .expect("the two Valkey nodes grant a plain lock");
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert!(guard.is_held(), "renewed on the majority past three leases");
    let pttl = longest_pttl(&urls(&[0, 1]), "lock:{mixed}").await;
    assert!(pttl > 0, "held on the Valkey nodes: {pttl} ms left");
    assert_eq!(
        longest_pttl(&urls(&[2]), "lock:{mixed}").await,
        -2,
        "never taken on Redis 7.0"
    );
    says_what_to_grant(&guard.fencing_token().await.expect_err("no token"));
    guard
        .release()
        .await
        .expect("the majority's release is the release");
    assert_eq!(longest_pttl(&mixed, "lock:{mixed}").await, -2, "released");

    redlock_refused_at_once(vec![url(0), url(2), url(3)], &urls(&[0, 2, 3])).await;
}

/// A server at `maxmemory` refuses the conditional `SET` (`OOM`), not the
/// script's `PEXPIRE`: the renewal falls back to the script, and the
/// lock stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_refused_for_memory_falls_back_to_the_script() {
    let valkey = RedisServer::start_on(Server::Valkey, &[]).await;
    let mut admin = raw_connection(valkey.url()).await;
    let client = LockClient::connect(valkey.url()).await.expect("connect");
    let guard = client.lock("full").acquire().await.expect("free");
    let config = |value: &'static str| {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("SET").arg("maxmemory").arg(value);
        cmd
    };
    let _: () = config("1")
        .query_async(&mut admin)
        .await
        .expect("CONFIG SET maxmemory");
    let scripts = scripts_run(&mut admin).await;
    let extended = guard.extend(Duration::from_secs(5)).await;
    let rejected = stat(&mut admin, "set", "rejected_calls").await;
    let scripts = scripts_run(&mut admin).await - scripts;
    let _: () = config("0")
        .query_async(&mut admin)
        .await
        .expect("CONFIG SET maxmemory");
    extended.expect("extended by the script at maxmemory");
    assert!(rejected >= 1, "the SET was refused for memory");
    assert!(scripts >= 1, "the script renewed instead");
    assert!(guard.is_held());
    guard.release().await.expect("release");
}

/// The server behind one address changes (a failover behind a proxy or
/// a virtual IP): the new connections ask the new server, and use what it
/// has, the scripts on Redis 7.0, the conditional commands on Valkey 9.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_changed_behind_one_address_is_probed_again() {
    let valkey = RedisServer::start_on(Server::Valkey, &[]).await;
    let redis = RedisServer::start_on(Server::Redis, &[]).await;
    let (mut at_valkey, mut at_redis) = (
        raw_connection(valkey.url()).await,
        raw_connection(redis.url()).await,
    );
    let proxy = FaultProxy::start(valkey.addr()).await;
    // One connection, so one ping after a cut finds it dead and makes the
    // next: no lock call is sent again (a re-sent acquire is a script).
    let client = LockClient::builder()
        .url(proxy.url())
        .pool_size(1)
        .build()
        .await
        .expect("connect");
    let pairs = |round: &'static str| {
        let client = client.clone();
        async move {
            for i in 0..5 {
                let guard = client
                    .lock(format!("{round}:{i}"))
                    .acquire()
                    .await
                    .expect("free");
                guard.extend(Duration::from_secs(10)).await.expect("extend");
                guard.release().await.expect("release");
            }
        }
    };
    pairs("on-valkey").await;
    assert_eq!(stat(&mut at_valkey, "delifeq", "calls").await, 5);
    assert_eq!(scripts_run(&mut at_valkey).await, 0);
    // Redis's script cache warmed, so no NOSCRIPT adds to the count below.
    let direct = LockClient::connect(redis.url()).await.expect("connect");
    let warm = direct.lock("warm-up").acquire().await.expect("free");
    warm.extend(Duration::from_secs(10)).await.expect("extend");
    warm.release().await.expect("release");
    let before = scripts_run(&mut at_redis).await;

    for (to, round) in [
        (redis.addr(), "on-redis"),
        (valkey.addr(), "back-on-valkey"),
    ] {
        proxy.retarget(to);
        proxy.cut_all();
        client.ping().await.expect("the new server answers");
        pairs(round).await;
    }
    assert_eq!(
        scripts_run(&mut at_redis).await - before,
        10,
        "on Redis 7.0, each extend and release ran its script"
    );
    assert_eq!(
        stat(&mut at_valkey, "delifeq", "calls").await,
        10,
        "back on Valkey, the releases are DELIFEQ again"
    );
    assert_eq!(scripts_run(&mut at_valkey).await, 0);
}

/// A client whose backoff alone sleeps 2 s between attempts.
async fn slow_poller(builder: LockClientBuilder) -> LockClient {
    builder
        .retry(RetryPolicy::new(Duration::from_secs(2), Duration::from_secs(2)).jitter(false))
        .build()
        .await
        .expect("connect")
}

/// Completes once a waiter of `key` has signalled (its busy attempt set
/// the waiters' signal), so it has subscribed: a waiter of
/// [`slow_poller`] then sleeps 2 s unless a release wakes it.
async fn signalled(admin: &mut MultiplexedConnection, key: &str) {
    let signal = format!("lock:{{{key}}}:waited");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let exists: bool = redis::cmd("EXISTS")
            .arg(&signal)
            .query_async(admin)
            .await
            .expect("EXISTS");
        if exists {
            return;
        }
        assert!(Instant::now() < deadline, "the waiter never signalled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Asserts that a waiter of [`slow_poller`] took the lock within 50 ms of
/// its release: a push woke it (its backoff alone sleeps 2 s).
fn woken_promptly(released: Instant, acquired: Instant, what: &str) {
    let delay = acquired.saturating_duration_since(released);
    assert!(
        delay <= Duration::from_millis(50),
        "{what}: woken {delay:?} after the release; the backoff alone sleeps 2 s"
    );
}

/// `key`'s lock taken by `client` after a wait of up to 10 s, and when.
fn waiting(
    client: &LockClient,
    key: impl Into<String>,
) -> tokio::task::JoinHandle<(Instant, LockGuard)> {
    let (client, key) = (client.clone(), key.into());
    tokio::spawn(async move {
        let guard = client
            .lock(key)
            .wait(Duration::from_secs(10))
            .acquire()
            .await
            .expect("acquire");
        (Instant::now(), guard)
    })
}

/// A holder whose acquire found the lock held first (others likely wait)
/// releases in one step: the conditional delete, the signal's `DEL` and
/// the publish in one pipeline, no `EXISTS` and no second round trip; the
/// next waiter is woken as promptly. A lock taken without a wait and
/// released with no one waiting still publishes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contended_release_deletes_and_wakes_in_one_step() {
    let valkey = RedisServer::start_on(Server::Valkey, &[]).await;
    let mut admin = raw_connection(valkey.url()).await;
    let first = LockClient::connect(valkey.url()).await.expect("connect");
    let second = slow_poller(LockClient::builder().url(valkey.url())).await;
    let third = slow_poller(LockClient::builder().url(valkey.url())).await;
    let key = "contended";

    let holder = first.lock(key).acquire().await.expect("free");
    let second_waits = waiting(&second, key);
    signalled(&mut admin, key).await;
    holder.release().await.expect("release");
    let (_, contended) = second_waits.await.expect("the second waiter");
    // Its winning attempt set the signal too: gone, so that the third
    // waiter's busy attempt is seen setting it.
    let _: () = redis::cmd("DEL")
        .arg("lock:{contended}:waited")
        .query_async(&mut admin)
        .await
        .expect("DEL");
    let third_waits = waiting(&third, key);
    signalled(&mut admin, key).await;

    let calls = |admin: &mut MultiplexedConnection| {
        let mut admin = admin.clone();
        async move {
            let mut counts = Vec::new();
            for command in ["delifeq", "exists", "del", "publish"] {
                counts.push(stat(&mut admin, command, "calls").await);
            }
            counts
        }
    };
    let before = calls(&mut admin).await;
    contended.release().await.expect("release");
    let released = Instant::now();
    let after = calls(&mut admin).await;
    let (acquired, guard) = third_waits.await.expect("the third waiter");
    let sent: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(
        sent,
        [1, 0, 1, 1],
        "DELIFEQ, EXISTS, DEL, PUBLISH sent by the contended release"
    );
    woken_promptly(released, acquired, "the third waiter");
    guard.release().await.expect("release");

    let published = stat(&mut admin, "publish", "calls").await;
    let alone = first.lock("alone").acquire().await.expect("free");
    alone.release().await.expect("release");
    assert_eq!(
        stat(&mut admin, "publish", "calls").await,
        published,
        "a release no one waited for published"
    );
}

/// A release without a script still wakes a waiter at once (its backoff
/// alone would sleep 2 s): the bound is the one `redis_wakeups.rs` holds
/// the script's release to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conditional_release_wakes_the_waiter_within_50ms() {
    let valkey = RedisServer::start_on(Server::Valkey, &[]).await;
    let mut admin = raw_connection(valkey.url()).await;
    let holders = LockClient::connect(valkey.url()).await.expect("connect");
    let waiters = slow_poller(LockClient::builder().url(valkey.url())).await;
    for round in 0..3 {
        let key = format!("push:{round}");
        let holder = holders.lock(&key).acquire().await.expect("holder");
        let waiter = waiting(&waiters, key.clone());
        // The waiter has signalled (its busy attempt set the key), so it
        // has subscribed: polling alone would now sleep 2 s.
        signalled(&mut admin, &key).await;
        let (deletes, scripts) = (
            stat(&mut admin, "delifeq", "calls").await,
            scripts_run(&mut admin).await,
        );
        holder.release().await.expect("release");
        let released = Instant::now();
        let (acquired, guard) = waiter.await.expect("waiter");
        assert_eq!(
            stat(&mut admin, "delifeq", "calls").await - deletes,
            1,
            "released with DELIFEQ"
        );
        assert_eq!(
            scripts_run(&mut admin).await,
            scripts,
            "the waiter's attempts ran no script"
        );
        woken_promptly(released, acquired, &format!("round {round}"));
        guard.release().await.expect("release");
    }
}
