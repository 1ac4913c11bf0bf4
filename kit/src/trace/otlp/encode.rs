//! Runs to OTLP spans: names, kinds, timing, status, and the GenAI attributes.

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue, any_value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span, status,
};
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
/// let request = OtlpEncoder::new(Protocol::Json, Profile::Otlp).request(&[run]);
/// let span = &request.resource_spans[0].scope_spans[0].spans[0];
/// assert_eq!(span.name, "invoke_agent support");
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
            protocol,
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

    /// The request for a batch of runs: one `ResourceSpans` per environment, scope `kit`.
    pub fn request(&self, runs: &[RunRecord]) -> ExportTraceServiceRequest {
        let mut groups: BTreeMap<Option<&str>, Vec<Span>> = BTreeMap::new();
        for run in runs {
            groups
                .entry(run.environment.as_deref())
                .or_default()
                .push(self.span(run));
        }
        let resource_spans = groups
            .into_iter()
            .map(|(env, spans)| {
                let mut attributes = vec![
                    kv_str(attr::SERVICE_NAME, &self.service_name),
                    kv_str("telemetry.sdk.name", "kit"),
                    kv_str("telemetry.sdk.language", "rust"),
                    kv_str("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
                ];
                for (k, v) in &self.resource {
                    attributes.push(kv_str(k, v));
                }
                if let Some(env) = env {
                    attributes.push(kv_str(attr::ENVIRONMENT, env));
                }
                ResourceSpans {
                    resource: Some(Resource {
                        attributes,
                        ..Default::default()
                    }),
                    scope_spans: vec![ScopeSpans {
                        scope: Some(InstrumentationScope {
                            name: "kit".into(),
                            version: env!("CARGO_PKG_VERSION").into(),
                            ..Default::default()
                        }),
                        spans,
                        schema_url: String::new(),
                    }],
                    schema_url: String::new(),
                }
            })
            .collect();
        ExportTraceServiceRequest { resource_spans }
    }

    /// The span of one run.
    pub fn span(&self, run: &RunRecord) -> Span {
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
            a.str(&format!("{}{k}", attr::METADATA_PREFIX), &scalar_text(v));
        }
        if !run.tags.is_empty() {
            a.strs(attr::TAGS, &run.tags);
        }
        let mut events = Vec::new();
        let mut status = Status::default();
        if run.status == RunStatus::Error {
            let message = run.error.clone().unwrap_or_default();
            let kind = error_type(&message);
            a.str(attr::ERROR_TYPE, &kind);
            events.push(span::Event {
                time_unix_nano: run.end_ns,
                name: "exception".into(),
                attributes: vec![
                    kv_str("exception.type", &kind),
                    kv_str("exception.message", &message),
                ],
                dropped_attributes_count: 0,
            });
            status = Status {
                message,
                code: status::StatusCode::Error as i32,
            };
        }
        if self.profile == Profile::Langfuse {
            self.langfuse_attrs(&mut a, run);
        }
        Span {
            trace_id: trace_id(&run.trace_id).to_vec(),
            span_id: span_id(&run.id).to_vec(),
            parent_span_id: run
                .parent_id
                .as_deref()
                .map(|p| span_id(p).to_vec())
                .unwrap_or_default(),
            name: run.span_name(),
            kind: if run.kind == RunKind::Model {
                span::SpanKind::Client as i32
            } else {
                span::SpanKind::Internal as i32
            },
            start_time_unix_nano: run.start_ns,
            end_time_unix_nano: run.end_ns.max(run.start_ns),
            attributes: a.0,
            events,
            status: Some(status),
            ..Default::default()
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
        let request = self.request(runs);
        match self.protocol {
            Protocol::Protobuf => Ok(prost::Message::encode_to_vec(&request)),
            Protocol::Json => serde_json::to_vec(&request).map_err(|e| e.to_string()),
        }
    }

    fn rejected(&self, content_type: &str, body: &[u8]) -> Option<(u64, String)> {
        if body.is_empty() {
            return None;
        }
        let response: ExportTraceServiceResponse = if content_type.contains("json") {
            serde_json::from_slice(body).ok()?
        } else if content_type.contains("protobuf") {
            prost::Message::decode(body).ok()?
        } else {
            return None;
        };
        let partial = response.partial_success?;
        (partial.rejected_spans > 0).then(|| {
            (
                partial.rejected_spans as u64,
                crate::trace::redact::redact_str(&partial.error_message),
            )
        })
    }
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
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push_str("…[truncated]");
    s
}

pub(super) fn clamp_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

pub(super) fn kv_str(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.to_string()))
}

pub(super) struct Attrs(pub(super) Vec<KeyValue>);

impl Attrs {
    pub(super) fn str(&mut self, key: &str, value: &str) {
        self.0.push(kv_str(key, value));
    }
    pub(super) fn i64(&mut self, key: &str, value: i64) {
        self.0.push(kv(key, any_value::Value::IntValue(value)));
    }
    pub(super) fn f64(&mut self, key: &str, value: f64) {
        self.0.push(kv(key, any_value::Value::DoubleValue(value)));
    }
    pub(super) fn strs(&mut self, key: &str, values: &[String]) {
        let values = values
            .iter()
            .map(|v| AnyValue {
                value: Some(any_value::Value::StringValue(v.clone())),
            })
            .collect();
        self.0
            .push(kv(key, any_value::Value::ArrayValue(ArrayValue { values })));
    }
}
