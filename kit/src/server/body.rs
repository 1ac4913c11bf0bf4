//! Request bodies reach a handler whole or not at all: a declared `Content-Length` over the
//! limit is refused before a byte is read, and the body must arrive within the body read
//! timeout.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::routes::ApiError;

/// The limits a request body is read within.
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyLimits {
    /// Largest body, in bytes ([`WorkerConfig::body_limit`](super::WorkerConfig::body_limit)).
    pub(super) max: usize,
    /// Longest the whole body may take to arrive
    /// ([`WorkerConfig::body_read_timeout`](super::WorkerConfig::body_read_timeout)).
    pub(super) timeout: Duration,
}

fn too_large(max: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!(
            "the request body is larger than this worker accepts ({max} bytes); send less, or \
             raise the worker's body_limit"
        ),
    )
}

/// Reads the body within [`BodyLimits`] before the request goes on.
pub(super) async fn guard(
    State(limits): State<BodyLimits>,
    request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > u64::try_from(limits.max).unwrap_or(u64::MAX)) {
        // Refused unread: the connection is closed rather than drained.
        return too_large(limits.max).into_response();
    }
    let (parts, body) = request.into_parts();
    let read = async {
        let mut stream = body.into_data_stream();
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                ApiError::bad_request(format!("the request body could not be read: {e}"))
            })?;
            if bytes.len().saturating_add(chunk.len()) > limits.max {
                return Err(too_large(limits.max));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    };
    match tokio::time::timeout(limits.timeout, read).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(e)) => e.into_response(),
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!(
                "the request body did not arrive within {:?}; send it at once, or raise the \
                 worker's body_read_timeout",
                limits.timeout
            ),
        )
        .into_response(),
    }
}
