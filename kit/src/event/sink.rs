//! Where events go: the sink a run sends through, the filters on the way, the consumer's stream.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::mode::EventKinds;
use super::{Event, EventKind};

/// Rewrites events on their way to the consumer: drops, edits, holds back or adds events.
///
/// A middleware offers one with
/// [`Middleware::event_filter`](crate::agent::Middleware::event_filter); the agent puts it on
/// the sink of every run, so it also sees the events of subagents. The PII middleware uses one
/// to scrub streamed tokens, holding back a short lookback so a match split across two deltas
/// is still found. A filter keeps its own state behind a lock; it must not block.
///
/// ```
/// use kit::event::{Event, EventFilter, EventKind};
///
/// /// Hides the tokens of the model, keeps everything else.
/// struct NoTokens;
///
/// impl EventFilter for NoTokens {
///     fn filter(&self, event: Event, out: &mut Vec<Event>) {
///         if event.kind() != EventKind::ModelDelta {
///             out.push(event);
///         }
///     }
/// }
/// ```
pub trait EventFilter: Send + Sync + 'static {
    /// Sees one event (already stamped with namespace, thread and tool call id) and pushes what
    /// should reach the consumer, in order, to `out`.
    fn filter(&self, event: Event, out: &mut Vec<Event>);
}

/// Two filters, the first one's output fed to the second.
struct Chain(Arc<dyn EventFilter>, Arc<dyn EventFilter>);

impl EventFilter for Chain {
    fn filter(&self, event: Event, out: &mut Vec<Event>) {
        let mut first = Vec::new();
        self.0.filter(event, &mut first);
        for event in first {
            self.1.filter(event, out);
        }
    }
}

/// One filter applying `filters` in order; `None` when there are none.
pub(crate) fn chain(filters: Vec<Arc<dyn EventFilter>>) -> Option<Arc<dyn EventFilter>> {
    filters
        .into_iter()
        .rev()
        .reduce(|later, earlier| Arc::new(Chain(earlier, later)))
}

/// The sending side of an event stream, cheap to clone.
///
/// Carries the namespace and parent ids that every event sent through it gets, so nested runs
/// (nodes, tool calls, subagents) stamp their events without threading parameters.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::Sender<Event>,
    namespace: Vec<String>,
    tool_call_id: Option<String>,
    thread_id: Option<String>,
    filter: Option<Arc<dyn EventFilter>>,
    kinds: EventKinds,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink")
            .field("namespace", &self.namespace)
            .field("tool_call_id", &self.tool_call_id)
            .field("thread_id", &self.thread_id)
            .field("filtered", &self.filter.is_some())
            .field("kinds", &self.kinds)
            .finish()
    }
}

impl EventSink {
    /// A sink and the receiving end, with room for `capacity` events before the run waits for
    /// the consumer (back-pressure instead of unbounded memory).
    pub fn channel(capacity: usize) -> (EventSink, mpsc::Receiver<Event>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (
            EventSink {
                tx,
                namespace: Vec::new(),
                tool_call_id: None,
                thread_id: None,
                filter: None,
                kinds: EventKinds::all(),
            },
            rx,
        )
    }

    /// A sink for a nested run: events get `segment` appended to their namespace and, when
    /// given, the tool call id.
    #[must_use]
    pub fn nested(&self, segment: impl Into<String>, tool_call_id: Option<String>) -> EventSink {
        let mut namespace = self.namespace.clone();
        namespace.push(segment.into());
        EventSink {
            tx: self.tx.clone(),
            namespace,
            tool_call_id: tool_call_id.or_else(|| self.tool_call_id.clone()),
            thread_id: self.thread_id.clone(),
            filter: self.filter.clone(),
            kinds: self.kinds,
        }
    }

    /// Passes every event sent through this sink (and the sinks nested in it) through `filter`
    /// first, then through the filters the sink already had.
    #[must_use]
    pub fn with_filter(mut self, filter: Arc<dyn EventFilter>) -> EventSink {
        self.filter = Some(match self.filter.take() {
            Some(outer) => Arc::new(Chain(filter, outer)),
            None => filter,
        });
        self
    }

    /// Sets the thread id stamped on events.
    #[must_use]
    pub fn with_thread_id(mut self, thread_id: Option<String>) -> EventSink {
        self.thread_id = thread_id;
        self
    }

    /// Carries only `kinds` (what the run's [`StreamMode`](super::StreamMode)s ask for).
    #[must_use]
    pub(crate) fn with_kinds(mut self, kinds: EventKinds) -> EventSink {
        self.kinds = kinds;
        self
    }

    /// Whether events of `kind` reach the consumer: check it before building an event that
    /// costs something to build. Events of other kinds are dropped by [`send`](Self::send).
    /// A sink from [`channel`](Self::channel) carries every kind; a run's options narrow the
    /// sink they are given ([`RunOptions::stream_mode`](crate::RunOptions::stream_mode)).
    ///
    /// ```
    /// use kit::RunOptions;
    /// use kit::event::{EventKind, EventSink, StreamMode};
    ///
    /// let (sink, _events) = EventSink::channel(16);
    /// assert!(sink.wants(EventKind::Values));
    /// let opts = RunOptions::new().events(sink).stream_mode([StreamMode::Updates]);
    /// # let _ = opts;
    /// ```
    pub fn wants(&self, kind: EventKind) -> bool {
        self.kinds.contains(kind)
    }

    /// The namespace of this sink.
    pub fn namespace(&self) -> &[String] {
        &self.namespace
    }

    /// Sends an event, filling in the namespace, thread id and tool call id; drops it when the
    /// stream does not carry its kind. A closed stream (the consumer went away) is ignored:
    /// the run goes on.
    ///
    /// The event is queued by the call itself when the channel has room (even if the returned
    /// future is then dropped), and the future is then ready; only a full channel makes it
    /// wait for the consumer (back-pressure), and what did not fit is sent only if it is
    /// awaited. So the future is small: awaiting it in a run's loop copies no event around.
    pub fn send(&self, mut event: Event) -> impl Future<Output = ()> + Send + 'static {
        let mut waiting = None;
        if self.wants(event.kind()) {
            self.stamp(&mut event);
            waiting = match &self.filter {
                None => self.queue_one(event),
                Some(filter) => {
                    let mut out = Vec::new();
                    filter.filter(event, &mut out);
                    // What a filter adds is held to the stream's kinds too.
                    let kinds = self.kinds;
                    self.queue(out.into_iter().filter(move |e| kinds.contains(e.kind())))
                }
            };
        }
        async move {
            if let Some(waiting) = waiting {
                waiting.await;
            }
        }
    }

    /// Queues one event if the channel has room; else the returned future sends it. (The
    /// common case, kept apart from [`queue`](Self::queue): an event is a few hundred bytes,
    /// and every layer of iterator it passes through copies it.)
    fn queue_one(&self, event: Event) -> Option<futures::future::BoxFuture<'static, ()>> {
        match self.tx.try_send(event) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => None,
            Err(mpsc::error::TrySendError::Full(event)) => {
                let tx = self.tx.clone();
                Some(Box::pin(async move {
                    let _ = tx.send(event).await;
                }))
            }
        }
    }

    /// Queues `events` in order while the channel has room; what does not fit is sent by the
    /// returned future, in order.
    fn queue(
        &self,
        mut events: impl Iterator<Item = Event> + Send + 'static,
    ) -> Option<futures::future::BoxFuture<'static, ()>> {
        while let Some(event) = events.next() {
            match self.tx.try_send(event) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Closed(_)) => return None,
                Err(mpsc::error::TrySendError::Full(event)) => {
                    let tx = self.tx.clone();
                    return Some(Box::pin(async move {
                        for event in std::iter::once(event).chain(events) {
                            if tx.send(event).await.is_err() {
                                return;
                            }
                        }
                    }));
                }
            }
        }
        None
    }

    /// Sends without waiting; drops the event if the consumer is `capacity` events behind.
    pub fn try_send(&self, mut event: Event) {
        if !self.wants(event.kind()) {
            return;
        }
        self.stamp(&mut event);
        match &self.filter {
            None => {
                let _ = self.tx.try_send(event);
            }
            Some(filter) => {
                let mut out = Vec::new();
                filter.filter(event, &mut out);
                for event in out.into_iter().filter(|e| self.wants(e.kind())) {
                    let _ = self.tx.try_send(event);
                }
            }
        }
    }

    fn stamp(&self, event: &mut Event) {
        if event.metadata.namespace.is_empty() && !self.namespace.is_empty() {
            event.metadata.namespace = self.namespace.clone();
        }
        if event.metadata.thread_id.is_none() {
            event.metadata.thread_id = self.thread_id.clone();
        }
        if event.metadata.tool_call_id.is_none() {
            event.metadata.tool_call_id = self.tool_call_id.clone();
        }
    }
}

/// A stream of events from a running graph or agent.
pub type EventStream = futures::stream::BoxStream<'static, Event>;

/// Turns the receiving end of a run's events into a stream that cancels the run when dropped.
pub(crate) fn stream_from(
    rx: mpsc::Receiver<Event>,
    run: tokio::task::JoinHandle<()>,
) -> EventStream {
    Box::pin(Receiving { rx, run })
}

/// The consumer's end of a run: polls the channel itself (no future per event to build and
/// move the event through), and aborts the run when dropped.
struct Receiving {
    rx: mpsc::Receiver<Event>,
    run: tokio::task::JoinHandle<()>,
}

impl futures::Stream for Receiving {
    type Item = Event;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Event>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for Receiving {
    fn drop(&mut self) {
        self.run.abort();
    }
}
