//! Code generation for `#[agent(...)]`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::parse::AgentDef;

pub fn expand(def: &AgentDef, item: &syn::ItemStruct) -> TokenStream {
    let ident = &item.ident;
    let vis = &item.vis;
    let name = &def.name;
    let model = &def.model;
    let mut calls = vec![quote!(.name(#name))];
    calls.push(quote_spanned!(model.span()=> .model(#model)));
    if let Some(p) = &def.system_prompt {
        calls.push(quote_spanned!(p.span()=> .system_prompt(#p)));
    }
    for t in &def.tools {
        calls.push(quote_spanned!(t.span()=> .tool(#t)));
    }
    for m in &def.middleware {
        calls.push(quote_spanned!(m.span()=> .middleware(#m)));
    }
    if !def.subagents.is_empty() {
        let subs = &def.subagents;
        calls.push(quote!(.subagents([#(::kit::middleware::Subagent::from(#subs)),*])));
    }
    if let Some(c) = &def.checkpointer {
        calls.push(quote_spanned!(c.span()=> .checkpointer(#c)));
    }
    if let Some(r) = &def.recursion_limit {
        calls.push(quote_spanned!(r.span()=> .recursion_limit(#r)));
    }
    if let Some(c) = &def.compact_conversation {
        calls.push(quote_spanned!(c.span()=> .compact_conversation(#c)));
    }
    if let Some(o) = &def.overflow_recovery {
        calls.push(quote_spanned!(o.span()=> .overflow_recovery(#o)));
    }
    if !def.async_subagents.is_empty() {
        let specs = def.async_subagents.iter().map(|e| {
            let n = e.name.to_string();
            let description = &e.description;
            let graph_id = &e.graph_id;
            let mut spec = quote! {
                ::kit::middleware::async_subagents::AsyncSpec::new(#n, #description, #graph_id)
            };
            if let Some(url) = &e.url {
                spec = quote!(#spec.url(#url));
            }
            for (k, v) in &e.headers {
                spec = quote!(#spec.header(#k, #v));
            }
            spec
        });
        calls.push(quote!(.async_subagents([#(#specs),*])));
    }
    let doc = format!("The agent `{name}`, declared with `#[agent]`.");
    quote! {
        #[doc = #doc]
        #item

        impl #ident {
            /// Builds a new instance of this agent (checks the definition, resolves the model).
            #vis fn build() -> ::core::result::Result<::kit::Agent, ::kit::AgentError> {
                ::kit::Agent::builder()
                    #(#calls)*
                    .build()
            }

            /// This agent, built once and shared.
            #vis fn agent() -> ::core::result::Result<&'static ::kit::Agent, ::kit::AgentError> {
                static AGENT: ::std::sync::OnceLock<::kit::Agent> = ::std::sync::OnceLock::new();
                if let ::core::option::Option::Some(agent) = AGENT.get() {
                    return ::core::result::Result::Ok(agent);
                }
                let built = Self::build()?;
                ::core::result::Result::Ok(AGENT.get_or_init(|| built))
            }

            /// Runs the agent on `input` (see `kit::Agent::invoke`).
            #vis async fn invoke(
                input: impl ::core::convert::Into<::kit::agent::AgentInput>,
                opts: &::kit::RunOptions,
            ) -> ::core::result::Result<::kit::agent::AgentOutcome, ::kit::AgentError> {
                Self::agent()?.invoke(input).options(opts).await
            }

            /// Resumes a paused run (see `kit::Agent::resume`).
            #vis async fn resume(
                payload: impl ::core::convert::Into<::kit::Resume>,
                opts: &::kit::RunOptions,
            ) -> ::core::result::Result<::kit::agent::AgentOutcome, ::kit::AgentError> {
                Self::agent()?.resume(payload).options(opts).await
            }

            /// Runs the agent and streams its events (see `kit::Agent::stream_events`).
            #vis fn stream_events(
                input: impl ::core::convert::Into<::kit::agent::AgentInput>,
                opts: &::kit::RunOptions,
            ) -> ::core::result::Result<::kit::EventStream, ::kit::AgentError> {
                ::core::result::Result::Ok(Self::agent()?.stream_events(input, opts))
            }
        }
    }
}

/// Stand-in methods emitted next to errors, so callers of `invoke` get no follow-on errors.
pub fn fallback(item: &syn::ItemStruct) -> TokenStream {
    let ident = &item.ident;
    quote! {
        impl #ident {
            #[allow(dead_code)]
            fn build() -> ::core::result::Result<::kit::Agent, ::kit::AgentError> {
                ::core::unreachable!()
            }
            #[allow(dead_code)]
            fn agent() -> ::core::result::Result<&'static ::kit::Agent, ::kit::AgentError> {
                ::core::unreachable!()
            }
            #[allow(dead_code)]
            async fn invoke(
                _input: impl ::core::convert::Into<::kit::agent::AgentInput>,
                _opts: &::kit::RunOptions,
            ) -> ::core::result::Result<::kit::agent::AgentOutcome, ::kit::AgentError> {
                ::core::unreachable!()
            }
            #[allow(dead_code)]
            async fn resume(
                _payload: impl ::core::convert::Into<::kit::Resume>,
                _opts: &::kit::RunOptions,
            ) -> ::core::result::Result<::kit::agent::AgentOutcome, ::kit::AgentError> {
                ::core::unreachable!()
            }
        }
    }
}
