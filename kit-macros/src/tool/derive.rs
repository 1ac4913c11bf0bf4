//! `#[derive(Tool)]` on an argument struct: model, checks and expansion.

use darling::FromDeriveInput;
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};

use super::attrs::ToolAttrs;
use crate::common::{Errors, doc_text, kit_path, snake_case};

/// The derive's input, as darling reads it.
#[derive(FromDeriveInput)]
#[darling(attributes(tool), forward_attrs(doc))]
struct Input {
    ident: syn::Ident,
    generics: syn::Generics,
    attrs: Vec<syn::Attribute>,
    #[darling(flatten)]
    options: ToolAttrs,
}

/// A checked tool argument struct.
struct Model {
    ident: syn::Ident,
    name: String,
    description: String,
    max_result_chars: Option<usize>,
    krate: Option<syn::Path>,
}

pub fn derive(input: syn::DeriveInput) -> TokenStream {
    match model(&input) {
        Ok(model) => expand(&model),
        Err(e) => {
            // A stand-in impl too, so uses of `T::tool()` do not pile up more errors.
            let mut out = e.to_compile_error();
            out.extend(fallback(&input));
            out
        }
    }
}

fn model(input: &syn::DeriveInput) -> Result<Model, syn::Error> {
    let mut errors = Errors::default();
    let parsed = match Input::from_derive_input(input) {
        Ok(parsed) => Some(parsed),
        Err(e) => {
            errors.darling(e);
            None
        }
    };
    match &input.data {
        syn::Data::Struct(syn::DataStruct {
            fields: syn::Fields::Named(fields),
            ..
        }) => {
            for field in &fields.named {
                if let Some((offending, why)) = unsupported(&field.ty) {
                    errors.push(syn::Error::new_spanned(
                        offending,
                        format!("unsupported field type: {why}"),
                    ));
                }
            }
        }
        syn::Data::Struct(syn::DataStruct {
            fields: syn::Fields::Unit,
            ..
        }) => {}
        _ => errors.at(
            input.ident.span(),
            "#[derive(Tool)] needs a struct with named fields (the tool's arguments are a \
             JSON object) or a unit struct (no arguments)",
        ),
    }
    let Some(parsed) = parsed else {
        return Err(errors.into_result().err().unwrap_or_else(|| {
            syn::Error::new(input.ident.span(), "the #[tool] attribute is invalid")
        }));
    };
    if !parsed.generics.params.is_empty() {
        errors.push(syn::Error::new_spanned(
            &parsed.generics,
            "a tool's argument struct cannot be generic: the schema sent to the model must be \
             concrete",
        ));
    }
    let options = parsed.options.check(&mut errors);
    let description = options
        .description
        .unwrap_or_else(|| doc_text(&parsed.attrs));
    if description.is_empty() {
        errors.at(
            parsed.ident.span(),
            "a tool needs a description for the model: add a doc comment (`/// Adds two \
             numbers.`) or `#[tool(description = \"...\")]`",
        );
    }
    errors.into_result()?;
    Ok(Model {
        name: options
            .name
            .unwrap_or_else(|| snake_case(&parsed.ident.to_string())),
        ident: parsed.ident,
        description,
        max_result_chars: options.max_result_chars,
        krate: options.krate,
    })
}

/// The part of a field type that cannot come from a model's JSON arguments, and why.
pub fn unsupported(ty: &syn::Type) -> Option<(&syn::Type, &'static str)> {
    let why = match ty {
        syn::Type::Reference(_) => {
            "a reference cannot be deserialized from the model's arguments; use an owned type \
             (`String` instead of `&str`)"
        }
        syn::Type::Ptr(_) => "a raw pointer cannot come from the model's arguments",
        syn::Type::BareFn(_) => "a function pointer cannot come from the model's arguments",
        syn::Type::TraitObject(_) | syn::Type::ImplTrait(_) => {
            "a trait object cannot come from the model's arguments; use a concrete type"
        }
        syn::Type::Never(_) => "`!` cannot come from the model's arguments",
        syn::Type::Paren(p) => return unsupported(&p.elem),
        syn::Type::Group(g) => return unsupported(&g.elem),
        syn::Type::Array(a) => return unsupported(&a.elem),
        syn::Type::Slice(s) => return unsupported(&s.elem),
        syn::Type::Tuple(t) => return t.elems.iter().find_map(unsupported),
        syn::Type::Path(p) => {
            return p.path.segments.iter().find_map(|seg| match &seg.arguments {
                syn::PathArguments::AngleBracketed(args) => {
                    args.args.iter().find_map(|a| match a {
                        syn::GenericArgument::Type(t) => unsupported(t),
                        _ => None,
                    })
                }
                _ => None,
            });
        }
        _ => return None,
    };
    Some((ty, why))
}

fn expand(model: &Model) -> TokenStream {
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
        #[automatically_derived]
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

        #[automatically_derived]
        impl #ident {
            /// The tool's name, as the model sees it.
            pub const NAME: &'static str = #name;

            /// This tool, ready for an agent.
            pub fn tool() -> #kit::tool::Tool {
                #tool
            }
        }
    }
}

/// A minimal impl emitted next to errors, so `T::tool()` and `T::NAME` elsewhere still resolve.
fn fallback(input: &syn::DeriveInput) -> TokenStream {
    let ident = &input.ident;
    if !input.generics.params.is_empty() {
        return TokenStream::new();
    }
    let krate = Input::from_derive_input(input)
        .ok()
        .and_then(|i| i.options.krate);
    let kit = kit_path(krate.as_ref());
    quote! {
        #[automatically_derived]
        #[allow(dead_code)]
        impl #ident {
            pub const NAME: &'static str = #kit::__private::TOOL_WITH_ERRORS;
            pub fn tool() -> #kit::tool::Tool {
                ::core::unreachable!()
            }
        }
    }
}
