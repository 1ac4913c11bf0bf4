//! The model of a tool argument struct.

use crate::common::{Errors, closest};

const KEYS: &[&str] = &["name", "description", "max_result_chars", "crate"];

pub struct ToolModel {
    pub ident: syn::Ident,
    pub name: String,
    pub description: String,
    pub max_result_chars: Option<usize>,
    pub krate: Option<syn::Path>,
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
fn snake_case(name: &str) -> String {
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

fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The part of a field type that cannot come from a model's JSON arguments, and why.
fn unsupported(ty: &syn::Type) -> Option<(&syn::Type, &'static str)> {
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

impl ToolModel {
    pub fn from_input(input: &syn::DeriveInput) -> Result<Self, syn::Error> {
        let mut errors = Errors::default();
        let mut name = None;
        let mut description = None;
        let mut max_result_chars = None;
        let mut krate = None;
        for attr in input.attrs.iter().filter(|a| a.path().is_ident("tool")) {
            let result = attr.parse_nested_meta(|meta| {
                let key = meta
                    .path
                    .get_ident()
                    .map(|i| i.to_string())
                    .unwrap_or_default();
                match key.as_str() {
                    "name" => {
                        let lit: syn::LitStr = meta.value()?.parse()?;
                        if !valid_tool_name(&lit.value()) {
                            return Err(syn::Error::new(
                                lit.span(),
                                "a tool name must be 1-64 characters of letters, digits, `_` or \
                                 `-` (the providers' rule)",
                            ));
                        }
                        name = Some(lit.value());
                    }
                    "description" => {
                        let lit: syn::LitStr = meta.value()?.parse()?;
                        description = Some(lit.value());
                    }
                    "max_result_chars" => {
                        let lit: syn::LitInt = meta.value()?.parse().map_err(|e| {
                            syn::Error::new(e.span(), "`max_result_chars` takes an integer")
                        })?;
                        let n: usize = lit.base10_parse()?;
                        if n == 0 {
                            return Err(syn::Error::new(
                                lit.span(),
                                "`max_result_chars` must be at least 1",
                            ));
                        }
                        max_result_chars = Some(n);
                    }
                    "crate" => krate = Some(meta.value()?.parse()?),
                    _ => {
                        let hint = match closest(&key, KEYS.iter().copied()) {
                            Some(c) => format!("; did you mean `{c}`?"),
                            None => format!("; expected one of: {}", KEYS.join(", ")),
                        };
                        return Err(meta.error(format!("unknown tool attribute `{key}`{hint}")));
                    }
                }
                Ok(())
            });
            if let Err(e) = result {
                errors.push(e);
            }
        }
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
        if !input.generics.params.is_empty() {
            errors.push(syn::Error::new_spanned(
                &input.generics,
                "a tool's argument struct cannot be generic: the schema sent to the model must \
                 be concrete",
            ));
        }
        let description = description.unwrap_or_else(|| doc_text(&input.attrs));
        if description.is_empty() {
            errors.at(
                input.ident.span(),
                "a tool needs a description for the model: add a doc comment (`/// Adds two \
                 numbers.`) or `#[tool(description = \"...\")]`",
            );
        }
        errors.into_result()?;
        Ok(ToolModel {
            name: name.unwrap_or_else(|| snake_case(&input.ident.to_string())),
            ident: input.ident.clone(),
            description,
            max_result_chars,
            krate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(snake_case("WriteFile"), "write_file");
        assert_eq!(snake_case("Add"), "add");
        assert!(valid_tool_name("read_file-2"));
        assert!(!valid_tool_name("read file"));
    }
}
