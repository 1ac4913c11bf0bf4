//! Code generation for `#[derive(Tool)]`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};

use super::model::ToolModel;
use crate::common::kit_path;

pub fn expand(model: &ToolModel) -> TokenStream {
    let kit = kit_path(model.krate.as_ref());
    let ident = &model.ident;
    let name = &model.name;
    let description = &model.description;
    let max = match model.max_result_chars {
        Some(n) => quote!(::core::option::Option::Some(#n)),
        None => quote!(::core::option::Option::None),
    };
    // Spanned at the struct so a missing JsonSchema / ToolHandler points at the user's type.
    let schema = quote_spanned! {ident.span()=> #kit::__private::tool_schema::<#ident>() };
    let tool = quote_spanned! {ident.span()=> #kit::tool::Tool::of::<#ident>() };
    quote! {
        impl #kit::tool::ToolDefinition for #ident {
            const NAME: &'static str = #name;
            const MAX_RESULT_CHARS: ::core::option::Option<usize> = #max;
            fn description() -> ::std::string::String {
                ::std::string::String::from(#description)
            }
            fn parameters() -> #kit::__private::serde_json::Value {
                #schema
            }
        }

        impl #ident {
            /// This tool, ready for an agent.
            pub fn tool() -> #kit::tool::Tool {
                #tool
            }
        }
    }
}

/// A minimal impl emitted next to errors, so `T::tool()` elsewhere still resolves.
pub fn fallback(input: &syn::DeriveInput) -> TokenStream {
    let ident = &input.ident;
    if !input.generics.params.is_empty() {
        return TokenStream::new();
    }
    quote! {
        impl #ident {
            #[allow(dead_code)]
            pub fn tool() -> ::kit::tool::Tool {
                ::core::unreachable!()
            }
        }
    }
}
