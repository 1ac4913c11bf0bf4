//! The exporter: OTLP/HTTP to a collector, a hosted backend or Langfuse, queued; its builder and environment settings.

use std::time::Duration;

use base64::Engine as _;

use super::{OtlpEncoder, Profile, Protocol};
use crate::trace::exporter::{Exporter, ExporterStats};
use crate::trace::queue::{ExportError, QueueConfig, QueueStats, QueuedExporter};
use crate::trace::record::RunRecord;

pub(super) fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

pub(super) fn default_service_name() -> String {
    if let Some(name) = env_var("KIT_TRACE_SERVICE_NAME").or_else(|| env_var("OTEL_SERVICE_NAME")) {
        return name;
    }
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    if exe.is_empty() {
        "unknown_service".into()
    } else {
        format!("unknown_service:{exe}")
    }
}

/// A [`QueuedExporter`] that sends OTLP/HTTP (protobuf by default) to a collector, a hosted
/// backend, or Langfuse. Never blocks or fails the caller; see [`QueueConfig`] for the queue.
///
/// Used automatically by [`Tracer::from_env`](crate::trace::Tracer::from_env) when
/// `KIT_TRACE_ENDPOINT` and `KIT_TRACE_API_KEY` are set (see [`OtlpExporter::from_env`]).
pub struct OtlpExporter {
    queue: QueuedExporter,
    profile: Profile,
    protocol: Protocol,
}

impl std::fmt::Debug for OtlpExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpExporter")
            .field("url", &crate::http::redact_url_text(self.queue.url()))
            .field("profile", &self.profile)
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

impl OtlpExporter {
    /// OTLP/HTTP protobuf to `endpoint` (a base such as `http://host:4318`, to which
    /// `/v1/traces` is appended, or a full `…/v1/traces` URL) with these headers.
    ///
    /// ```
    /// let e = kit::trace::otlp::OtlpExporter::new(
    ///     "https://otel.example.com/v1/traces",
    ///     [("authorization", "Bearer my-key")],
    /// )?;
    /// assert_eq!(e.url(), "https://otel.example.com/v1/traces");
    /// # Ok::<(), kit::trace::ExportError>(())
    /// ```
    pub fn new<K, V>(
        endpoint: &str,
        headers: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, ExportError>
    where
        K: Into<String>,
        V: Into<String>,
    {
        let mut b = Self::builder(endpoint);
        for (k, v) in headers {
            b = b.header(k, v);
        }
        b.build()
    }

    /// A builder: protocol, profile, headers, service name, queue settings.
    pub fn builder(endpoint: impl Into<String>) -> OtlpExporterBuilder {
        OtlpExporterBuilder {
            endpoint: endpoint.into(),
            headers: Vec::new(),
            protocol: Protocol::Protobuf,
            profile: Profile::Otlp,
            service_name: None,
            resource: Vec::new(),
            queue: QueueConfig::default(),
            max_content_chars: None,
        }
    }

    /// The exporter the environment asks for, if any:
    ///
    /// | variable | use |
    /// |---|---|
    /// | `KIT_TRACE_ENDPOINT` | the endpoint (required) |
    /// | `KIT_TRACE_API_KEY` | sent as `Authorization: Bearer …`; for Langfuse `public_key:secret_key` |
    /// | `KIT_TRACE_FORMAT` | `otlp` (default) or `langfuse`; an endpoint containing `/api/public/otel` means `langfuse` |
    /// | `KIT_TRACE_PROTOCOL` | `protobuf` (default) or `json` (`http/protobuf`, `http/json` also accepted) |
    /// | `KIT_LANGFUSE_PUBLIC_KEY`, `KIT_LANGFUSE_SECRET_KEY` | the Langfuse key pair, instead of `KIT_TRACE_API_KEY` |
    /// | `KIT_TRACE_SERVICE_NAME` (or `OTEL_SERVICE_NAME`) | `service.name` |
    ///
    /// `Ok(None)` when the endpoint or the key is missing; an error when a setting is wrong.
    ///
    /// ```
    /// use kit::trace::{otlp::OtlpExporter, Tracer};
    ///
    /// let tracer = match OtlpExporter::from_env() {
    ///     Ok(Some(exporter)) => Tracer::new().with_exporter(exporter),
    ///     Ok(None) => Tracer::new(), // not configured
    ///     Err(e) => {
    ///         eprintln!("trace export disabled: {e}");
    ///         Tracer::new()
    ///     }
    /// };
    /// # drop(tracer);
    /// ```
    pub fn from_env() -> Result<Option<Self>, ExportError> {
        match builder_from_vars(env_var)? {
            Some(b) => b.build().map(Some),
            None => Ok(None),
        }
    }

    /// The URL spans are sent to.
    pub fn url(&self) -> &str {
        self.queue.url()
    }

    /// The profile.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// Counters and the last error.
    pub fn queue_stats(&self) -> QueueStats {
        self.queue.queue_stats()
    }

    /// Sends what is queued and stops; see [`QueuedExporter::shutdown`].
    pub fn shutdown(&self, timeout: Duration) -> bool {
        self.queue.shutdown(timeout)
    }
}

impl Exporter for OtlpExporter {
    fn export(&self, run: RunRecord) {
        self.queue.export(run);
    }

    fn flush(&self, timeout: Duration) -> bool {
        self.queue.flush(timeout)
    }

    fn stats(&self) -> ExporterStats {
        self.queue.stats()
    }
}

/// The builder that these settings (environment variables, see [`OtlpExporter::from_env`])
/// ask for; `None` when the endpoint or the key is missing.
pub(crate) fn builder_from_vars(
    get: impl Fn(&str) -> Option<String>,
) -> Result<Option<OtlpExporterBuilder>, ExportError> {
    let get = |name: &str| get(name).filter(|v| !v.trim().is_empty());
    let Some(endpoint) = get("KIT_TRACE_ENDPOINT") else {
        return Ok(None);
    };
    let api_key = get("KIT_TRACE_API_KEY");
    let format = get("KIT_TRACE_FORMAT")
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let langfuse = match format.as_str() {
        "" | "otlp" => endpoint.contains("/api/public/otel"),
        "langfuse" => true,
        other => {
            return Err(ExportError::InvalidSetting(format!(
                "KIT_TRACE_FORMAT=`{other}` is not known; use `otlp` or `langfuse`"
            )));
        }
    };
    let protocol = match get("KIT_TRACE_PROTOCOL")
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
        .as_str()
    {
        "" | "protobuf" | "http/protobuf" | "proto" => Protocol::Protobuf,
        "json" | "http/json" => Protocol::Json,
        other => {
            return Err(ExportError::InvalidSetting(format!(
                "KIT_TRACE_PROTOCOL=`{other}` is not known; use `protobuf` or `json`"
            )));
        }
    };
    let mut builder = OtlpExporter::builder(endpoint).protocol(protocol);
    if let Some(name) = get("KIT_TRACE_SERVICE_NAME").or_else(|| get("OTEL_SERVICE_NAME")) {
        builder = builder.service_name(name);
    }
    if langfuse {
        let pair = match (
            get("KIT_LANGFUSE_PUBLIC_KEY"),
            get("KIT_LANGFUSE_SECRET_KEY"),
        ) {
            (Some(pk), Some(sk)) => Some((pk, sk)),
            _ => api_key.as_deref().and_then(|k| {
                let (pk, sk) = k.split_once(':')?;
                (!pk.trim().is_empty() && !sk.trim().is_empty())
                    .then(|| (pk.trim().to_string(), sk.trim().to_string()))
            }),
        };
        match pair {
            Some((pk, sk)) => Ok(Some(builder.langfuse(pk, sk))),
            None if api_key.is_none() => Ok(None),
            None => Err(ExportError::InvalidSetting(
                "Langfuse needs a key pair: set KIT_TRACE_API_KEY to `public_key:secret_key` (pk-lf-…:sk-lf-…), or set KIT_LANGFUSE_PUBLIC_KEY and KIT_LANGFUSE_SECRET_KEY".into(),
            )),
        }
    } else {
        Ok(api_key.map(|key| builder.bearer(key)))
    }
}

/// Builds an [`OtlpExporter`].
#[derive(Clone)]
pub struct OtlpExporterBuilder {
    pub(super) endpoint: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) protocol: Protocol,
    pub(super) profile: Profile,
    pub(super) service_name: Option<String>,
    pub(super) resource: Vec<(String, String)>,
    pub(super) queue: QueueConfig,
    pub(super) max_content_chars: Option<usize>,
}

impl std::fmt::Debug for OtlpExporterBuilder {
    /// Header values are never shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpExporterBuilder")
            .field("endpoint", &crate::http::redact_url_text(&self.endpoint))
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("protocol", &self.protocol)
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

impl OtlpExporterBuilder {
    /// Sets the encoding (protobuf by default).
    #[must_use]
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sends `Authorization: Bearer <key>`.
    #[must_use]
    pub fn bearer(self, key: impl AsRef<str>) -> Self {
        let value = format!("Bearer {}", key.as_ref().trim());
        self.header("authorization", value)
    }

    /// The Langfuse profile: `{host}/api/public/otel/v1/traces`, `Authorization: Basic
    /// base64(public_key:secret_key)`, `x-langfuse-ingestion-version: 4`, and the `langfuse.*`
    /// attributes.
    #[must_use]
    pub fn langfuse(self, public_key: impl AsRef<str>, secret_key: impl AsRef<str>) -> Self {
        let (pk, sk) = (public_key.as_ref().trim(), secret_key.as_ref().trim());
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{pk}:{sk}"));
        let mut b = self
            .header("authorization", format!("Basic {basic}"))
            .header("x-langfuse-ingestion-version", "4")
            .header("x-langfuse-sdk-name", "kit")
            .header("x-langfuse-sdk-version", env!("CARGO_PKG_VERSION"))
            .header("x-langfuse-public-key", pk);
        b.profile = Profile::Langfuse;
        b
    }

    /// Sets `service.name` (default: `KIT_TRACE_SERVICE_NAME`, `OTEL_SERVICE_NAME`, else
    /// `unknown_service:<executable>`).
    #[must_use]
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = Some(name.into());
        self
    }

    /// Adds a resource attribute (e.g. `service.version`).
    #[must_use]
    pub fn resource_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.resource.push((key.into(), value.into()));
        self
    }

    /// Caps each content attribute (inputs, outputs, messages) at this many characters
    /// (default 65,536); see [`OtlpEncoder::max_content_chars`].
    #[must_use]
    pub fn max_content_chars(mut self, n: usize) -> Self {
        self.max_content_chars = Some(n);
        self
    }

    /// Sets the queue, batching and retry settings.
    #[must_use]
    pub fn queue(mut self, config: QueueConfig) -> Self {
        self.queue = config;
        self
    }

    /// The full traces URL for the endpoint and profile.
    pub(super) fn url(&self) -> String {
        let base = self.endpoint.trim().trim_end_matches('/');
        if base.ends_with("/v1/traces") {
            return base.to_string();
        }
        match self.profile {
            Profile::Langfuse if !base.contains("/api/public/otel") => {
                format!("{base}/api/public/otel/v1/traces")
            }
            _ => format!("{base}/v1/traces"),
        }
    }

    /// Starts the exporter's worker. Errors on an invalid endpoint or header.
    pub fn build(self) -> Result<OtlpExporter, ExportError> {
        let url = self.url();
        let mut encoder = OtlpEncoder::new(self.protocol, self.profile);
        if let Some(name) = self.service_name {
            encoder = encoder.service_name(name);
        }
        for (k, v) in self.resource {
            encoder = encoder.resource_attribute(k, v);
        }
        if let Some(n) = self.max_content_chars {
            encoder = encoder.max_content_chars(n);
        }
        let queue = QueuedExporter::new(&url, self.headers, encoder, self.queue)?;
        Ok(OtlpExporter {
            queue,
            profile: self.profile,
            protocol: self.protocol,
        })
    }
}
