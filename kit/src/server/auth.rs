//! Who is asking: the worker's auth hook ([`Authenticate`]), the [`Identity`] it yields, and the
//! built-in form, bearer tokens mapped to identities.
//!
//! Every route but `GET /ok` runs the hook first. The identity it returns owns the threads and
//! runs it creates, and sees only those: a thread or run of another identity is answered
//! exactly like one that does not exist (see the module docs of [`server`](super)).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::routes::ApiError;

/// The identity a request acts as: the owner recorded on the threads and runs it creates.
///
/// The empty identity ([`Identity::shared`]) is what every request has when the worker has no
/// auth, and what the tokens given with
/// [`bearer_token`](super::WorkerBuilder::bearer_token) map to: it owns the threads of
/// single-tenant workers (and every thread a store held before owners were recorded).
///
/// ```
/// use kit::server::Identity;
/// let alice = Identity::new("alice");
/// assert_eq!(alice.as_str(), "alice");
/// assert!(Identity::shared().is_shared());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Identity(String);

impl Identity {
    /// An identity named `id` (a user id, a tenant id: whatever your hook decides owns
    /// threads).
    pub fn new(id: impl Into<String>) -> Self {
        Identity(id.into())
    }

    /// The identity of a worker without tenants (the empty name).
    pub fn shared() -> Self {
        Identity(String::new())
    }

    /// True for [`Identity::shared`].
    pub fn is_shared(&self) -> bool {
        self.0.is_empty()
    }

    /// The name stored as the owner of threads and runs.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            f.write_str("(shared)")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// An auth hook refused a request: answered `401` with this message (say what credential is
/// expected; never echo the one presented).
///
/// ```
/// use kit::server::AuthError;
/// let e = AuthError::new("send `X-Api-Key: <key>`");
/// assert_eq!(e.to_string(), "send `X-Api-Key: <key>`");
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct AuthError {
    message: String,
}

impl AuthError {
    /// A refusal with this message for the client.
    pub fn new(message: impl Into<String>) -> Self {
        AuthError {
            message: message.into(),
        }
    }
}

/// The worker's auth hook: from a request (its method, URI and headers) to the [`Identity`]
/// it acts as, or a refusal. The anchor is LangGraph Platform's custom auth.
///
/// Any `Fn(&Parts) -> Result<Identity, AuthError>` is a hook; implement the trait yourself
/// when checking a credential needs I/O (a token introspection endpoint, a key table).
///
/// ```
/// use kit::server::{AuthError, Identity, RequestParts, Worker};
/// use kit::testing::ScriptedModel;
/// use kit::{Agent, Message};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let agent = Agent::builder()
///     .model(ScriptedModel::new([Message::assistant("hi")]))
///     .build()?;
/// let worker = Worker::builder()
///     .agent("assistant", agent)
///     .auth(|request: &RequestParts| {
///         match request.headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
///             Some("key-of-acme") => Ok(Identity::new("acme")),
///             _ => Err(AuthError::new("send your key as `X-Api-Key: <key>`")),
///         }
///     })
///     .build()
///     .await?;
/// # let _ = worker; Ok(()) }
/// ```
#[crate::async_trait]
pub trait Authenticate: Send + Sync + 'static {
    /// Who `request` acts as. Its body is not available (hooks must not depend on it).
    async fn authenticate(&self, request: &Parts) -> Result<Identity, AuthError>;
}

#[crate::async_trait]
impl<F> Authenticate for F
where
    F: Fn(&Parts) -> Result<Identity, AuthError> + Send + Sync + 'static,
{
    async fn authenticate(&self, request: &Parts) -> Result<Identity, AuthError> {
        self(request)
    }
}

/// Bearer tokens mapped to identities: the built-in [`Authenticate`]. Tokens are kept as
/// SHA-256 digests and every presented token is compared with all of them, each in constant
/// time, so the answer's timing says nothing about which tokens exist.
///
/// ```
/// use kit::server::{BearerTokens, Identity};
/// let tokens = BearerTokens::new()
///     .token("t-alice", Identity::new("alice"))
///     .token("t-bob", Identity::new("bob"));
/// assert_eq!(tokens.len(), 2);
/// ```
#[derive(Clone, Default)]
pub struct BearerTokens {
    tokens: Vec<([u8; 32], Identity)>,
}

impl std::fmt::Debug for BearerTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The digests are not secrets, but nothing is gained by showing them.
        f.debug_struct("BearerTokens")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl BearerTokens {
    /// No tokens yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accepts `token`, acting as `identity`. Several tokens may map to one identity
    /// (rotation).
    #[must_use]
    pub fn token(mut self, token: impl AsRef<str>, identity: Identity) -> Self {
        self.tokens
            .push((digest(token.as_ref().as_bytes()), identity));
        self
    }

    /// How many tokens are accepted.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// True when no token is accepted.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The identity of `presented`, if it is one of the tokens. Compares against every token,
    /// each in constant time.
    fn identify(&self, presented: &[u8]) -> Option<Identity> {
        let d = digest(presented);
        let mut found = None;
        for (t, identity) in &self.tokens {
            if constant_time_eq(t, &d) {
                found = Some(identity);
            }
        }
        found.cloned()
    }

    /// Two identities claiming one token would make the answer depend on the order of the
    /// calls: refused when the worker is built.
    pub(crate) fn conflicting_token(&self) -> bool {
        let mut seen: HashMap<[u8; 32], &Identity> = HashMap::new();
        self.tokens
            .iter()
            .any(|(d, id)| seen.insert(*d, id).is_some_and(|other| other != id))
    }
}

#[crate::async_trait]
impl Authenticate for BearerTokens {
    async fn authenticate(&self, request: &Parts) -> Result<Identity, AuthError> {
        let presented = request
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme
                    .eq_ignore_ascii_case("bearer")
                    .then(|| token.trim().to_string())
            });
        match presented {
            Some(token) => self.identify(token.as_bytes()).ok_or_else(|| {
                AuthError::new(
                    "the bearer token is not accepted by this worker; check the token in the \
                     `Authorization: Bearer <token>` header (for async subagents: the spec's \
                     headers)",
                )
            }),
            None => Err(AuthError::new(
                "this worker requires authentication: send the header `Authorization: Bearer \
                 <token>` (for async subagents: put it in the spec's headers)",
            )),
        }
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

/// The worker's auth: none (every request is [`Identity::shared`]) or a hook.
#[derive(Clone, Default)]
pub(crate) struct Auth(pub(crate) Option<Arc<dyn Authenticate>>);

/// The middleware: runs the hook, puts the [`Identity`] in the request's extensions, and
/// answers 401 with a JSON error when the hook refuses.
pub(crate) async fn require_identity(
    State(auth): State<Auth>,
    request: Request,
    next: Next,
) -> Response {
    let Some(hook) = auth.0 else {
        let mut request = request;
        request.extensions_mut().insert(Identity::shared());
        return next.run(request).await;
    };
    let (mut parts, body) = request.into_parts();
    match hook.authenticate(&parts).await {
        Ok(identity) => {
            parts.extensions.insert(identity);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(e) => {
            let mut response =
                ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", e.message).into_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"kit-worker\""),
            );
            response
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_exactly_and_name_their_identity() {
        let t = BearerTokens::new()
            .token("s3cret", Identity::shared())
            .token("other", Identity::new("bob"));
        assert_eq!(t.identify(b"s3cret"), Some(Identity::shared()));
        assert_eq!(t.identify(b"other"), Some(Identity::new("bob")));
        assert_eq!(t.identify(b"s3cre"), None);
        assert_eq!(t.identify(b"s3cret "), None);
        assert_eq!(t.identify(b""), None);
        assert!(BearerTokens::new().is_empty());
    }

    #[test]
    fn one_token_for_two_identities_is_a_conflict() {
        let same = BearerTokens::new()
            .token("a", Identity::new("x"))
            .token("a", Identity::new("x"));
        assert!(!same.conflicting_token());
        let clash = BearerTokens::new()
            .token("a", Identity::new("x"))
            .token("a", Identity::new("y"));
        assert!(clash.conflicting_token());
    }
}
