//! `#[agent(...)]`: parse → validate → expand.

mod expand;
mod parse;

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
    match parse::parse(args, &item_struct) {
        Ok(def) => expand::expand(&def, &item_struct),
        Err(e) => {
            // Keep the struct so code naming it does not report more errors.
            let errors = e.to_compile_error();
            let fallback = expand::fallback(&item_struct);
            quote!(#errors #item_struct #fallback)
        }
    }
}
