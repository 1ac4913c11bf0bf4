//! `graph!`: declare nodes and edges over a State type, checked at compile time.
//!
//! parse (grammar) → validate (names, reachability, ways out) → expand (builder calls).

mod expand;
mod parse;
mod validate;

use proc_macro2::TokenStream;

pub fn expand(input: TokenStream) -> TokenStream {
    let def: parse::GraphDef = match syn::parse2(input) {
        Ok(def) => def,
        Err(e) => {
            // Without a parsed definition the graph's type is unknown: a value of any type.
            let errors = e.to_compile_error();
            return quote::quote!({ #errors ::core::unreachable!() });
        }
    };
    if let Err(e) = validate::validate(&def) {
        // Still emit a value of the graph's type, so code using it type-checks and only the
        // real errors show.
        let errors = e.to_compile_error();
        let fallback = expand::fallback(&def);
        return quote::quote!({ #errors #fallback });
    }
    expand::expand(&def)
}
