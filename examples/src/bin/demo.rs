//! The redlock demo: the three things redlock is for, in one run of about
//! eight seconds.
//!
//! ```text
//! cargo run -p redlock-examples --bin demo                                   # in-memory
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p redlock-examples --bin demo  # real Redis
//! REDIS_CLUSTER_URLS=redis://127.0.0.1:7000,redis://127.0.0.1:7001 \
//!     cargo run -p redlock-examples --bin demo                               # a Redis Cluster
//! REDIS_SENTINEL_URLS=redis://127.0.0.1:26379 REDIS_SENTINEL_MASTER=mymaster \
//!     cargo run -p redlock-examples --bin demo                               # Sentinel
//! ```
//!
//! 1. **A service method** (`Orders::place_order`, annotated with
//!    `#[distributed_lock(key = "order:<user_id>:<order_id>", ..)]`) called
//!    at once by three nodes: two place the same order, one another order.
//!    The same order runs one node after the other (the second finds it
//!    placed); the other order runs in parallel.
//! 2. **Double-submit**: the order service on a free loopback port behind
//!    the idempotency layer; the same POST twice at once (`201` and `409`
//!    "processing"), then once more (the `201` replayed).
//! 3. **A scheduled job** on three nodes, every second for five seconds,
//!    with `on_busy = "skip"` and `hold_at_least`: exactly one node runs
//!    each tick.
//!
//! Each node is its own `LockClient` (with a Redis store; in memory the
//! nodes share one client, as threads of one process would). The demo
//! checks what it shows and exits with 1 if anything did not hold.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::StatusCode;
use redlock_examples::client::{Error, Reply, get, post_order};
use redlock_examples::orders::{OrderStore, Orders, Placed, app};
use redlock_examples::store::Store;
use redlock_runtime::{LockClient, distributed_lock};
use tokio::sync::Mutex;
use tokio::time::Instant;

#[tokio::main]
async fn main() {
    match run().await {
        Ok(true) => {}
        Ok(false) => {
            println!("\nSomething above did not hold (marked UNEXPECTED).");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("\ndemo failed: {e}");
            std::process::exit(1);
        }
    }
}

async fn run() -> Result<bool, Error> {
    let t0 = Instant::now();
    let (nodes, backend) = connect().await?;
    println!("redlock demo using {backend}");
    let mut ok = true;
    ok &= service_method(&nodes).await?;
    ok &= double_submit(&nodes[0]).await?;
    ok &= scheduled_job(&nodes).await?;
    println!("\ndone in {:.1} s", t0.elapsed().as_secs_f64());
    Ok(ok)
}

/// Three clients: three nodes.
async fn connect() -> Result<(Vec<LockClient>, String), Error> {
    let store = Store::from_env()?;
    match store.builder() {
        Some(_) => {
            let mut nodes = Vec::new();
            for _ in 0..3 {
                // Separate clients, separate pools: like three processes.
                let builder = store.builder().ok_or("a Redis store")?;
                nodes.push(builder.key_prefix("redlock-demo:").build().await?);
            }
            let shown = format!("Redis at {}", nodes[0].target());
            Ok((nodes, shown))
        }
        None => {
            let client = LockClient::in_memory();
            Ok((
                vec![client.clone(), client.clone(), client],
                "the in-memory backend: REDIS_URL is not set (set REDIS_URL=redis://host:port \
                 to use Redis, or REDIS_CLUSTER_URLS / REDIS_SENTINEL_URLS)"
                    .to_owned(),
            ))
        }
    }
}

fn ms(from: Instant, at: Instant) -> u128 {
    at.saturating_duration_since(from).as_millis()
}

fn check(ok: bool, what: &str) -> bool {
    if ok {
        println!("   ok: {what}");
    } else {
        println!("   UNEXPECTED: not {what}");
    }
    ok
}

/// Part 1: `Orders::place_order` under `#[distributed_lock]` on three nodes.
async fn service_method(nodes: &[LockClient]) -> Result<bool, Error> {
    println!(
        "\n1. A service method: Orders::place_order under\n   \
         #[distributed_lock(key = \"order:<user_id>:<order_id>\", ttl = \"15s\", wait = \"5s\")],\n   \
         called at once on three nodes (placing an order takes 300 ms)"
    );
    let store = OrderStore::default();
    let calls = [
        ("node-1", "42", "A-17"),
        ("node-2", "42", "A-17"),
        ("node-3", "7", "B-9"),
    ];
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (i, (node, user, order)) in calls.into_iter().enumerate() {
        let orders = Orders::new(
            node,
            nodes[i].clone(),
            store.clone(),
            Duration::from_millis(300),
        );
        tasks.push(tokio::spawn(async move {
            orders.place_order(user, order, "book", 1).await
        }));
    }
    let mut placed: Vec<Placed> = Vec::new();
    for task in tasks {
        placed.push(task.await??);
    }
    // In the order the bodies began.
    let mut by_start: Vec<(usize, &Placed)> = placed.iter().enumerate().collect();
    by_start.sort_by_key(|(_, p)| p.began);
    for (i, p) in by_start {
        let (node, user, order) = calls[i];
        let what = if p.created {
            "placed it".to_owned()
        } else {
            format!("found it placed by {}: not placed twice", p.order.placed_by)
        };
        println!(
            "   {node}  {:<14} body ran {:>4} → {:>4} ms  fencing token {}  {what}",
            format!("order:{user}:{order}"),
            ms(start, p.began),
            ms(start, p.ended),
            p.fencing_token,
        );
    }
    let [a, b, c] = [&placed[0], &placed[1], &placed[2]];
    let (first, second) = if a.began <= b.began { (a, b) } else { (b, a) };
    let mut ok = check(
        second.began >= first.ended && first.created && !second.created,
        "the same order serialized: the second body began after the first ended and found the \
         order placed",
    );
    ok &= check(
        second.fencing_token > first.fencing_token,
        "the second holder of order:42:A-17 had a larger fencing token",
    );
    ok &= check(
        c.began < first.ended && first.began < c.ended,
        "the other order ran in parallel with the first",
    );
    ok &= check(store.len() == 2, "two orders stored");
    Ok(ok)
}

/// Part 2: the order service behind the idempotency layer, on a loopback
/// port, and the same POST twice at once, then once more.
async fn double_submit(locks: &LockClient) -> Result<bool, Error> {
    let metrics = redlock_examples::prometheus::install()?;
    let orders = Orders::new(
        "web-1",
        locks.clone(),
        OrderStore::default(),
        Duration::from_millis(300),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app(orders, Some(metrics))).await;
    });
    // Unique per run: a rerun against the same Redis is a new operation.
    let key = format!("\"demo-{}\"", uuid::Uuid::new_v4());
    let body = r#"{"order_id":"C-3","sku":"book","qty":1}"#;
    println!(
        "\n2. Double-submit: the order service on http://{addr} behind the idempotency layer\n   \
         POST /orders  Idempotency-Key: {key}  {body}"
    );

    let (one, two) = tokio::join!(
        post_order(addr, "ann", &key, body),
        post_order(addr, "ann", &key, body)
    );
    let (one, two) = (one?, two?);
    let (created, conflict) = if one.status == StatusCode::CREATED {
        (one, two)
    } else {
        (two, one)
    };
    println!("   twice at once:");
    print(&created);
    print(&conflict);
    let mut ok = check(
        created.status == StatusCode::CREATED
            && conflict.status == StatusCode::CONFLICT
            && conflict.body.contains("being processed"),
        "one 201 and one 409 \"processing\"",
    );
    let again = post_order(addr, "ann", &key, body).await?;
    println!("   once more, later:");
    print(&again);
    ok &= check(
        again.status == StatusCode::CREATED && again.replayed && again.body == created.body,
        "the first response replayed (Idempotent-Replayed: true, same body)",
    );
    let page = get(addr, "/metrics").await?;
    println!("   GET /metrics (idempotency outcomes so far):");
    for line in page
        .body
        .lines()
        .filter(|l| l.starts_with("redlock_idempotency_requests_total"))
    {
        println!("     {line}");
    }
    server.abort();
    Ok(ok)
}

/// Prints a response: status, the idempotency headers, and the body (a
/// problem body by its title).
fn print(reply: &Reply) {
    let mut extra = String::new();
    if reply.replayed {
        extra.push_str("  Idempotent-Replayed: true");
    }
    if let Some(retry) = &reply.retry_after {
        extra.push_str(&format!("  Retry-After: {retry}"));
    }
    let body: String = match serde_json::from_str::<serde_json::Value>(&reply.body) {
        Ok(v) if v.get("title").is_some() => {
            format!("\"{}\"", v["title"].as_str().unwrap_or_default())
        }
        _ => reply.body.clone(),
    };
    println!("     {}{extra}  {body}", reply.status);
}

/// Who ran each tick of the report job.
type Runs = Arc<Mutex<Vec<(u64, &'static str)>>>;

/// The scheduled job: every node calls it every tick; one runs it. The lock
/// is held at least 500 ms, so a node whose tick comes up to half a second
/// late still finds it held and skips, and it is free again well before the
/// next tick. The key has no tick in it: one lock (and one fencing counter)
/// for the job, however long it runs.
#[distributed_lock(key = "job:report", on_busy = "skip", hold_at_least = "500ms", client = locks)]
async fn report(locks: &LockClient, node: &'static str, tick: u64, runs: Runs) {
    runs.lock().await.push((tick, node));
    tokio::time::sleep(Duration::from_millis(100)).await; // the report
}

/// Part 3: three nodes, five ticks a second apart.
async fn scheduled_job(nodes: &[LockClient]) -> Result<bool, Error> {
    println!(
        "\n3. A scheduled job on three nodes, every second for 5 s:\n   \
         #[distributed_lock(key = \"job:report\", on_busy = \"skip\", hold_at_least = \"500ms\")]"
    );
    let runs: Runs = Arc::default();
    let calls = Arc::new(Mutex::new(Vec::new()));
    // Tick at the next whole second of the wall clock, as a cron would; the
    // nodes do not talk to each other.
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
    let first =
        Instant::now() + (Duration::from_secs(1) - Duration::from_nanos(now.subsec_nanos().into()));
    let mut tasks = Vec::new();
    for (i, node) in ["node-1", "node-2", "node-3"].into_iter().enumerate() {
        let (locks, runs, calls) = (nodes[i].clone(), runs.clone(), calls.clone());
        tasks.push(tokio::spawn(async move {
            for tick in 1..=5u64 {
                // Each node's timer fires a little early or late.
                let jitter = Duration::from_millis(fastrand::u64(0..40));
                tokio::time::sleep_until(first + Duration::from_secs(tick - 1) + jitter).await;
                report(&locks, node, tick, runs.clone()).await;
                calls.lock().await.push(tick);
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    let runs = runs.lock().await.clone();
    let calls = calls.lock().await.clone();
    let mut ok = true;
    for tick in 1..=5u64 {
        let ran: Vec<&str> = runs
            .iter()
            .filter(|(t, _)| *t == tick)
            .map(|(_, n)| *n)
            .collect();
        let called = calls.iter().filter(|t| **t == tick).count();
        let line = match ran.as_slice() {
            [node] => format!(
                "   tick {tick}: {node} ran the report; the other {} skipped",
                called - 1
            ),
            _ => {
                ok = false;
                format!("   tick {tick}: UNEXPECTED: ran on {ran:?}")
            }
        };
        println!("{line}");
    }
    ok &= check(
        runs.len() == 5 && calls.len() == 15,
        "exactly one run per tick, 15 calls in all",
    );
    Ok(ok)
}
