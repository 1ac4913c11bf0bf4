//! Runs to OTLP spans: names, kinds, timing, status, and the GenAI attributes.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{
    Profile, Protocol, attr, default_service_name, genai_input, genai_output, span_id, trace_id,
};
use crate::trace::queue::BatchEncoder;
use crate::trace::record::{ModelInfo, RunKind, RunRecord, RunStatus};

/// Maps runs to OTLP requests and encodes them. [`OtlpExporter`](super::OtlpExporter) uses it; it is public so the
/// mapping can be inspected (and reused with another transport).
///
/// ```
/// use kit::trace::otlp::{OtlpEncoder, Profile, Protocol};
/// use kit::trace::{RunKind, RunRecord, RunStatus};
///
/// let run: RunRecord = serde_json::from_value(serde_json::json!({
///     "id": "0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071",
///     "trace_id": "0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071",
///     "name": "support", "kind": "agent", "start_ns": 1, "end_ns": 2, "status": "ok"
/// }))?;
/// // OTLP/JSON, which needs no protobuf (the `otlp` feature adds the protobuf encoding).
/// let request = OtlpEncoder::new(Protocol::Json, Profile::Otlp).json_request(&[run]);
/// let span = &request["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
/// assert_eq!(span["name"], "invoke_agent support");
/// assert_eq!(span["spanId"], "9a1b2c3d4e5f6071");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct OtlpEncoder {
    pub(super) protocol: Protocol,
    pub(super) profile: Profile,
    pub(super) service_name: String,
    pub(super) resource: Vec<(String, String)>,
    pub(super) max_content_chars: usize,
}

impl OtlpEncoder {
    /// An encoder for this protocol and profile, with service name
    /// `unknown_service:<executable>` (OpenTelemetry's default).
    pub fn new(protocol: Protocol, profile: Profile) -> Self {
        OtlpEncoder {
            protocol: super::available(protocol),
            profile,
            service_name: default_service_name(),
            resource: Vec::new(),
            max_content_chars: 64 * 1024,
        }
    }

    /// Sets `service.name`.
    #[must_use]
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = name.into();
        self
    }

    /// Adds a resource attribute (e.g. `service.version`).
    #[must_use]
    pub fn resource_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.resource.push((key.into(), value.into()));
        self
    }

    /// Caps every content attribute (inputs, outputs, messages) at this many characters
    /// (default 65,536); longer ones are cut and marked `…[truncated]`.
    #[must_use]
    pub fn max_content_chars(mut self, n: usize) -> Self {
        self.max_content_chars = n;
        self
    }

    /// The runs grouped by environment (one `ResourceSpans` each), with each group's
    /// resource attributes.
    pub(super) fn resources<'r>(&self, runs: &'r [RunRecord]) -> Vec<(Vec<Attr>, Vec<SpanData>)> {
        let mut groups: BTreeMap<Option<&'r str>, Vec<SpanData>> = BTreeMap::new();
        for run in runs {
            groups
                .entry(run.environment.as_deref())
                .or_default()
                .push(self.span_data(run));
        }
        groups
            .into_iter()
            .map(|(env, spans)| {
                let mut a = Attrs(vec![]);
                a.str(attr::SERVICE_NAME, &self.service_name);
                a.str("telemetry.sdk.name", "kit");
                a.str("telemetry.sdk.language", "rust");
                a.str("telemetry.sdk.version", env!("CARGO_PKG_VERSION"));
                for (k, v) in &self.resource {
                    a.str(k, v);
                }
                if let Some(env) = env {
                    a.str(attr::ENVIRONMENT, env);
                }
                (a.0, spans)
            })
            .collect()
    }

    /// The span of one run, in neither encoding yet.
    pub(super) fn span_data(&self, run: &RunRecord) -> SpanData {
        let mut a = Attrs(Vec::with_capacity(24));
        a.str(attr::RUN_KIND, run.kind.as_str());
        a.str(attr::RUN_ID, &run.id);
        if let Some(op) = run.operation() {
            a.str(attr::OPERATION, op);
        }
        match run.kind {
            RunKind::Agent => a.str(attr::AGENT_NAME, &run.name),
            RunKind::Graph => a.str(attr::WORKFLOW_NAME, &run.name),
            _ => {}
        }
        if let Some(model) = &run.model {
            self.model_attrs(&mut a, model);
        }
        if let Some(tool) = &run.tool {
            a.str(attr::TOOL_NAME, &tool.name);
            a.str(attr::TOOL_TYPE, "function");
            if !tool.call_id.is_empty() {
                a.str(attr::TOOL_CALL_ID, &tool.call_id);
            }
            if !tool.description.is_empty() {
                a.str(attr::TOOL_DESCRIPTION, &tool.description);
            }
        } else if run.kind == RunKind::Tool {
            a.str(attr::TOOL_NAME, &run.name);
        }
        self.content_attrs(&mut a, run);
        if let Some(thread) = &run.thread_id {
            a.str(attr::CONVERSATION_ID, thread);
        }
        if let Some(user) = &run.user_id {
            a.str(attr::USER_ID, user);
        }
        if let Some(session) = &run.session_id {
            a.str(attr::SESSION_ID, session);
        }
        if let Some(mode) = &run.execution_mode {
            a.str(attr::EXECUTION_MODE, mode);
        }
        for (k, v) in &run.custom_fields {
            a.str(&format!("{}{k}", attr::CUSTOM_PREFIX), v);
        }
        for (k, v) in &run.metadata {
            a.str(
                &format!("{}{k}", attr::METADATA_PREFIX),
                &truncate(scalar_text(v), self.max_content_chars),
            );
        }
        if !run.tags.is_empty() {
            a.strs(attr::TAGS, &run.tags);
        }
        let mut events = Vec::new();
        let mut error = None;
        if run.status == RunStatus::Error {
            let message = run.error.clone().unwrap_or_default();
            let kind = error_type(&message);
            a.str(attr::ERROR_TYPE, &kind);
            events.push(EventData {
                time_unix_nano: run.end_ns,
                name: "exception".into(),
                attributes: vec![
                    ("exception.type".into(), AttrValue::Str(kind)),
                    ("exception.message".into(), AttrValue::Str(message.clone())),
                ],
            });
            error = Some(message);
        }
        if self.profile == Profile::Langfuse {
            self.langfuse_attrs(&mut a, run);
        }
        SpanData {
            trace_id: trace_id(&run.trace_id),
            span_id: span_id(&run.id),
            parent_span_id: run.parent_id.as_deref().map(span_id),
            name: run.span_name(),
            client: run.kind == RunKind::Model,
            start_time_unix_nano: run.start_ns,
            end_time_unix_nano: run.end_ns.max(run.start_ns),
            attributes: a.0,
            events,
            error,
        }
    }

    pub(super) fn model_attrs(&self, a: &mut Attrs, model: &ModelInfo) {
        if !model.provider.is_empty() {
            a.str(attr::PROVIDER, &model.provider);
        }
        if !model.model.is_empty() {
            a.str(attr::REQUEST_MODEL, &model.model);
            a.str(attr::RESPONSE_MODEL, &model.model);
        }
        if let Some(t) = model.params.get("temperature").and_then(Value::as_f64) {
            a.f64(attr::TEMPERATURE, t);
        }
        if let Some(n) = model.params.get("max_tokens").and_then(Value::as_i64) {
            a.i64(attr::MAX_TOKENS, n);
        }
        if let Some(p) = model.params.get("top_p").and_then(Value::as_f64) {
            a.f64(attr::TOP_P, p);
        }
        if let Some(u) = &model.usage {
            a.i64(attr::INPUT_TOKENS, clamp_i64(u.input_tokens));
            a.i64(attr::OUTPUT_TOKENS, clamp_i64(u.output_tokens));
            if u.cache_read_tokens > 0 {
                a.i64(attr::CACHE_READ_TOKENS, clamp_i64(u.cache_read_tokens));
            }
            if u.cache_creation_tokens > 0 {
                a.i64(
                    attr::CACHE_CREATION_TOKENS,
                    clamp_i64(u.cache_creation_tokens),
                );
            }
            if u.reasoning_tokens > 0 {
                a.i64(attr::REASONING_TOKENS, clamp_i64(u.reasoning_tokens));
            }
        }
        if let Some(cost) = model.cost.filter(|c| c.is_finite()) {
            a.f64(attr::COST, cost);
        }
        if let Some(reason) = &model.finish_reason {
            a.strs(attr::FINISH_REASONS, std::slice::from_ref(reason));
        }
        if let Some(so) = &model.structured_output {
            a.str(attr::STRUCTURED_OUTPUT, so);
        }
    }

    pub(super) fn content_attrs(&self, a: &mut Attrs, run: &RunRecord) {
        let cap = |s: String| truncate(s, self.max_content_chars);
        match run.kind {
            RunKind::Model => {
                if let Some(system) = run.inputs.get("system").and_then(Value::as_str) {
                    let parts = json!([{"type": "text", "content": system}]);
                    a.str(attr::SYSTEM_INSTRUCTIONS, &cap(parts.to_string()));
                }
                match genai_input(&run.inputs) {
                    Some(messages) => a.str(attr::INPUT_MESSAGES, &cap(messages.to_string())),
                    None if !run.inputs.is_null() => {
                        a.str(attr::INPUT_MESSAGES, &cap(run.inputs.to_string()))
                    }
                    None => {}
                }
                let reason = run.model.as_ref().and_then(|m| m.finish_reason.as_deref());
                match genai_output(&run.outputs, reason) {
                    Some(messages) => a.str(attr::OUTPUT_MESSAGES, &cap(messages.to_string())),
                    None if !run.outputs.is_null() => {
                        a.str(attr::OUTPUT_MESSAGES, &cap(run.outputs.to_string()))
                    }
                    None => {}
                }
            }
            RunKind::Tool => {
                if !run.inputs.is_null() {
                    a.str(attr::TOOL_ARGUMENTS, &cap(run.inputs.to_string()));
                }
                let result = match &run.outputs {
                    Value::Object(m) if m.len() == 1 && m.contains_key("result") => &m["result"],
                    other => other,
                };
                if !result.is_null() {
                    a.str(attr::TOOL_RESULT, &cap(scalar_text(result)));
                }
            }
            _ => {
                if !run.inputs.is_null() {
                    a.str(attr::INPUT, &cap(run.inputs.to_string()));
                }
                if !run.outputs.is_null() {
                    a.str(attr::OUTPUT, &cap(run.outputs.to_string()));
                }
            }
        }
    }
}

impl BatchEncoder for OtlpEncoder {
    fn content_type(&self) -> &str {
        match self.protocol {
            Protocol::Protobuf => "application/x-protobuf",
            Protocol::Json => "application/json",
        }
    }

    fn encode(&self, runs: &[RunRecord]) -> Result<Vec<u8>, String> {
        match self.protocol {
            #[cfg(feature = "otlp")]
            Protocol::Protobuf => Ok(prost::Message::encode_to_vec(&self.request(runs))),
            _ => serde_json::to_vec(&self.json_request(runs)).map_err(|e| e.to_string()),
        }
    }

    fn rejected(&self, content_type: &str, body: &[u8]) -> Option<(u64, String)> {
        if body.is_empty() {
            return None;
        }
        let (rejected, message) = if content_type.contains("json") {
            super::json::partial_success(body)?
        } else if content_type.contains("protobuf") {
            super::proto::partial_success(body)?
        } else {
            return None;
        };
        (rejected > 0).then(|| (rejected, crate::trace::redact::redact_str(&message)))
    }
}

/// An attribute, before it is encoded.
pub(super) type Attr = (String, AttrValue);

/// An attribute's value, before it is encoded.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum AttrValue {
    Str(String),
    Int(i64),
    Double(f64),
    Strs(Vec<String>),
}

/// A span event, before it is encoded.
#[derive(Debug, Clone)]
pub(super) struct EventData {
    pub time_unix_nano: u64,
    pub name: String,
    pub attributes: Vec<(String, AttrValue)>,
}

/// A run as a span, before it is encoded as protobuf or JSON.
#[derive(Debug, Clone)]
pub(super) struct SpanData {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent_span_id: Option<[u8; 8]>,
    pub name: String,
    /// A `CLIENT` span (a model call); `INTERNAL` otherwise.
    pub client: bool,
    pub start_time_unix_nano: u64,
    pub end_time_unix_nano: u64,
    pub attributes: Vec<(String, AttrValue)>,
    pub events: Vec<EventData>,
    /// The status message of a failed run.
    pub error: Option<String>,
}

/// `error.type`: the error's leading identifier (`timeout: …` → `timeout`), else `_OTHER`.
pub(super) fn error_type(message: &str) -> String {
    let head = message.split(':').next().unwrap_or("").trim();
    let ident = !head.is_empty()
        && head.len() <= 48
        && head != message.trim()
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ident {
        head.to_string()
    } else {
        "_OTHER".to_string()
    }
}

/// Strings as they are, anything else as JSON.
pub(super) fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub(super) fn truncate(mut s: String, max: usize) -> String {
    crate::trace::trim::cut(&mut s, max);
    s
}

pub(super) fn clamp_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) struct Attrs(pub(super) Vec<(String, AttrValue)>);

impl Attrs {
    pub(super) fn str(&mut self, key: &str, value: &str) {
        self.0
            .push((key.to_string(), AttrValue::Str(value.to_string())));
    }
    pub(super) fn i64(&mut self, key: &str, value: i64) {
        self.0.push((key.to_string(), AttrValue::Int(value)));
    }
    pub(super) fn f64(&mut self, key: &str, value: f64) {
        self.0.push((key.to_string(), AttrValue::Double(value)));
    }
    pub(super) fn strs(&mut self, key: &str, values: &[String]) {
        self.0
            .push((key.to_string(), AttrValue::Strs(values.to_vec())));
    }
}
