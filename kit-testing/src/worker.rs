//! A kit worker on loopback for async-subagent tests, and waiting on its runs.

use std::time::Duration;

use kit::server::{WorkerBuilder, WorkerHandle};
use serde_json::Value;

use crate::Error;

/// Builds the worker and starts it on a free port of 127.0.0.1.
///
/// ```
/// use kit::server::Worker;
/// use kit_testing::researcher::{self, Gate};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit_testing::Error> {
/// let worker = kit_testing::worker::spawn_worker(
///     Worker::builder().agent("research", researcher::agent(Gate::open())),
/// )
/// .await?;
/// assert!(worker.url().starts_with("http://127.0.0.1:"));
/// # Ok(()) }
/// ```
pub async fn spawn_worker(builder: WorkerBuilder) -> Result<WorkerHandle, Error> {
    Ok(builder.build().await?.start("127.0.0.1:0").await?)
}

/// Polls `GET {base_url}/runs/{run_id}` until the run's status is one of `statuses` and
/// returns the run, or fails after `timeout` with the last status seen.
pub async fn wait_for_status(
    base_url: &str,
    run_id: &str,
    statuses: &[&str],
    timeout: Duration,
) -> Result<Value, Error> {
    wait_for_status_with(base_url, run_id, statuses, timeout, None).await
}

/// [`wait_for_status`], sending `Authorization: Bearer <token>` when a token is given (a
/// worker with tenants answers a run only to its owner).
pub async fn wait_for_status_with(
    base_url: &str,
    run_id: &str,
    statuses: &[&str],
    timeout: Duration,
    token: Option<&str>,
) -> Result<Value, Error> {
    let started = tokio::time::Instant::now();
    let mut last = Value::Null;
    let http = reqwest::Client::new();
    while started.elapsed() < timeout {
        let mut request = http.get(format!("{base_url}/runs/{run_id}"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await?;
        last = response.json().await.unwrap_or(Value::Null);
        if statuses.contains(&last["status"].as_str().unwrap_or("")) {
            return Ok(last);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(
        format!("run {run_id} never reached {statuses:?} within {timeout:?}; last seen: {last}")
            .into(),
    )
}
