//! Three workers consume a queue that delivers each message at least once
//! (duplicates, and redeliveries of what was not acknowledged), and apply
//! each message's effect exactly once, with `#[idempotent]`.
//!
//! ```text
//! cargo run -p redlock-examples --bin queue_consumer                 # in memory
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p redlock-examples --bin queue_consumer
//! ```
//!
//! Settings, from the environment:
//!
//! - `REDIS_URL`: the Redis the workers share (each worker has its own
//!   client, as separate processes would). Without it the three workers
//!   share one in-memory client, and say so.
//! - `MESSAGES`: how many payments the queue carries. Defaults to 30.
//!
//! The queue stands in for Kafka, RabbitMQ, NATS or SQS: it hands each
//! message to one worker at a time, delivers every third one twice from
//! the start (a producer's retry), and puts a message back when its
//! worker does not acknowledge it (a nack, or a visibility timeout). The
//! handler fails one attempt in five with a transient error before it
//! applies anything: the failed run stores nothing, the message comes back,
//! and a later run applies it. A worker that gets a message another worker
//! is applying right now waits for that run's result (`wait = "5s"`).
//!
//! The ledger (standing in for the database the effect lands in) counts
//! what was applied. The last line says whether every message was applied
//! exactly once; the example exits 1 if not:
//!
//! ```text
//! # 3 workers on one in-memory client (set REDIS_URL to share a Redis), 30 messages
//! msg-3 applied by worker b (fencing token 1)
//! msg-3 replayed to worker a: applied by worker b
//! msg-5 failed on worker c (card network timeout): not acknowledged, redelivered
//! ...
//! # 30 messages, 52 deliveries: 30 applied, each exactly once; 12 replayed, 6 failed and redelivered
//! ```

use std::collections::{HashMap, VecDeque};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redlock_runtime::{IdempotentError, LockClient, WorkContext, idempotent};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

/// A payment message, as a broker delivers it.
#[derive(Debug, Clone)]
struct Message {
    /// This run of the example (so that a second run on the same Redis
    /// starts afresh).
    run: String,
    id: String,
    account: u32,
    cents: u64,
}

/// What applying a message returns (stored, and replayed to duplicates).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Receipt {
    message: String,
    applied_by: String,
    fencing_token: u64,
}

#[derive(Debug, thiserror::Error)]
enum ConsumeError {
    #[error("card network timeout")]
    Transient,
    #[error(transparent)]
    Idempotency(#[from] IdempotentError),
}

/// The database the effect lands in: each message's credits.
#[derive(Default)]
struct Ledger {
    applied: Mutex<HashMap<String, u32>>,
}

/// The queue: at-least-once delivery, one consumer per delivery.
struct Queue {
    pending: Mutex<VecDeque<Message>>,
    /// Messages handed out and not yet acknowledged.
    in_flight: Mutex<usize>,
    changed: Notify,
}

impl Queue {
    fn new(messages: &[Message]) -> Self {
        let mut pending = VecDeque::new();
        for (i, message) in messages.iter().enumerate() {
            pending.push_back(message.clone());
            if i % 3 == 0 {
                // A producer's retry: the same message twice.
                pending.push_back(message.clone());
            }
        }
        Queue {
            pending: Mutex::new(pending),
            in_flight: Mutex::new(0),
            changed: Notify::new(),
        }
    }

    /// The next delivery; `None` once the queue is empty and nothing is in
    /// flight (nothing can come back).
    async fn next(&self) -> Option<Message> {
        loop {
            let notified = self.changed.notified();
            {
                let mut pending = self.pending.lock().expect("queue");
                let mut in_flight = self.in_flight.lock().expect("queue");
                if let Some(message) = pending.pop_front() {
                    *in_flight += 1;
                    return Some(message);
                }
                if *in_flight == 0 {
                    return None;
                }
            }
            notified.await;
        }
    }

    fn ack(&self) {
        *self.in_flight.lock().expect("queue") -= 1;
        self.changed.notify_waiters();
    }

    /// Not acknowledged: the message comes back (at the end of the queue).
    fn nack(&self, message: Message) {
        self.pending.lock().expect("queue").push_back(message);
        self.ack();
    }
}

/// Applies one payment, once per message id; a redelivery gets the first
/// run's receipt.
#[idempotent(
    key = "<message.run>:<message.id>",
    scope = "examples/payments",
    ttl = "1h",
    lease = "10s",
    wait = "5s",
    fingerprint = "<message.account>:<message.cents>",
    client = client
)]
async fn apply_payment(
    client: &LockClient,
    message: &Message,
    worker: &str,
    ledger: &Ledger,
    ran: &AtomicBool,
) -> Result<Receipt, ConsumeError> {
    ran.store(true, Ordering::Relaxed);
    // Some attempts fail before they apply anything.
    tokio::time::sleep(Duration::from_millis(5)).await;
    if fastrand::u8(0..5) == 0 {
        return Err(ConsumeError::Transient);
    }
    let fencing_token = WorkContext::current().map_or(0, |c| c.fencing_token());
    *ledger
        .applied
        .lock()
        .expect("ledger")
        .entry(message.id.clone())
        .or_default() += 1;
    Ok(Receipt {
        message: message.id.clone(),
        applied_by: worker.to_owned(),
        fencing_token,
    })
}

#[derive(Default)]
struct Counts {
    deliveries: usize,
    replayed: usize,
    failed: usize,
}

async fn worker(
    name: &'static str,
    client: LockClient,
    queue: Arc<Queue>,
    ledger: Arc<Ledger>,
) -> Counts {
    let mut counts = Counts::default();
    while let Some(message) = queue.next().await {
        counts.deliveries += 1;
        let ran = AtomicBool::new(false);
        match apply_payment(&client, &message, name, &ledger, &ran).await {
            Ok(receipt) if ran.load(Ordering::Relaxed) => {
                println!(
                    "{} applied by worker {name} (fencing token {})",
                    message.id, receipt.fencing_token
                );
                queue.ack();
            }
            Ok(receipt) => {
                println!(
                    "{} replayed to worker {name}: applied by worker {}",
                    message.id, receipt.applied_by
                );
                counts.replayed += 1;
                queue.ack();
            }
            Err(error) => {
                let transient = match &error {
                    ConsumeError::Transient => true,
                    ConsumeError::Idempotency(e) => e.is_transient(),
                };
                if transient {
                    println!(
                        "{} failed on worker {name} ({error}): not acknowledged, redelivered",
                        message.id
                    );
                    counts.failed += 1;
                    queue.nack(message);
                } else {
                    // A mismatch, a store error that will not pass: a dead
                    // letter, in a real consumer.
                    println!("{} dead-lettered on worker {name}: {error}", message.id);
                    queue.ack();
                }
            }
        }
    }
    counts
}

#[tokio::main]
async fn main() -> ExitCode {
    let messages: usize = std::env::var("MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let run = uuid::Uuid::new_v4().simple().to_string();
    let clients = match std::env::var("REDIS_URL") {
        Ok(url) => {
            let mut clients = Vec::new();
            for _ in 0..3 {
                match LockClient::connect(url.clone()).await {
                    Ok(client) => clients.push(client),
                    Err(e) => {
                        eprintln!("# cannot reach Redis: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            println!(
                "# 3 workers, each with its own client of {}, {messages} messages",
                redlock_runtime::redact_url(&url)
            );
            clients
        }
        Err(_) => {
            let client = LockClient::in_memory();
            println!(
                "# 3 workers on one in-memory client (set REDIS_URL to share a Redis), {messages} messages"
            );
            vec![client.clone(), client.clone(), client]
        }
    };
    let all: Vec<Message> = (0..messages)
        .map(|i| Message {
            run: run.clone(),
            id: format!("msg-{i}"),
            account: 1000 + i as u32,
            cents: 100 * (i as u64 + 1),
        })
        .collect();
    let queue = Arc::new(Queue::new(&all));
    let ledger = Arc::new(Ledger::default());
    let mut tasks = Vec::new();
    for (name, client) in ["a", "b", "c"].into_iter().zip(clients) {
        tasks.push(tokio::spawn(worker(
            name,
            client,
            Arc::clone(&queue),
            Arc::clone(&ledger),
        )));
    }
    let mut total = Counts::default();
    for task in tasks {
        match task.await {
            Ok(counts) => {
                total.deliveries += counts.deliveries;
                total.replayed += counts.replayed;
                total.failed += counts.failed;
            }
            Err(e) => {
                eprintln!("# a worker panicked: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let applied = ledger.applied.lock().expect("ledger").clone();
    let twice: Vec<&String> = applied
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, _)| id)
        .collect();
    let missing = all.iter().filter(|m| !applied.contains_key(&m.id)).count();
    if twice.is_empty() && missing == 0 {
        println!(
            "# {messages} messages, {} deliveries: {} applied, each exactly once; {} replayed, {} failed and redelivered",
            total.deliveries,
            applied.len(),
            total.replayed,
            total.failed
        );
        ExitCode::SUCCESS
    } else {
        println!("# FAILED: applied twice: {twice:?}; never applied: {missing}");
        ExitCode::FAILURE
    }
}
