//! The model of a state struct, built from its attributes and validated.

use darling::FromMeta;
use darling::ast::NestedMeta;
use syn::Token;
use syn::ext::IdentExt;
use syn::parse::ParseStream;
use syn::spanned::Spanned;

use crate::common::Errors;

/// Names the generated update type uses for methods; a field cannot take them.
const RESERVED: &[&str] = &["new", "default", "into_output"];

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
    /// False when the field's name is taken by the update type's own methods (only in the
    /// stand-in expansion after an error).
    pub builder: bool,
}

/// A validated state struct.
pub struct StateModel {
    pub ident: syn::Ident,
    pub vis: syn::Visibility,
    pub krate: Option<syn::Path>,
    pub channels: Vec<Channel>,
    pub dynamic: bool,
}

/// The `#[state(...)]` options of a field, read by darling.
#[derive(FromMeta, Default)]
#[darling(default)]
struct FieldAttrs {
    reducer: Option<syn::Path>,
    update: Option<TypeValue>,
    dynamic: darling::util::Flag,
}

/// The `#[state(...)]` options of the struct.
#[derive(FromMeta, Default)]
#[darling(default)]
struct StructAttrs {
    #[darling(rename = "crate")]
    krate: Option<syn::Path>,
}

/// A type as an option's value (`update = BTreeMap<String, i64>`), which syn cannot read as the
/// expression darling expects: the parser below hands it over verbatim.
struct TypeValue(syn::Type);

impl FromMeta for TypeValue {
    fn from_expr(expr: &syn::Expr) -> darling::Result<Self> {
        let tokens = match expr {
            syn::Expr::Verbatim(tokens) => tokens.clone(),
            other => quote::quote!(#other),
        };
        syn::parse2(tokens)
            .map(TypeValue)
            .map_err(|e| darling::Error::custom(format!("expected a type: {e}")).with_span(expr))
    }
}

/// The options of every `#[state(...)]` attribute in `attrs`, as meta items: `key`, or
/// `key = value` where `update`'s value is a type and any other value an expression.
fn state_metas(attrs: &[syn::Attribute], errors: &mut Errors) -> Vec<NestedMeta> {
    let mut metas = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("state")) {
        let parsed = attr.parse_args_with(|input: ParseStream| {
            let mut out = Vec::new();
            while !input.is_empty() {
                let key = syn::Ident::parse_any(input)?;
                let path = syn::Path::from(key.clone());
                let meta = if input.peek(Token![=]) {
                    let eq_token = input.parse()?;
                    let value = if key == "update" {
                        let ty: syn::Type = input.parse().map_err(|e| {
                            syn::Error::new(
                                e.span(),
                                "`update` takes the reducer's update type: \
                                 `update = BTreeMap<String, Option<i64>>`",
                            )
                        })?;
                        syn::Expr::Verbatim(quote::quote!(#ty))
                    } else {
                        input.parse()?
                    };
                    syn::Meta::NameValue(syn::MetaNameValue {
                        path,
                        eq_token,
                        value,
                    })
                } else {
                    syn::Meta::Path(path)
                };
                out.push(NestedMeta::Meta(meta));
                if input.is_empty() {
                    break;
                }
                input.parse::<Token![,]>()?;
            }
            Ok(out)
        });
        match parsed {
            Ok(list) => metas.extend(list),
            Err(e) => errors.push(e),
        }
    }
    metas
}

impl StateModel {
    /// The checked model, or the errors with a best-effort model to expand beside them (so
    /// uses of the state type and its update type add no errors of their own); no model when
    /// the input is not a plain struct with named fields.
    pub fn from_input(input: &syn::DeriveInput) -> Result<Self, (syn::Error, Option<Box<Self>>)> {
        let mut errors = Errors::default();
        let fields = match &input.data {
            syn::Data::Struct(syn::DataStruct {
                fields: syn::Fields::Named(named),
                ..
            }) => named.named.iter().collect::<Vec<_>>(),
            _ => {
                return Err((
                    syn::Error::new(
                        input.ident.span(),
                        "#[derive(State)] needs a struct with named fields: each field is a \
                         channel",
                    ),
                    None,
                ));
            }
        };
        let krate = match StructAttrs::from_list(&state_metas(&input.attrs, &mut errors)) {
            Ok(a) => a.krate,
            Err(e) => {
                errors.darling(e);
                None
            }
        };
        let generic = !input.generics.params.is_empty();
        if generic {
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
            let attrs = match FieldAttrs::from_list(&state_metas(&field.attrs, &mut errors)) {
                Ok(a) => a,
                Err(e) => {
                    errors.darling(e);
                    FieldAttrs::default()
                }
            };
            let name = ident.to_string();
            let reserved = RESERVED.contains(&name.as_str());
            if reserved {
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
            let dynamic = attrs.dynamic.is_present().then(|| attrs.dynamic.span());
            let merge = match (attrs.reducer, attrs.update.map(|u| u.0), dynamic) {
                (None, Some(update), _) => {
                    errors.push(syn::Error::new_spanned(
                        &update,
                        "`update` names the update type of a reducer; add `reducer = path` too",
                    ));
                    Merge::LastValue
                }
                (Some(reducer), _, Some(_)) => {
                    errors.push(syn::Error::new_spanned(
                        &reducer,
                        "a `dynamic` field uses the reducers registered at run time; remove \
                         `reducer`",
                    ));
                    Merge::LastValue
                }
                (None, None, Some(span)) => {
                    dynamic_fields += 1;
                    if dynamic_fields > 1 {
                        errors.at(span, "only one field of a State struct can be `dynamic`");
                        Merge::LastValue
                    } else {
                        Merge::Dynamic
                    }
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
                builder: !reserved,
            });
        }
        let model = StateModel {
            ident: input.ident.clone(),
            vis: input.vis.clone(),
            krate,
            dynamic: dynamic_fields > 0,
            channels,
        };
        match errors.into_result() {
            Ok(()) => Ok(model),
            Err(e) => Err((e, (!generic).then(|| Box::new(model)))),
        }
    }
}
