//! Code generation for `#[derive(State)]`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use super::model::{Merge, StateModel};
use crate::common::kit_path;

pub fn expand(model: &StateModel) -> TokenStream {
    let kit = kit_path(model.krate.as_ref());
    let p = quote!(#kit::__private);
    let ident = &model.ident;
    let vis = &model.vis;
    let update_ident = format_ident!("{}Update", ident);
    let serde_crate = format!("{}::__private::serde", kit.to_string().replace(' ', ""));

    let schema_ty = if model.dynamic {
        quote!(#kit::state::DynSchema)
    } else {
        quote!(())
    };

    let mut update_fields = Vec::new();
    let mut builders = Vec::new();
    let mut channel_infos = Vec::new();
    let mut checks = Vec::new();
    let mut applies = Vec::new();
    let mut saves = Vec::new();
    let mut restores = Vec::new();
    let mut written = Vec::new();
    let mut into_update = Vec::new();

    for (index, channel) in model.channels.iter().enumerate() {
        let f = &channel.ident;
        let ty = &channel.ty;
        let name = f.to_string();
        let update_ty = match &channel.merge {
            Merge::LastValue => quote!(#ty),
            Merge::Reduced { update, .. } => quote!(#update),
            Merge::Dynamic => quote!(#kit::state::DynUpdate),
        };
        let doc = format!("Writes the `{name}` channel (or replaces it, given `Overwrite`).");
        update_fields.push(quote! {
            #[serde(default, skip_serializing_if = "::core::option::Option::is_none")]
            #[doc = #doc]
            pub #f: ::core::option::Option<#p::Write<#update_ty>>,
        });
        if channel.builder {
            builders.push(quote! {
                #[doc = #doc]
                #[must_use]
                pub fn #f(mut self, value: impl #p::IntoWrite<#update_ty>) -> Self {
                    self.#f = ::core::option::Option::Some(#p::IntoWrite::into_write(value));
                    self
                }
            });
        }
        let reducer_text = match &channel.merge {
            Merge::LastValue => quote!(::core::option::Option::None),
            Merge::Reduced { reducer, .. } => {
                let text = quote!(#reducer).to_string().replace(' ', "");
                quote!(::core::option::Option::Some(#text))
            }
            Merge::Dynamic => quote!(::core::option::Option::Some("dynamic")),
        };
        channel_infos.push(quote!(#p::ChannelInfo { name: #name, reducer: #reducer_text }));
        let at = format_ident!("__at_{}", index);
        let reduced = !matches!(channel.merge, Merge::LastValue);
        checks.push(quote! {
            let #at = #p::check(updates, |u: &#update_ident| u.#f.as_ref(), #name, #reduced)?;
        });
        let reducer_closure = match &channel.merge {
            Merge::LastValue => quote!(),
            Merge::Reduced { reducer, update } => quote_spanned! {reducer.span()=>
                |current: &mut #ty, value: #update| #reducer(current, value)
            },
            // Applied and restored by step (`apply_dynamic`), not value by value.
            Merge::Dynamic => quote!(),
        };
        match &channel.merge {
            Merge::LastValue => {
                applies.push(quote! {
                    #p::apply_last_value(&mut self.#f, updates, |u: &mut #update_ident| &mut u.#f, #at, #index, changes);
                });
                restores.push(quote! {
                    #index => #p::restore_last_value(&mut self.#f, full, deltas, #name),
                });
            }
            Merge::Reduced { .. } | Merge::Dynamic => {
                if matches!(channel.merge, Merge::Dynamic) {
                    checks.push(quote! {
                        #kit::state::DynState::check(
                            schema,
                            updates.iter().filter_map(|u: &#update_ident| match &u.#f {
                                ::core::option::Option::Some(#p::Write::Value(v)) => ::core::option::Option::Some(v),
                                _ => ::core::option::Option::None,
                            }),
                        )?;
                    });
                }
                if matches!(channel.merge, Merge::Dynamic) {
                    applies.push(quote! {
                        #p::apply_dynamic(&mut self.#f, schema, updates, |u: &mut #update_ident| &mut u.#f, #at, #index, #name, changes, record)?;
                    });
                    restores.push(quote! {
                        #index => #p::restore_dynamic(&mut self.#f, schema, full, deltas, #name),
                    });
                } else {
                    applies.push(quote! {
                        #p::apply_reduced(&mut self.#f, updates, |u: &mut #update_ident| &mut u.#f, #reducer_closure, #at, #index, #name, changes, record)?;
                    });
                    restores.push(quote! {
                        #index => #p::restore_reduced(&mut self.#f, full, deltas, #reducer_closure, #name),
                    });
                }
            }
        }
        saves.push(quote!(#index => #p::save(&self.#f, #name),));
        written.push(quote! {
            if update.#f.is_some() { out.push(#index); }
        });
        if channel.same_update_type && !matches!(channel.merge, Merge::Dynamic) {
            into_update.push(quote!(#f: ::core::option::Option::Some(#p::Write::Value(self.#f)),));
        } else if matches!(channel.merge, Merge::Dynamic) {
            into_update.push(quote!(#f: ::core::option::Option::Some(#p::Write::Value(#kit::state::State::into_update(self.#f))),));
        }
    }

    let update_doc = format!(
        "A partial update of [`{ident}`]: set only the channels a node writes. Generated by \
         `#[derive(State)]`."
    );
    let schema_binding = if model.dynamic {
        quote!()
    } else {
        quote!(let _ = schema;)
    };

    // A state with a dynamic field takes its schema's initial values and merges schemas.
    let dynamic_schema = match model
        .channels
        .iter()
        .find(|c| matches!(c.merge, Merge::Dynamic))
    {
        Some(channel) => {
            let f = &channel.ident;
            quote! {
                fn initial(schema: &Self::Schema) -> ::core::option::Option<#update_ident> {
                    let dynamic = <#kit::state::DynState as #p::State>::initial(schema)?;
                    ::core::option::Option::Some(#update_ident {
                        #f: ::core::option::Option::Some(#p::Write::Value(dynamic)),
                        ..::core::default::Default::default()
                    })
                }

                fn merge_schema(into: &mut Self::Schema, other: Self::Schema) {
                    into.merge(other);
                }
            }
        }
        None => quote!(),
    };

    quote! {
        #[doc = #update_doc]
        #[derive(::core::default::Default, #p::serde::Serialize, #p::serde::Deserialize)]
        #[serde(crate = #serde_crate, default)]
        #vis struct #update_ident {
            #(#update_fields)*
        }

        #[automatically_derived]
        impl #update_ident {
            /// An update that writes nothing.
            #[must_use]
            pub fn new() -> Self {
                ::core::default::Default::default()
            }
            #(#builders)*
        }

        #[automatically_derived]
        impl ::core::fmt::Debug for #update_ident {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                // Shown as JSON: field types need not implement Debug.
                match #p::serde_json::to_string(self) {
                    ::core::result::Result::Ok(json) => write!(f, "{} {}", stringify!(#update_ident), json),
                    ::core::result::Result::Err(_) => f.write_str(stringify!(#update_ident)),
                }
            }
        }

        #[automatically_derived]
        impl #kit::graph::IntoNodeOutput<#ident> for #update_ident {
            fn into_output(self) -> ::core::result::Result<#kit::graph::NodeOutput<#ident>, #kit::graph::NodeError> {
                ::core::result::Result::Ok(#kit::graph::NodeOutput::update(self))
            }
        }

        #[automatically_derived]
        impl #p::State for #ident {
            type Update = #update_ident;
            type Schema = #schema_ty;

            fn channels() -> &'static [#p::ChannelInfo] {
                const CHANNELS: &[#p::ChannelInfo] = &[#(#channel_infos),*];
                CHANNELS
            }

            #[allow(clippy::redundant_closure)]
            fn apply(
                &mut self,
                schema: &Self::Schema,
                updates: &mut ::std::vec::Vec<#update_ident>,
                changes: &mut ::std::vec::Vec<#p::ChannelChange>,
                record: bool,
            ) -> ::core::result::Result<(), #p::StateError> {
                #schema_binding
                #(#checks)*
                #(#applies)*
                updates.clear();
                ::core::result::Result::Ok(())
            }

            fn save_channel(&self, channel: usize) -> ::core::result::Result<::std::vec::Vec<u8>, #p::StateError> {
                match channel {
                    #(#saves)*
                    other => ::core::result::Result::Err(#p::StateError::UnknownChannel(other.to_string())),
                }
            }

            #[allow(clippy::redundant_closure)]
            fn restore_channel(
                &mut self,
                schema: &Self::Schema,
                channel: usize,
                full: ::core::option::Option<&[u8]>,
                deltas: &[&[u8]],
            ) -> ::core::result::Result<(), #p::StateError> {
                #schema_binding
                match channel {
                    #(#restores)*
                    other => ::core::result::Result::Err(#p::StateError::UnknownChannel(other.to_string())),
                }
            }

            fn written_channels(update: &#update_ident, out: &mut ::std::vec::Vec<usize>) {
                #(#written)*
            }

            #dynamic_schema

            #[allow(clippy::needless_update)]
            fn into_update(self) -> #update_ident {
                #update_ident {
                    #(#into_update)*
                    ..::core::default::Default::default()
                }
            }
        }

    }
}
