//! Code generation for `graph!`: a block that assembles a `GraphBuilder` and compiles it.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::parse::{Endpoint, GraphDef, NodeFunc};
use crate::common::kit_path;

fn endpoint_name(e: &Endpoint, kit: &TokenStream) -> TokenStream {
    match e {
        Endpoint::Start(_) => quote!(#kit::graph::START),
        Endpoint::End(_) => quote!(#kit::graph::END),
        Endpoint::Node(i) => {
            let s = crate::common::name_of(i);
            quote!(#s)
        }
    }
}

pub fn expand(def: &GraphDef) -> TokenStream {
    let Some(state) = &def.state else {
        return fallback(def);
    };
    let kit = &kit_path(def.krate.as_ref());
    let endpoint_name = |e: &Endpoint| endpoint_name(e, kit);
    let name = def
        .name
        .as_ref()
        .map(|n| quote!(#n))
        .unwrap_or_else(|| quote!("graph"));
    let mut calls = Vec::new();

    for node in &def.nodes {
        let node_name = crate::common::name_of(&node.name);
        let func = match &node.func {
            NodeFunc::Path(path) => {
                let call = quote_spanned! {path.span()=>
                    #path(&*state, &ctx).await
                };
                quote! {
                    #kit::__private::node_fn::<#state, _>(
                        move |state: ::std::sync::Arc<#state>, ctx: #kit::graph::NodeContext|
                            -> #kit::graph::NodeFuture<#state> {
                            ::std::boxed::Box::pin(async move {
                                #kit::graph::IntoNodeOutput::<#state>::into_output(#call)
                            })
                        },
                    )
                }
            }
            NodeFunc::Expr(expr) => quote_spanned! {expr.span()=>
                #kit::__private::async_node::<#state, _, _, _>(#expr)
            },
        };
        calls.push(quote!(.node_fn(#node_name, #func)));
        if !node.destinations.is_empty() {
            let targets = node.destinations.iter().map(endpoint_name);
            calls.push(quote!(.destinations(#node_name, [#(#targets),*])));
        }
    }

    for edge in &def.edges {
        let to = endpoint_name(&edge.to);
        if edge.join {
            let from = edge.from.iter().map(endpoint_name);
            calls.push(quote!(.join([#(#from),*], #to)));
            continue;
        }
        let Some(from) = edge.from.first() else {
            continue;
        };
        let from = endpoint_name(from);
        if edge.when.is_empty() {
            calls.push(quote!(.edge(#from, #to)));
            continue;
        }
        let mut label_parts = Vec::new();
        let mut checks = Vec::new();
        for cond in &edge.when {
            let field = &cond.field;
            let value = &cond.value;
            label_parts.push(format!("{} == {}", field, quote!(#value)));
            let access = quote_spanned!(field.span()=> state.#field);
            checks.push(quote_spanned! {value.span()=>
                #kit::__private::when_matches(&#access, #value)
            });
        }
        let label = label_parts.join(" && ");
        calls.push(quote! {
            .edge_when(#from, #to, #label, |state: &#state| -> bool { true #(&& #checks)* })
        });
    }

    for route in &def.routes {
        let from = endpoint_name(&route.from);
        let targets = route.targets.iter().map(endpoint_name);
        let router = &route.router;
        let router = quote_spanned! {router.span()=>
            #kit::__private::router::<#state, _, _>(#router)
        };
        calls.push(quote!(.route(#from, [#(#targets),*], #router)));
    }

    let before: Vec<String> = def
        .interrupt_before
        .iter()
        .map(crate::common::name_of)
        .collect();
    let after: Vec<String> = def
        .interrupt_after
        .iter()
        .map(crate::common::name_of)
        .collect();
    if !before.is_empty() {
        calls.push(quote!(.interrupt_before([#(#before),*])));
    }
    if !after.is_empty() {
        calls.push(quote!(.interrupt_after([#(#after),*])));
    }
    for cache in &def.caches {
        let node = crate::common::name_of(&cache.node);
        let policy = &cache.policy;
        calls.push(quote_spanned!(policy.span()=> .cache_policy(#node, #policy)));
    }
    if let Some(store) = &def.cache_store {
        calls.push(quote_spanned!(store.span()=> .cache(#store)));
    }
    for retry in &def.retries {
        let node = crate::common::name_of(&retry.node);
        let policy = &retry.policy;
        calls.push(quote_spanned!(policy.span()=> .retry(#node, #policy)));
    }
    if let Some(limit) = &def.recursion_limit {
        calls.push(quote!(.recursion_limit(#limit)));
    }

    quote! {
        #kit::__private::compile_checked(
            #kit::graph::GraphBuilder::<#state>::new(#name)
                #(#calls)*
        )
    }
}

/// What a failed `graph!` expands to besides its errors: a value of the right type, so code
/// using the graph does not report follow-on errors.
pub fn fallback(def: &GraphDef) -> TokenStream {
    let kit = kit_path(def.krate.as_ref());
    match &def.state {
        Some(state) => quote!(#kit::__private::unreachable_graph::<#state>()),
        None => quote!(#kit::__private::unreachable_graph::<#kit::state::DynState>()),
    }
}
