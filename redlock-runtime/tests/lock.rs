//! The lock runtime against real `redis-server` processes started by the
//! harness: mutual exclusion, watchdog, lost locks, cancellation, waiting
//! while Redis is paused, Redis going away and coming back, bad input.
//!
//! Each test starts its own server, so they run in parallel without sharing
//! keys.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlock_runtime::{ConfigError, LockClient, LockError, LostReason, RetryPolicy};
use redlock_tests::{FaultProxy, RedisServer};

async fn client(url: &str) -> LockClient {
    LockClient::connect(url)
        .await
        .expect("connect to the test Redis")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_four_nodes_sixteen_tasks_two_thousand_acquisitions() {
    const TOTAL: usize = 2_000;
    let server = RedisServer::start().await;
    let inside = Arc::new(AtomicBool::new(false));
    let taken = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(std::sync::Mutex::new(Vec::with_capacity(TOTAL + 64)));
    let mut tasks = Vec::new();
    for _node in 0..4 {
        // Each "node" has its own client and pool: separate connections.
        let client = LockClient::builder()
            .url(server.url())
            .retry(RetryPolicy::new(
                Duration::from_millis(1),
                Duration::from_millis(20),
            ))
            .build()
            .await
            .expect("node client");
        for _task in 0..16 {
            let (client, inside, taken, fences) = (
                client.clone(),
                inside.clone(),
                taken.clone(),
                fences.clone(),
            );
            tasks.push(tokio::spawn(async move {
                while taken.load(Ordering::SeqCst) < TOTAL {
                    let guard = client
                        .lock("contended")
                        .ttl(Duration::from_secs(5))
                        .wait(Duration::from_secs(60))
                        .acquire()
                        .await
                        .expect("acquire within the wait");
                    assert!(
                        !inside.swap(true, Ordering::SeqCst),
                        "two holders inside the critical section at once"
                    );
                    fences
                        .lock()
                        .expect("fence log")
                        .push(guard.fencing_token());
                    taken.fetch_add(1, Ordering::SeqCst);
                    // Give another holder every chance to overlap.
                    tokio::task::yield_now().await;
                    inside.store(false, Ordering::SeqCst);
                    guard.release().await.expect("release while held");
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("contending task");
    }
    let fences = fences.lock().expect("fence log");
    assert!(fences.len() >= TOTAL, "{} acquisitions", fences.len());
    for pair in fences.windows(2) {
        assert!(
            pair[1] > pair[0],
            "fencing tokens must strictly increase in lock order: {} then {}",
            pair[0],
            pair[1]
        );
    }
}

#[tokio::test]
async fn acquire_writes_token_and_fence_beside_each_other() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let guard = locks
        .lock("order:42")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .expect("acquire");
    let stored: String = redis.get("lock:{order:42}").await.expect("GET");
    assert_eq!(stored, guard.token());
    assert!(uuid::Uuid::parse_str(guard.token()).is_ok_and(|u| u.get_version_num() == 4));
    let pttl: i64 = redis.pttl("lock:{order:42}").await.expect("PTTL");
    assert!(pttl > 9_000 && pttl <= 10_000, "pttl {pttl}");
    let fence: u64 = redis.get("lock:{order:42}:fence").await.expect("GET fence");
    assert_eq!(fence, guard.fencing_token());
    guard.release().await.expect("release");
    let exists: bool = redis.exists("lock:{order:42}").await.expect("EXISTS");
    assert!(!exists, "released lock is deleted");
    let fence_after: u64 = redis.get("lock:{order:42}:fence").await.expect("GET fence");
    assert_eq!(fence_after, fence, "the fencing counter outlives the lock");
}

#[tokio::test]
async fn watchdog_keeps_a_lock_held_for_three_ttls() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let other = client(&server.url()).await;
    let ttl = Duration::from_millis(600);
    let guard = locks
        .lock("long-job")
        .ttl(ttl)
        .acquire()
        .await
        .expect("acquire");
    let lost = guard.lost();
    tokio::select! {
        reason = lost => panic!("lock lost while the watchdog ran: {reason}"),
        () = tokio::time::sleep(ttl * 3) => {}
    }
    assert!(guard.is_held());
    assert!(
        other
            .lock("long-job")
            .try_acquire()
            .await
            .expect("no error")
            .is_none(),
        "another client must still find it held after 3 x ttl"
    );
    guard.release().await.expect("still ours to release");
}

#[tokio::test]
async fn deleting_the_key_makes_lost_fire_within_ttl() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let ttl = Duration::from_millis(900);
    let guard = locks.lock("del").ttl(ttl).acquire().await.expect("acquire");
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let _: () = redis.del("lock:{del}").await.expect("DEL");
    let started = Instant::now();
    let reason = tokio::time::timeout(ttl, guard.lost())
        .await
        .expect("lost() must fire within ttl of the key's deletion");
    assert_eq!(reason, LostReason::TokenGone);
    assert!(!guard.is_held());
    assert!(started.elapsed() < ttl);
    let err = guard.release().await.expect_err("releasing a lost lock");
    assert!(matches!(err, LockError::Lost { .. }), "{err}");
}

#[tokio::test]
async fn restarting_redis_makes_lost_fire_within_ttl() {
    let mut server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let ttl = Duration::from_millis(1_500);
    let guard = locks
        .lock("restart")
        .ttl(ttl)
        .acquire()
        .await
        .expect("acquire");
    let started = Instant::now();
    server.restart().await;
    let reason = tokio::time::timeout(ttl.saturating_sub(started.elapsed()), guard.lost())
        .await
        .expect("lost() must fire within ttl of a restart that emptied Redis");
    assert_eq!(reason, LostReason::TokenGone);
    // The same client works again after the restart.
    let again = locks
        .lock("restart")
        .wait(Duration::from_secs(3))
        .acquire()
        .await
        .expect("acquire after restart");
    again.release().await.expect("release");
}

#[tokio::test]
async fn black_holed_connection_makes_lost_fire_within_ttl() {
    let server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    let locks = client(&proxy.url()).await;
    let ttl = Duration::from_millis(1_200);
    let guard = locks
        .lock("partition")
        .ttl(ttl)
        .acquire()
        .await
        .expect("acquire");
    proxy.blackhole(true);
    let started = Instant::now();
    let reason = tokio::time::timeout(ttl + Duration::from_millis(100), guard.lost())
        .await
        .expect("lost() must fire within ttl when Redis stops answering");
    assert_eq!(reason, LostReason::Unconfirmed);
    assert!(!guard.is_held());
    // Presumed lost no later than the lease could have ended on Redis.
    assert!(started.elapsed() <= ttl + Duration::from_millis(100));
}

#[tokio::test]
async fn aborting_a_task_that_holds_a_guard_frees_the_key_within_200ms() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let holder = tokio::spawn({
        let locks = locks.clone();
        async move {
            let _guard = locks
                .lock("cancel")
                .ttl(Duration::from_secs(30))
                .acquire()
                .await
                .expect("acquire");
            held_tx.send(()).expect("test is listening");
            std::future::pending::<()>().await;
        }
    });
    held_rx.await.expect("holder acquired");
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let exists: bool = redis.exists("lock:{cancel}").await.expect("EXISTS");
    assert!(exists);
    holder.abort();
    let aborted = Instant::now();
    let mut gone = false;
    // Bounded poll: at most 200 ms in 5 ms steps.
    while aborted.elapsed() < Duration::from_millis(200) {
        let exists: bool = redis.exists("lock:{cancel}").await.expect("EXISTS");
        if !exists {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        gone,
        "the key must be deleted within 200 ms of the abort (ttl was 30 s)"
    );
}

#[tokio::test]
async fn wait_is_honoured_while_redis_is_paused() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let wait = Duration::from_millis(1_200);
    server.pause();
    let started = Instant::now();
    let result = locks.lock("paused").wait(wait).acquire().await;
    let took = started.elapsed();
    server.resume();
    let err = result.expect_err("Redis is paused");
    assert!(
        took >= wait - Duration::from_millis(100) && took <= wait + Duration::from_millis(100),
        "acquire took {took:?} for a wait of {wait:?}"
    );
    assert!(
        err.is_transient() && !err.is_busy(),
        "an outage is not busy: {err}"
    );
    assert!(err.to_string().contains("`paused`"), "{err}");
}

#[tokio::test]
async fn wait_is_honoured_while_another_owner_holds_the_lock() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let _holder = locks.lock("busy").acquire().await.expect("holder");
    let wait = Duration::from_millis(700);
    let started = Instant::now();
    let err = locks
        .lock("busy")
        .wait(wait)
        .acquire()
        .await
        .expect_err("held");
    let took = started.elapsed();
    assert!(
        matches!(err, LockError::WaitTimeout { .. }),
        "busy is reported as busy: {err}"
    );
    assert!(
        took >= wait && took <= wait + Duration::from_millis(100),
        "took {took:?}"
    );
    let err = locks.lock("busy").acquire().await.expect_err("held");
    assert!(matches!(err, LockError::Busy { .. }), "{err}");
}

#[tokio::test]
async fn a_waiter_acquires_as_soon_as_the_lease_runs_out() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let ttl = Duration::from_millis(800);
    let holder = locks
        .lock("expire")
        .ttl(ttl)
        .watchdog(false)
        .acquire()
        .await
        .expect("holder");
    let started = Instant::now();
    let next = locks
        .lock("expire")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("the lease runs out within the wait");
    let took = started.elapsed();
    assert!(
        took <= ttl + Duration::from_millis(100),
        "waiter woke {took:?} after the request; ttl {ttl:?}"
    );
    assert!(next.fencing_token() > holder.fencing_token());
    // The old owner's release must not delete the new owner's lock.
    let err = holder.release().await.expect_err("lost");
    assert!(err.is_lost(), "{err}");
    assert!(next.is_held());
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let stored: String = redis.get("lock:{expire}").await.expect("GET");
    assert_eq!(stored, next.token(), "the new owner's lock is untouched");
}

#[tokio::test]
async fn redis_down_fails_fast_and_the_client_recovers() {
    let mut server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    locks
        .lock("warm")
        .acquire()
        .await
        .expect("works before the kill")
        .release()
        .await
        .expect("release");
    server.kill().await;
    let started = Instant::now();
    let err = locks
        .lock("down")
        .acquire()
        .await
        .expect_err("Redis is down");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "failed after {:?}",
        started.elapsed()
    );
    assert!(err.is_transient(), "a typed transient error: {err:?}");
    server.restart().await;
    let guard = locks
        .lock("down")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("the same client works once Redis is back");
    guard.release().await.expect("release");
}

#[tokio::test]
async fn bad_input_gives_clear_typed_errors() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;

    let err = locks.lock("").acquire().await.expect_err("empty key");
    assert!(matches!(err, LockError::InvalidKey { .. }), "{err}");
    assert!(err.to_string().contains("empty"), "{err}");

    let err = locks
        .lock("x".repeat(1025))
        .acquire()
        .await
        .expect_err("oversized key");
    assert!(matches!(err, LockError::InvalidKey { .. }), "{err}");
    assert!(err.to_string().contains("1024"), "{err}");

    let err = locks
        .lock("k")
        .ttl(Duration::ZERO)
        .acquire()
        .await
        .expect_err("zero ttl");
    assert!(
        matches!(
            err,
            LockError::Config(ConfigError::InvalidDuration { name: "ttl", .. })
        ),
        "{err}"
    );

    // Nothing was written by the rejected requests.
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let keys: Vec<String> = redis.keys("*").await.expect("KEYS");
    assert!(keys.is_empty(), "{keys:?}");

    // An unreachable server: a port nobody listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let started = Instant::now();
    let err = LockClient::builder()
        .url(format!("redis://:hunter2@127.0.0.1:{port}"))
        .connection_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect_err("nothing listens there");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(matches!(err, LockError::Connect { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&port.to_string()), "names the server: {msg}");
    assert!(msg.to_lowercase().contains("refused"), "says why: {msg}");
    assert!(!msg.contains("hunter2"), "password leaked: {msg}");
    assert!(!format!("{err:?}").contains("hunter2"));

    let err = LockClient::connect("http://:hunter2@example")
        .await
        .expect_err("not a redis URL");
    assert!(
        matches!(err, LockError::Config(ConfigError::InvalidUrl { .. })),
        "{err:?}"
    );
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[tokio::test]
async fn debug_output_never_shows_the_password() {
    let server = RedisServer::start().await;
    let client = LockClient::builder()
        .url(format!(
            "redis://default:hunter2@127.0.0.1:{}",
            server.port()
        ))
        .build_unchecked()
        .expect("valid settings");
    let debug = format!("{client:?}");
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(debug.contains("***"), "{debug}");
    let builder = LockClient::builder().url("redis://:hunter2@127.0.0.1:1");
    assert!(!format!("{builder:?}").contains("hunter2"));
}

#[tokio::test]
async fn extend_and_release_are_checked_against_the_token() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let guard = locks
        .lock("ext")
        .ttl(Duration::from_secs(2))
        .watchdog(false)
        .acquire()
        .await
        .expect("acquire");
    guard
        .extend(Duration::from_secs(20))
        .await
        .expect("extend while held");
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let pttl: i64 = redis.pttl("lock:{ext}").await.expect("PTTL");
    assert!(pttl > 19_000, "extended: {pttl}");
    // Someone else's value under the key: extend and release refuse to act.
    let _: () = redis.set("lock:{ext}", "someone-else").await.expect("SET");
    let err = guard
        .extend(Duration::from_secs(5))
        .await
        .expect_err("lost");
    assert!(err.is_lost(), "{err}");
    let err = guard.release().await.expect_err("lost");
    assert!(err.is_lost(), "{err}");
    let stored: String = redis.get("lock:{ext}").await.expect("GET");
    assert_eq!(
        stored, "someone-else",
        "another owner's lock is never deleted"
    );
}

#[tokio::test]
async fn key_prefix_and_from_pool() {
    let server = RedisServer::start().await;
    let manager =
        redlock_runtime::bb8_redis::RedisConnectionManager::new(server.url()).expect("manager");
    let pool = redlock_runtime::bb8::Pool::builder()
        .max_size(2)
        .build(manager)
        .await
        .expect("pool");
    let locks = LockClient::builder()
        .pool(pool)
        .key_prefix("app:locks:")
        .build()
        .await
        .expect("client over the pool");
    let guard = locks.lock("k").acquire().await.expect("acquire");
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let exists: bool = redis.exists("app:locks:{k}").await.expect("EXISTS");
    assert!(exists);
    guard.release().await.expect("release");
    let plain = LockClient::from_pool(locks.pool().expect("redis client").clone());
    plain
        .lock("k")
        .acquire()
        .await
        .expect("from_pool")
        .release()
        .await
        .expect("release");
}

#[tokio::test]
async fn scripts_are_reloaded_after_script_flush() {
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    locks
        .lock("s")
        .acquire()
        .await
        .expect("loads the scripts")
        .release()
        .await
        .expect("release");
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut redis)
        .await
        .expect("SCRIPT FLUSH");
    // EVALSHA now answers NOSCRIPT; the client loads the script and retries.
    let guard = locks
        .lock("s")
        .acquire()
        .await
        .expect("acquire after flush");
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut redis)
        .await
        .expect("SCRIPT FLUSH");
    guard
        .extend(Duration::from_secs(5))
        .await
        .expect("extend after flush");
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut redis)
        .await
        .expect("SCRIPT FLUSH");
    guard.release().await.expect("release after flush");
}

#[tokio::test]
async fn a_slow_redis_gives_a_typed_timeout_within_the_command_timeout() {
    let server = RedisServer::start().await;
    let proxy = FaultProxy::start(server.addr()).await;
    let locks = LockClient::builder()
        .url(proxy.url())
        .command_timeout(Duration::from_millis(200))
        .build()
        .await
        .expect("client through the proxy");
    proxy.set_latency(Duration::from_millis(400));
    let started = Instant::now();
    let err = locks.lock("slow").acquire().await.expect_err("too slow");
    let took = started.elapsed();
    assert!(
        matches!(err, LockError::Timeout { .. }),
        "a slow Redis is a timeout: {err:?}"
    );
    assert!(took < Duration::from_millis(400), "took {took:?}");
    assert!(err.to_string().contains("`slow`"), "{err}");
    proxy.set_latency(Duration::ZERO);
    let guard = locks
        .lock("slow")
        .wait(Duration::from_secs(3))
        .acquire()
        .await
        .expect("works again once Redis is fast");
    guard.release().await.expect("release");
}

#[tokio::test]
async fn an_exhausted_pool_is_a_clear_error() {
    let server = RedisServer::start().await;
    let manager =
        redlock_runtime::bb8_redis::RedisConnectionManager::new(server.url()).expect("manager");
    let pool = redlock_runtime::bb8::Pool::builder()
        .max_size(1)
        .connection_timeout(Duration::from_millis(300))
        .build(manager)
        .await
        .expect("pool");
    // The application holds the only connection.
    let held = pool.get_owned().await.expect("the one connection");
    let locks = LockClient::from_pool(pool.clone());
    let started = Instant::now();
    let err = locks
        .lock("p")
        .acquire()
        .await
        .expect_err("no connection to be had");
    assert!(matches!(err, LockError::Pool { .. }), "{err:?}");
    assert!(err.is_transient());
    assert!(
        err.to_string().contains("pool is exhausted"),
        "says what to look at: {err}"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    drop(held);
    locks
        .lock("p")
        .acquire()
        .await
        .expect("works once a connection is free")
        .release()
        .await
        .expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_renewal_keeps_a_thousand_locks_alive_in_few_round_trips() {
    const LOCKS: usize = 1_000;
    let server = RedisServer::start().await;
    let locks = client(&server.url()).await;
    let ttl = Duration::from_millis(900);
    let mut guards = Vec::with_capacity(LOCKS);
    // Taken over ~ a third of the ttl, so their renewals are not naturally aligned.
    for i in 0..LOCKS {
        guards.push(
            locks
                .lock(format!("batch:{i}"))
                .ttl(ttl)
                .acquire()
                .await
                .expect("acquire"),
        );
        if i % 100 == 99 {
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
    assert_eq!(locks.held_locks(), LOCKS);
    let before = locks.renewal_round_trips();
    let mut redis = redlock_tests::raw_connection(&server.url()).await;
    let hold = ttl * 3;
    let started = Instant::now();
    tokio::time::sleep(hold / 2).await;
    // The renewal pipeline recovers from a flushed script cache (NOSCRIPT).
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut redis)
        .await
        .expect("SCRIPT FLUSH");
    tokio::time::sleep(hold.saturating_sub(started.elapsed())).await;
    let round_trips = locks.renewal_round_trips() - before;
    eprintln!("{LOCKS} locks, {hold:?} hold: {round_trips} renewal round trips");

    let lost: Vec<_> = guards
        .iter()
        .filter(|g| !g.is_held())
        .map(|g| g.key())
        .collect();
    assert!(lost.is_empty(), "locks lost while renewed: {lost:?}");
    let mut pipe = redis::pipe();
    for i in 0..LOCKS {
        pipe.get(format!("lock:{{batch:{i}}}"));
    }
    let stored: Vec<Option<String>> = pipe.query_async(&mut redis).await.expect("GETs");
    for (guard, stored) in guards.iter().zip(&stored) {
        assert_eq!(
            stored.as_deref(),
            Some(guard.token()),
            "{} in Redis",
            guard.key()
        );
    }
    // Renewal period is ttl/3; at most two cohorts per period, plus the
    // round trip that reloaded the flushed script.
    let periods = hold.as_secs_f64() / (ttl / 3).as_secs_f64();
    let allowed = (2.0 * periods).ceil() as u64 + 2;
    assert!(
        round_trips <= allowed,
        "{round_trips} renewal round trips for {LOCKS} locks over {periods:.0} periods (allowed {allowed})"
    );
    assert!(
        round_trips >= periods as u64 / 2,
        "renewals happened: {round_trips}"
    );
    for guard in guards {
        guard.release().await.expect("release");
    }
    assert_eq!(locks.held_locks(), 0);
}
