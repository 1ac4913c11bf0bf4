//! Procedural macros of [kit](https://docs.rs/kit). Use them through the `kit` crate:
//! `kit::State`, `kit::Tool`, `kit::agent`, `kit::graph!`.
//!
//! Each macro is split into parse → model → validate → expand. Errors are collected (not the
//! first one only), point at the offending token, and the expansion still emits the user's items
//! so one mistake does not cascade into unrelated errors.

mod common;
mod graph;
mod state;

use proc_macro::TokenStream;

/// Derives `kit::State` and generates the partial update type `<Name>Update`.
///
/// Field attributes: `#[state(reducer = path)]` (a `fn(&mut Field, Update)`),
/// `#[state(reducer = path, update = Type)]` when the update type differs from the field type,
/// and `#[state(dynamic)]` on a `kit::state::DynState` field for channels added at run time.
#[proc_macro_derive(State, attributes(state))]
pub fn derive_state(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    state::derive(input).into()
}

/// Declares a graph over a `#[derive(State)]` type; see `kit::graph!`.
#[proc_macro]
pub fn graph(input: TokenStream) -> TokenStream {
    graph::expand(input.into()).into()
}
