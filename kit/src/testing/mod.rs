//! Deterministic stand-ins for tests, examples and the offline quickstart.

mod scripted;

pub use scripted::{ScriptStep, ScriptedModel};
