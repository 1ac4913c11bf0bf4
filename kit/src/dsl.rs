//! The DSL reference: the four macros that declare a whole agent system, each with its grammar,
//! every option, what it generates and an example per option (every snippet here is a doctest).
//!
//! | macro | on | declares | reference |
//! |---|---|---|---|
//! | `#[tool]` | an `async fn` | a tool: the doc comment describes it, each parameter is an argument | [`tool`] |
//! | `#[derive(Tool)]` | an argument struct | a tool whose arguments are a type of their own | [`tool`] |
//! | `#[agent(..)]` | a unit struct | an agent: model, tools, capabilities, subagents, guardrails, structured output; generates `invoke`, `resume`, `resume_review`, `stream_events` | [`agent`] |
//! | `graph! { .. }` | — | a graph over a state type, checked at compile time | [`graph`] |
//! | `#[derive(State)]` | a struct | a graph's state: channels, reducers, the update type | [`state`] |
//!
//! The macros expand to the public API (`Agent::builder()`, `GraphBuilder`, `ToolDefinition`),
//! so everything they declare can also be assembled at run time — the builders are for agents
//! and graphs whose shape is only known then. Each macro reports every mistake at once, at your
//! token, with a did-you-mean where one fits; after an error it still generates its items, so
//! one mistake is one error. `crate = path` on each names the runtime crate when it is renamed
//! or re-exported.
//!
//! Key = value options are read with darling (its unknown-key suggestions and duplicate checks);
//! the `< .. >` blocks of `#[agent]` and the `graph!` language have parsers of their own, since
//! their syntax is not a Rust attribute's.

#[doc = include_str!("../docs/dsl/tool.md")]
pub mod tool {}

#[doc = include_str!("../docs/dsl/agent.md")]
pub mod agent {}

#[doc = include_str!("../docs/dsl/graph.md")]
pub mod graph {}

#[doc = include_str!("../docs/dsl/state.md")]
pub mod state {}
