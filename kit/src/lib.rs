//! # kit — typed LLM agents and agent graphs
//!
//! kit builds agents (a chat model calling tools in a loop) and graphs (nodes, edges,
//! reducers, checkpoints, interrupts, streaming). Agents compile to graphs, so both share the
//! same executor, checkpointers, streaming and tracing.
#![cfg_attr(docsrs, feature(doc_cfg))]

// Lets the derive macros refer to `::kit` from inside this crate too.
extern crate self as kit;

pub mod agent;
pub mod checkpoint;
pub mod config;
pub mod event;
pub mod graph;
pub mod http;
pub mod ids;
pub mod message;
pub mod middleware;
pub mod model;
pub mod protocol;
#[cfg(feature = "server")]
pub mod server;
pub mod state;
pub mod testing;
pub mod tool;
pub mod trace;

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
pub use kit_macros::{State, Tool, agent, graph};
pub use message::{Content, ContentPart, Message, Role, ToolCall, ToolStatus, Usage};
pub use model::ChatModel;
pub use state::{Overwrite, State, reducers};
pub use tool::Tool;

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

    /// Placeholder value emitted after a `graph!` error so no follow-on errors appear.
    #[allow(clippy::panic)]
    pub fn unreachable_graph<S: State>() -> crate::Graph<S> {
        panic!("this graph! invocation has compile errors")
    }
}
