//! The options of `#[derive(Tool)]`'s `#[tool(..)]` and of `#[tool(..)]` on a function, parsed
//! with darling (unknown keys get a did-you-mean, duplicates an error).

use darling::FromMeta;
use proc_macro2::Span;
use syn::spanned::Spanned;

use crate::common::{AnyExpr, Errors, lit_str, valid_tool_name};

/// `name = "..", description = "..", max_result_chars = N, crate = path`.
#[derive(FromMeta, Default)]
#[darling(default)]
pub struct ToolAttrs {
    /// The tool name (default: from the struct or function name).
    pub name: Option<AnyExpr>,
    /// The description (default: the doc comment).
    pub description: Option<AnyExpr>,
    /// Results longer than this many characters are cut.
    pub max_result_chars: Option<AnyExpr>,
    /// The path to the runtime crate, when renamed or re-exported.
    #[darling(rename = "crate")]
    pub krate: Option<syn::Path>,
}

/// The checked options.
pub struct ToolOptions {
    pub name: Option<String>,
    pub description: Option<String>,
    pub max_result_chars: Option<usize>,
    pub krate: Option<syn::Path>,
}

impl ToolAttrs {
    /// Checks the values: a valid tool name, a string description, a positive integer limit.
    pub fn check(self, errors: &mut Errors) -> ToolOptions {
        let name = self.name.map(|e| e.0).and_then(|e| match lit_str(&e) {
            Some(s) if valid_tool_name(&s.value()) => Some(s.value()),
            Some(s) => {
                errors.at(
                    s.span(),
                    "a tool name must be 1-64 characters of letters, digits, `_` or `-` (the \
                     providers' rule)",
                );
                None
            }
            None => {
                errors.at(
                    e.span(),
                    "`name` takes a string literal: `name = \"lookup_order\"`",
                );
                None
            }
        });
        let description = self
            .description
            .map(|e| e.0)
            .and_then(|e| match lit_str(&e) {
                Some(s) => Some(s.value()),
                None => {
                    errors.at(e.span(), "`description` takes a string literal");
                    None
                }
            });
        let max_result_chars = self
            .max_result_chars
            .map(|e| e.0)
            .and_then(|e| match int(&e) {
                Some((0, span)) => {
                    errors.at(span, "`max_result_chars` must be at least 1");
                    None
                }
                Some((n, _)) => Some(n),
                None => {
                    errors.at(e.span(), "`max_result_chars` takes an integer");
                    None
                }
            });
        ToolOptions {
            name,
            description,
            max_result_chars,
            krate: self.krate,
        }
    }
}

fn int(e: &syn::Expr) -> Option<(usize, Span)> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => i.base10_parse().ok().map(|n| (n, i.span())),
        _ => None,
    }
}
