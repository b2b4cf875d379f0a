//! The order service: a service method that runs holding a distributed lock,
//! an order store that checks fencing tokens, and the axum routes in front,
//! behind the idempotency layer.
//!
//! - [`Orders::place_order`] is annotated with
//!   `#[distributed_lock(key = "order:<user_id>:<order_id>", ..)]`: two
//!   nodes placing the same order run one after the other, and the second
//!   finds it placed; different orders run in parallel.
//! - [`OrderStore`] stands for the database. It keeps, per order, the
//!   highest fencing token that wrote it and refuses a write with a lower
//!   one, so a node whose lock ran out (a long pause) cannot overwrite the
//!   work of the node that took the lock after it.
//! - [`app`] serves `POST /orders` behind [`IdempotencyLayer`] (one run per
//!   `Idempotency-Key` and user, `409` for a duplicate in flight, the stored
//!   response replayed afterwards), `GET /metrics` and `GET /healthz`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use metrics_exporter_prometheus::PrometheusHandle;
use redlock_axum::{IdempotencyContext, IdempotencyLayer};
use redlock_runtime::{LockClient, LockError, current_lock, distributed_lock};
use serde_json::{Value, json};
use tokio::time::Instant;

/// An order as stored.
#[derive(Clone, Debug)]
pub struct Order {
    /// The client's id for the order (unique per user).
    pub order_id: String,
    /// Who placed it.
    pub user_id: String,
    /// What was ordered.
    pub sku: String,
    /// How many.
    pub qty: u64,
    /// The node that placed it.
    pub placed_by: String,
    /// The fencing token of the lock it was written under.
    pub fencing_token: u64,
}

impl Order {
    /// The order as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "order_id": self.order_id,
            "user_id": self.user_id,
            "sku": self.sku,
            "qty": self.qty,
            "placed_by": self.placed_by,
            "fencing_token": self.fencing_token,
        })
    }
}

/// What [`Orders::place_order`] did.
#[derive(Clone, Debug)]
pub struct Placed {
    /// The order, as stored.
    pub order: Order,
    /// `true` when this call placed it, `false` when it was placed before.
    pub created: bool,
    /// The fencing token this call held.
    pub fencing_token: u64,
    /// When the body began and ended (it runs holding the lock).
    pub began: Instant,
    /// See `began`.
    pub ended: Instant,
}

/// Why an order was not placed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OrderError {
    /// The order's lock: held by another node for the whole wait, or Redis
    /// could not be reached.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The store refused the write: a later holder of the order's lock has
    /// written it (this node's lock had run out).
    #[error(
        "write refused: fencing token {token} is older than {newest}, the token of a later lock \
         holder; this node's lock ran out while it worked"
    )]
    Fenced {
        /// This write's token.
        token: u64,
        /// The highest token the store has seen for the order.
        newest: u64,
    },
    /// The request was not an order.
    #[error("{0}")]
    Invalid(String),
}

impl IntoResponse for OrderError {
    fn into_response(self) -> Response {
        let status = match &self {
            OrderError::Lock(LockError::Busy { .. } | LockError::WaitTimeout { .. }) => {
                StatusCode::CONFLICT
            }
            OrderError::Lock(_) => StatusCode::SERVICE_UNAVAILABLE,
            OrderError::Fenced { .. } => StatusCode::CONFLICT,
            OrderError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
        };
        (status, Json(json!({ "error": self.to_string() }))).into_response()
    }
}

/// Stands for the database: orders by user and id, each with the highest
/// fencing token that wrote it. Clones share the same data.
#[derive(Clone, Debug, Default)]
pub struct OrderStore {
    rows: Arc<Mutex<HashMap<(String, String), Order>>>,
}

impl OrderStore {
    /// The order `order_id` of `user_id`, if placed.
    pub fn get(&self, user_id: &str, order_id: &str) -> Option<Order> {
        self.rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(user_id.to_owned(), order_id.to_owned()))
            .cloned()
    }

    /// Writes the order unless a write with a higher fencing token came
    /// first: in SQL, `UPDATE .. SET .., fence = $token WHERE id = $id AND
    /// fence <= $token` (or an insert that conflicts on the id and does the
    /// same check).
    ///
    /// # Errors
    /// [`OrderError::Fenced`] when a newer token wrote the order.
    pub fn write(&self, order: Order) -> Result<(), OrderError> {
        let mut rows = self.rows.lock().unwrap_or_else(PoisonError::into_inner);
        let id = (order.user_id.clone(), order.order_id.clone());
        if let Some(existing) = rows.get(&id)
            && existing.fencing_token > order.fencing_token
        {
            return Err(OrderError::Fenced {
                token: order.fencing_token,
                newest: existing.fencing_token,
            });
        }
        rows.insert(id, order);
        Ok(())
    }

    /// How many orders are stored.
    pub fn len(&self) -> usize {
        self.rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// True when no order is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One node's order service.
#[derive(Clone, Debug)]
pub struct Orders {
    locks: LockClient,
    store: OrderStore,
    node: String,
    work: Duration,
}

impl Orders {
    /// The service on node `node`, locking through `locks`, writing to
    /// `store`; placing an order takes `work` (the payment, the stock...).
    pub fn new(
        node: impl Into<String>,
        locks: LockClient,
        store: OrderStore,
        work: Duration,
    ) -> Self {
        Self {
            locks,
            store,
            node: node.into(),
            work,
        }
    }

    /// The node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Places order `order_id` for `user_id`, once: the body runs holding
    /// the lock `order:<user_id>:<order_id>` (waiting up to 5 s for another
    /// node that holds it), finds the order if it was placed before, and
    /// otherwise does the work and writes the order with the lock's fencing
    /// token.
    ///
    /// # Errors
    /// [`OrderError::Lock`] when the lock could not be taken within 5 s or
    /// Redis failed (`OrderError: From<LockError>`), [`OrderError::Fenced`]
    /// when the store refused a write from a holder whose lock ran out.
    #[distributed_lock(key = "order:<user_id>:<order_id>", ttl = "15s", wait = "5s", client = self.locks)]
    pub async fn place_order(
        &self,
        user_id: &str,
        order_id: &str,
        sku: &str,
        qty: u64,
    ) -> Result<Placed, OrderError> {
        let began = Instant::now();
        // Issued on first ask: one round trip, once per order.
        let fencing_token = match current_lock() {
            Some(lock) => lock.fencing_token().await?,
            None => 0,
        };
        if let Some(order) = self.store.get(user_id, order_id) {
            return Ok(Placed {
                order,
                created: false,
                fencing_token,
                began,
                ended: Instant::now(),
            });
        }
        tokio::time::sleep(self.work).await; // charge the card, reserve the stock
        let order = Order {
            order_id: order_id.to_owned(),
            user_id: user_id.to_owned(),
            sku: sku.to_owned(),
            qty,
            placed_by: self.node.clone(),
            fencing_token,
        };
        self.store.write(order.clone())?;
        tracing::info!(user_id, order_id, fencing_token, "order placed");
        Ok(Placed {
            order,
            created: true,
            fencing_token,
            began,
            ended: Instant::now(),
        })
    }
}

/// The user a request acts for, put in its extensions by [`authenticate`].
#[derive(Clone, Debug)]
pub struct User(pub String);

/// Stands in for an authentication layer: the `x-user` header names the
/// user (`guest` without it).
pub async fn authenticate(mut req: Request, next: Next) -> Response {
    let user = req
        .headers()
        .get("x-user")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .unwrap_or("guest")
        .to_owned();
    req.extensions_mut().insert(User(user));
    next.run(req).await
}

/// `POST /orders` with `{"order_id": "A-17", "sku": "book", "qty": 1}`:
/// `201 Created` with the order when this request placed it, `200 OK` when
/// it was placed before (by another request with another key).
async fn create_order(
    State(orders): State<Orders>,
    Extension(user): Extension<User>,
    Extension(idem): Extension<IdempotencyContext>,
    Json(body): Json<Value>,
) -> Result<Response, OrderError> {
    let field = |name: &str| {
        body.get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let (Some(order_id), Some(sku), Some(qty)) = (
        field("order_id"),
        field("sku"),
        body.get("qty").and_then(Value::as_u64).filter(|&q| q > 0),
    ) else {
        return Err(OrderError::Invalid(
            "expected {\"order_id\": non-empty string, \"sku\": non-empty string, \"qty\": \
             positive integer}"
                .to_owned(),
        ));
    };
    tracing::debug!(key_hash = idem.key_hash(), "creating an order");
    let placed = orders.place_order(&user.0, order_id, sku, qty).await?;
    let status = if placed.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        [(header::LOCATION, format!("/orders/{order_id}"))],
        Json(placed.order.to_json()),
    )
        .into_response())
}

/// The routes: `POST /orders` (behind the idempotency layer, keys required,
/// per user), `GET /metrics` (when `metrics` is given) and `GET /healthz`.
/// The idempotency records live where `orders`' lock client keeps its locks.
pub fn app(orders: Orders, metrics: Option<PrometheusHandle>) -> Router {
    let idempotency = IdempotencyLayer::scoped(orders.locks.clone(), |parts| {
        parts.extensions.get::<User>().map(|u| u.0.clone())
    })
    .required();
    let mut app = Router::new()
        .route("/orders", post(create_order))
        .layer(idempotency)
        // Runs first: the idempotency scope needs the user.
        .layer(middleware::from_fn(authenticate))
        .with_state(orders)
        .route("/healthz", get(|| async { "ok" }));
    if let Some(handle) = metrics {
        app = app.route("/metrics", get(move || async move { handle.render() }));
    }
    app
}
