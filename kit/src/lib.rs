//! # kit — typed LLM agents and agent graphs
//!
//! kit builds agents (a chat model calling tools in a loop) and graphs (nodes, edges,
//! reducers, checkpoints, interrupts, streaming). Agents compile to graphs, so both share the
//! same executor, checkpointers, streaming and tracing.
#![cfg_attr(docsrs, feature(doc_cfg))]

// Lets the derive macros refer to `::kit` from inside this crate too.
extern crate self as kit;

pub mod checkpoint;
pub mod event;
pub mod graph;
pub mod ids;
pub mod message;
pub mod state;
pub mod trace;

pub use checkpoint::{Checkpointer, MemoryCheckpointer};
pub use event::{Event, EventKind, EventStream};
pub use graph::{
    END, Graph, GraphBuilder, GraphError, Interrupt, NodeContext, NodeOutput, Outcome, Resume,
    RunOptions, START, Send,
};
pub use kit_macros::State;
pub use message::{Content, ContentPart, Message, Role, ToolCall, ToolStatus, Usage};
pub use state::{Overwrite, State, reducers};

/// Support code for the macros. Not a public API: it may change in any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::state::derive_support::*;
    pub use crate::state::{ChannelChange, ChannelInfo, IntoWrite, State, StateError, Write};
    pub use serde;
    pub use serde_json;
}
