//! `#[tool]` on an async function: model, checks and expansion.
//!
//! The function stays as written (callable as before). Next to it the macro emits a unit struct
//! named after it in CamelCase (`lookup_order` → `LookupOrder`) that is the tool: agents take
//! it (`tools = [LookupOrder]`, `.tool(LookupOrder)`), `LookupOrder::tool()` builds the
//! [`Tool`], and `LookupOrder::NAME` is the name as a constant. A hidden struct holds the
//! arguments the model sends: each parameter that is not injected becomes a schema property.

use darling::FromAttributes;
use darling::FromMeta;
use darling::ast::NestedMeta;
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use super::attrs::ToolAttrs;
use super::derive::unsupported;
use crate::common::{Errors, doc_text, kit_path, kit_path_str, type_named_after, valid_tool_name};

/// `#[arg(description = "..", default, default = expr)]` on a parameter.
#[derive(FromAttributes, Default)]
#[darling(attributes(arg), forward_attrs(doc))]
struct ArgAttrs {
    attrs: Vec<syn::Attribute>,
    #[darling(default)]
    description: Option<String>,
    #[darling(default)]
    default: Option<darling::util::Override<syn::Expr>>,
}

/// What kit passes to a parameter instead of the model.
#[derive(Clone, Copy)]
enum Injected {
    /// `ToolContext`.
    Context,
    /// `&ToolContext`.
    ContextRef,
    /// `&AgentState`.
    State,
    /// `Arc<AgentState>`.
    StateArc,
}

/// A parameter the model fills: a property of the tool's arguments.
struct Arg {
    ident: syn::Ident,
    ty: syn::Type,
    description: Option<String>,
    default: Option<darling::util::Override<syn::Expr>>,
}

enum Param {
    /// From the model's arguments.
    Arg(Box<Arg>),
    /// Injected by kit.
    Injected(Injected),
}

struct Model {
    func: syn::ItemFn,
    value: syn::Ident,
    name: String,
    description: String,
    max_result_chars: Option<usize>,
    krate: Option<syn::Path>,
    params: Vec<Param>,
    output: syn::Type,
    /// The function's error type, when written out.
    error: Option<syn::Type>,
}

pub fn attribute(args: TokenStream, item: TokenStream) -> TokenStream {
    let func: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            let e = syn::Error::new_spanned(
                &item,
                "#[tool] goes on an async function; for an argument struct use \
                 #[derive(Tool)]",
            );
            let errors = e.to_compile_error();
            return quote!(#errors #item);
        }
    };
    // The runtime crate's path, read on its own so the stand-in after an error uses it too.
    let krate = NestedMeta::parse_meta_list(args.clone())
        .ok()
        .and_then(|list| ToolAttrs::from_list(&list).ok())
        .and_then(|attrs| attrs.krate);
    match model(args, func.clone()) {
        Ok(model) => expand(&model),
        Err(e) => {
            let errors = e.to_compile_error();
            let fallback = fallback(func, krate.as_ref());
            quote!(#errors #fallback)
        }
    }
}

fn model(args: TokenStream, mut func: syn::ItemFn) -> Result<Model, syn::Error> {
    let mut errors = Errors::default();
    let options = match NestedMeta::parse_meta_list(args) {
        Ok(list) => match ToolAttrs::from_list(&list) {
            Ok(attrs) => attrs.check(&mut errors),
            Err(e) => {
                errors.darling(e);
                ToolAttrs::default().check(&mut errors)
            }
        },
        Err(e) => {
            errors.push(e);
            ToolAttrs::default().check(&mut errors)
        }
    };
    let sig = &func.sig;
    if sig.asyncness.is_none() {
        errors.at(
            sig.fn_token.span(),
            "a #[tool] function must be `async`: kit awaits it when the model calls the tool",
        );
    }
    if !sig.generics.params.is_empty() {
        errors.push(syn::Error::new_spanned(
            &sig.generics,
            "a #[tool] function cannot be generic: the schema sent to the model must be concrete",
        ));
    }
    let (output, error) = match result_ok_type(&sig.output) {
        Some(found) => found,
        None => {
            let span = match &sig.output {
                syn::ReturnType::Type(_, t) => t.span(),
                syn::ReturnType::Default => sig.ident.span(),
            };
            errors.at(
                span,
                "a #[tool] function returns `Result<T, E>`: `T` (any `Serialize`) is what the \
                 model sees, an `Err` becomes an error result the model can react to",
            );
            (syn::parse_quote!(()), None)
        }
    };
    let (doc_description, arg_docs) = split_arguments_section(&doc_text(&func.attrs));
    let mut params = Vec::new();
    for input in func.sig.inputs.iter_mut() {
        let typed = match input {
            syn::FnArg::Receiver(r) => {
                errors.at(
                    r.span(),
                    "a #[tool] function is a free function; move it out of the `impl` or make \
                     the method an argument struct with #[derive(Tool)]",
                );
                continue;
            }
            syn::FnArg::Typed(t) => t,
        };
        let attrs = match ArgAttrs::from_attributes(&typed.attrs) {
            Ok(a) => a,
            Err(e) => {
                errors.darling(e);
                ArgAttrs::default()
            }
        };
        // Our attributes are consumed here; others (`#[cfg]`, lints) stay.
        typed
            .attrs
            .retain(|a| !a.path().is_ident("arg") && !a.path().is_ident("doc"));
        let ident = match &*typed.pat {
            syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => p.ident.clone(),
            other => {
                errors.at(
                    other.span(),
                    "a #[tool] parameter is a plain name (`city: String`): each one is a \
                     property of the tool's arguments",
                );
                continue;
            }
        };
        if let Some(injected) = injected(&typed.ty) {
            if attrs.description.is_some() || attrs.default.is_some() {
                errors.at(
                    ident.span(),
                    "this parameter is given by kit, not by the model: `#[arg(..)]` does not \
                     apply",
                );
            }
            params.push(Param::Injected(injected));
            continue;
        }
        if let Some((offending, why)) = unsupported(&typed.ty) {
            errors.push(syn::Error::new_spanned(
                offending,
                format!(
                    "unsupported parameter type: {why} (kit gives a tool `ToolContext`, \
                     `&ToolContext`, `&AgentState` or `Arc<AgentState>`)"
                ),
            ));
            continue;
        }
        let own = doc_text(&attrs.attrs);
        let description = attrs
            .description
            .or_else(|| (!own.is_empty()).then_some(own))
            .or_else(|| {
                arg_docs
                    .iter()
                    .find(|(name, _)| *name == property_name(&ident) || ident == name)
                    .map(|(_, text)| text.clone())
            });
        params.push(Param::Arg(Box::new(Arg {
            ident,
            ty: (*typed.ty).clone(),
            description,
            default: attrs.default,
        })));
    }
    let description = options.description.unwrap_or(doc_description);
    if description.is_empty() {
        errors.at(
            func.sig.ident.span(),
            "a tool needs a description for the model: add a doc comment (`/// Looks up an \
             order.`) or `#[tool(description = \"...\")]`",
        );
    }
    // Named as written, without `r#`: `r#move` is the tool `move` of the type `Move`.
    let fn_name = syn::ext::IdentExt::unraw(&func.sig.ident).to_string();
    let value = type_named_after(&func.sig.ident);
    if value.is_none() {
        errors.at(
            func.sig.ident.span(),
            "the tool's type is named after its function in CamelCase, and this name makes \
             none Rust allows (no letter, as `__`, or a keyword, as `self_` makes `Self`): \
             rename the function",
        );
    }
    if options.name.is_none() && !valid_tool_name(&fn_name) {
        errors.at(
            func.sig.ident.span(),
            "a tool name must be 1-64 characters of letters, digits, `_` or `-` (the \
             providers' rule): rename the function, or name the tool with \
             `#[tool(name = \"...\")]`",
        );
    }
    errors.into_result()?;
    let Some(value) = value else {
        return Err(syn::Error::new(
            func.sig.ident.span(),
            "the tool needs a type name",
        ));
    };
    Ok(Model {
        value,
        name: options.name.unwrap_or(fn_name),
        description,
        max_result_chars: options.max_result_chars,
        krate: options.krate,
        params,
        output,
        error,
        func,
    })
}

/// `T` and `E` of a `Result<T, E>` return type (any path ending in `Result`, so aliases work;
/// `E` is `None` for an alias that fixes it).
fn result_ok_type(output: &syn::ReturnType) -> Option<(syn::Type, Option<syn::Type>)> {
    let syn::ReturnType::Type(_, ty) = output else {
        return None;
    };
    let syn::Type::Path(path) = &**ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    if last.ident != "Result" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let mut types = args.args.iter().filter_map(|a| match a {
        syn::GenericArgument::Type(t) => Some(t),
        _ => None,
    });
    let ok = types.next()?.clone();
    Some((ok, types.next().cloned()))
}

/// The argument property a parameter fills: its name without a leading `_`.
fn property_name(ident: &syn::Ident) -> String {
    let name = ident.to_string();
    match name.trim_start_matches('_') {
        "" => name,
        trimmed => trimmed.to_string(),
    }
}

/// The kit type a parameter is given as, if it is one.
fn injected(ty: &syn::Type) -> Option<Injected> {
    let (by_ref, inner) = match ty {
        syn::Type::Reference(r) if r.mutability.is_none() => (true, &*r.elem),
        other => (false, other),
    };
    let syn::Type::Path(path) = inner else {
        return None;
    };
    let last = path.path.segments.last()?;
    match (last.ident.to_string().as_str(), by_ref) {
        ("ToolContext", false) => Some(Injected::Context),
        ("ToolContext", true) => Some(Injected::ContextRef),
        ("AgentState", true) => Some(Injected::State),
        ("Arc", false) => {
            let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
                return None;
            };
            let is_state = args.args.iter().any(|a| {
                matches!(a, syn::GenericArgument::Type(syn::Type::Path(p))
                    if p.path.segments.last().is_some_and(|s| s.ident == "AgentState"))
            });
            is_state.then_some(Injected::StateArc)
        }
        _ => None,
    }
}

/// The description without a rustdoc `# Arguments` section, and that section's
/// `* `name` - text` items.
fn split_arguments_section(doc: &str) -> (String, Vec<(String, String)>) {
    let mut description = Vec::new();
    let mut args: Vec<(String, String)> = Vec::new();
    let mut in_args = false;
    for line in doc.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') {
            in_args = trimmed
                .trim_start_matches('#')
                .trim()
                .eq_ignore_ascii_case("arguments");
            if in_args {
                continue;
            }
        }
        if !in_args {
            description.push(line);
            continue;
        }
        let item = trimmed
            .strip_prefix("* ")
            .or_else(|| trimmed.strip_prefix("- "));
        match item {
            Some(item) => {
                let item = item.trim();
                let (name, text) = match item.split_once(['-', ':']) {
                    Some((name, text)) => (name, text),
                    None => (item, ""),
                };
                let name = name.trim().trim_matches('`').to_string();
                args.push((name, text.trim().to_string()));
            }
            None if !trimmed.is_empty() => {
                if let Some((_, text)) = args.last_mut() {
                    text.push(' ');
                    text.push_str(trimmed);
                }
            }
            None => {}
        }
    }
    (description.join("\n").trim().to_string(), args)
}

fn expand(model: &Model) -> TokenStream {
    let kit = kit_path(model.krate.as_ref());
    let kit_str = kit_path_str(model.krate.as_ref());
    let serde_crate = format!("{kit_str}::serde");
    let schemars_crate = format!("{kit_str}::schemars");
    let func = &model.func;
    let fn_ident = &func.sig.ident;
    let vis = &func.vis;
    let value = &model.value;
    let name = &model.name;
    let description = &model.description;
    let output = &model.output;
    let max = match model.max_result_chars {
        Some(n) => quote!(::core::option::Option::Some(#n)),
        None => quote!(::core::option::Option::None),
    };
    let mut fields = Vec::new();
    let mut defaults = Vec::new();
    let mut call_args = Vec::new();
    for param in &model.params {
        match param {
            Param::Arg(arg) => {
                let Arg {
                    ident,
                    ty,
                    description,
                    default,
                } = &**arg;
                let doc = description.iter();
                let serde_default = match default {
                    Some(darling::util::Override::Explicit(expr)) => {
                        let f = format_ident!("__default_{}", ident);
                        let path = f.to_string();
                        defaults.push(quote! {
                            fn #f() -> #ty {
                                #expr
                            }
                        });
                        quote!(#[serde(default = #path)])
                    }
                    Some(darling::util::Override::Inherit) => quote!(#[serde(default)]),
                    // `Option<T>` needs nothing: serde reads an absent one as `None`, and the
                    // schema leaves it out of `required`.
                    None => quote!(),
                };
                // `_order` (an unused parameter) is still the property `order`.
                let property = property_name(ident);
                let rename = (*ident != property).then(|| quote!(#[serde(rename = #property)]));
                fields.push(quote_spanned! {ty.span()=>
                    #(#[doc = #doc])*
                    #serde_default
                    #rename
                    #ident: #ty,
                });
                call_args.push(quote!(self.#ident));
            }
            Param::Injected(Injected::Context) => call_args.push(quote!(ctx.clone())),
            Param::Injected(Injected::ContextRef) => call_args.push(quote!(&ctx)),
            Param::Injected(Injected::State) => call_args.push(quote!(ctx.state())),
            Param::Injected(Injected::StateArc) => {
                call_args.push(quote!(::std::sync::Arc::clone(ctx.state_arc())))
            }
        }
    }
    let value_doc = format!(
        "The `{name}` tool, from the function [`{fn_ident}`] (generated by `#[tool]`). Give it \
         to an agent as it is (`tools = [{value}]`, `.tool({value})`)."
    );
    // Spanned at the error type, so a type that is not an error is reported there, once.
    let error_span = model
        .error
        .as_ref()
        .map_or_else(Span::call_site, |e| e.span());
    let into_tool_error = match &model.error {
        Some(error) => {
            quote_spanned!(error_span=> <#error as #kit::tool::IntoToolError>::into_tool_error)
        }
        None => quote!(#kit::tool::IntoToolError::into_tool_error),
    };
    let call = quote! {
        let result = #fn_ident(#(#call_args),*).await;
    };
    let convert = quote_spanned!(error_span=> result.map_err(#into_tool_error));
    quote! {
        #func

        #[doc = #value_doc]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #value;

        const _: () = {
            #[derive(#kit::serde::Deserialize, #kit::schemars::JsonSchema)]
            #[serde(crate = #serde_crate)]
            #[schemars(crate = #schemars_crate)]
            struct __Arguments {
                #(#fields)*
            }

            #(#defaults)*

            #[automatically_derived]
            impl #kit::tool::ToolDefinition for __Arguments {
                const NAME: &'static str = #name;
                const MAX_RESULT_CHARS: ::core::option::Option<usize> = #max;
                fn description() -> ::std::string::String {
                    ::std::string::String::from(#description)
                }
                fn parameters() -> #kit::__private::serde_json::Value {
                    #kit::__private::tool_schema::<__Arguments>()
                }
            }

            #[automatically_derived]
            impl #kit::tool::ToolHandler for __Arguments {
                type Output = #output;
                async fn run(
                    self,
                    ctx: #kit::tool::ToolContext,
                ) -> ::core::result::Result<#output, #kit::tool::ToolError> {
                    let _ = &ctx;
                    #call
                    #convert
                }
            }

            #[automatically_derived]
            impl #value {
                /// The tool's name, as the model sees it.
                pub const NAME: &'static str = #name;

                /// This tool, ready for an agent.
                pub fn tool() -> #kit::tool::Tool {
                    #kit::tool::Tool::of::<__Arguments>()
                }
            }

            #[automatically_derived]
            impl #kit::tool::IntoTool for #value {
                fn into_tool(self) -> #kit::tool::Tool {
                    #value::tool()
                }
            }
        };
    }
}

/// After an error: the function as written (our parameter attributes removed, so they do not
/// add errors of their own) and a stand-in tool value, so code naming it still resolves.
fn fallback(mut func: syn::ItemFn, krate: Option<&syn::Path>) -> TokenStream {
    for input in func.sig.inputs.iter_mut() {
        if let syn::FnArg::Typed(t) = input {
            t.attrs
                .retain(|a| !a.path().is_ident("arg") && !a.path().is_ident("doc"));
        }
    }
    let value =
        type_named_after(&func.sig.ident).unwrap_or_else(|| quote::format_ident!("InvalidTool"));
    let vis = &func.vis;
    let kit = kit_path(krate);
    quote! {
        #func

        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #value;

        #[automatically_derived]
        #[allow(dead_code)]
        impl #value {
            pub const NAME: &'static str = #kit::__private::TOOL_WITH_ERRORS;
            pub fn tool() -> #kit::tool::Tool {
                ::core::unreachable!()
            }
        }

        #[automatically_derived]
        impl #kit::tool::IntoTool for #value {
            fn into_tool(self) -> #kit::tool::Tool {
                ::core::unreachable!()
            }
        }
    }
}
