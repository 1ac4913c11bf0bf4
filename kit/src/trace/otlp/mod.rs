//! OTLP/HTTP export of run trees with the OpenTelemetry GenAI conventions, and its Langfuse
//! profile. OTLP/JSON is always there; the `otlp` feature adds the protobuf encoding (OTLP's
//! default). A build without it that is asked for protobuf says so once, with the fix, and
//! sends OTLP/JSON instead.
//!
//! Each [`RunRecord`](crate::trace::RunRecord) becomes one span: trace id = the root run's UUID (16 bytes), span id =
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
//! | usage | `gen_ai.usage.input_tokens`, `.output_tokens`, `.cache_read.input_tokens`, `.cache_creation.input_tokens`, `.reasoning.output_tokens` |
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
/// Attribute names, in one place so they can follow the (still moving) GenAI conventions.
pub mod attr;
mod encode;
mod exporter;
mod genai;
mod ids;
mod json;
mod langfuse;
mod proto;

pub use encode::OtlpEncoder;
pub use exporter::{OtlpExporter, OtlpExporterBuilder};
pub use ids::{span_id, trace_id};
#[cfg(feature = "otlp")]
pub use opentelemetry_proto;

use encode::{Attrs, scalar_text, truncate};
pub(crate) use exporter::builder_from_vars;
use exporter::default_service_name;
use genai::{genai_input, genai_output};

/// The OTLP/HTTP body encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// `application/x-protobuf` (OTLP's default; every backend takes it). Needs the `otlp`
    /// feature; without it kit sends [`Json`](Protocol::Json) and says so once.
    #[default]
    Protobuf,
    /// `application/json` (OTLP JSON: hex ids, integer enums, lowerCamelCase keys).
    Json,
}

/// The protocol this build can send: protobuf needs the `otlp` feature; without it, JSON,
/// said once (with the fix) through `tracing`.
pub(crate) fn available(protocol: Protocol) -> Protocol {
    if protocol == Protocol::Protobuf && !cfg!(feature = "otlp") {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!(
                target: "kit",
                "kit was built without the `otlp` feature, so traces go as OTLP/JSON over HTTP \
                 instead of protobuf; to send protobuf, enable it: kit = {{ features = [\"otlp\"] }}"
            );
        });
        return Protocol::Json;
    }
    protocol
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

#[cfg(all(test, feature = "otlp"))]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
