//! Built-in middleware: ready-made capabilities to add to an agent with
//! [`AgentBuilder::middleware`](crate::agent::AgentBuilder::middleware).
//!
//! * [`filesystem`] — a virtual filesystem (`ls`, `read_file`, `write_file`, `edit_file`,
//!   `delete`, `glob`, `grep`) kept in the agent state or in a real directory, and eviction of
//!   large tool results to files.

pub mod filesystem;
