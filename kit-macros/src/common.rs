//! Helpers shared by the macros.

use proc_macro2::TokenStream;
use quote::quote;

/// Collects errors so a macro reports all of them at once.
#[derive(Default)]
pub struct Errors {
    errors: Option<syn::Error>,
}

impl Errors {
    /// Records an error.
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.errors {
            Some(e) => e.combine(error),
            None => self.errors = Some(error),
        }
    }

    /// Records an error at a span.
    pub fn at(&mut self, span: proc_macro2::Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    /// The collected errors as `compile_error!` invocations, if any.
    pub fn into_result(self) -> Result<(), syn::Error> {
        match self.errors {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The path to the `kit` crate in generated code.
pub fn kit_path(custom: Option<&syn::Path>) -> TokenStream {
    match custom {
        Some(p) => quote!(#p),
        None => quote!(::kit),
    }
}

/// The closest candidate to `name`, for "did you mean" hints (the graph rulebook's).
pub use kit_graph_rules::closest;
