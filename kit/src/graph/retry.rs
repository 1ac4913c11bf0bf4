//! Retry policies: a node that fails is run again, after a growing pause, before its step
//! fails (LangGraph's `RetryPolicy`).
//!
//! A failed attempt writes nothing (a node's writes are applied only when it succeeds), so a
//! retry never re-applies an attempt's writes. Interrupts are never retried: they are not
//! failures. Each attempt after the first is announced by a `node_retry` event and traced as
//! its own run, with the error that caused it.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::time::Duration;
//!
//! use kit::graph::{GraphBuilder, NodeContext, NodeError, RetryPolicy};
//! use kit::{END, START, State};
//!
//! #[derive(State, Clone, Default, serde::Serialize, serde::Deserialize)]
//! struct Page {
//!     body: String,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::GraphError> {
//! let attempts = Arc::new(AtomicUsize::new(0));
//! let seen = attempts.clone();
//! let graph = GraphBuilder::<Page>::new("fetch")
//!     .sync_node("fetch", move |_: &Page, _: &NodeContext| -> Result<PageUpdate, NodeError> {
//!         if seen.fetch_add(1, Ordering::SeqCst) < 2 {
//!             return Err(NodeError::msg("503 Service Unavailable"));
//!         }
//!         Ok(PageUpdate::new().body("<html>"))
//!     })
//!     .retry("fetch", RetryPolicy::new().initial_interval(Duration::from_millis(1)))
//!     .edge(START, "fetch")
//!     .edge("fetch", END)
//!     .compile()?;
//! let out = graph.invoke(PageUpdate::new()).await?;
//! assert_eq!(out.state().body, "<html>");
//! assert_eq!(attempts.load(Ordering::SeqCst), 3);
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use super::NodeError;

type RetryOn = dyn Fn(&NodeError) -> bool + Send + Sync;

/// When and how often a failing node is run again.
///
/// The defaults are LangGraph's: 3 attempts in all, 0.5 s before the second, each pause twice
/// the one before, at most 128 s, with jitter; every failure is retried unless
/// [`retry_on`](Self::retry_on) or [`retry_on_error`](Self::retry_on_error) says otherwise.
#[derive(Clone)]
#[must_use]
pub struct RetryPolicy {
    max_attempts: u32,
    initial_interval: Duration,
    backoff_factor: f64,
    max_interval: Duration,
    jitter: bool,
    retry_on: Option<Arc<RetryOn>>,
}

impl std::fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_attempts", &self.max_attempts)
            .field("initial_interval", &self.initial_interval)
            .field("backoff_factor", &self.backoff_factor)
            .field("max_interval", &self.max_interval)
            .field("jitter", &self.jitter)
            .field("retry_on", &self.retry_on.as_ref().map(|_| "predicate"))
            .finish()
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            initial_interval: Duration::from_millis(500),
            backoff_factor: 2.0,
            max_interval: Duration::from_secs(128),
            jitter: true,
            retry_on: None,
        }
    }
}

impl RetryPolicy {
    /// The defaults (see the type's documentation).
    pub fn new() -> Self {
        Self::default()
    }

    /// How many attempts in all, the first included (at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// The pause before the second attempt.
    pub fn initial_interval(mut self, interval: Duration) -> Self {
        self.initial_interval = interval;
        self
    }

    /// How much each pause grows over the one before (at least 1).
    pub fn backoff_factor(mut self, factor: f64) -> Self {
        self.backoff_factor = if factor.is_finite() {
            factor.max(1.0)
        } else {
            1.0
        };
        self
    }

    /// The longest backoff, before jitter (which may add up to as much again).
    pub fn max_interval(mut self, interval: Duration) -> Self {
        self.max_interval = interval;
        self
    }

    /// Whether pauses are spread at random (up to +100 %), so that many failing tasks do not
    /// retry at the same moment (default on).
    pub fn jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }

    /// Retries only the failures `predicate` accepts.
    pub fn retry_on(
        mut self,
        predicate: impl Fn(&NodeError) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.retry_on = Some(Arc::new(predicate));
        self
    }

    /// Retries only failures caused by an `E` (an error the node returned with `?`, found
    /// along its source chain).
    pub fn retry_on_error<E: std::error::Error + 'static>(self) -> Self {
        self.retry_on(|e| e.find_source::<E>().is_some())
    }

    /// The number of attempts in all.
    pub fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The longest backoff ([`max_interval`](Self::max_interval)), before jitter: with
    /// jitter on, a pause may be up to twice this.
    pub fn longest_pause(&self) -> Duration {
        self.max_interval
    }

    /// Whether a failure on attempt `attempt` (1 for the first) is tried again.
    pub(crate) fn retries(&self, error: &NodeError, attempt: u32) -> bool {
        attempt < self.max_attempts
            && !error.is_interrupt()
            && self.retry_on.as_ref().is_none_or(|p| p(error))
    }

    /// The pause after attempt `attempt` (1 for the first) failed: the backoff, capped, with
    /// jitter when it is on. Middleware that retry model and tool calls reuse it.
    pub fn delay(&self, attempt: u32) -> Duration {
        let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let base = self.initial_interval.as_secs_f64() * self.backoff_factor.powi(exponent);
        let capped = base.min(self.max_interval.as_secs_f64());
        let jittered = if self.jitter {
            capped * (1.0 + jitter_fraction())
        } else {
            capped
        };
        Duration::try_from_secs_f64(jittered.min(self.max_interval.as_secs_f64() * 2.0))
            .unwrap_or(self.max_interval)
    }
}

/// A fraction in [0, 1), from the clock: good enough to spread retries apart.
fn jitter_fraction() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    f64::from(crate::ids::fnv1a(&nanos.to_le_bytes()) as u32) / f64::from(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_to_the_cap() {
        let p = RetryPolicy::new()
            .initial_interval(Duration::from_millis(100))
            .backoff_factor(3.0)
            .max_interval(Duration::from_millis(500))
            .jitter(false);
        assert_eq!(p.delay(1), Duration::from_millis(100));
        assert_eq!(p.delay(2), Duration::from_millis(300));
        assert_eq!(p.delay(3), Duration::from_millis(500));
        assert_eq!(p.delay(u32::MAX), Duration::from_millis(500));
        let jittered = RetryPolicy::new()
            .initial_interval(Duration::from_millis(100))
            .delay(1);
        assert!(jittered >= Duration::from_millis(100) && jittered < Duration::from_millis(201));
    }

    #[test]
    fn which_failures_are_retried() {
        let p = RetryPolicy::new().max_attempts(2);
        assert!(p.retries(&NodeError::msg("x"), 1));
        assert!(!p.retries(&NodeError::msg("x"), 2), "no attempts left");
        assert!(
            !p.retries(&NodeError::interrupted(Vec::new()), 1),
            "interrupts are not failures"
        );
        let only_io = RetryPolicy::new().retry_on_error::<std::io::Error>();
        assert!(!only_io.retries(&NodeError::msg("x"), 1));
        let io = NodeError::from(std::io::Error::other("disk"));
        assert!(only_io.retries(&io, 1));
        assert_eq!(RetryPolicy::new().max_attempts(0).attempts(), 1);
    }
}
