//! Procedural macros of [kit](https://docs.rs/kit). Use them through the `kit` crate:
//! `kit::State`, `kit::Tool`, `kit::agent`, `kit::graph!`.
//!
//! Each macro is split into parse → model → validate → expand. Errors are collected (not the
//! first one only), point at the offending token, and the expansion still emits the user's items
//! so one mistake does not cascade into unrelated errors.

mod agent;
mod common;
mod graph;
mod state;
mod tool;

use proc_macro::TokenStream;

/// Derives `kit::State` and generates the partial update type `<Name>Update`.
///
/// Field attributes: `#[state(reducer = path)]` (a `fn(&mut Field, Update)`),
/// `#[state(reducer = path, update = Type)]` when the update type differs from the field type,
/// and `#[state(dynamic)]` on a `kit::state::DynState` field for channels added at run time.
/// The reference, with an example per option: `kit::dsl::state`.
#[proc_macro_derive(State, attributes(state))]
pub fn derive_state(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    state::derive(input).into()
}

/// Derives `kit::tool::ToolDefinition` for a tool's argument struct and adds `T::tool()`.
///
/// The description is the struct's doc comment (or `#[tool(description = "...")]`); the
/// argument schema comes from `schemars::JsonSchema` (field doc comments become field
/// descriptions); `#[tool(name = "...", max_result_chars = N)]` are optional. Implement
/// `kit::tool::ToolHandler` for the struct to give the tool its body. The reference:
/// `kit::dsl::tool`.
#[proc_macro_derive(Tool, attributes(tool))]
pub fn derive_tool(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    tool::derive(input).into()
}

/// Turns an async function into a tool: the function stays callable as written, and a unit
/// struct named after it in CamelCase (`lookup_order` → `LookupOrder`) is the tool an agent
/// takes (`tools = [LookupOrder]`, `.tool(LookupOrder)`). The doc comment is the description;
/// each parameter is an argument (`Option` is not required, `#[arg(default)]` gives a default),
/// and `ToolContext` or the agent state are injected. The reference, with an example per
/// option: `kit::dsl::tool`.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    tool::attribute(args.into(), item.into()).into()
}

/// Declares an agent on a unit struct: model, tools, capabilities, subagents
/// (`subagents< .. >`, `async_subagents< .. >`), guardrails (`interrupt_on< .. >`, `pii< .. >`)
/// and a typed `response_format`. Generates `NAME`, `build()`, `agent()`, `invoke(..)`,
/// `resume(..)`, `resume_review(..)` and `stream_events(..)`. The reference, with an example
/// per option: `kit::dsl::agent`.
#[proc_macro_attribute]
pub fn agent(args: TokenStream, item: TokenStream) -> TokenStream {
    agent::expand(args.into(), item.into()).into()
}

/// Declares a graph over a `#[derive(State)]` type, checked at compile time. The reference:
/// `kit::dsl::graph`.
#[proc_macro]
pub fn graph(input: TokenStream) -> TokenStream {
    graph::expand(input.into()).into()
}
