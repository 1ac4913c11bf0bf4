//! What comes back: a complete response, or a streamed body with an idle timeout.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde::de::DeserializeOwned;

use super::client::error_chain;
use super::error::Inner;
use super::{HeaderMap, HttpError, HttpErrorKind, HttpLimits, Method, Secrets, SseStream};
use crate::text::clip;

/// A complete response with a success status.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// The status (2xx).
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
    pub(super) method: String,
    pub(super) url: String,
    /// The request's credentials, scrubbed from the errors built from this body.
    pub(super) secrets: Secrets,
}

impl HttpResponse {
    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON. The error quotes the start of the body, the request's
    /// credentials scrubbed from it.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            HttpError::from(Inner {
                kind: HttpErrorKind::Decode,
                method: self.method.clone(),
                url: self.url.clone(),
                status: Some(self.status),
                headers: HeaderMap::new(),
                body: clip(
                    &String::from_utf8_lossy(&self.body[..self.body.len().min(64 * 1024)]),
                    2000,
                ),
                retry_after: None,
                timeout: None,
                attempts: 1,
                message: format!("the body is not the expected JSON ({e})"),
                limit: None,
            })
            .scrubbed(&self.secrets)
        })
    }

    /// The credentials of the request this answers (what kit scrubs from errors built from
    /// the body).
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }
}

/// A response whose body arrives as a stream (status 2xx).
pub struct HttpStream {
    /// The status (2xx).
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The body chunks. A failure after the body started is an [`HttpErrorKind::Body`] error
    /// (or [`HttpErrorKind::Timeout`] when the server fell silent).
    pub body: BoxStream<'static, Result<Bytes, HttpError>>,
    pub(super) sse: SseContext,
}

/// What an event stream needs from the request: the limits, and what its errors name.
#[derive(Clone)]
pub(super) struct SseContext {
    pub(super) method: Method,
    pub(super) shown: String,
    pub(super) limits: HttpLimits,
}

impl std::fmt::Debug for HttpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpStream")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl HttpStream {
    /// The body decoded as server-sent events, within [`HttpLimits::max_sse_line_bytes`] and
    /// [`HttpLimits::max_sse_event_bytes`].
    pub fn sse(self) -> SseStream {
        SseStream::with_context(self.body, self.sse)
    }

    /// Whether the response says its body is JSON (`application/json`, or a `+json` type)
    /// rather than an event stream: what a proxy may answer a streamed request with, an error
    /// or a whole answer.
    pub fn is_json(&self) -> bool {
        let Some(kind) = self
            .headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        let essence = kind.split(';').next().unwrap_or_default().trim();
        essence.eq_ignore_ascii_case("application/json")
            || essence
                .get(essence.len().saturating_sub(5)..)
                .is_some_and(|end| end.eq_ignore_ascii_case("+json"))
    }

    /// The whole body, within [`HttpLimits::max_body_bytes`] (a larger body is an
    /// [`HttpErrorKind::TooLarge`] error), and the stream's own idle and total limits.
    pub async fn read_all(mut self) -> Result<Bytes, HttpError> {
        let max = self.sse.limits.max_body_bytes;
        let mut body = bytes::BytesMut::new();
        while let Some(piece) = self.body.next().await {
            let piece = piece?;
            if (body.len().saturating_add(piece.len()) as u64) > max {
                return Err(super::client::limit_error(
                    &self.sse.method,
                    &self.sse.shown,
                    HttpErrorKind::TooLarge,
                    "max_body_bytes",
                    format!("more than {max} bytes arrived"),
                    1,
                ));
            }
            body.extend_from_slice(&piece);
        }
        Ok(body.freeze())
    }
}

pub(super) struct BodyMeta {
    pub(super) method: Method,
    pub(super) shown: String,
    pub(super) host: String,
    pub(super) path: String,
    pub(super) timeout: Duration,
    pub(super) attempt: u32,
    pub(super) started: Instant,
    /// When the whole body must be done ([`HttpLimits::stream_deadline`] after the start;
    /// `None` when that is beyond what the clock can represent).
    pub(super) deadline: Option<Instant>,
    pub(super) limits: HttpLimits,
    pub(super) secrets: Secrets,
}

struct BodyState {
    inner: BoxStream<'static, reqwest::Result<Bytes>>,
    info: BodyMeta,
    bytes: u64,
    done: bool,
}

impl BodyMeta {
    fn fail(
        &self,
        kind: HttpErrorKind,
        limit: Option<&'static str>,
        message: String,
        bytes: u64,
    ) -> HttpError {
        let message = self.secrets.scrub(&message);
        tracing::warn!(
            target: "kit::http",
            phase = "body_exception",
            method = %self.method,
            host = %self.host,
            path = %self.path,
            error = ?kind,
            message = %message,
            bytes,
            attempt = self.attempt,
            duration_ms = self.started.elapsed().as_millis() as u64,
            "http body exception"
        );
        Inner {
            timeout: (kind == HttpErrorKind::Timeout && limit.is_none()).then_some(self.timeout),
            attempts: self.attempt,
            limit,
            ..Inner::new(kind, &self.method, &self.shown, message)
        }
        .into()
    }
}

/// The body of a streamed response, with an idle timeout per chunk and tracing at the end.
pub(super) fn body_stream(
    response: reqwest::Response,
    info: BodyMeta,
) -> BoxStream<'static, Result<Bytes, HttpError>> {
    let state = BodyState {
        inner: response.bytes_stream().boxed(),
        info,
        bytes: 0,
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        let left = st.info.deadline.map_or(Duration::MAX, |d| {
            d.saturating_duration_since(Instant::now())
        });
        let wait = st.info.timeout.min(left);
        match tokio::time::timeout(wait, st.inner.next()).await {
            Ok(Some(Ok(chunk))) => {
                st.bytes = st.bytes.saturating_add(chunk.len() as u64);
                let max = st.info.limits.max_stream_bytes;
                if st.bytes > max {
                    st.done = true;
                    let message = format!(
                        "the stream delivered more than {max} bytes ({} when it was cut)",
                        st.bytes
                    );
                    let err = st.info.fail(
                        HttpErrorKind::TooLarge,
                        Some("max_stream_bytes"),
                        message,
                        st.bytes,
                    );
                    return Some((Err(err), st));
                }
                Some((Ok(chunk), st))
            }
            Ok(Some(Err(e))) => {
                st.done = true;
                let message = format!("{} after {} bytes", error_chain(e), st.bytes);
                let err = st.info.fail(HttpErrorKind::Body, None, message, st.bytes);
                Some((Err(err), st))
            }
            Ok(None) => {
                tracing::debug!(
                    target: "kit::http",
                    phase = "body_stop",
                    method = %st.info.method,
                    host = %st.info.host,
                    path = %st.info.path,
                    bytes = st.bytes,
                    attempt = st.info.attempt,
                    duration_ms = st.info.started.elapsed().as_millis() as u64,
                    "http body stop"
                );
                None
            }
            Err(_) if wait < st.info.timeout => {
                st.done = true;
                let message = format!(
                    "the stream was still open after its total deadline of {:?} ({} bytes \
                     received)",
                    st.info.limits.stream_deadline, st.bytes
                );
                let err = st.info.fail(
                    HttpErrorKind::Timeout,
                    Some("stream_deadline"),
                    message,
                    st.bytes,
                );
                Some((Err(err), st))
            }
            Err(_) => {
                st.done = true;
                let message = format!(
                    "the server sent nothing for {:?} after {} bytes",
                    st.info.timeout, st.bytes
                );
                let err = st
                    .info
                    .fail(HttpErrorKind::Timeout, None, message, st.bytes);
                Some((Err(err), st))
            }
        }
    })
    .boxed()
}
