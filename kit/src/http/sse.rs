//! Server-sent events: decoding a `text/event-stream` body into events.
//!
//! Follows the WHATWG event-stream rules that matter for API streams: lines end with `\n`,
//! `\r\n` or `\r` (also when split across network chunks); `data:` lines of one event are
//! joined with `\n`; one space after the colon is dropped; lines starting with `:` are
//! comments; a blank line ends an event; an event without data is not dispatched. At the end of
//! the body, a last event that lacks its blank line is still delivered (some servers omit it).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use futures::stream::BoxStream;

use super::client::limit_error;
use super::response::SseContext;
use super::{HttpError, HttpErrorKind, HttpLimits, Method};

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; `None` means the default type (`message`).
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The `id:` field, if any.
    pub id: Option<String>,
}

/// A server-sent-event stream broke a size limit; the decoder stops at the first one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// A line did not end within the limit.
    #[error(
        "a line of the event stream is longer than {max} bytes; raise \
         HttpLimits::max_sse_line_bytes if this peer is trusted to send such lines"
    )]
    LineTooLong {
        /// The limit, in bytes.
        max: usize,
    },
    /// An event's data grew past the limit before the blank line that ends it.
    #[error(
        "an event of the stream is larger than {max} bytes; raise \
         HttpLimits::max_sse_event_bytes if this peer is trusted to send such events"
    )]
    EventTooLarge {
        /// The limit, in bytes.
        max: usize,
    },
    /// An `id:` line was longer than the limit (the id is repeated on every later event).
    #[error(
        "an event id of the stream is longer than {max} bytes; raise \
         HttpLimits::max_sse_id_bytes if this peer is trusted to send such ids"
    )]
    IdTooLong {
        /// The limit, in bytes.
        max: usize,
    },
    /// The events decoded and not yet read hold more than twice the event limit: the id is
    /// copied onto every event, so thousands of empty events after a long id would otherwise
    /// take a hundred times the bytes that carried them.
    #[error(
        "the events of the stream waiting to be read hold more than {max} bytes (each repeats \
         the last event id); raise HttpLimits::max_sse_event_bytes if this peer is trusted"
    )]
    BacklogTooLarge {
        /// The limit, in bytes.
        max: usize,
    },
}

impl SseError {
    /// The [`HttpLimits`] field that was hit.
    pub fn limit(&self) -> &'static str {
        match self {
            SseError::LineTooLong { .. } => "max_sse_line_bytes",
            SseError::EventTooLarge { .. } => "max_sse_event_bytes",
            SseError::IdTooLong { .. } => "max_sse_id_bytes",
            SseError::BacklogTooLarge { .. } => "max_sse_event_bytes",
        }
    }
}

/// An incremental decoder: feed it bytes, take out complete events.
///
/// Memory is bounded: a line may hold at most `max_sse_line_bytes` and an event's data at most
/// `max_sse_event_bytes` ([`HttpLimits`]); past either the decoder stops with an [`SseError`]
/// ([`try_feed`](Self::try_feed) returns it, [`error`](Self::error) keeps it).
///
/// ```
/// use kit::http::SseDecoder;
/// let mut d = SseDecoder::new();
/// d.feed(b"event: ping\r\ndata: {\"a\"");
/// assert!(d.next_event().is_none());
/// d.feed(b":1}\r\n\r\n: a comment\n\ndata: [DONE]\n\n");
/// let first = d.next_event().unwrap();
/// assert_eq!(first.event.as_deref(), Some("ping"));
/// assert_eq!(first.data, "{\"a\":1}");
/// assert_eq!(d.next_event().unwrap().data, "[DONE]");
/// assert!(d.next_event().is_none());
/// ```
#[derive(Debug)]
pub struct SseDecoder {
    /// How many bytes of a leading byte-order mark were read; 3 once the stream's start is
    /// past (a stream may begin with one, which the format says to ignore).
    bom: u8,
    line: Vec<u8>,
    skip_lf: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
    ready: VecDeque<SseEvent>,
    /// The bytes of the events in `ready` (see [`event_bytes`]).
    ready_bytes: usize,
    max_line: usize,
    max_event: usize,
    max_id: usize,
    error: Option<SseError>,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::with_limits(&HttpLimits::default())
    }
}

impl SseDecoder {
    /// An empty decoder with the default [`HttpLimits`].
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty decoder with these limits on lines and events.
    pub fn with_limits(limits: &HttpLimits) -> Self {
        SseDecoder {
            bom: 0,
            line: Vec::new(),
            skip_lf: false,
            event: None,
            data: String::new(),
            has_data: false,
            id: None,
            ready: VecDeque::new(),
            ready_bytes: 0,
            max_line: limits.max_sse_line_bytes,
            max_event: limits.max_sse_event_bytes,
            max_id: limits.max_sse_id_bytes,
            error: None,
        }
    }

    /// Adds bytes from the body. After a broken limit the bytes are ignored; see
    /// [`try_feed`](Self::try_feed) and [`error`](Self::error).
    pub fn feed(&mut self, bytes: &[u8]) {
        let _ = self.try_feed(bytes);
    }

    /// Adds bytes from the body, or says which limit they break (then and ever after).
    pub fn try_feed(&mut self, mut bytes: &[u8]) -> Result<(), SseError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        while self.bom < 3
            && let Some((&first, rest)) = bytes.split_first()
        {
            /// U+FEFF in UTF-8.
            const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];
            if first == BOM[usize::from(self.bom)] {
                self.bom += 1;
                bytes = rest;
            } else {
                // Not a mark after all: what looked like its start is text.
                let seen = usize::from(self.bom);
                self.bom = 3;
                self.push_line(&BOM[..seen])?;
            }
        }
        while !bytes.is_empty() {
            if self.skip_lf {
                self.skip_lf = false;
                if bytes[0] == b'\n' {
                    bytes = &bytes[1..];
                    continue;
                }
            }
            match bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(end) => {
                    self.push_line(&bytes[..end])?;
                    self.skip_lf = bytes[end] == b'\r';
                    self.end_line()?;
                    bytes = &bytes[end + 1..];
                }
                None => {
                    self.push_line(bytes)?;
                    bytes = &[];
                }
            }
        }
        Ok(())
    }

    /// The limit broken so far, if any.
    pub fn error(&self) -> Option<SseError> {
        self.error
    }

    /// The next complete event, if any.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        let event = self.ready.pop_front()?;
        self.ready_bytes = self.ready_bytes.saturating_sub(event_bytes(&event));
        Some(event)
    }

    /// Ends the body: a pending line and event are completed.
    pub fn finish(&mut self) {
        if self.error.is_some() {
            return;
        }
        if !self.line.is_empty() && self.end_line().is_err() {
            return;
        }
        let _ = self.dispatch();
    }

    fn fail(&mut self, error: SseError) -> Result<(), SseError> {
        self.error = Some(error);
        self.line = Vec::new();
        self.data = String::new();
        Err(error)
    }

    fn push_line(&mut self, part: &[u8]) -> Result<(), SseError> {
        if self.line.len().saturating_add(part.len()) > self.max_line {
            return self.fail(SseError::LineTooLong { max: self.max_line });
        }
        self.line.extend_from_slice(part);
        Ok(())
    }

    fn end_line(&mut self) -> Result<(), SseError> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            return self.dispatch();
        }
        let line = String::from_utf8_lossy(&line);
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                if self
                    .data
                    .len()
                    .saturating_add(value.len())
                    .saturating_add(1)
                    > self.max_event
                {
                    return self.fail(SseError::EventTooLarge {
                        max: self.max_event,
                    });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => {
                if value.len() > self.max_id {
                    return self.fail(SseError::IdTooLong { max: self.max_id });
                }
                self.id = Some(value.to_string());
            }
            _ => {} // `retry` and unknown fields are ignored
        }
        Ok(())
    }

    fn dispatch(&mut self) -> Result<(), SseError> {
        let event = self.event.take();
        if !self.has_data {
            return Ok(());
        }
        self.has_data = false;
        let event = SseEvent {
            event,
            data: std::mem::take(&mut self.data),
            id: self.id.clone(),
        };
        let max = self.max_event.saturating_mul(2);
        let held = self.ready_bytes.saturating_add(event_bytes(&event));
        if held > max {
            // The events before it stay readable; decoding stops here.
            return self.fail(SseError::BacklogTooLarge { max });
        }
        self.ready_bytes = held;
        self.ready.push_back(event);
        Ok(())
    }
}

/// What an event holds in memory, about: its strings and their headers.
fn event_bytes(event: &SseEvent) -> usize {
    event.data.len()
        + event.id.as_ref().map_or(0, String::len)
        + event.event.as_ref().map_or(0, String::len)
        + std::mem::size_of::<SseEvent>()
}

/// A stream of events decoded from a body stream (see [`HttpStream::sse`](super::HttpStream::sse)).
/// A broken limit ends it with an [`HttpErrorKind::TooLarge`] error naming the limit.
pub struct SseStream {
    body: BoxStream<'static, Result<Bytes, HttpError>>,
    decoder: SseDecoder,
    context: SseContext,
    failed: Option<HttpError>,
    ended: bool,
}

impl std::fmt::Debug for SseStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseStream")
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl SseStream {
    /// Decodes `body` with the default [`HttpLimits`].
    pub fn new(body: BoxStream<'static, Result<Bytes, HttpError>>) -> Self {
        Self::with_context(
            body,
            SseContext {
                method: Method::GET,
                shown: "<event stream>".to_string(),
                limits: HttpLimits::default(),
            },
        )
    }

    pub(super) fn with_context(
        body: BoxStream<'static, Result<Bytes, HttpError>>,
        context: SseContext,
    ) -> Self {
        SseStream {
            body,
            decoder: SseDecoder::with_limits(&context.limits),
            context,
            failed: None,
            ended: false,
        }
    }
}

impl Stream for SseStream {
    type Item = Result<SseEvent, HttpError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(event) = self.decoder.next_event() {
                return Poll::Ready(Some(Ok(event)));
            }
            if let Some(e) = self.failed.take() {
                return Poll::Ready(Some(Err(e)));
            }
            if self.ended {
                return Poll::Ready(None);
            }
            match self.body.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(bytes))) => {
                    if let Err(e) = self.decoder.try_feed(&bytes) {
                        self.ended = true;
                        let c = &self.context;
                        self.failed = Some(limit_error(
                            &c.method,
                            &c.shown,
                            HttpErrorKind::TooLarge,
                            e.limit(),
                            e.to_string(),
                            1,
                        ));
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    self.ended = true;
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(None) => {
                    self.ended = true;
                    self.decoder.finish();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_pieces(input: &[u8], size: usize) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for piece in input.chunks(size) {
            d.feed(piece);
            while let Some(e) = d.next_event() {
                out.push(e);
            }
        }
        d.finish();
        while let Some(e) = d.next_event() {
            out.push(e);
        }
        out
    }

    #[test]
    fn any_split_gives_the_same_events() {
        let input = "event: message_start\r\ndata: {\"x\":\"é\"}\r\n\r\n:keepalive\r\n\r\n\
                     data: line1\ndata:line2\n\nevent: empty\n\ndata: last";
        let whole = decode_in_pieces(input.as_bytes(), input.len());
        assert_eq!(whole.len(), 3, "{whole:?}");
        assert_eq!(whole[0].event.as_deref(), Some("message_start"));
        assert_eq!(whole[0].data, "{\"x\":\"é\"}");
        assert_eq!(whole[1].data, "line1\nline2");
        assert_eq!(whole[1].event, None);
        assert_eq!(whole[2].data, "last");
        for size in 1..input.len() {
            assert_eq!(
                decode_in_pieces(input.as_bytes(), size),
                whole,
                "split every {size}"
            );
        }
    }

    #[test]
    fn one_leading_byte_order_mark_is_ignored_however_split() {
        let input = "\u{feff}data: a\n\ndata: b\n\n";
        for size in 1..input.len() {
            let data: Vec<String> = decode_in_pieces(input.as_bytes(), size)
                .into_iter()
                .map(|e| e.data)
                .collect();
            assert_eq!(data, ["a", "b"], "split every {size}");
        }
        // Only a leading one, and only a whole one: a second mark is a field name's text (so
        // that line is no `data` field), a lone first byte of one is kept as text.
        let twice = decode_in_pieces("\u{feff}\u{feff}data: a\n\ndata: b\n\n".as_bytes(), 1);
        assert_eq!(twice.len(), 1);
        assert_eq!(twice[0].data, "b");
        let partial = decode_in_pieces(b"\xEF\xBBdata: a\n\ndata: b\n\n", 1);
        assert_eq!(partial.len(), 1);
        assert_eq!(partial[0].data, "b");
        let late = decode_in_pieces("data: a\n\n\u{feff}data: b\n\n".as_bytes(), 2);
        assert_eq!(late.len(), 1);
    }

    /// The last id is carried by every later event (as a browser's `lastEventId` is), and
    /// only an id within `max_sse_id_bytes` is taken: one long id line followed by many tiny
    /// events would otherwise be copied into each of them.
    #[test]
    fn an_id_carries_over_within_its_limit() {
        let events = decode_in_pieces(b"id: 7\ndata: a\n\ndata: b\n\nid: 8\ndata: c\n\n", 3);
        let ids: Vec<Option<&str>> = events.iter().map(|e| e.id.as_deref()).collect();
        assert_eq!(ids, [Some("7"), Some("7"), Some("8")]);
        // An id with a NUL is ignored, as the specification says.
        let events = decode_in_pieces(b"id: 7\ndata: a\n\nid: x\0y\ndata: b\n\n", 5);
        assert_eq!(events[1].id.as_deref(), Some("7"));

        let limits = HttpLimits::default();
        for (len, ok) in [(1 << 10, true), ((1 << 10) + 1, false), (1 << 20, false)] {
            let mut body = format!("id: {}\n", "x".repeat(len)).into_bytes();
            for _ in 0..10_000 {
                body.extend_from_slice(b"data\n\n");
            }
            match crate::fuzz::sse(&body, &limits) {
                Ok(events) => {
                    assert!(ok, "{len}");
                    assert_eq!(events.len(), 10_000);
                    assert!(
                        events
                            .iter()
                            .all(|e| e.id.as_ref().map(String::len) == Some(len))
                    );
                }
                Err(e) => {
                    assert!(!ok, "{len}: {e}");
                    assert_eq!(e, SseError::IdTooLong { max: 1 << 10 });
                    assert_eq!(e.limit(), "max_sse_id_bytes");
                    assert!(e.to_string().contains("raise HttpLimits::max_sse_id_bytes"));
                }
            }
        }
        // A peer trusted with longer ids can be allowed them.
        let wide = HttpLimits {
            max_sse_id_bytes: 1 << 20,
            ..HttpLimits::default()
        };
        let body = format!("id: {}\ndata: a\n\n", "x".repeat(1 << 20));
        let events = crate::fuzz::sse(body.as_bytes(), &wide).unwrap();
        assert_eq!(events[0].id.as_ref().map(String::len), Some(1 << 20));
    }

    #[test]
    fn lone_cr_ends_lines() {
        let events = decode_in_pieces(b"data: a\r\rdata: b\r\r", 1);
        let data: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, ["a", "b"]);
    }

    /// Thousands of empty events after a long id, fed in one piece: each would carry a copy of
    /// the id (150 times the bytes that made it). A kibibyte of them decodes; a megabyte stops
    /// at the backlog limit, the events before it still readable. Read out as they come (a
    /// live stream), the same megabyte decodes whole.
    #[test]
    fn a_backlog_of_id_copies_is_bounded() {
        let limits = HttpLimits::default();
        for (size, ok) in [(1 << 10, true), (1 << 20, false)] {
            let mut body = format!("id: {}\n", "x".repeat(1 << 10)).into_bytes();
            while body.len() < size {
                body.extend_from_slice(b"data:\n\n");
            }
            let events = body.len().saturating_sub(1 << 10) / 7;
            let mut d = SseDecoder::with_limits(&limits);
            match d.try_feed(&body) {
                Ok(()) => assert!(ok, "{size}"),
                Err(e) => {
                    assert!(!ok, "{size}: {e}");
                    let max = 2 * limits.max_sse_event_bytes;
                    assert_eq!(e, SseError::BacklogTooLarge { max });
                    assert_eq!(e.limit(), "max_sse_event_bytes");
                    assert!(d.ready_bytes <= max);
                    let kept = std::iter::from_fn(|| d.next_event()).count();
                    assert!(kept > 1_000 && kept < events, "{kept}");
                }
            }
            let live = crate::fuzz::sse(&body, &limits).unwrap();
            assert!(live.len() >= events, "{size}");
        }
    }
}
