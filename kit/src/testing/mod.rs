//! Deterministic stand-ins for tests, examples and the offline quickstart.

mod embedder;
mod scripted;

pub use embedder::HashEmbedder;
pub use scripted::{ScriptStep, ScriptedModel};
