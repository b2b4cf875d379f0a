//! The Prometheus exporter behind `GET /metrics`.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

/// Histogram buckets (seconds) for the lock wait and hold times: from a
/// Redis round trip (a fraction of a millisecond) to a long job.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// Installs the process-wide Prometheus recorder (once; later calls return
/// the same handle) and describes redlock's metrics. The handle's
/// [`render`](PrometheusHandle::render) is the `/metrics` page.
///
/// # Errors
/// When another recorder is already installed in this process.
pub fn install() -> Result<PrometheusHandle, BuildError> {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), BUCKETS)?
        .install_recorder()?;
    redlock_axum::metrics::describe();
    Ok(HANDLE.get_or_init(|| handle).clone())
}
