//! The `pii< .. >` block: one PII middleware per type, its strategy and where it applies.
//! Unknown types, strategies and options, and invalid regexes, are compile errors.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, Ident};

use super::fields::Fields;
use super::parse::{Block, EntryValue};
use crate::common::{Errors, camel_case, hint, lit_str};

/// The built-in types.
const TYPES: &[&str] = &["email", "credit_card", "ip", "mac_address", "url"];
const STRATEGIES: &[&str] = &["redact", "mask", "hash", "block"];
const KEYS: &[&str] = &[
    "apply_to_input",
    "apply_to_output",
    "apply_to_tool_results",
    "regex",
    "detector",
];

/// One PII type and what to do with it.
pub struct Pii {
    pub name: Ident,
    pub strategy: Option<Ident>,
    pub options: Vec<(&'static str, Expr)>,
    pub detector: Detector,
}

pub enum Detector {
    Builtin,
    Regex(syn::LitStr),
    Function(Expr),
}

pub fn block(block: Block, errors: &mut Errors) -> Vec<Pii> {
    let mut out: Vec<Pii> = Vec::new();
    for entry in block.entries {
        let name = entry.name;
        if out.iter().any(|p| p.name == name) {
            errors.at(name.span(), format!("PII type `{name}` is given twice"));
            continue;
        }
        let mut fields = match entry.value {
            EntryValue::Flag => {
                Fields::read("PII", name.span(), Vec::new(), KEYS, STRATEGIES, errors)
            }
            EntryValue::Fields(f) => Fields::read("PII", name.span(), f, KEYS, STRATEGIES, errors),
            _ => {
                errors.at(
                    name.span(),
                    format!("write `{name}(redact)`: a PII entry takes a strategy and options in parentheses"),
                );
                continue;
            }
        };
        // Bare words: the strategy, or an `apply_to_*` switch turned on.
        let (words, switches): (Vec<Ident>, Vec<Ident>) = fields
            .words()
            .into_iter()
            .partition(|w| STRATEGIES.contains(&w.to_string().as_str()));
        let strategy = match words.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            [_, second, ..] => {
                errors.at(
                    second.span(),
                    format!(
                        "`{name}` has two strategies; choose one of {}",
                        STRATEGIES.join(", ")
                    ),
                );
                None
            }
        };
        let regex = fields.expr("regex", errors);
        let function = fields.expr("detector", errors);
        let detector = match (regex, function) {
            (Some(r), None) => match lit_str(&r) {
                Some(s) => {
                    if let Err(e) = regex_syntax::Parser::new().parse(&s.value()) {
                        errors.at(s.span(), format!("invalid regex: {e}"));
                    }
                    Detector::Regex(s.clone())
                }
                None => {
                    errors.push(syn::Error::new_spanned(r, "`regex` takes a string literal"));
                    continue;
                }
            },
            (None, Some(f)) => Detector::Function(f),
            (None, None) => {
                let type_name = name.to_string();
                if !TYPES.contains(&type_name.as_str()) {
                    let known = hint(&type_name, TYPES);
                    errors.at(
                        name.span(),
                        format!(
                            "unknown PII type `{type_name}`{known} (a type of your own needs \
                             `regex = \"..\"` or `detector = my_fn`)"
                        ),
                    );
                    continue;
                }
                Detector::Builtin
            }
            (Some(r), Some(_)) => {
                errors.push(syn::Error::new_spanned(
                    r,
                    "give `regex` or `detector`, not both",
                ));
                continue;
            }
        };
        let mut options: Vec<(&'static str, Expr)> = Vec::new();
        for key in ["apply_to_input", "apply_to_output", "apply_to_tool_results"] {
            if let Some(w) = switches.iter().find(|w| *w == key) {
                options.push((key, syn::parse_quote_spanned!(w.span()=> true)));
            } else if let Some(e) = fields.expr(key, errors) {
                options.push((key, e));
            }
        }
        for w in switches
            .iter()
            .filter(|w| !w.to_string().starts_with("apply_to"))
        {
            errors.at(w.span(), format!("`{w}` takes a value: `{w} = ..`"));
        }
        out.push(Pii {
            name,
            strategy,
            options,
            detector,
        });
    }
    out
}

impl Pii {
    /// The middleware this entry builds (inside `build()`).
    pub fn middleware(&self, kit: &TokenStream) -> TokenStream {
        let pii = quote!(#kit::middleware::pii);
        let name = self.name.to_string();
        let failed = quote! {
            .map_err(|e| #kit::AgentError::middleware_error("PiiMiddleware", "pii", e))?
        };
        let mut m = match &self.detector {
            Detector::Builtin => {
                let variant = Ident::new(&camel_case(&name), self.name.span());
                quote!(#pii::PiiMiddleware::new(#pii::PiiType::#variant))
            }
            Detector::Regex(r) => quote!(#pii::PiiMiddleware::regex(#name, #r) #failed),
            Detector::Function(f) => {
                quote_spanned!(f.span()=> #pii::PiiMiddleware::function(#name, #f) #failed)
            }
        };
        if let Some(s) = &self.strategy {
            let variant = Ident::new(&camel_case(&s.to_string()), s.span());
            m = quote!(#m.strategy(#pii::PiiStrategy::#variant));
        }
        for (key, value) in &self.options {
            let method = Ident::new(key, value.span());
            m = quote_spanned!(value.span()=> #m.#method(#value));
        }
        m
    }
}
