//! `#[derive(State)]`: parse → model → validate → expand.

mod expand;
mod model;

use proc_macro2::TokenStream;

/// Entry point: on any error, emits the errors (the struct itself is untouched by a derive, so
/// nothing else breaks).
pub fn derive(input: syn::DeriveInput) -> TokenStream {
    match model::StateModel::from_input(&input) {
        Ok(model) => expand::expand(&model),
        Err(e) => e.to_compile_error(),
    }
}
