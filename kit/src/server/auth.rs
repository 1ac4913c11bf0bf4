//! Bearer-token authentication of the worker's routes.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::routes::ApiError;

/// The accepted tokens, kept as SHA-256 digests so every comparison takes the same time
/// whatever the token's length or content.
#[derive(Clone, Default)]
pub(crate) struct Tokens(Arc<Vec<[u8; 32]>>);

impl Tokens {
    pub(crate) fn new(tokens: &[String]) -> Self {
        Tokens(Arc::new(
            tokens.iter().map(|t| digest(t.as_bytes())).collect(),
        ))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when `presented` is one of the tokens. Compares against every token, each in
    /// constant time.
    fn accepts(&self, presented: &[u8]) -> bool {
        let d = digest(presented);
        let mut ok = false;
        for t in self.0.iter() {
            ok |= constant_time_eq(t, &d);
        }
        ok
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Compares two equal-length arrays without an early exit.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b.iter()) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

/// The middleware: lets a request through when auth is off or its `Authorization: Bearer`
/// token is accepted; answers 401 with a JSON error otherwise.
pub(crate) async fn require_bearer(
    State(tokens): State<Tokens>,
    request: Request,
    next: Next,
) -> Response {
    if tokens.is_empty() {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| token.trim().to_string())
        });
    let message = match presented {
        Some(token) if tokens.accepts(token.as_bytes()) => return next.run(request).await,
        Some(_) => {
            "the bearer token is not accepted by this worker; check the token in the \
                    `Authorization: Bearer <token>` header (for async subagents: the spec's \
                    headers)"
        }
        None => {
            "this worker requires authentication: send the header `Authorization: Bearer \
                 <token>` (for async subagents: put it in the spec's headers)"
        }
    };
    let mut response =
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"kit-worker\""),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_exactly() {
        let t = Tokens::new(&["s3cret".to_string(), "other".to_string()]);
        assert!(t.accepts(b"s3cret"));
        assert!(t.accepts(b"other"));
        assert!(!t.accepts(b"s3cre"));
        assert!(!t.accepts(b"s3cret "));
        assert!(!t.accepts(b""));
        assert!(Tokens::new(&[]).is_empty());
    }
}
