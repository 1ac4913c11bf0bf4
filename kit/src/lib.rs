//! # kit — typed LLM agents and agent graphs
//!
//! kit builds **graphs** (nodes, edges, reducers, checkpoints, interrupts, streaming) and
//! **agents** (a chat model calling tools in a loop, with middleware). Agents compile to
//! graphs, so both share one executor, one checkpoint format, one event stream and one trace
//! model.
//!
//! ## A graph
//!
//! ```
//! use kit::graph::NodeContext;
//! use kit::{RunOptions, State};
//!
//! #[derive(State, Clone, Default, Debug, serde::Serialize, serde::Deserialize)]
//! struct Ticket {
//!     text: String,
//!     kind: String,
//!     #[state(reducer = kit::reducers::append)]
//!     log: Vec<String>,
//! }
//!
//! async fn classify(t: &Ticket, _ctx: &NodeContext) -> TicketUpdate {
//!     let kind = if t.text.contains("refund") { "refund" } else { "question" };
//!     TicketUpdate::new().kind(kind).log(vec![format!("classified as {kind}")])
//! }
//! async fn refund(_t: &Ticket, _ctx: &NodeContext) -> TicketUpdate {
//!     TicketUpdate::new().log(vec!["refunded".to_string()])
//! }
//! async fn answer(_t: &Ticket, _ctx: &NodeContext) -> TicketUpdate {
//!     TicketUpdate::new().log(vec!["answered".to_string()])
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::GraphError> {
//! let graph = kit::graph! {
//!     state: Ticket;
//!     node classify;
//!     node refund;
//!     node answer;
//!     edge START -> classify;
//!     edge classify -> refund when kind == "refund";
//!     edge classify -> answer when kind == "question";
//!     edge refund -> END;
//!     edge answer -> END;
//! };
//! let out = graph
//!     .invoke(TicketUpdate::new().text("I want a refund"))
//!     .await?;
//! assert_eq!(out.state().log, ["classified as refund", "refunded"]);
//! # Ok(()) }
//! ```
//!
//! See [`graph`](mod@graph) for the execution model (supersteps, reducers, `Send`, `Command`, joins,
//! interrupts, failure recovery) and [`state`] for channels and reducers.
//!
//! ## An agent
//!
//! Tools are async functions; an agent is a declaration. Both are checked at compile time.
//!
//! ```
//! use kit::testing::ScriptedModel;
//! use kit::tool::ToolError;
//! use kit::{Message, ToolCall};
//!
//! /// Adds two integers.
//! #[kit::tool]
//! async fn add(
//!     /// The first addend.
//!     a: i64,
//!     /// The second addend.
//!     b: i64,
//! ) -> Result<i64, ToolError> {
//!     Ok(a + b)
//! }
//!
//! /// Does arithmetic. Offline a scripted model plays the model; write
//! /// `model = "openai:gpt-4o-mini"` for a real one.
//! #[kit::agent(
//!     model = ScriptedModel::new([
//!         Message::assistant_with_tool_calls("", vec![ToolCall::new("add", serde_json::json!({"a": 40, "b": 2}))]),
//!         Message::assistant("It is 42."),
//!     ]),
//!     system_prompt = "Use the add tool.",
//!     tools = [Add],
//! )]
//! struct Calculator;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::AgentError> {
//! let out = Calculator::invoke("What is 40 + 2?").await?;
//! assert_eq!(out.state().final_text(), "It is 42.");
//! # Ok(()) }
//! ```
//!
//! [`dsl`] is the reference of the macros (`#[tool]`, `#[derive(Tool)]`, `#[agent]`, `graph!`,
//! `#[derive(State)]`), with an example per option. [`Agent::builder()`](Agent::builder)
//! assembles the same agents at run time. See [`agent`](mod@agent) for the middleware order,
//! [`middleware`] for the built-in capabilities and guardrails, [`tool`](mod@tool) and [`model`]
//! for tools and providers.
//!
//! ## Modules
//!
//! | module | what |
//! |---|---|
//! | [`dsl`] | the macros' reference: grammar, every option, what each generates |
//! | [`graph`](mod@graph) | graphs: builder, `graph!`, supersteps, interrupts, run options |
//! | [`state`] | typed state, reducers, `Overwrite`, the dynamic form |
//! | [`checkpoint`] | the `Checkpointer` trait; memory, SQLite and PostgreSQL back-ends |
//! | [`store`] | long-term memory across threads: the `Store` trait, memory, SQLite and PostgreSQL back-ends, semantic search |
//! | [`event`] | the streamed event envelope and its catalog |
//! | [`agent`](mod@agent) | agents, the builder, middleware hooks and wrappers |
//! | [`middleware`] | todos, filesystem, subagents, async subagents, compaction, overflow recovery, PII, human review, moderation |
//! | [`model`] | the `ChatModel` trait, OpenAI-compatible and Anthropic providers, pricing |
//! | [`tool`](mod@tool) | tools, `#[derive(Tool)]`, argument validation |
//! | [`http`] | the HTTP client everything kit sends goes through |
//! | `mcp` | MCP servers' tools as kit tools, kit tools served over MCP (feature `mcp`) |
//! | [`protocol`] | the async-subagent run protocol client |
//! | `server` | the worker server (feature `server`) |
//! | [`trace`] | run trees, redaction, exporters (JSON lines, OTLP, Langfuse), the trace viewer |
//! | [`testing`] | `ScriptedModel` for deterministic tests and offline demos |
//!
//! ## Feature flags
//!
//! | feature | default | what it brings |
//! |---|---|---|
//! | `sqlite` | yes | [`checkpoint::SqliteCheckpointer`] (bundled SQLite), [`store::SqliteStore`] and the worker's SQLite run store |
//! | `postgres` | no | `checkpoint::PostgresCheckpointer`, `store::PostgresStore` and the worker's shared PostgreSQL queue |
//! | `server` | no | `kit::server`: the async-subagent worker (axum) |
//! | `otlp` | no | the protobuf encoding of `kit::trace::otlp`'s OTLP/HTTP export (OTLP/JSON, the exporter and the Langfuse profile need no feature) |
//! | `embeddings` | no | `store::OpenAiEmbeddings`: vectors from any OpenAI-compatible embeddings API, for the store's semantic search |
//! | `mcp` | no | `kit::mcp`: the tools of MCP servers (stdio, Streamable HTTP) as kit tools, and kit tools or agents served over MCP, through `rmcp` (pinned) |
//!
//! ## Errors
//!
//! Errors are typed values, never panics on data from a model, a peer, a file or a user: tool
//! failures become error results the model sees; a malformed tool call gets a validation
//! message; a model failure is a [`model::ModelError`] you can match (rate limit, context
//! length, authentication); agent runs fail with [`AgentError`], graph runs with
//! [`GraphError`]; an interrupt is not an error but [`Outcome::Interrupted`]. Tracing and
//! export failures are counted and swallowed.
#![cfg_attr(docsrs, feature(doc_cfg))]

// Lets the derive macros refer to `::kit` from inside this crate too.
extern crate self as kit;

pub mod agent;
mod bounded;
pub mod checkpoint;
pub mod config;
mod deadline;
pub mod dsl;
pub mod event;
pub mod fuzz;
pub mod graph;
mod hash;
pub mod http;
pub mod ids;
mod json;
#[cfg(any(feature = "server", feature = "mcp"))]
mod listen;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod message;
pub mod middleware;
pub mod model;
#[cfg(feature = "postgres")]
mod pg;
pub mod protocol;
#[cfg(feature = "server")]
pub mod server;
mod shared;
#[cfg(feature = "sqlite")]
mod sqlite;
pub mod state;
pub mod store;
pub mod testing;
mod text;
pub mod trace;
/// Tools: what a model can call (part of the agent layer; see [`agent::tool`]).
pub use agent::tool;

pub use agent::{Agent, AgentError, AgentState, Middleware};
/// Re-exported so implementations of kit's async traits (`Middleware`, `Checkpointer`,
/// `ChatModel`, ...) need no extra dependency: `#[kit::async_trait]`.
pub use async_trait::async_trait;
pub use checkpoint::{Checkpointer, MemoryCheckpointer};
pub use config::Config;
pub use event::{Event, EventKind, EventStream};
pub use graph::{
    END, Graph, GraphBuilder, GraphError, Interrupt, NodeContext, NodeOutput, Outcome, Resume,
    RunOptions, START, Send,
};
pub use kit_macros::{State, Tool, agent, graph, tool};
pub use message::{
    Content, ContentPart, Message, Reasoning, ReasoningFormat, Role, ToolCall, ToolStatus, Usage,
};
pub use model::ChatModel;
pub use state::{Messages, Overwrite, State, reducers};
pub use tool::Tool;

/// Re-exported for JSON Schemas of tool arguments and structured output: derive with
/// `#[derive(kit::schemars::JsonSchema)]` and `#[schemars(crate = "kit::schemars")]`.
pub use schemars;
/// Re-exported so a user's `Cargo.toml` needs only `kit` (and tokio): derive with
/// `#[derive(kit::serde::Serialize, kit::serde::Deserialize)]` and `#[serde(crate = "kit::serde")]`.
pub use serde;
/// Re-exported: kit's JSON values are `serde_json::Value`.
pub use serde_json;

/// Support code for the macros. Not a public API: it may change in any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::state::derive_support::*;
    pub use crate::state::{ChannelChange, ChannelInfo, IntoWrite, State, StateError, Write};
    pub use serde;
    pub use serde_json;

    use crate::graph::{GraphBuilder, IntoNodeOutput, NodeContext, NodeFn, Route};
    use std::future::Future;
    use std::sync::Arc;

    /// Coerces a node closure into the erased node type.
    pub fn node_fn<S: State, F>(f: F) -> NodeFn<S>
    where
        F: Fn(Arc<S>, NodeContext) -> crate::graph::NodeFuture<S> + Send + Sync + 'static,
    {
        Arc::new(f)
    }

    /// Erases an async node closure `(Arc<S>, NodeContext) -> impl Future`.
    pub fn async_node<S: State, F, Fut, R>(f: F) -> NodeFn<S>
    where
        F: Fn(Arc<S>, NodeContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoNodeOutput<S> + 'static,
    {
        crate::graph::builder_support::async_node(f)
    }

    /// Checks a routing function's type where the user wrote it.
    pub fn router<S: State, F, R>(f: F) -> F
    where
        F: Fn(&S) -> R + Send + Sync + 'static,
        R: Into<Route>,
    {
        f
    }

    /// Compiles a graph that `graph!` already validated.
    #[allow(clippy::panic)]
    pub fn compile_checked<S: State>(builder: GraphBuilder<S>) -> crate::Graph<S> {
        match builder.compile() {
            Ok(graph) => graph,
            // graph! checks every rule compile() checks, at compile time.
            Err(e) => panic!("graph! accepted a graph that does not compile; please report: {e}"),
        }
    }

    /// The JSON Schema of a derived tool's arguments, as providers want it (no `$schema` or
    /// `title`; the description travels separately).
    pub fn tool_schema<T: schemars::JsonSchema>() -> serde_json::Value {
        let schema = schemars::generate::SchemaSettings::draft2020_12()
            .into_generator()
            .into_root_schema_for::<T>();
        let mut value = serde_json::to_value(schema).unwrap_or(serde_json::Value::Null);
        if let Some(map) = value.as_object_mut() {
            map.remove("$schema");
            map.remove("title");
            map.remove("description");
            map.entry("properties")
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
        }
        value
    }

    /// The `NAME` of a tool whose macro reported an error: the checks that use tool names
    /// pass, so that one error is reported once.
    pub const TOOL_WITH_ERRORS: &str = "\u{0}kit: this tool has compile errors";

    /// Whether `name` is one of `names`, at compile time: `#[agent]` checks the tool names its
    /// `interrupt_on< .. >` block gives against the agent's tools with it. A tool with errors
    /// of its own ([`TOOL_WITH_ERRORS`]) passes every check.
    pub const fn str_in(name: &str, names: &[&str]) -> bool {
        let mut i = 0;
        while i < names.len() {
            if const_str_eq(names[i], TOOL_WITH_ERRORS) {
                return true;
            }
            i += 1;
        }
        let mut i = 0;
        while i < names.len() {
            if const_str_eq(name, names[i]) {
                return true;
            }
            i += 1;
        }
        false
    }

    const fn const_str_eq(a: &str, b: &str) -> bool {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }

    /// A declared agent, built on first use and shared after; a failed build is not kept, so
    /// the next call tries again (and reports the error again).
    pub fn declared_agent(
        cell: &'static std::sync::OnceLock<crate::Agent>,
        build: fn() -> Result<crate::Agent, crate::AgentError>,
    ) -> Result<&'static crate::Agent, crate::AgentError> {
        if let Some(agent) = cell.get() {
            return Ok(agent);
        }
        let built = build()?;
        Ok(cell.get_or_init(|| built))
    }

    /// A filesystem on a real directory (created when missing), for
    /// `#[agent(filesystem(dir = ".."))]`.
    pub fn disk_filesystem(
        dir: impl AsRef<std::path::Path>,
    ) -> Result<crate::middleware::filesystem::FilesystemMiddleware, crate::AgentError> {
        let backend =
            crate::middleware::filesystem::DirectoryBackend::create(dir).map_err(|e| {
                crate::AgentError::middleware_error("FilesystemMiddleware", "filesystem", e)
            })?;
        Ok(crate::middleware::filesystem::FilesystemMiddleware::new().backend(backend))
    }

    /// The event stream of a declared agent that failed to build: one `error` event.
    pub fn error_stream(error: crate::AgentError) -> crate::EventStream {
        let event = crate::event::Event::error("agent", error.to_string(), "build");
        Box::pin(futures::stream::once(async move { event }))
    }

    /// Placeholder value emitted after a `graph!` error so no follow-on errors appear.
    #[allow(clippy::panic)]
    pub fn unreachable_graph<S: State>() -> crate::Graph<S> {
        panic!("this graph! invocation has compile errors")
    }
}
