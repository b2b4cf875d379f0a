//! What our client is compared with: the raw Redis commands (no lock
//! library) and the `rslock` crate, in both the uncontended and the
//! contended scenario.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::contended::{CONTENDED_TTL, CONTENDED_WORKERS, Contended, contended};
use crate::support::connect;
use crate::uncontended::UNCONTENDED_TTL;

/// Keep in step with `rslock` in benches/Cargo.toml (shown in the output).
pub(crate) const RSLOCK_VERSION: &str = "0.10.0";

/// rslock retries after a random delay in `0..this` (its default is 200 ms,
/// which would make it look far worse than it need be; this matches the
/// first step of our default backoff).
pub(crate) const RSLOCK_RETRY_DELAY: Duration = Duration::from_millis(10);

/// The naive poller's fixed retry interval.
const RAW_POLL: Duration = Duration::from_millis(1);

/// The compare-and-delete script of the raw baseline.
const RELEASE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

pub(crate) fn release_script() -> redis::Script {
    redis::Script::new(RELEASE)
}

/// The raw baselines' acquire of a free key: `SET key token NX PX`, with
/// a UUID v4 token, as our client makes one per acquire. Returns the token.
async fn raw_acquire<C: redis::aio::ConnectionLike + Send>(conn: &mut C, key: &str) -> String {
    let token = uuid::Uuid::new_v4().to_string();
    let ok: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(&token)
        .arg("NX")
        .arg("PX")
        .arg(UNCONTENDED_TTL.as_millis() as u64)
        .query_async(conn)
        .await
        .expect("raw SET");
    assert!(ok.is_some(), "distinct keys are never busy");
    token
}

/// One uncontended `raw` pair: `SET key token NX PX`, then `EVALSHA` of the
/// compare-and-delete script (on one server's connection, or redis-rs's
/// cluster connection, which routes each command by its key's slot).
pub(crate) async fn raw_pair<C: redis::aio::ConnectionLike + Send>(
    mut conn: C,
    script: Arc<redis::Script>,
    key: String,
) {
    let token = raw_acquire(&mut conn, &key).await;
    let released: i64 = script
        .key(&key)
        .arg(&token)
        .invoke_async(&mut conn)
        .await
        .expect("raw release");
    assert_eq!(released, 1);
}

/// One uncontended `raw_conditional` pair, on a server with `DELIFEQ`
/// (Valkey 9): the commands our client sends for a plain lock without
/// scripts, by hand, with nothing around them: `SET key token NX PX`, then
/// `DELIFEQ key token` pipelined with `EXISTS` of the waiters' signal.
/// What no client can send less of while it wakes waiters by push.
pub(crate) async fn raw_conditional_pair<C: redis::aio::ConnectionLike + Send>(
    mut conn: C,
    key: String,
) {
    let token = raw_acquire(&mut conn, &key).await;
    let (released, _waited): (i64, i64) = redis::pipe()
        .cmd("DELIFEQ")
        .arg(&key)
        .arg(&token)
        .cmd("EXISTS")
        .arg(format!("{key}:waited"))
        .query_async(&mut conn)
        .await
        .expect("raw DELIFEQ");
    assert_eq!(released, 1);
}

/// One uncontended `rslock` pair: `manager.acquire(key)`, then
/// `guard.release()`.
pub(crate) async fn rslock_pair(manager: rslock::LockManager, key: String) {
    let guard = manager
        .acquire(key.as_str(), UNCONTENDED_TTL)
        .await
        .expect("rslock acquire");
    guard.release().await;
}

/// The contended scenario for rslock, one `LockManager` per worker.
pub(crate) async fn contended_rslock(url: &str, cfg: &Config) -> Contended {
    let managers: Vec<rslock::LockManager> = (0..CONTENDED_WORKERS)
        .map(|_| {
            let mut manager = rslock::LockManager::new(vec![url.to_owned()]);
            manager.set_retry(3, RSLOCK_RETRY_DELAY);
            manager
        })
        .collect();
    let key: Arc<str> = "contended:rslock".into();
    contended("rslock", cfg, managers, move |manager, critical, worker| {
        let wanted = Instant::now();
        let key = key.clone();
        async move {
            // `acquire` loops over `lock` (3 tries, random delays) until it wins.
            let guard = manager
                .acquire(&*key, CONTENDED_TTL)
                .await
                .map_err(|e| e.to_string())?;
            let entry = critical.section(worker, wanted).await;
            guard.release().await;
            Ok(entry)
        }
    })
    .await
}

/// The naive poller: `SET NX PX` every [`RAW_POLL`] until it wins.
pub(crate) async fn contended_raw(url: &str, cfg: &Config) -> Contended {
    let mut conns = Vec::new();
    for _ in 0..CONTENDED_WORKERS {
        conns.push(connect(url).await);
    }
    let script = Arc::new(release_script());
    let key: Arc<str> = "contended:raw".into();
    contended("raw", cfg, conns, move |mut conn, critical, worker| {
        let wanted = Instant::now();
        let (key, script) = (key.clone(), script.clone());
        async move {
            let token = uuid::Uuid::new_v4().to_string();
            loop {
                let won: Option<String> = redis::cmd("SET")
                    .arg(&*key)
                    .arg(&token)
                    .arg("NX")
                    .arg("PX")
                    .arg(CONTENDED_TTL.as_millis() as u64)
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| e.to_string())?;
                if won.is_some() {
                    break;
                }
                tokio::time::sleep(RAW_POLL).await;
            }
            let entry = critical.section(worker, wanted).await;
            let released: i64 = script
                .key(&*key)
                .arg(&token)
                .invoke_async(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            if released != 1 {
                return Err("raw release found another owner's token".to_owned());
            }
            Ok(entry)
        }
    })
    .await
}
