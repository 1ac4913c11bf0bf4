//! Code generation for `#[agent(...)]`: `build()` as a chain of `Agent::builder()` calls, the
//! methods that run the agent, and the stand-ins emitted after an error. The stand-ins come
//! from the same method list as the real methods, so their signatures cannot drift apart.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::model::{Agent, Fallback};
use super::options::{Filesystem, ModelOpts, Switch};
use super::review;
use crate::common::kit_path;

pub fn expand(agent: &Agent, item: &syn::ItemStruct) -> TokenStream {
    let kit = kit_path(agent.krate.as_ref());
    let ident = &agent.ident;
    let name = &agent.name;
    let steps = build_steps(agent, &kit);
    let build = quote! {
        let builder = #kit::Agent::builder().name(#name);
        #(let builder = #steps;)*
        ::core::result::Result::Ok(builder)
    };
    let check = review::check_names(&agent.interrupt_on, agent.tool_names().as_deref(), &kit);
    let response = agent.response_format.as_ref().map(|r| &r.ty);
    let methods = methods(&Declared {
        kit: &kit,
        ident,
        vis: &agent.vis,
        name,
        response,
        build: Some(build),
    });
    quote! {
        #item
        #check
        #methods
    }
}

/// After an error: the struct and stand-in methods, so code calling them adds no errors.
pub fn fallback(item: &syn::ItemStruct, fallback: &Fallback) -> TokenStream {
    let kit = kit_path(fallback.krate.as_ref());
    let methods = methods(&Declared {
        kit: &kit,
        ident: &item.ident,
        vis: &item.vis,
        name: "",
        response: fallback.response_type.as_ref(),
        build: None,
    });
    quote! {
        #item
        #methods
    }
}

/// The builder calls, one per option, each spanned at the option so a type error lands there.
fn build_steps(agent: &Agent, kit: &TokenStream) -> Vec<TokenStream> {
    let mut steps = Vec::new();
    let model = &agent.model;
    steps.push(quote_spanned!(model.span()=> builder.model(#model)));
    match &agent.model_opts {
        Some(ModelOpts::Expr(e)) => steps.push(quote_spanned!(e.span()=> builder.model_opts(#e))),
        Some(ModelOpts::Fields(f)) => {
            let mut opts = quote!(#kit::model::ModelOptions::default());
            for (method, value) in [
                ("temperature", &f.temperature),
                ("max_tokens", &f.max_tokens),
                ("timeout_ms", &f.timeout_ms),
                ("retries", &f.retries),
            ] {
                if let Some(v) = value {
                    let v = &v.0;
                    let method = syn::Ident::new(method, v.span());
                    opts = quote_spanned!(v.span()=> #opts.#method(#v));
                }
            }
            steps.push(quote!(builder.model_opts(#opts)));
        }
        None => {}
    }
    if let Some(c) = &agent.config {
        steps.push(quote_spanned!(c.span()=> builder.config(#c)));
    }
    if let Some(p) = &agent.system_prompt {
        steps.push(quote_spanned!(p.span()=> builder.system_prompt(#p)));
    }
    for t in &agent.tools {
        steps.push(quote_spanned!(t.span()=> builder.tool(#t)));
    }
    if let Some(todos) = &agent.todos {
        let todos_mw = quote!(#kit::middleware::todos::TodoMiddleware::new());
        steps.push(switch(todos, |b| quote!(#b.middleware(#todos_mw))));
    }
    match &agent.filesystem {
        Some(Filesystem::State) => steps.push(quote! {
            builder.filesystem(#kit::middleware::filesystem::FilesystemMiddleware::new())
        }),
        Some(Filesystem::Dir(dir)) => steps.push(quote_spanned! {dir.span()=>
            builder.filesystem(#kit::__private::disk_filesystem(#dir)?)
        }),
        Some(Filesystem::Expr(e)) => steps.push(quote_spanned!(e.span()=> builder.filesystem(#e))),
        None => {}
    }
    if !agent.subagent_values.is_empty() {
        let values = agent
            .subagent_values
            .iter()
            .map(|s| quote_spanned!(s.span()=> #kit::middleware::Subagent::from(#s)));
        steps.push(quote!(builder.subagents([#(#values),*])));
    }
    if !agent.subagents.is_empty() {
        let specs = agent.subagents.iter().map(|s| s.spec(kit));
        steps.push(quote!(builder.subagents([#(#specs),*])));
    }
    if let Some(gp) = &agent.general_purpose_subagent {
        steps.push(switch_value(
            gp,
            |on| quote!(builder.general_purpose_subagent(#on)),
        ));
    }
    if !agent.async_subagents.is_empty() {
        let specs = agent.async_subagents.iter().map(|s| s.spec(kit));
        steps.push(quote!(builder.async_subagents([#(#specs),*])));
    }
    for p in &agent.pii {
        let m = p.middleware(kit);
        steps.push(quote!(builder.middleware(#m)));
    }
    if !agent.interrupt_on.is_empty() {
        let m = review::middleware(&agent.interrupt_on, kit);
        steps.push(quote!(builder.middleware(#m)));
    }
    for m in &agent.middleware {
        steps.push(quote_spanned!(m.span()=> builder.middleware(#m)));
    }
    if let Some(r) = &agent.response_format {
        let ty = &r.ty;
        let mut format = quote_spanned!(ty.span()=> #kit::agent::StructuredOutput::of::<#ty>());
        if let Some(s) = &r.strategy {
            let variant = syn::Ident::new(&crate::common::camel_case(&s.to_string()), s.span());
            format = quote!(#format.strategy(#kit::agent::StructuredStrategy::#variant));
        }
        if let Some(n) = &r.max_retries {
            format = quote_spanned!(n.span()=> #format.max_retries(#n));
        }
        steps.push(quote!(builder.response_format(#format)));
    }
    if let Some(c) = &agent.compact_conversation {
        steps.push(switch_value(
            c,
            |on| quote!(builder.compact_conversation(#on)),
        ));
    }
    if let Some(o) = &agent.overflow_recovery {
        steps.push(switch_value(o, |on| quote!(builder.overflow_recovery(#on))));
    }
    if let Some(c) = &agent.checkpointer {
        steps.push(quote_spanned!(c.span()=> builder.checkpointer(#c)));
    }
    if let Some(s) = &agent.store {
        steps.push(quote_spanned!(s.span()=> builder.store(#s)));
    }
    if let Some(b) = &agent.budget {
        steps.push(quote_spanned!(b.span()=> builder.budget(#b)));
    }
    if let Some(r) = &agent.recursion_limit {
        steps.push(quote_spanned!(r.span()=> builder.recursion_limit(#r)));
    }
    steps
}

/// A switch that adds something when on.
fn switch(s: &Switch, on: impl Fn(TokenStream) -> TokenStream) -> TokenStream {
    let add = on(quote!(builder));
    match s {
        Switch::On => add,
        Switch::Expr(e) => quote_spanned!(e.span()=> if #e { #add } else { builder }),
    }
}

/// A switch passed to a builder method taking a `bool`.
fn switch_value(s: &Switch, call: impl Fn(TokenStream) -> TokenStream) -> TokenStream {
    match s {
        Switch::On => call(quote!(true)),
        Switch::Expr(e) => {
            let e = quote_spanned!(e.span()=> #e);
            call(e)
        }
    }
}

/// What the methods are generated for.
struct Declared<'a> {
    kit: &'a TokenStream,
    ident: &'a syn::Ident,
    vis: &'a syn::Visibility,
    name: &'a str,
    response: Option<&'a syn::Type>,
    /// The body of `build()`; `None` for the stand-ins.
    build: Option<TokenStream>,
}

/// The generated API: one list for the real methods and the stand-ins.
fn methods(d: &Declared) -> TokenStream {
    let Declared {
        kit,
        ident,
        vis,
        name,
        ..
    } = d;
    let real = d.build.is_some();
    // A stand-in body: never run, since the crate does not compile.
    let body = |tokens: TokenStream| {
        if real {
            tokens
        } else {
            quote!(::core::unreachable!())
        }
    };
    let (output, finish) = match d.response {
        Some(ty) => (
            quote!(#kit::agent::TypedOutcome<#ty>),
            quote_spanned!(ty.span()=> #kit::agent::typed_outcome::<#ty>),
        ),
        None => (
            quote!(#kit::agent::AgentOutcome),
            quote!(::core::result::Result::Ok),
        ),
    };
    let invocation = quote!(#kit::graph::Invocation<'static, #kit::Agent, #output>);
    let result = |t: TokenStream| quote!(::core::result::Result<#t, #kit::AgentError>);
    let agent_result = result(quote!(&'static #kit::Agent));
    let built = result(quote!(#kit::Agent));
    let builder_result = result(quote!(#kit::agent::AgentBuilder));
    let run = |request: TokenStream| {
        body(quote! {
            #kit::graph::Invocation::declared(Self::agent(), #request, #finish)
        })
    };
    let builder_body = body(d.build.clone().unwrap_or_default());
    let build_body = body(quote!(Self::builder()?.build()));
    let agent_body = body(quote! {
        static AGENT: ::std::sync::OnceLock<#kit::Agent> = ::std::sync::OnceLock::new();
        #kit::__private::declared_agent(&AGENT, Self::build)
    });
    let invoke_body =
        run(quote!(#kit::graph::RunRequest::Input(::core::convert::Into::into(input))));
    let resume_body =
        run(quote!(#kit::graph::RunRequest::Resume(::core::convert::Into::into(payload))));
    let review_body = run(quote! {
        #kit::graph::RunRequest::Resume(#kit::middleware::review::resume_review(decisions))
    });
    let stream_body = body(quote! {
        match Self::agent() {
            ::core::result::Result::Ok(agent) => agent.stream_events(input, opts),
            ::core::result::Result::Err(e) => #kit::__private::error_stream(e),
        }
    });
    let the = format!("the agent `{name}` declared on [`{ident}`] with `#[agent]`");
    let doc_builder = format!(
        "The `Agent::builder()` that {the} expands to, to extend at run time (`.tool(..)`, \
         `.middleware(..)`) before building it."
    );
    let doc_build =
        format!("Builds a new instance of {the}: checks the declaration and resolves the model.");
    let doc_agent = format!(
        "{the}, built on first use and shared after (a failed build is retried on the next call)."
    );
    let typed = match d.response {
        Some(ty) => format!(
            " The outcome carries the answer as a `{}` (`response_format`).",
            quote!(#ty)
        ),
        None => String::new(),
    };
    let doc_invoke = format!(
        "Runs {the} on `input` (text, messages or a state update). Set per-run options on the \
         returned request (`.thread_id(\"t1\")`, `.options(&opts)`), then `.await` it.{typed}"
    );
    let doc_resume = format!(
        "Resumes a paused run of {the} with `payload` (the interrupt's answer). Set the \
         thread on the returned request, then `.await` it.{typed}"
    );
    let doc_review = format!(
        "Answers the human review of a paused run of {the} (its `interrupt_on< .. >` gates or \
         its subagents'): one decision per reviewed call, in order.{typed}"
    );
    let doc_stream = format!(
        "Runs {the} on `input` and streams its events; the stream ends after `run_end` or an \
         `error` (a failed build is an `error` event)."
    );
    let allow = (!real).then(|| quote!(#[allow(dead_code, unused_variables)]));
    quote! {
        #[automatically_derived]
        #allow
        impl #ident {
            /// The agent's name.
            #vis const NAME: &'static str = #name;

            #[doc = #doc_builder]
            #vis fn builder() -> #builder_result {
                #builder_body
            }

            #[doc = #doc_build]
            #vis fn build() -> #built {
                #build_body
            }

            #[doc = #doc_agent]
            #vis fn agent() -> #agent_result {
                #agent_body
            }

            #[doc = #doc_invoke]
            #vis fn invoke(input: impl ::core::convert::Into<#kit::agent::AgentInput>) -> #invocation {
                #invoke_body
            }

            #[doc = #doc_resume]
            #vis fn resume(payload: impl ::core::convert::Into<#kit::Resume>) -> #invocation {
                #resume_body
            }

            #[doc = #doc_review]
            #vis fn resume_review(
                decisions: impl #kit::middleware::review::ReviewDecisions,
            ) -> #invocation {
                #review_body
            }

            #[doc = #doc_stream]
            #vis fn stream_events(
                input: impl ::core::convert::Into<#kit::agent::AgentInput>,
                opts: &#kit::RunOptions,
            ) -> #kit::EventStream {
                #stream_body
            }
        }

        #[automatically_derived]
        #allow
        impl #kit::agent::DeclaredAgent for #ident {
            const NAME: &'static str = #name;

            fn builder() -> #builder_result {
                #ident::builder()
            }
        }
    }
}
