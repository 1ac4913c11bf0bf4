//! `graph!`: declare nodes and edges over a State type, checked at compile time.

use proc_macro2::TokenStream;

pub fn expand(input: TokenStream) -> TokenStream {
    let _ = input;
    quote::quote!(compile_error!("graph! is not implemented yet"))
}
