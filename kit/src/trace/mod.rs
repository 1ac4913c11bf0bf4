//! Tracing: run trees of graphs, agents, model and tool calls.

mod options;

pub use options::TraceOptions;
