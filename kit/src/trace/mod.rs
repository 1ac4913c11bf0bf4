//! Tracing: run trees of graphs, agents, model calls, tool calls and middleware.
//!
//! Every graph or agent invocation is a root *run*; its nodes, model calls, tool calls,
//! middleware hooks and spawned tasks are child runs. Children inherit `thread_id`, `user_id`,
//! `session_id`, `execution_mode`, `environment` and the custom fields. Everything is redacted
//! (authorization headers, API keys, bearer tokens, secret-looking fields at any depth) before
//! it is stored or exported.
//!
//! Finished runs go to the [`Tracer`]'s exporters, which never block the caller and swallow
//! (and count) their own failures: tracing never breaks the user's flow. With no exporter
//! configured nothing is recorded — but every run is still a `tracing` span (target `kit`,
//! with `otel.name` and `gen_ai.*` fields), so applications already using `tracing` see kit's
//! work. kit never installs a global subscriber.
//!
//! The current run travels in a tokio task-local: user code and kit code nest without passing
//! anything around.
//!
//! Where runs go, configured from the environment for the global tracer:
//!
//! * `KIT_TRACE_FILE=runs.jsonl`: one JSON line per run ([`JsonLinesExporter`]), no backend
//!   needed; look at it with the [`viewer`] (`cargo run --example trace_viewer -- --file
//!   runs.jsonl`).
//! * `KIT_TRACE_ENDPOINT` + `KIT_TRACE_API_KEY`: OTLP/HTTP with the GenAI conventions to any
//!   collector or hosted backend, or Langfuse (`KIT_TRACE_FORMAT=langfuse`, key
//!   `public:secret`), through a bounded background queue ([`QueuedExporter`]); protobuf with
//!   the `otlp` feature, OTLP/JSON without; see [`otlp`]. The same fields of a
//!   [`Config`](crate::Config) set in code do the same ([`Tracer::from_config`]; agents built
//!   with that config use it).
//!
//! Trace options ([`TraceOptions`]) apply per call: to a graph or agent invocation, and to a
//! direct model or tool call ([`generate_traced`](crate::model::generate_traced),
//! [`Tool::execute_traced`](crate::tool::Tool::execute_traced)); `trace: false` suppresses a
//! run and everything under it, nested graphs included. Tool runs carry the tool's tags and
//! metadata ([`Tool::tags`](crate::tool::Tool::tags)) besides `tool_name` and `tool_call_id`.
//!
//! Exporters deliver in the background: call [`flush`] before the program exits.
//!
//! ```
//! use kit::trace::{self, Collector, RunKind, Tracer};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let collector = Collector::new();
//! trace::set_global(Tracer::new().with_exporter(collector.clone()));
//!
//! let total = trace::with_run("checkout", async {
//!     let run = trace::start_run("price lookup", RunKind::Custom, json!({"sku": "A1"}), None);
//!     trace::finish_run(&run, json!({"price": 42}));
//!     42
//! })
//! .await;
//! assert_eq!(total, 42);
//! let runs = collector.runs();
//! assert_eq!(runs.len(), 2);
//! assert_eq!(runs[0].parent_id.as_deref(), Some(runs[1].id.as_str()));
//! # }
//! ```

mod exporter;
mod fields;
mod options;
pub mod otlp;
mod queue;
mod record;
pub mod redact;
mod run;
mod setup;
mod trim;
pub mod viewer;

pub use exporter::{
    Collector, Exporter, ExporterStats, IntoExporter, JsonLinesExporter, read_json_lines,
};
pub use fields::custom_fields;
pub use options::TraceOptions;
pub use queue::{BatchEncoder, ExportError, QueueConfig, QueueStats, QueuedExporter};
pub use record::{ModelInfo, RunKind, RunRecord, RunStatus, ToolInfo};
pub use run::{Run, Tracer, current, global, set_global};

use std::future::Future;
use std::time::Duration;

use serde_json::{Map, Value};

/// Starts a run: a child of the current run, or a root run of the global tracer.
pub fn start_run(
    name: &str,
    kind: RunKind,
    inputs: Value,
    metadata: Option<Map<String, Value>>,
) -> Run {
    let run = match current() {
        Some(parent) => parent.child(name, kind, || inputs),
        None => global().start(name, kind, || inputs, None),
    };
    if let Some(metadata) = metadata {
        for (k, v) in metadata {
            run.add_metadata(&k, v);
        }
    }
    run
}

/// Ends a run successfully.
pub fn finish_run(run: &Run, outputs: Value) {
    run.finish(outputs);
}

/// Ends a run as failed.
pub fn fail_run(run: &Run, error: impl std::fmt::Display) {
    run.fail(&error.to_string());
}

/// Runs `fut` inside a new run named `name` (a child of the current run, or a root).
pub async fn with_run<F: Future>(name: &str, fut: F) -> F::Output {
    let run = start_run(name, RunKind::Custom, Value::Null, None);
    let out = run.clone().scope(fut).await;
    run.finish(Value::Null);
    out
}

/// Spawns a tokio task that inherits the trace context: its work is a `task` child run of the
/// current run.
pub fn spawn<F>(fut: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match current() {
        Some(parent) => {
            let run = parent.child("task", RunKind::Task, || Value::Null);
            tokio::spawn(async move {
                let out = run.clone().scope(fut).await;
                run.finish(Value::Null);
                out
            })
        }
        None => tokio::spawn(fut),
    }
}

/// Waits until the global tracer's exporters have delivered what they hold, at most
/// `timeout`. True when everything got through.
pub fn flush(timeout: Duration) -> bool {
    global().flush(timeout)
}
