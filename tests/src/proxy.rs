//! [`FaultProxy`]: a loopback TCP proxy that injects network faults.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Bound on connecting to the target for one proxied connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Size of one read, i.e. the largest chunk forwarded at once.
const CHUNK_SIZE: usize = 16 * 1024;
/// Chunks in flight per direction (delayed by latency) before reading stops.
const CHUNKS_IN_FLIGHT: usize = 64;

/// A TCP proxy on `127.0.0.1:<free port>` that forwards to a target (typically a
/// [`RedisServer`](crate::RedisServer)) and can inject faults: latency, a black hole
/// (partition), cutting every connection, and refusing new ones.
///
/// Point the client under test at [`FaultProxy::url`] instead of the server. Faults
/// can be switched at any time and apply to live connections. Everything runs in
/// tasks on the Tokio runtime that called [`FaultProxy::start`] (current-thread or
/// multi-thread). Dropping the proxy stops accepting and closes all its connections.
pub struct FaultProxy {
    addr: SocketAddr,
    target: SocketAddr,
    shared: Arc<Shared>,
    /// Cut generation. Each connection closes when it changes (cut_all) or when this
    /// sender is dropped (the proxy is dropped).
    cut: watch::Sender<u64>,
    accept_task: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Shared {
    latency_nanos: AtomicU64,
    /// While true, nothing is read or written: traffic stalls, as in a partition.
    blackhole: watch::Sender<bool>,
    /// While true, the server's replies are held back (requests still go through).
    hold_replies: watch::Sender<bool>,
    refuse: AtomicBool,
    connections: AtomicUsize,
    /// Chunks read and not yet written, both directions, every connection.
    in_flight: AtomicUsize,
    /// Of those, the chunks of replies (server to client).
    replies_in_flight: AtomicUsize,
    /// When a chunk was last read or written.
    last_traffic: std::sync::Mutex<Option<Instant>>,
    /// Where new connections go instead of the target (see
    /// [`FaultProxy::retarget`]).
    retarget: std::sync::Mutex<Option<SocketAddr>>,
}

impl Shared {
    fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency_nanos.load(Ordering::SeqCst))
    }

    fn traffic(&self) {
        let mut last = self
            .last_traffic
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *last = Some(Instant::now());
    }

    fn blackholed(&self) -> bool {
        *self.blackhole.borrow()
    }

    /// Returns once the black hole is off.
    async fn wait_open(&self) {
        let mut rx = self.blackhole.subscribe();
        // The sender lives in `self`, so this cannot fail while we borrow it.
        let _ = rx.wait_for(|on| !on).await;
    }

    /// Returns once chunks going `direction` may be written.
    async fn wait_deliverable(&self, direction: Direction) {
        if direction == Direction::Reply {
            let mut rx = self.hold_replies.subscribe();
            let _ = rx.wait_for(|on| !on).await;
        }
        self.wait_open().await;
    }
}

impl FaultProxy {
    /// Starts a proxy on a free loopback port forwarding to `target`. It forwards
    /// faithfully until a fault is switched on.
    ///
    /// # Panics
    ///
    /// If no loopback port can be bound, or when called outside a Tokio runtime.
    pub async fn start(target: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("FaultProxy: could not bind a loopback port; is the loopback interface up?");
        let addr = listener
            .local_addr()
            .expect("FaultProxy: could not read the bound address of its listener");
        let shared = Arc::new(Shared::default());
        let (cut, cut_rx) = watch::channel(0);
        let accept_task = tokio::spawn(accept_loop(listener, target, Arc::clone(&shared), cut_rx));
        FaultProxy {
            addr,
            target,
            shared,
            cut,
            accept_task,
        }
    }

    /// The proxy's address, `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The connection URL for clients, `redis://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.addr.port())
    }

    /// The address the proxy forwards new connections to.
    pub fn target(&self) -> SocketAddr {
        self.shared
            .retarget
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .unwrap_or(self.target)
    }

    /// Forwards new connections to `to` from now on (live ones stay where
    /// they are: [`cut_all`](Self::cut_all) them): one address whose server
    /// changes, as after a failover behind a proxy or a virtual IP.
    pub fn retarget(&self, to: SocketAddr) {
        *self
            .shared
            .retarget
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(to);
    }

    /// Delays every chunk forwarded, in either direction, by `latency` (so a request
    /// and its reply take about twice that). Applies to chunks read from now on, on
    /// live connections too; ordering is kept. `Duration::ZERO` switches it off.
    pub fn set_latency(&self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.shared.latency_nanos.store(nanos, Ordering::SeqCst);
    }

    /// Switches the black hole on or off. While on, nothing is forwarded in either
    /// direction (bytes already read are held back): connections stay open and
    /// nothing is answered, like a network partition. New connections are accepted
    /// and stall too. Switching it off delivers what was held back, in order, as TCP
    /// does when a partition heals before the connection gives up; use
    /// [`FaultProxy::cut_all`] as well for a partition that outlasts the connections.
    ///
    /// Bytes are never dropped: a TCP stream that loses bytes in the middle does not
    /// exist in reality, and it would desynchronise a pipelined Redis connection.
    pub fn blackhole(&self, on: bool) {
        self.shared.blackhole.send_replace(on);
    }

    /// Switches holding replies on or off. While on, requests are forwarded to
    /// the server as usual, but nothing the server sends back is delivered: the
    /// commands run, and their answers wait in the proxy. Switching it off
    /// delivers them in order; [`FaultProxy::cut_all`] while it is on loses them,
    /// as when a connection dies after the server answered (the client cannot
    /// tell whether its command ran).
    pub fn hold_replies(&self, on: bool) {
        self.shared.hold_replies.send_replace(on);
    }

    /// The chunks of replies the server sent that the proxy has not delivered
    /// yet (held by [`FaultProxy::hold_replies`], or delayed by latency): above 0
    /// once the server answered a command sent while replies are held, that is,
    /// once the command ran.
    pub fn replies_waiting(&self) -> usize {
        self.shared.replies_in_flight.load(Ordering::SeqCst)
    }

    /// Closes every current connection, on both sides. New connections are accepted
    /// afterwards as usual.
    ///
    /// The sockets are closed by the proxy's tasks, promptly but not before this
    /// returns; nothing more is forwarded on them once this returns, though. Wait for
    /// [`FaultProxy::connections`] to reach 0 if a test needs them closed.
    pub fn cut_all(&self) {
        self.cut
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    /// Switches refusing on or off. While on, every new connection is closed right
    /// after it is accepted (the client sees EOF), like a dead port. Existing
    /// connections are not affected (see [`FaultProxy::cut_all`]).
    pub fn refuse(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::SeqCst);
    }

    /// The number of live proxied connections.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Waits until nothing is on its way through the proxy (no chunk read
    /// and not yet delivered, in either direction) and nothing was read or
    /// written for `quiet`; `false` if that did not happen within `limit`.
    ///
    /// For a test that cut a command short and needs everything the client
    /// sent because of it (the command, and what the client sends when it
    /// gives up on it) to have landed before it looks at the server.
    pub async fn await_quiet(&self, quiet: Duration, limit: Duration) -> bool {
        let started = Instant::now();
        while started.elapsed() < limit {
            let last = *self
                .shared
                .last_traffic
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let idle = last.is_none_or(|at| at.elapsed() >= quiet);
            if idle && self.shared.in_flight.load(Ordering::SeqCst) == 0 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    }
}

impl fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("target", &self.target())
            .field("latency", &self.shared.latency())
            .field("blackhole", &self.shared.blackholed())
            .field("hold_replies", &*self.shared.hold_replies.borrow())
            .field("refuse", &self.shared.refuse.load(Ordering::SeqCst))
            .field("connections", &self.connections())
            .finish()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // Closes the listener. Dropping `self.cut` right after wakes every connection
        // task, which then closes both of its sockets.
        self.accept_task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: SocketAddr,
    shared: Arc<Shared>,
    cut: watch::Receiver<u64>,
) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            // E.g. out of file descriptors; back off instead of spinning. This loop ends
            // when the proxy is dropped (the task is aborted).
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if shared.refuse.load(Ordering::SeqCst) {
            drop(client);
            continue;
        }
        let mut cut = cut.clone();
        cut.mark_unchanged();
        let to = shared
            .retarget
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .unwrap_or(target);
        tokio::spawn(proxy_connection(client, to, Arc::clone(&shared), cut));
    }
}

/// Counts a live connection; decrements on drop, also when the task is aborted.
struct ConnectionCount(Arc<Shared>);

impl ConnectionCount {
    fn new(shared: Arc<Shared>) -> Self {
        shared.connections.fetch_add(1, Ordering::SeqCst);
        ConnectionCount(shared)
    }
}

impl Drop for ConnectionCount {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn proxy_connection(
    mut client: TcpStream,
    target: SocketAddr,
    shared: Arc<Shared>,
    mut cut: watch::Receiver<u64>,
) {
    let _count = ConnectionCount::new(Arc::clone(&shared));
    // `biased`: once cut (or the proxy dropped), never forward another chunk.
    let mut server = tokio::select! {
        biased;
        _ = cut.changed() => return,
        connected = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(target)) => match connected {
            Ok(Ok(server)) => server,
            // Target down: close the client's side too, as a dead backend would.
            Ok(Err(_)) | Err(_) => return,
        },
    };
    // Best effort; only affects how fast small writes go out.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.split();
    let (server_read, server_write) = server.split();
    tokio::select! {
        biased;
        _ = cut.changed() => {}
        _ = async {
            tokio::try_join!(
                pipe(client_read, server_write, &shared, Direction::Request),
                pipe(server_read, client_write, &shared, Direction::Reply),
            )
        } => {}
    }
    // Both sockets are dropped (closed) here.
}

/// Bytes read from one side, due on the other at `due`; counted in flight
/// until written or dropped (a cut connection).
struct Chunk<'a> {
    due: Instant,
    bytes: Vec<u8>,
    shared: &'a Shared,
    direction: Direction,
}

impl<'a> Chunk<'a> {
    fn new(due: Instant, bytes: &[u8], shared: &'a Shared, direction: Direction) -> Self {
        shared.in_flight.fetch_add(1, Ordering::SeqCst);
        if direction == Direction::Reply {
            shared.replies_in_flight.fetch_add(1, Ordering::SeqCst);
        }
        shared.traffic();
        Chunk {
            due,
            bytes: bytes.to_vec(),
            shared,
            direction,
        }
    }
}

impl Drop for Chunk<'_> {
    fn drop(&mut self) {
        self.shared.in_flight.fetch_sub(1, Ordering::SeqCst);
        if self.direction == Direction::Reply {
            self.shared.replies_in_flight.fetch_sub(1, Ordering::SeqCst);
        }
        self.shared.traffic();
    }
}

/// Which way a [`pipe`] forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Client to server.
    Request,
    /// Server to client (held back by [`FaultProxy::hold_replies`]).
    Reply,
}

/// Forwards one direction until EOF (then half-closes the writer) or an error. Each
/// chunk is held back until `read time + latency`, while the black hole is on, and
/// (replies) while replies are held.
async fn pipe<R, W>(
    mut reader: R,
    mut writer: W,
    shared: &Shared,
    direction: Direction,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (tx, mut rx) = mpsc::channel::<Chunk<'_>>(CHUNKS_IN_FLIGHT);
    let read_side = async move {
        let mut buf = vec![0u8; CHUNK_SIZE];
        loop {
            shared.wait_open().await;
            let n = reader.read(&mut buf).await?;
            if n == 0 {
                return Ok(()); // drops `tx`: the write side drains and half-closes
            }
            shared.wait_open().await;
            let due = Instant::now() + shared.latency();
            if tx
                .send(Chunk::new(due, &buf[..n], shared, direction))
                .await
                .is_err()
            {
                return Ok(());
            }
        }
    };
    let write_side = async move {
        while let Some(chunk) = rx.recv().await {
            if chunk.due > Instant::now() {
                tokio::time::sleep_until(chunk.due).await;
            }
            shared.wait_deliverable(direction).await;
            writer.write_all(&chunk.bytes).await?;
        }
        writer.shutdown().await
    };
    tokio::try_join!(read_side, write_side).map(|((), ())| ())
}
