//! One request to send: method, URL, headers, body and per-request overrides.

use std::time::Duration;

use bytes::Bytes;
use reqwest::Url;
use serde::Serialize;

use super::{
    HeaderMap, HeaderName, HeaderValue, Method, Secrets, is_sensitive_name, redact_url,
    redact_url_text,
};
use crate::text::clip;

/// One request to send: method, URL, headers, body and per-request overrides. Cheap to build;
/// builder errors (an invalid URL or header value) are reported when it is sent.
#[derive(Clone)]
pub struct HttpRequest {
    pub(super) method: Method,
    pub(super) url: Result<Url, String>,
    pub(super) raw_url: String,
    pub(super) headers: HeaderMap,
    pub(super) body: Option<Bytes>,
    pub(super) timeout: Option<Duration>,
    pub(super) max_retries: Option<u32>,
    pub(super) error: Option<String>,
}

impl std::fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("url", &self.shown_url())
            .field(
                "headers",
                &self
                    .headers
                    .keys()
                    .map(HeaderName::as_str)
                    .collect::<Vec<_>>(),
            )
            .field("body_bytes", &self.body.as_ref().map(Bytes::len))
            .finish_non_exhaustive()
    }
}

impl HttpRequest {
    /// A request with this method and URL.
    pub fn new(method: Method, url: &str) -> Self {
        HttpRequest {
            method,
            url: Url::parse(url).map_err(|e| {
                format!(
                    "`{}` is not a valid URL ({e}); check the configured base URL",
                    clip(&redact_url_text(url), 200)
                )
            }),
            raw_url: url.to_string(),
            headers: HeaderMap::new(),
            body: None,
            timeout: None,
            max_retries: None,
            error: None,
        }
    }

    /// A `GET` request.
    pub fn get(url: &str) -> Self {
        Self::new(Method::GET, url)
    }

    /// A `POST` request.
    pub fn post(url: &str) -> Self {
        Self::new(Method::POST, url)
    }

    /// Adds a header (a second value for the same name is added, not replaced).
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            (Ok(n), Ok(mut v)) => {
                if is_sensitive_name(name) {
                    v.set_sensitive(true);
                }
                self.headers.append(n, v);
            }
            (Err(_), _) => {
                self.error
                    .get_or_insert_with(|| format!("`{name}` is not a valid header name"));
            }
            (_, Err(_)) => {
                self.error.get_or_insert_with(|| {
                    format!(
                        "the value of header `{name}` contains characters not allowed in a \
                         header (a newline in an API key?)"
                    )
                });
            }
        }
        self
    }

    /// Adds `Authorization: Bearer <token>`.
    #[must_use]
    pub fn bearer_auth(self, token: &str) -> Self {
        self.header("authorization", &format!("Bearer {token}"))
    }

    /// Appends a query parameter.
    #[must_use]
    pub fn query(mut self, key: &str, value: &str) -> Self {
        if let Ok(url) = &mut self.url {
            url.query_pairs_mut().append_pair(key, value);
        }
        self
    }

    /// Sets a JSON body (and `content-type: application/json`).
    #[must_use]
    pub fn json<T: Serialize + ?Sized>(mut self, body: &T) -> Self {
        match serde_json::to_vec(body) {
            Ok(bytes) => {
                self.body = Some(Bytes::from(bytes));
                self.headers.insert(
                    reqwest::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
            }
            Err(e) => {
                self.error
                    .get_or_insert_with(|| format!("the body could not be serialised: {e}"));
            }
        }
        self
    }

    /// Sets a raw body with its content type.
    #[must_use]
    pub fn body(mut self, body: impl Into<Bytes>, content_type: &str) -> Self {
        self.body = Some(body.into());
        self.header("content-type", content_type)
    }

    /// Overrides the client's timeout for this request.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Overrides the client's number of retries for this request.
    #[must_use]
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = Some(retries);
        self
    }

    /// The method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The URL with secrets redacted (what logs and errors show).
    pub fn shown_url(&self) -> String {
        match &self.url {
            Ok(url) => redact_url(url),
            Err(_) => match Url::parse(&self.raw_url) {
                Ok(u) => redact_url(&u),
                Err(_) => "<invalid URL>".to_string(),
            },
        }
    }

    /// The credentials this request carries, to scrub from whatever the peer sends back: every
    /// header value but the plain ones (`content-type`, `accept`, `user-agent`, ...), also
    /// without its scheme word (`Bearer`, `Basic`, ...), the URL's user name and password,
    /// and the values of secret-looking query parameters (see [`is_sensitive_name`]).
    pub fn secrets(&self) -> Secrets {
        const PLAIN: &[&str] = &[
            "content-type",
            "accept",
            "content-length",
            "user-agent",
            "anthropic-version",
            "accept-encoding",
        ];
        let mut secrets = Secrets::new();
        for (name, value) in &self.headers {
            if PLAIN.contains(&name.as_str()) {
                continue;
            }
            let value = String::from_utf8_lossy(value.as_bytes());
            secrets.add(&value);
            if let Some((_, credential)) = value.split_once(' ') {
                secrets.add(credential);
            }
        }
        if let Ok(url) = &self.url {
            secrets.add_url_part(url.username());
            if let Some(password) = url.password() {
                secrets.add_url_part(password);
            }
            for (k, v) in url.query_pairs() {
                if is_sensitive_name(&k) {
                    secrets.add(&v);
                }
            }
        }
        secrets
    }
}
