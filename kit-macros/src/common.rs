//! What the macros share: error collection, the path to the runtime crate, names, doc text.

use proc_macro2::TokenStream;
use quote::quote;

/// The closest candidate to `name`, for "did you mean" hints (the graph rulebook's).
pub use kit_graph_rules::closest;

/// Collects errors so a macro reports all of them at once.
#[derive(Default)]
pub struct Errors {
    errors: Option<syn::Error>,
}

impl Errors {
    /// Records an error.
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.errors {
            Some(e) => e.combine(error),
            None => self.errors = Some(error),
        }
    }

    /// Records an error at a span.
    pub fn at(&mut self, span: proc_macro2::Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    /// Records darling's errors.
    pub fn darling(&mut self, error: darling::Error) {
        for e in error.into_iter() {
            self.push(e.into());
        }
    }

    /// `Err` with every recorded error, or `Ok`.
    pub fn into_result(self) -> Result<(), syn::Error> {
        match self.errors {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The path to the runtime crate in generated code: `crate = path` when the user gave one
/// (the crate renamed or re-exported), else `::kit`. The one place the macros name it.
pub fn kit_path(custom: Option<&syn::Path>) -> TokenStream {
    match custom {
        Some(p) => quote!(#p),
        None => quote!(::kit),
    }
}

/// The same path as a string, for attributes that take one (`#[serde(crate = "...")]`).
pub fn kit_path_str(custom: Option<&syn::Path>) -> String {
    kit_path(custom).to_string().replace(' ', "")
}

/// "; did you mean `x`?" for the closest of `known`, else "; expected one of: ...".
pub fn hint(name: &str, known: &[&str]) -> String {
    match closest(name, known.iter().copied()) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => format!("; expected one of: {}", known.join(", ")),
    }
}

/// The text of the `///` doc comments, paragraphs kept.
pub fn doc_text(attrs: &[syn::Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            lines.push(s.value().trim().to_string());
        }
    }
    lines.join("\n").trim().to_string()
}

/// `WriteFile` → `write_file`.
pub fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `lookup_order` → `LookupOrder`.
pub fn camel_case(name: &str) -> String {
    name.split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect(),
                None => String::new(),
            }
        })
        .collect()
}

/// The name an identifier stands for, without the `r#` of a raw identifier (`r#type` names
/// the node `type`).
pub fn name_of(ident: &syn::Ident) -> String {
    syn::ext::IdentExt::unraw(ident).to_string()
}

/// The type named after a function (`look_up` → `LookUp`, `r#move` → `Move`), spanned at it;
/// `None` when the name makes no type name (`__`, a keyword such as `Self`).
pub fn type_named_after(func: &syn::Ident) -> Option<syn::Ident> {
    use syn::ext::IdentExt;
    let camel = camel_case(&func.unraw().to_string());
    let mut ident = syn::parse_str::<syn::Ident>(&camel).ok()?;
    ident.set_span(func.span());
    Some(ident)
}

/// A tool name the providers accept: 1-64 letters, digits, `_` or `-`.
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// An option's value as the user wrote it, for darling: the expression itself (darling's own
/// `syn::Expr` reads a string literal as the code inside it, which `name = "web-search"` is not).
pub struct AnyExpr(pub syn::Expr);

impl darling::FromMeta for AnyExpr {
    fn from_expr(expr: &syn::Expr) -> darling::Result<Self> {
        Ok(AnyExpr(expr.clone()))
    }
}

/// The string of a string literal expression.
pub fn lit_str(e: &syn::Expr) -> Option<&syn::LitStr> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(snake_case("WriteFile"), "write_file");
        assert_eq!(snake_case("Add"), "add");
        assert_eq!(camel_case("lookup_order"), "LookupOrder");
        assert_eq!(camel_case("add"), "Add");
        assert!(valid_tool_name("read_file-2"));
        assert!(!valid_tool_name("read file"));
    }
}
