//! The model of a state struct, built from its attributes and validated.

use darling::{FromDeriveInput, FromField, util::Flag};
use syn::spanned::Spanned;

use crate::common::Errors;

/// Names the generated update type uses for methods; a field cannot take them.
const RESERVED: &[&str] = &["new", "default", "into_output"];

#[derive(FromDeriveInput)]
#[darling(attributes(state), supports(struct_named))]
struct StateOpts {
    ident: syn::Ident,
    vis: syn::Visibility,
    generics: syn::Generics,
    data: darling::ast::Data<(), FieldOpts>,
    /// Path to the kit crate, for renamed dependencies.
    #[darling(rename = "crate")]
    krate: Option<syn::Path>,
}

#[derive(FromField)]
#[darling(attributes(state))]
struct FieldOpts {
    ident: Option<syn::Ident>,
    ty: syn::Type,
    reducer: Option<syn::Path>,
    update: Option<syn::Type>,
    dynamic: Flag,
}

/// How a channel merges writes.
pub enum Merge {
    /// Last value wins.
    LastValue,
    /// Folded with a reducer function; `update` is the update type.
    Reduced {
        reducer: syn::Path,
        update: syn::Type,
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

impl StateModel {
    pub fn from_input(input: &syn::DeriveInput) -> Result<Self, syn::Error> {
        let opts = StateOpts::from_derive_input(input).map_err(syn::Error::from)?;
        let mut errors = Errors::default();
        if !opts.generics.params.is_empty() {
            errors.at(
                opts.generics.span(),
                "a State struct cannot be generic: its channels are stored and restored by name, \
                 so their types must be concrete",
            );
        }
        let fields = opts
            .data
            .take_struct()
            .map(|f| f.fields)
            .unwrap_or_default();
        if fields.is_empty() {
            errors.at(
                opts.ident.span(),
                "a State struct needs at least one field: every field is a channel",
            );
        }
        let mut channels = Vec::new();
        let mut dynamic_fields = 0;
        for field in fields {
            let Some(ident) = field.ident.clone() else {
                continue;
            };
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
            let merge = match (field.reducer, field.update, field.dynamic.is_present()) {
                (None, Some(update), _) => {
                    errors.at(
                        update.span(),
                        "`update` names the update type of a reducer; add `reducer = path` too",
                    );
                    Merge::LastValue
                }
                (Some(reducer), _, true) => {
                    errors.at(
                        reducer.span(),
                        "a `dynamic` field uses the reducers registered at run time; remove \
                         `reducer`",
                    );
                    Merge::Dynamic
                }
                (None, None, true) => {
                    dynamic_fields += 1;
                    if dynamic_fields > 1 {
                        errors.at(
                            ident.span(),
                            "only one field of a State struct can be `dynamic`",
                        );
                    }
                    Merge::Dynamic
                }
                (Some(reducer), update, false) => Merge::Reduced {
                    update: update.clone().unwrap_or_else(|| field.ty.clone()),
                    reducer,
                },
                (None, None, false) => Merge::LastValue,
            };
            let same_update_type = match &merge {
                Merge::Reduced { update, .. } => update == &field.ty,
                _ => true,
            };
            channels.push(Channel {
                ident,
                ty: field.ty,
                merge,
                same_update_type,
            });
        }
        errors.into_result()?;
        Ok(StateModel {
            ident: opts.ident,
            vis: opts.vis,
            krate: opts.krate,
            dynamic: dynamic_fields > 0,
            channels,
        })
    }
}
