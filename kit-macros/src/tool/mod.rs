//! `#[derive(Tool)]`: parse → model (validated) → expand.

mod expand;
mod model;

use proc_macro2::TokenStream;

pub fn derive(input: syn::DeriveInput) -> TokenStream {
    match model::ToolModel::from_input(&input) {
        Ok(model) => expand::expand(&model),
        Err(e) => {
            // Also emit a stand-in impl so uses of `T::tool()` do not pile up more errors.
            let mut out = e.to_compile_error();
            out.extend(expand::fallback(&input));
            out
        }
    }
}
