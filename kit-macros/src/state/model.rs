//! The model of a state struct, built from its attributes and validated.

use syn::spanned::Spanned;

use crate::common::{Errors, closest};

/// Names the generated update type uses for methods; a field cannot take them.
const RESERVED: &[&str] = &["new", "default", "into_output"];
const FIELD_KEYS: &[&str] = &["reducer", "update", "dynamic"];

/// How a channel merges writes.
pub enum Merge {
    /// Last value wins.
    LastValue,
    /// Folded with a reducer function; `update` is the update type.
    Reduced {
        reducer: Box<syn::Path>,
        update: Box<syn::Type>,
    },
    /// A `DynState` with run-time reducers.
    Dynamic,
}

/// One channel.
pub struct Channel {
    pub ident: syn::Ident,
    pub ty: syn::Type,
    pub merge: Merge,
    /// True when the update type is the field type (so `into_update` can write it).
    pub same_update_type: bool,
}

/// A validated state struct.
pub struct StateModel {
    pub ident: syn::Ident,
    pub vis: syn::Visibility,
    pub krate: Option<syn::Path>,
    pub channels: Vec<Channel>,
    pub dynamic: bool,
}

/// The raw `#[state(...)]` options of a field.
#[derive(Default)]
struct FieldAttrs {
    reducer: Option<syn::Path>,
    update: Option<syn::Type>,
    dynamic: Option<proc_macro2::Span>,
}

fn parse_field_attrs(field: &syn::Field, errors: &mut Errors) -> FieldAttrs {
    let mut attrs = FieldAttrs::default();
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("state")) {
        let result = attr.parse_nested_meta(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            match key.as_str() {
                "reducer" => {
                    if attrs.reducer.is_some() {
                        return Err(meta.error("`reducer` is given twice"));
                    }
                    attrs.reducer = Some(meta.value()?.parse()?);
                }
                "update" => {
                    if attrs.update.is_some() {
                        return Err(meta.error("`update` is given twice"));
                    }
                    attrs.update = Some(meta.value()?.parse()?);
                }
                "dynamic" => attrs.dynamic = Some(meta.path.span()),
                _ => {
                    let hint = match closest(&key, FIELD_KEYS.iter().copied()) {
                        Some(c) => format!("; did you mean `{c}`?"),
                        None => format!("; expected one of: {}", FIELD_KEYS.join(", ")),
                    };
                    return Err(meta.error(format!("unknown state attribute `{key}`{hint}")));
                }
            }
            Ok(())
        });
        if let Err(e) = result {
            errors.push(e);
        }
    }
    attrs
}

fn parse_struct_attrs(input: &syn::DeriveInput, errors: &mut Errors) -> Option<syn::Path> {
    let mut krate = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("state")) {
        let result = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                krate = Some(meta.value()?.parse()?);
                Ok(())
            } else {
                Err(meta.error("unknown state attribute on the struct; expected `crate = path`"))
            }
        });
        if let Err(e) = result {
            errors.push(e);
        }
    }
    krate
}

impl StateModel {
    pub fn from_input(input: &syn::DeriveInput) -> Result<Self, syn::Error> {
        let mut errors = Errors::default();
        let fields = match &input.data {
            syn::Data::Struct(syn::DataStruct {
                fields: syn::Fields::Named(named),
                ..
            }) => named.named.iter().collect::<Vec<_>>(),
            _ => {
                return Err(syn::Error::new(
                    input.ident.span(),
                    "#[derive(State)] needs a struct with named fields: each field is a channel",
                ));
            }
        };
        let krate = parse_struct_attrs(input, &mut errors);
        if !input.generics.params.is_empty() {
            errors.at(
                input.generics.span(),
                "a State struct cannot be generic: its channels are stored and restored by name, \
                 so their types must be concrete",
            );
        }
        if fields.is_empty() {
            errors.at(
                input.ident.span(),
                "a State struct needs at least one field: every field is a channel",
            );
        }
        let mut channels = Vec::new();
        let mut dynamic_fields = 0;
        for field in fields {
            let Some(ident) = field.ident.clone() else {
                continue;
            };
            let attrs = parse_field_attrs(field, &mut errors);
            let name = ident.to_string();
            if RESERVED.contains(&name.as_str()) {
                errors.at(
                    ident.span(),
                    format!(
                        "a state field cannot be named `{name}`: the generated update builder \
                         has a method with that name; rename the field"
                    ),
                );
            }
            if name.starts_with("__") {
                errors.at(
                    ident.span(),
                    "state field names starting with `__` are reserved for kit",
                );
            }
            let merge = match (attrs.reducer, attrs.update, attrs.dynamic) {
                (None, Some(update), _) => {
                    errors.at(
                        update.span(),
                        "`update` names the update type of a reducer; add `reducer = path` too",
                    );
                    Merge::LastValue
                }
                (Some(reducer), _, Some(_)) => {
                    errors.at(
                        reducer.span(),
                        "a `dynamic` field uses the reducers registered at run time; remove \
                         `reducer`",
                    );
                    Merge::Dynamic
                }
                (None, None, Some(span)) => {
                    dynamic_fields += 1;
                    if dynamic_fields > 1 {
                        errors.at(span, "only one field of a State struct can be `dynamic`");
                    }
                    Merge::Dynamic
                }
                (Some(reducer), update, None) => Merge::Reduced {
                    update: Box::new(update.unwrap_or_else(|| field.ty.clone())),
                    reducer: Box::new(reducer),
                },
                (None, None, None) => Merge::LastValue,
            };
            let same_update_type = match &merge {
                Merge::Reduced { update, .. } => **update == field.ty,
                _ => true,
            };
            channels.push(Channel {
                ident,
                ty: field.ty.clone(),
                merge,
                same_update_type,
            });
        }
        errors.into_result()?;
        Ok(StateModel {
            ident: input.ident.clone(),
            vis: input.vis.clone(),
            krate,
            dynamic: dynamic_fields > 0,
            channels,
        })
    }
}
