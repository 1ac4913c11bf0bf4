//! Reading the `key = value` fields of a block entry: unknown and repeated keys are errors at
//! the key, with a did-you-mean.

use proc_macro2::Span;
use syn::Ident;

use super::parse::{Field, FieldValue};
use crate::common::{Errors, hint};

/// The fields of one entry, checked against the keys its block knows.
pub struct Fields {
    fields: Vec<Field>,
    /// The entry, for "missing field" errors.
    pub span: Span,
}

impl Fields {
    /// Checks `fields` against `known` (reporting unknown and repeated keys) and keeps the rest.
    /// `words` are the bare words the block accepts (PII strategies), checked by the caller.
    pub fn read(
        what: &str,
        span: Span,
        fields: Vec<Field>,
        known: &[&str],
        words: &[&str],
        errors: &mut Errors,
    ) -> Fields {
        let mut kept: Vec<Field> = Vec::new();
        for field in fields {
            let key = field.key.to_string();
            let is_word = matches!(field.value, FieldValue::Word);
            if !(known.contains(&key.as_str()) || is_word && words.contains(&key.as_str())) {
                let all: Vec<&str> = known.iter().chain(words).copied().collect();
                errors.at(
                    field.key.span(),
                    format!("unknown {what} field `{key}`{}", hint(&key, &all)),
                );
                continue;
            }
            if kept.iter().any(|f| f.key == field.key) {
                errors.at(field.key.span(), format!("`{key}` is given twice"));
                continue;
            }
            kept.push(field);
        }
        Fields { fields: kept, span }
    }

    /// The expression given for `key`; any other form is an error.
    pub fn expr(&mut self, key: &str, errors: &mut Errors) -> Option<syn::Expr> {
        let field = self.take(key)?;
        match field.value {
            FieldValue::Expr(e) => Some(e),
            _ => {
                errors.at(
                    field.key.span(),
                    format!("`{key}` takes a value: `{key} = ..`"),
                );
                None
            }
        }
    }

    /// The `{"name": value}` map given for `key`.
    pub fn map(&mut self, key: &str, errors: &mut Errors) -> Vec<(syn::LitStr, syn::Expr)> {
        let Some(field) = self.take(key) else {
            return Vec::new();
        };
        match field.value {
            FieldValue::Map(m) => m,
            _ => {
                errors.at(
                    field.key.span(),
                    format!("`{key}` takes a map: `{key} = {{\"Authorization\": \"Bearer ..\"}}`"),
                );
                Vec::new()
            }
        }
    }

    /// `[a, b]` given for `key`, as expressions.
    pub fn list(&mut self, key: &str, errors: &mut Errors) -> Option<Vec<syn::Expr>> {
        let expr = self.expr(key, errors)?;
        match expr {
            syn::Expr::Array(a) => Some(a.elems.into_iter().collect()),
            other => {
                errors.push(syn::Error::new_spanned(
                    other,
                    format!("`{key}` takes a list in brackets: `{key} = [a, b]`"),
                ));
                None
            }
        }
    }

    /// The `< .. >` block given for `key`.
    pub fn block(&mut self, key: &str, errors: &mut Errors) -> Option<super::parse::Block> {
        let field = self.take(key)?;
        match field.value {
            FieldValue::Block(b) => Some(b),
            _ => {
                errors.at(
                    field.key.span(),
                    format!("`{key}` takes a block: `{key}< .. >`"),
                );
                None
            }
        }
    }

    /// The bare words given (in order), taken out of the fields.
    pub fn words(&mut self) -> Vec<Ident> {
        let (words, rest): (Vec<Field>, Vec<Field>) = std::mem::take(&mut self.fields)
            .into_iter()
            .partition(|f| matches!(f.value, FieldValue::Word));
        self.fields = rest;
        words.into_iter().map(|f| f.key).collect()
    }

    fn take(&mut self, key: &str) -> Option<Field> {
        let at = self.fields.iter().position(|f| f.key == key)?;
        Some(self.fields.remove(at))
    }
}
