//! Drives the middleware's stream filter with one model call's events.

use std::sync::Arc;

use crate::event::{Event, EventData, EventFilter, EventKind};
use crate::middleware::pii::PiiMiddleware;

/// The envelope of one model call's events.
fn envelope(data: EventData) -> Event {
    let mut event = Event::new(data, "model", "call");
    event.parent_ids = vec!["run".to_string(), "task".to_string()];
    event
}

/// A `model_delta` event of one model call, carrying `text`.
pub fn delta_event(text: &str) -> Event {
    envelope(EventData::text(text))
}

/// The `model_end` event of that model call.
pub fn end_event() -> Option<Event> {
    let end = serde_json::json!({ "message": crate::Message::assistant("") });
    EventData::from_json(EventKind::ModelEnd, end)
        .ok()
        .map(envelope)
}

/// The events of one model call streaming `deltas` as its text, then its end.
pub fn stream_events<'a>(deltas: impl IntoIterator<Item = &'a str>) -> Vec<Event> {
    let mut events: Vec<Event> = deltas.into_iter().map(delta_event).collect();
    events.extend(end_event());
    events
}

/// The event filter the middleware installs with `apply_to_output`, whatever its options.
pub fn stream_filter(middleware: &PiiMiddleware) -> Arc<dyn EventFilter> {
    Arc::new(
        crate::middleware::pii::stream::StreamScrubber::with_replacer(
            middleware.detector.clone(),
            &middleware.replacer(),
            middleware.lookback,
        ),
    )
}

/// The text the streamed events carry, joined.
pub fn released_text(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::ModelDelta(crate::event::ModelDelta::Text { text }) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Streams `deltas` as one model call's text through the middleware's event filter and
/// returns what comes out, joined.
pub fn stream_text<'a>(
    middleware: &PiiMiddleware,
    deltas: impl IntoIterator<Item = &'a str>,
) -> String {
    let filter = stream_filter(middleware);
    let mut out = Vec::new();
    for event in stream_events(deltas) {
        filter.filter(event, &mut out);
    }
    released_text(&out)
}
