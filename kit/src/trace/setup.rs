//! Tracers from a [`Config`] set in code: its trace endpoint and key start the queued
//! exporter, as `KIT_TRACE_ENDPOINT` and `KIT_TRACE_API_KEY` do for the global tracer.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::run::{Tracer, global};
use crate::config::Config;

/// One tracer per endpoint and key, so every agent built from the same configuration shares
/// one queue and one worker.
fn registry() -> &'static Mutex<HashMap<String, Tracer>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Tracer>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

fn registry_key(config: &Config) -> String {
    use sha2::Digest as _;
    let key = config.trace_api_key.as_deref().unwrap_or_default();
    let digest = sha2::Sha256::digest(key.as_bytes());
    let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}\u{0}{hash}",
        config.trace_endpoint.as_deref().unwrap_or_default()
    )
}

impl Tracer {
    /// The tracer `config` asks for: with `trace_endpoint` (and `trace_api_key`) set, the
    /// queued OTLP exporter sending there — protobuf with the `otlp` feature, OTLP/JSON
    /// without —, shared by every call with the same endpoint and key; otherwise the global
    /// tracer. The other export settings are read from `config.extra` first, then from the
    /// environment (`KIT_TRACE_FORMAT`, `KIT_TRACE_PROTOCOL`, `KIT_TRACE_SERVICE_NAME`,
    /// `KIT_LANGFUSE_PUBLIC_KEY`, `KIT_LANGFUSE_SECRET_KEY`). A wrong setting is said once
    /// through `tracing` and leaves the global tracer.
    ///
    /// An agent built with [`AgentBuilder::config`](crate::agent::AgentBuilder::config) uses
    /// this tracer for its runs.
    ///
    /// ```
    /// use kit::trace::Tracer;
    /// use kit::Config;
    ///
    /// let config = Config {
    ///     trace_endpoint: Some("http://127.0.0.1:4318".into()),
    ///     trace_api_key: Some("collector-key".into()),
    ///     ..Config::default()
    /// };
    /// let tracer = Tracer::from_config(&config);
    /// assert!(tracer.is_active());
    /// // The same settings share one exporter.
    /// assert!(Tracer::from_config(&config).same_as(&tracer));
    /// ```
    pub fn from_config(config: &Config) -> Tracer {
        if config
            .trace_endpoint
            .as_deref()
            .is_none_or(|e| e.trim().is_empty())
        {
            return global();
        }
        let key = registry_key(config);
        let mut registry = registry().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tracer) = registry.get(&key) {
            return tracer.clone();
        }
        let get = |name: &str| match name {
            "KIT_TRACE_ENDPOINT" => config.trace_endpoint.clone(),
            "KIT_TRACE_API_KEY" => config.trace_api_key.clone(),
            other => config
                .extra
                .get(other)
                .cloned()
                .or_else(|| std::env::var(other).ok()),
        };
        let built = super::otlp::builder_from_vars(get).and_then(|b| match b {
            Some(b) => b.build().map(Some),
            None => Ok(None),
        });
        let tracer = match built {
            Ok(Some(exporter)) => Tracer::new().with_exporter(exporter),
            Ok(None) => {
                tracing::warn!(
                    target: "kit",
                    "kit: Config.trace_endpoint is set without Config.trace_api_key (or, for \
                     Langfuse, its key pair); set it to send traces"
                );
                return global();
            }
            Err(e) => {
                tracing::warn!(target: "kit", error = %e, "kit: the trace settings of Config are wrong; traces are not sent");
                return global();
            }
        };
        registry.insert(key, tracer.clone());
        tracer
    }
}
