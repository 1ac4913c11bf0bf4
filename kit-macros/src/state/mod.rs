//! `#[derive(State)]`: parse (darling) → model and checks → expand.

mod expand;
mod model;

use proc_macro2::TokenStream;

/// Entry point. On errors, also expands what could be understood, so code using the state type
/// and its update type reports nothing more.
pub fn derive(input: syn::DeriveInput) -> TokenStream {
    match model::StateModel::from_input(&input) {
        Ok(model) => expand::expand(&model),
        Err((e, best_effort)) => {
            let mut out = e.to_compile_error();
            if let Some(model) = best_effort {
                out.extend(expand::expand(&model));
            }
            out
        }
    }
}
