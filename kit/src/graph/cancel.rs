//! Cancelling a run: a token handed to the run, seen by everything it runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// Cancels the runs it is given to ([`RunOptions::cancel_token`](super::RunOptions::cancel_token)):
/// their nodes, subgraphs, subagents, tool calls and model requests stop where they are (their
/// futures are dropped, so an HTTP request in flight is aborted), the stream ends with one
/// `cancelled` event, the run returns [`GraphError::Cancelled`](super::GraphError::Cancelled),
/// and the thread stays resumable from its last checkpoint. Dropping a run's event stream
/// cancels it too. Cheap to clone; every clone cancels the same runs.
///
/// A node or tool that holds resources can wait for it ([`NodeContext::cancel_token`](super::NodeContext::cancel_token))
/// to clean up; nothing else needs to look at it.
///
/// ```
/// use kit::graph::CancelToken;
///
/// let token = CancelToken::new();
/// assert!(!token.is_cancelled());
/// token.cancel();
/// assert!(token.clone().is_cancelled());
/// ```
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    notify: Notify,
    /// Why, when kit cancelled the run itself (a newer run on its thread stopped it).
    reason: std::sync::OnceLock<String>,
}

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every run holding this token (and any given it later).
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    /// Cancels, saying why (shown in the run's `cancelled` event).
    pub(crate) fn cancel_because(&self, reason: String) {
        let _ = self.inner.reason.set(reason);
        self.cancel();
    }

    /// Why the run was cancelled, when kit said.
    pub(crate) fn reason(&self) -> Option<&str> {
        self.inner.reason.get().map(String::as_str)
    }

    /// True once [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Completes when the token is cancelled (at once if it already is).
    pub async fn cancelled(&self) {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}
