//! `#[agent(...)]`: parse (`parse`, with darling for the scalar `options`) → model and checks
//! (`model`, and one file per block: `subagents`, `review`, `pii`) → expand.

mod expand;
mod fields;
mod model;
mod options;
mod parse;
mod pii;
mod review;
mod subagents;

use proc_macro2::TokenStream;
use quote::quote;

pub fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let item_struct: syn::ItemStruct = match syn::parse2(item.clone()) {
        Ok(s) => s,
        Err(_) => {
            let e = syn::Error::new_spanned(
                &item,
                "#[agent] goes on a unit struct, e.g. `#[agent(model = ..)] struct Support;`",
            );
            let errors = e.to_compile_error();
            return quote!(#errors #item);
        }
    };
    match model::Agent::from_args(args, &item_struct) {
        Ok(agent) => expand::expand(&agent, &item_struct),
        Err(failed) => {
            let (e, fallback) = *failed;
            // The struct and stand-in methods too, so code naming them reports nothing more.
            let errors = e.to_compile_error();
            let stand_in = expand::fallback(&item_struct, &fallback);
            quote!(#errors #stand_in)
        }
    }
}
