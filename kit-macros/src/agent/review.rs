//! The `interrupt_on< .. >` block: which tool calls pause for human review, with which
//! decisions; and the compile-time check that each named tool is one of the agent's.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use super::fields::Fields;
use super::parse::{Block, EntryValue};
use crate::common::{Errors, hint, lit_str, valid_tool_name};

const DECISIONS: &[&str] = &["approve", "edit", "reject", "respond"];
const KEYS: &[&str] = &["allowed", "description"];

/// One reviewed tool.
pub struct Reviewed {
    pub tool: Ident,
    pub on: Review,
}

pub enum Review {
    /// `= true` (every decision) or `= false` (no review).
    All(bool),
    /// `= [approve, reject]` or `(allowed = [..], description = "..")`.
    Some {
        decisions: Vec<Ident>,
        description: Option<syn::Expr>,
    },
}

pub fn block(block: Block, errors: &mut Errors) -> Vec<Reviewed> {
    let mut out: Vec<Reviewed> = Vec::new();
    for entry in block.entries {
        let tool = entry.name;
        if out.iter().any(|r| r.tool == tool) {
            errors.at(tool.span(), format!("`{tool}` is reviewed twice"));
            continue;
        }
        if !valid_tool_name(&tool.to_string()) {
            errors.at(tool.span(), "not a tool name");
            continue;
        }
        let on = match entry.value {
            EntryValue::Flag => Review::All(true),
            EntryValue::Bool(b) => Review::All(b.value),
            EntryValue::List(list) => Review::Some {
                decisions: decisions(&tool, list, errors),
                description: None,
            },
            EntryValue::Fields(fields) => {
                let mut fields = Fields::read("review", tool.span(), fields, KEYS, &[], errors);
                let description = fields.expr("description", errors);
                let allowed = fields
                    .list("allowed", errors)
                    .map(|list| idents(list, errors))
                    .unwrap_or_else(|| {
                        DECISIONS
                            .iter()
                            .map(|d| Ident::new(d, tool.span()))
                            .collect()
                    });
                if let Some(d) = &description
                    && lit_str(d).is_none()
                    && matches!(d, syn::Expr::Lit(_))
                {
                    errors.push(syn::Error::new_spanned(d, "`description` takes a string"));
                }
                Review::Some {
                    decisions: decisions(&tool, allowed, errors),
                    description,
                }
            }
        };
        out.push(Reviewed { tool, on });
    }
    out
}

fn idents(list: Vec<syn::Expr>, errors: &mut Errors) -> Vec<Ident> {
    list.into_iter()
        .filter_map(|e| match &e {
            syn::Expr::Path(p) if p.path.get_ident().is_some() => p.path.get_ident().cloned(),
            _ => {
                errors.push(syn::Error::new_spanned(
                    &e,
                    "a decision is one of `approve`, `edit`, `reject`, `respond`",
                ));
                None
            }
        })
        .collect()
}

fn decisions(tool: &Ident, list: Vec<Ident>, errors: &mut Errors) -> Vec<Ident> {
    if list.is_empty() {
        errors.at(
            tool.span(),
            format!(
                "`{tool}` allows no decision: list at least one of approve, edit, reject, \
                 respond (or write `{tool} = false` to run it without review)"
            ),
        );
    }
    let mut out: Vec<Ident> = Vec::new();
    for d in list {
        let name = d.to_string();
        if !DECISIONS.contains(&name.as_str()) {
            errors.at(
                d.span(),
                format!("unknown decision `{name}`{}", hint(&name, DECISIONS)),
            );
        } else if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// The review middleware these entries configure.
pub fn middleware(reviewed: &[Reviewed], kit: &TokenStream) -> TokenStream {
    let mut m = quote!(#kit::middleware::review::HumanReviewMiddleware::new());
    for r in reviewed {
        let tool = r.tool.to_string();
        let on = gate(r, kit);
        m = quote!(#m.interrupt_on(#tool, #on));
    }
    m
}

/// How one entry reviews its tool: a `bool` or an `InterruptOnConfig` (inside `build()`).
pub fn gate(r: &Reviewed, kit: &TokenStream) -> TokenStream {
    let review = quote!(#kit::middleware::review);
    match &r.on {
        Review::All(b) => quote!(#b),
        Review::Some {
            decisions,
            description,
        } => {
            let variants = decisions.iter().map(|d| {
                let variant = Ident::new(&crate::common::camel_case(&d.to_string()), d.span());
                quote!(#review::DecisionType::#variant)
            });
            let mut config = quote! {
                #review::InterruptOnConfig::allow([#(#variants),*]).map_err(|e| {
                    #kit::AgentError::middleware_error(#review::NAME, "review", e)
                })?
            };
            if let Some(d) = description {
                config = quote_spanned!(d.span()=> #config.description(#d));
            }
            config
        }
    }
}

/// A compile-time check that each reviewed tool is one of `tools` (expressions giving each
/// tool's `NAME`); nothing when the agent's tools are not all known at compile time.
pub fn check_names(
    reviewed: &[Reviewed],
    tools: Option<&[TokenStream]>,
    kit: &TokenStream,
) -> TokenStream {
    let Some(tools) = tools else {
        return TokenStream::new();
    };
    let checks = reviewed.iter().map(|r| {
        let name = r.tool.to_string();
        let message = format!(
            "`{name}` in `interrupt_on< .. >` is not a tool of this agent: review one of the \
             tools it declares (`tools = [..]`, and the tools of `todos`, `filesystem` and the \
             subagents)"
        );
        quote_spanned! {r.tool.span()=>
            if !#kit::__private::str_in(#name, TOOLS) {
                ::core::panic!(#message);
            }
        }
    });
    quote! {
        const _: () = {
            const TOOLS: &[&str] = &[#(#tools),*];
            #(#checks)*
        };
    }
}
