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

use super::HttpError;

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

/// An incremental decoder: feed it bytes, take out complete events.
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
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    skip_lf: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
    ready: VecDeque<SseEvent>,
}

impl SseDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes from the body.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.skip_lf {
                self.skip_lf = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' => self.end_line(),
                b'\r' => {
                    self.end_line();
                    self.skip_lf = true;
                }
                _ => self.line.push(b),
            }
        }
    }

    /// The next complete event, if any.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        self.ready.pop_front()
    }

    /// Ends the body: a pending line and event are completed.
    pub fn finish(&mut self) {
        if !self.line.is_empty() {
            self.end_line();
        }
        self.dispatch();
    }

    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch();
            return;
        }
        let line = String::from_utf8_lossy(&line);
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            _ => {} // `retry` and unknown fields are ignored
        }
    }

    fn dispatch(&mut self) {
        let event = self.event.take();
        if !self.has_data {
            return;
        }
        self.has_data = false;
        self.ready.push_back(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
            id: self.id.clone(),
        });
    }
}

/// A stream of events decoded from a body stream (see [`HttpStream::sse`](super::HttpStream::sse)).
pub struct SseStream {
    body: BoxStream<'static, Result<Bytes, HttpError>>,
    decoder: SseDecoder,
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
    /// Decodes `body`.
    pub fn new(body: BoxStream<'static, Result<Bytes, HttpError>>) -> Self {
        SseStream {
            body,
            decoder: SseDecoder::new(),
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
            if self.ended {
                return Poll::Ready(None);
            }
            match self.body.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(bytes))) => self.decoder.feed(&bytes),
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
    fn lone_cr_ends_lines() {
        let events = decode_in_pieces(b"data: a\r\rdata: b\r\r", 1);
        let data: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, ["a", "b"]);
    }
}
