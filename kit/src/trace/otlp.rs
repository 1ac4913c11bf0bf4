//! OTLP/HTTP export of run trees with the OpenTelemetry GenAI conventions (feature `otlp`), and
//! its Langfuse profile.
//!
//! Each [`RunRecord`] becomes one span: trace id = the root run's UUID (16 bytes), span id =
//! the last 8 bytes of the run's UUID, parent span id likewise. Span names follow the GenAI
//! conventions (`invoke_agent {name}`, `chat {model}`, `execute_tool {tool}`,
//! `invoke_workflow {name}`); model calls are `CLIENT` spans, everything else `INTERNAL`.
//! Failures get status `ERROR`, `error.type` and an `exception` event.
//!
//! | kit | attribute |
//! |---|---|
//! | kind | `kit.run_kind`, `gen_ai.operation.name` |
//! | agent / graph name | `gen_ai.agent.name` / `gen_ai.workflow.name` |
//! | model provider, model | `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.response.model` |
//! | params | `gen_ai.request.temperature`, `.max_tokens`, `.top_p` |
//! | usage | `gen_ai.usage.input_tokens`, `.output_tokens`, `.cache_read.input_tokens`, `.cache_creation.input_tokens` |
//! | cost (USD) | `gen_ai.usage.cost` (not in the conventions; Langfuse reads it) |
//! | finish reason | `gen_ai.response.finish_reasons` |
//! | tool | `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.description`, `gen_ai.tool.type` |
//! | inputs / outputs | model: `gen_ai.system_instructions`, `gen_ai.input.messages`, `gen_ai.output.messages`; tool: `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`; others: `kit.input`, `kit.output` (JSON strings) |
//! | thread, user, session | `gen_ai.conversation.id`, `user.id`, `session.id` |
//! | execution mode | `kit.execution_mode` |
//! | custom fields | `kit.custom.<key>` |
//! | metadata, tags | `kit.metadata.<key>`, `kit.tags` |
//! | run id | `kit.run_id` |
//! | environment (only when given) | resource `deployment.environment.name` |
//!
//! The [`Profile::Langfuse`] profile adds the `langfuse.*` attributes Langfuse reads
//! (`langfuse.observation.type`, `.input`, `.output`, `.model.name`, `.model.parameters`,
//! `.usage_details`, `.cost_details`, `.level`, `.status_message`, `.metadata.<key>`;
//! `langfuse.trace.name` on the root, `langfuse.trace.metadata.<key>` for custom fields and
//! `langfuse.trace.tags` on every span, `langfuse.environment` when given), sends to
//! `{host}/api/public/otel/v1/traces` with Basic auth and `x-langfuse-ingestion-version: 4`.
//!
//! ```
//! use kit::trace::otlp::{OtlpExporter, Protocol};
//! use kit::trace::Tracer;
//!
//! // A collector without auth, OTLP/HTTP JSON.
//! let exporter = OtlpExporter::builder("http://127.0.0.1:4318")
//!     .protocol(Protocol::Json)
//!     .service_name("billing-bot")
//!     .build()?;
//! assert_eq!(exporter.url(), "http://127.0.0.1:4318/v1/traces");
//!
//! // Langfuse: its OTLP endpoint, Basic auth from the key pair.
//! let langfuse = OtlpExporter::builder("https://cloud.langfuse.com")
//!     .langfuse("pk-lf-1", "sk-lf-1")
//!     .build()?;
//! assert_eq!(langfuse.url(), "https://cloud.langfuse.com/api/public/otel/v1/traces");
//! let tracer = Tracer::new().with_exporter(langfuse);
//! # drop(tracer);
//! # Ok::<(), kit::trace::ExportError>(())
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
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
use serde::Deserialize;
use serde_json::{Value, json};

pub use opentelemetry_proto;

use super::exporter::{Exporter, ExporterStats};
use super::queue::{BatchEncoder, ExportError, QueueConfig, QueueStats, QueuedExporter};
use super::record::{ModelInfo, RunKind, RunRecord, RunStatus};
use crate::message::{Content, ContentPart, ImageSource, Message, Role};

/// Attribute names, in one place so they can follow the (still moving) GenAI conventions.
pub mod attr {
    #![allow(missing_docs)]
    pub const OPERATION: &str = "gen_ai.operation.name";
    pub const PROVIDER: &str = "gen_ai.provider.name";
    pub const REQUEST_MODEL: &str = "gen_ai.request.model";
    pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
    pub const TEMPERATURE: &str = "gen_ai.request.temperature";
    pub const MAX_TOKENS: &str = "gen_ai.request.max_tokens";
    pub const TOP_P: &str = "gen_ai.request.top_p";
    pub const FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    pub const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    pub const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    pub const CACHE_READ_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
    pub const CACHE_CREATION_TOKENS: &str = "gen_ai.usage.cache_creation.input_tokens";
    pub const COST: &str = "gen_ai.usage.cost";
    pub const AGENT_NAME: &str = "gen_ai.agent.name";
    pub const WORKFLOW_NAME: &str = "gen_ai.workflow.name";
    pub const TOOL_NAME: &str = "gen_ai.tool.name";
    pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    pub const TOOL_DESCRIPTION: &str = "gen_ai.tool.description";
    pub const TOOL_TYPE: &str = "gen_ai.tool.type";
    pub const TOOL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
    pub const TOOL_RESULT: &str = "gen_ai.tool.call.result";
    pub const SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
    pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
    pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
    pub const CONVERSATION_ID: &str = "gen_ai.conversation.id";
    pub const USER_ID: &str = "user.id";
    pub const SESSION_ID: &str = "session.id";
    pub const ERROR_TYPE: &str = "error.type";
    pub const ENVIRONMENT: &str = "deployment.environment.name";
    pub const SERVICE_NAME: &str = "service.name";
    pub const RUN_KIND: &str = "kit.run_kind";
    pub const RUN_ID: &str = "kit.run_id";
    pub const EXECUTION_MODE: &str = "kit.execution_mode";
    pub const INPUT: &str = "kit.input";
    pub const OUTPUT: &str = "kit.output";
    pub const TAGS: &str = "kit.tags";
    pub const STRUCTURED_OUTPUT: &str = "kit.structured_output";
    pub const CUSTOM_PREFIX: &str = "kit.custom.";
    pub const METADATA_PREFIX: &str = "kit.metadata.";
    pub const LF_TYPE: &str = "langfuse.observation.type";
    pub const LF_INPUT: &str = "langfuse.observation.input";
    pub const LF_OUTPUT: &str = "langfuse.observation.output";
    pub const LF_MODEL: &str = "langfuse.observation.model.name";
    pub const LF_MODEL_PARAMS: &str = "langfuse.observation.model.parameters";
    pub const LF_USAGE: &str = "langfuse.observation.usage_details";
    pub const LF_COST: &str = "langfuse.observation.cost_details";
    pub const LF_LEVEL: &str = "langfuse.observation.level";
    pub const LF_STATUS_MESSAGE: &str = "langfuse.observation.status_message";
    pub const LF_METADATA_PREFIX: &str = "langfuse.observation.metadata.";
    pub const LF_TRACE_NAME: &str = "langfuse.trace.name";
    pub const LF_TRACE_METADATA_PREFIX: &str = "langfuse.trace.metadata.";
    pub const LF_TRACE_TAGS: &str = "langfuse.trace.tags";
    pub const LF_ENVIRONMENT: &str = "langfuse.environment";
}

/// The OTLP/HTTP body encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// `application/x-protobuf` (OTLP's default; every backend takes it).
    #[default]
    Protobuf,
    /// `application/json` (OTLP JSON: hex ids, integer enums, lowerCamelCase keys).
    Json,
}

/// Which attributes to add on top of the GenAI ones, and where to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Profile {
    /// Plain OTLP with the GenAI conventions.
    #[default]
    Otlp,
    /// Langfuse's OTLP endpoint: adds the `langfuse.*` attributes.
    Langfuse,
}

/// The OTLP trace id of a kit trace id (the root run's UUID): its 16 bytes. Ids that are not
/// UUIDs are hashed; the result is never all zero.
///
/// ```
/// let id = kit::trace::otlp::trace_id("0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071");
/// assert_eq!(id[0], 0x01);
/// assert_eq!(id[15], 0x71);
/// ```
pub fn trace_id(id: &str) -> [u8; 16] {
    let mut bytes = uuid_bytes(id);
    if bytes == [0; 16] {
        bytes[15] = 1;
    }
    bytes
}

/// The OTLP span id of a kit run id: the last 8 bytes of its UUID (for kit's UUIDv7 ids: the
/// per-millisecond counter and random bits). Never all zero.
///
/// ```
/// let id = kit::trace::otlp::span_id("0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071");
/// assert_eq!(id, [0x9a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x60, 0x71]);
/// ```
pub fn span_id(id: &str) -> [u8; 8] {
    let bytes = uuid_bytes(id);
    let mut out = [0u8; 8];
    out.copy_from_slice(&bytes[8..]);
    if out == [0; 8] {
        out.copy_from_slice(&bytes[..8]);
    }
    if out == [0; 8] {
        out[7] = 1;
    }
    out
}

fn uuid_bytes(id: &str) -> [u8; 16] {
    match uuid::Uuid::parse_str(id.trim()) {
        Ok(u) => *u.as_bytes(),
        Err(_) => {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(id.as_bytes());
            let mut out = [0u8; 16];
            out.copy_from_slice(&digest[..16]);
            out
        }
    }
}

/// Maps runs to OTLP requests and encodes them. [`OtlpExporter`] uses it; it is public so the
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
    protocol: Protocol,
    profile: Profile,
    service_name: String,
    resource: Vec<(String, String)>,
    max_content_chars: usize,
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
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = name.into();
        self
    }

    /// Adds a resource attribute (e.g. `service.version`).
    pub fn resource_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.resource.push((key.into(), value.into()));
        self
    }

    /// Caps every content attribute (inputs, outputs, messages) at this many characters
    /// (default 65,536); longer ones are cut and marked `…[truncated]`.
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

    fn model_attrs(&self, a: &mut Attrs, model: &ModelInfo) {
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

    fn content_attrs(&self, a: &mut Attrs, run: &RunRecord) {
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

    fn langfuse_attrs(&self, a: &mut Attrs, run: &RunRecord) {
        let cap = |s: String| truncate(s, self.max_content_chars);
        let kind = match run.kind {
            RunKind::Agent => "agent",
            RunKind::Graph => "chain",
            RunKind::Model => "generation",
            RunKind::Tool => "tool",
            RunKind::Node | RunKind::Middleware | RunKind::Task | RunKind::Custom => "span",
        };
        a.str(attr::LF_TYPE, kind);
        let (input, output) = if run.kind == RunKind::Model {
            let mut messages = Vec::new();
            if let Some(system) = run.inputs.get("system").and_then(Value::as_str) {
                messages.push(json!({"role": "system", "content": system}));
            }
            match run.inputs.get("messages").and_then(Value::as_array) {
                Some(list) => messages.extend(list.iter().cloned()),
                None if !run.inputs.is_null() => messages.push(run.inputs.clone()),
                None => {}
            }
            let output = run
                .outputs
                .get("message")
                .cloned()
                .unwrap_or_else(|| run.outputs.clone());
            (Value::Array(messages), output)
        } else {
            (run.inputs.clone(), run.outputs.clone())
        };
        if !input.is_null() && input != json!([]) {
            a.str(attr::LF_INPUT, &cap(input.to_string()));
        }
        if !output.is_null() {
            a.str(attr::LF_OUTPUT, &cap(output.to_string()));
        }
        if let Some(model) = &run.model {
            if !model.model.is_empty() {
                a.str(attr::LF_MODEL, &model.model);
            }
            if !model.params.is_empty() {
                a.str(
                    attr::LF_MODEL_PARAMS,
                    &Value::Object(model.params.clone()).to_string(),
                );
            }
            if let Some(u) = &model.usage {
                let cached = u.cache_read_tokens + u.cache_creation_tokens;
                let mut usage = serde_json::Map::new();
                usage.insert("input".into(), json!(u.input_tokens.saturating_sub(cached)));
                usage.insert("output".into(), json!(u.output_tokens));
                if u.cache_read_tokens > 0 {
                    usage.insert("input_cache_read".into(), json!(u.cache_read_tokens));
                }
                if u.cache_creation_tokens > 0 {
                    usage.insert(
                        "input_cache_creation".into(),
                        json!(u.cache_creation_tokens),
                    );
                }
                usage.insert("total".into(), json!(u.total_tokens()));
                a.str(attr::LF_USAGE, &Value::Object(usage).to_string());
            }
            if let Some(cost) = model.cost.filter(|c| c.is_finite()) {
                a.str(attr::LF_COST, &json!({ "total": cost }).to_string());
            }
        }
        if run.status == RunStatus::Error {
            a.str(attr::LF_LEVEL, "ERROR");
            a.str(
                attr::LF_STATUS_MESSAGE,
                run.error.as_deref().unwrap_or("error"),
            );
        }
        for (k, v) in &run.metadata {
            a.str(&format!("{}{k}", attr::LF_METADATA_PREFIX), &scalar_text(v));
        }
        if let Some(mode) = &run.execution_mode {
            a.str(&format!("{}execution_mode", attr::LF_METADATA_PREFIX), mode);
        }
        for (k, v) in &run.custom_fields {
            a.str(&format!("{}{k}", attr::LF_TRACE_METADATA_PREFIX), v);
        }
        if run.parent_id.is_none() {
            a.str(attr::LF_TRACE_NAME, &run.name);
        }
        if !run.tags.is_empty() {
            a.strs(attr::LF_TRACE_TAGS, &run.tags);
        }
        if let Some(env) = &run.environment {
            a.str(attr::LF_ENVIRONMENT, env);
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
                super::redact::redact_str(&partial.error_message),
            )
        })
    }
}

/// The GenAI `gen_ai.input.messages` of a model run's inputs (`{"messages": [...]}`).
fn genai_input(inputs: &Value) -> Option<Value> {
    let messages = Vec::<Message>::deserialize(inputs.get("messages")?).ok()?;
    Some(Value::Array(
        messages
            .iter()
            .filter(|m| m.role != Role::Remove)
            .map(|m| json!({"role": m.role.as_str(), "parts": genai_parts(m)}))
            .collect(),
    ))
}

/// The GenAI `gen_ai.output.messages` of a model run's outputs (`{"message": {...}}`).
fn genai_output(outputs: &Value, finish_reason: Option<&str>) -> Option<Value> {
    let message = Message::deserialize(outputs.get("message")?).ok()?;
    let reason = finish_reason.unwrap_or(if message.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_call"
    });
    Some(json!([{
        "role": message.role.as_str(),
        "parts": genai_parts(&message),
        "finish_reason": reason,
    }]))
}

fn genai_parts(m: &Message) -> Vec<Value> {
    let mut parts = Vec::new();
    if m.role == Role::Tool {
        parts.push(json!({
            "type": "tool_call_response",
            "id": m.tool_call_id,
            "response": m.content.text(),
        }));
        return parts;
    }
    match &m.content {
        Content::Text(t) if !t.is_empty() => parts.push(json!({"type": "text", "content": t})),
        Content::Text(_) => {}
        Content::Parts(list) => {
            for p in list {
                parts.push(match p {
                    ContentPart::Text { text } => json!({"type": "text", "content": text}),
                    ContentPart::Image {
                        source: ImageSource::Url { url },
                    } => json!({"type": "uri", "modality": "image", "uri": url}),
                    ContentPart::Image {
                        source: ImageSource::Base64 { media_type, data },
                    } => json!({"type": "blob", "modality": "image",
                                "mime_type": media_type, "content": data}),
                });
            }
        }
    }
    for call in &m.tool_calls {
        parts.push(json!({
            "type": "tool_call", "id": call.id, "name": call.name, "arguments": call.args,
        }));
    }
    parts
}

/// `error.type`: the error's leading identifier (`timeout: …` → `timeout`), else `_OTHER`.
fn error_type(message: &str) -> String {
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
fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn truncate(mut s: String, max: usize) -> String {
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

fn clamp_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn kv_str(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.to_string()))
}

struct Attrs(Vec<KeyValue>);

impl Attrs {
    fn str(&mut self, key: &str, value: &str) {
        self.0.push(kv_str(key, value));
    }
    fn i64(&mut self, key: &str, value: i64) {
        self.0.push(kv(key, any_value::Value::IntValue(value)));
    }
    fn f64(&mut self, key: &str, value: f64) {
        self.0.push(kv(key, any_value::Value::DoubleValue(value)));
    }
    fn strs(&mut self, key: &str, values: &[String]) {
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

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn default_service_name() -> String {
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
/// Used automatically by [`Tracer::from_env`](super::Tracer::from_env) when
/// `KIT_TRACE_ENDPOINT` and `KIT_TRACE_API_KEY` are set (see [`OtlpExporter::from_env`]).
pub struct OtlpExporter {
    queue: QueuedExporter,
    profile: Profile,
    protocol: Protocol,
}

impl std::fmt::Debug for OtlpExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpExporter")
            .field("url", &self.queue.url())
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
fn builder_from_vars(
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
    endpoint: String,
    headers: Vec<(String, String)>,
    protocol: Protocol,
    profile: Profile,
    service_name: Option<String>,
    resource: Vec<(String, String)>,
    queue: QueueConfig,
    max_content_chars: Option<usize>,
}

impl std::fmt::Debug for OtlpExporterBuilder {
    /// Header values are never shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpExporterBuilder")
            .field("endpoint", &self.endpoint)
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
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sends `Authorization: Bearer <key>`.
    pub fn bearer(self, key: impl AsRef<str>) -> Self {
        let value = format!("Bearer {}", key.as_ref().trim());
        self.header("authorization", value)
    }

    /// The Langfuse profile: `{host}/api/public/otel/v1/traces`, `Authorization: Basic
    /// base64(public_key:secret_key)`, `x-langfuse-ingestion-version: 4`, and the `langfuse.*`
    /// attributes.
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
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = Some(name.into());
        self
    }

    /// Adds a resource attribute (e.g. `service.version`).
    pub fn resource_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.resource.push((key.into(), value.into()));
        self
    }

    /// Caps each content attribute (inputs, outputs, messages) at this many characters
    /// (default 65,536); see [`OtlpEncoder::max_content_chars`].
    pub fn max_content_chars(mut self, n: usize) -> Self {
        self.max_content_chars = Some(n);
        self
    }

    /// Sets the queue, batching and retry settings.
    pub fn queue(mut self, config: QueueConfig) -> Self {
        self.queue = config;
        self
    }

    /// The full traces URL for the endpoint and profile.
    fn url(&self) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Usage;
    use crate::trace::record::ToolInfo;

    fn record(kind: RunKind, name: &str) -> RunRecord {
        RunRecord {
            id: "0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071".into(),
            trace_id: "0190f3c2-a7b8-7c3e-8000-000000000001".into(),
            parent_id: Some("0190f3c2-a7b8-7c3e-8000-000000000001".into()),
            name: name.into(),
            kind,
            start_ns: 10,
            end_ns: 20,
            status: RunStatus::Ok,
            error: None,
            inputs: Value::Null,
            outputs: Value::Null,
            metadata: Default::default(),
            tags: Vec::new(),
            thread_id: None,
            user_id: None,
            session_id: None,
            execution_mode: None,
            environment: None,
            custom_fields: Default::default(),
            model: None,
            tool: None,
        }
    }

    fn attrs(span: &Span) -> BTreeMap<String, any_value::Value> {
        span.attributes
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone().unwrap().value.unwrap()))
            .collect()
    }

    fn s(v: &any_value::Value) -> &str {
        match v {
            any_value::Value::StringValue(s) => s,
            other => panic!("not a string: {other:?}"),
        }
    }

    #[test]
    fn ids_are_uuid_bytes_and_never_zero() {
        assert_eq!(
            span_id("00000000-0000-0000-0000-000000000000"),
            [0, 0, 0, 0, 0, 0, 0, 1]
        );
        assert_eq!(trace_id("00000000-0000-0000-0000-000000000000")[15], 1);
        let hashed = span_id("not-a-uuid");
        assert_ne!(hashed, [0; 8]);
        assert_eq!(hashed, span_id("not-a-uuid"));
    }

    #[test]
    fn model_run_maps_to_a_client_chat_span() {
        let mut run = record(RunKind::Model, "gpt-4o");
        run.model = Some(ModelInfo {
            provider: "openai".into(),
            model: "gpt-4o".into(),
            params: serde_json::from_value(json!({"temperature": 0.2, "max_tokens": 100})).unwrap(),
            usage: Some(Usage {
                input_tokens: 120,
                output_tokens: 48,
                cache_read_tokens: 20,
                cache_creation_tokens: 0,
            }),
            cost: Some(0.0125),
            structured_output: None,
            finish_reason: Some("stop".into()),
        });
        run.inputs = json!({"system": "Be brief.", "messages": [
            {"id": "m1", "role": "user", "content": "hi"},
            {"id": "m2", "role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "add", "args": {"a": 1}}]},
            {"id": "m3", "role": "tool", "content": "2", "tool_call_id": "c1", "name": "add"}
        ]});
        run.outputs = json!({"message": {"id": "m4", "role": "assistant", "content": "two"}});
        run.thread_id = Some("t-1".into());
        let enc = OtlpEncoder::new(Protocol::Protobuf, Profile::Langfuse);
        let span = enc.span(&run);
        assert_eq!(span.name, "chat gpt-4o");
        assert_eq!(span.kind, span::SpanKind::Client as i32);
        let a = attrs(&span);
        assert_eq!(s(&a[attr::OPERATION]), "chat");
        assert_eq!(s(&a[attr::PROVIDER]), "openai");
        assert_eq!(a[attr::INPUT_TOKENS], any_value::Value::IntValue(120));
        assert_eq!(a[attr::CACHE_READ_TOKENS], any_value::Value::IntValue(20));
        assert_eq!(a[attr::TEMPERATURE], any_value::Value::DoubleValue(0.2));
        assert_eq!(a[attr::MAX_TOKENS], any_value::Value::IntValue(100));
        assert_eq!(a[attr::COST], any_value::Value::DoubleValue(0.0125));
        let input: Value = serde_json::from_str(s(&a[attr::INPUT_MESSAGES])).unwrap();
        assert_eq!(
            input[0],
            json!({"role": "user", "parts": [{"type": "text", "content": "hi"}]})
        );
        assert_eq!(input[1]["parts"][0]["type"], "tool_call");
        assert_eq!(
            input[2]["parts"][0],
            json!({"type": "tool_call_response", "id": "c1", "response": "2"})
        );
        let output: Value = serde_json::from_str(s(&a[attr::OUTPUT_MESSAGES])).unwrap();
        assert_eq!(output[0]["finish_reason"], "stop");
        let system: Value = serde_json::from_str(s(&a[attr::SYSTEM_INSTRUCTIONS])).unwrap();
        assert_eq!(system[0]["content"], "Be brief.");
        assert_eq!(s(&a[attr::LF_TYPE]), "generation");
        let usage: Value = serde_json::from_str(s(&a[attr::LF_USAGE])).unwrap();
        assert_eq!(
            usage,
            json!({"input": 100, "output": 48, "input_cache_read": 20, "total": 168})
        );
        let cost: Value = serde_json::from_str(s(&a[attr::LF_COST])).unwrap();
        assert_eq!(cost, json!({"total": 0.0125}));
        let lf_input: Value = serde_json::from_str(s(&a[attr::LF_INPUT])).unwrap();
        assert_eq!(
            lf_input[0],
            json!({"role": "system", "content": "Be brief."})
        );
        assert_eq!(s(&a[attr::CONVERSATION_ID]), "t-1");
        assert!(
            !a.contains_key(attr::LF_TRACE_NAME),
            "only the root names the trace"
        );
    }

    #[test]
    fn tool_and_error_mapping() {
        let mut run = record(RunKind::Tool, "lookup");
        run.tool = Some(ToolInfo {
            name: "lookup".into(),
            call_id: "c9".into(),
            description: "Looks things up.".into(),
        });
        run.inputs = json!({"q": "x"});
        run.status = RunStatus::Error;
        run.error = Some("timeout: no answer in 5s".into());
        let span = OtlpEncoder::new(Protocol::Json, Profile::Otlp).span(&run);
        assert_eq!(span.name, "execute_tool lookup");
        assert_eq!(span.kind, span::SpanKind::Internal as i32);
        let status = span.status.clone().unwrap();
        assert_eq!(status.code, status::StatusCode::Error as i32);
        assert_eq!(status.message, "timeout: no answer in 5s");
        assert_eq!(span.events[0].name, "exception");
        let a = attrs(&span);
        assert_eq!(s(&a[attr::ERROR_TYPE]), "timeout");
        assert_eq!(s(&a[attr::TOOL_CALL_ID]), "c9");
        assert_eq!(s(&a[attr::TOOL_ARGUMENTS]), r#"{"q":"x"}"#);
        assert!(!a.keys().any(|k| k.starts_with("langfuse.")));
        assert_eq!(error_type("the model failed: boom"), "_OTHER");
        assert_eq!(error_type("plain"), "_OTHER");
    }

    #[test]
    fn environment_groups_resources_and_is_absent_unless_given() {
        let a = record(RunKind::Custom, "a");
        let mut b = record(RunKind::Custom, "b");
        b.environment = Some("staging".into());
        let req = OtlpEncoder::new(Protocol::Json, Profile::Otlp)
            .service_name("svc")
            .request(&[a, b]);
        assert_eq!(req.resource_spans.len(), 2);
        let envs: Vec<bool> = req
            .resource_spans
            .iter()
            .map(|rs| {
                rs.resource
                    .as_ref()
                    .unwrap()
                    .attributes
                    .iter()
                    .any(|kv| kv.key == attr::ENVIRONMENT)
            })
            .collect();
        assert_eq!(envs, vec![false, true]);
    }

    #[test]
    fn truncation_marks_the_cut() {
        let t = truncate("héllo wörld".into(), 3);
        assert_eq!(t, "hé…[truncated]");
    }

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn header<'a>(b: &'a OtlpExporterBuilder, name: &str) -> Option<&'a str> {
        b.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn settings_from_the_environment() {
        // Nothing, or only half of it: no exporter.
        assert!(builder_from_vars(vars(&[])).unwrap().is_none());
        assert!(
            builder_from_vars(vars(&[("KIT_TRACE_ENDPOINT", "http://h:4318")]))
                .unwrap()
                .is_none()
        );
        assert!(
            builder_from_vars(vars(&[("KIT_TRACE_API_KEY", "k")]))
                .unwrap()
                .is_none()
        );
        // Endpoint + key: OTLP protobuf with a bearer key.
        let b = builder_from_vars(vars(&[
            ("KIT_TRACE_ENDPOINT", "http://h:4318"),
            ("KIT_TRACE_API_KEY", "k1"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(b.url(), "http://h:4318/v1/traces");
        assert_eq!(b.protocol, Protocol::Protobuf);
        assert_eq!(b.profile, Profile::Otlp);
        assert_eq!(header(&b, "authorization"), Some("Bearer k1"));
        // JSON on request.
        let b = builder_from_vars(vars(&[
            ("KIT_TRACE_ENDPOINT", "http://h:4318"),
            ("KIT_TRACE_API_KEY", "k1"),
            ("KIT_TRACE_PROTOCOL", "http/json"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(b.protocol, Protocol::Json);
        // Langfuse by format, key pair in the API key.
        let b = builder_from_vars(vars(&[
            ("KIT_TRACE_ENDPOINT", "https://cloud.langfuse.com"),
            ("KIT_TRACE_API_KEY", "pk-lf-1:sk-lf-2"),
            ("KIT_TRACE_FORMAT", "langfuse"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(b.profile, Profile::Langfuse);
        assert_eq!(
            b.url(),
            "https://cloud.langfuse.com/api/public/otel/v1/traces"
        );
        assert_eq!(
            header(&b, "authorization"),
            Some("Basic cGstbGYtMTpzay1sZi0y")
        );
        assert_eq!(header(&b, "x-langfuse-ingestion-version"), Some("4"));
        // Langfuse by URL, key pair in their own variables.
        let b = builder_from_vars(vars(&[
            (
                "KIT_TRACE_ENDPOINT",
                "https://lf.example.com/api/public/otel",
            ),
            ("KIT_LANGFUSE_PUBLIC_KEY", "pk"),
            ("KIT_LANGFUSE_SECRET_KEY", "sk"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(b.profile, Profile::Langfuse);
        assert_eq!(b.url(), "https://lf.example.com/api/public/otel/v1/traces");
        // Wrong settings say what to do.
        let e = builder_from_vars(vars(&[
            ("KIT_TRACE_ENDPOINT", "https://cloud.langfuse.com"),
            ("KIT_TRACE_API_KEY", "just-one-key"),
            ("KIT_TRACE_FORMAT", "langfuse"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("public_key:secret_key"), "{e}");
        let e = builder_from_vars(vars(&[
            ("KIT_TRACE_ENDPOINT", "http://h"),
            ("KIT_TRACE_API_KEY", "k"),
            ("KIT_TRACE_FORMAT", "zipkin"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("otlp"), "{e}");
    }

    #[test]
    fn urls_per_profile() {
        let b = OtlpExporter::builder("http://h:4318/");
        assert_eq!(b.url(), "http://h:4318/v1/traces");
        let b = OtlpExporter::builder("http://h/custom/v1/traces");
        assert_eq!(b.url(), "http://h/custom/v1/traces");
        let b = OtlpExporter::builder("https://lf.example.com").langfuse("pk", "sk");
        assert_eq!(b.url(), "https://lf.example.com/api/public/otel/v1/traces");
        let b =
            OtlpExporter::builder("https://lf.example.com/api/public/otel").langfuse("pk", "sk");
        assert_eq!(b.url(), "https://lf.example.com/api/public/otel/v1/traces");
        assert!(!format!("{b:?}").contains("Basic"));
    }
}
