//! The grammar of `graph!`.
//!
//! ```text
//! graph! {
//!     name: "support";                       // optional
//!     state: Ticket;                         // required
//!     interrupt_before: [refund];            // optional
//!     interrupt_after: [escalate];           // optional
//!     recursion_limit: 50;                   // optional: the graph's default
//!     crate: ::my_kit;                       // optional: kit renamed or re-exported
//!     node classify;                         // async fn classify(&Ticket, &NodeContext) -> ..
//!     node refund = handle_refund;           // a path to such a fn
//!     node start = begin -> [refund];        // declares goto destinations
//!     node quick = |s, ctx| async move { .. };// a closure (Arc<Ticket>, NodeContext)
//!     node research = kit::graph::subgraph(child, map_in, map_out); // any node expression
//!     edge START -> classify;
//!     edge classify -> refund when kind == "refund";
//!     edge classify -> escalate when { kind: "other", urgent: true };
//!     edge [refund, escalate] -> summary;    // fan-in: wait for both
//!     route summary -> [review, END] by pick; // a routing fn(&Ticket) -> impl Into<Route>
//!     retry classify = RetryPolicy::new().max_attempts(5); // a RetryPolicy for a node
//!     cache_store: Arc::new(MemoryCache::new());  // where cached outputs live
//!     cache classify = CachePolicy::new();         // a CachePolicy for a node
//! }
//! ```

use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, LitStr, Token, Type, braced, bracketed};

mod kw {
    syn::custom_keyword!(node);
    syn::custom_keyword!(edge);
    syn::custom_keyword!(route);
    syn::custom_keyword!(when);
    syn::custom_keyword!(by);
    syn::custom_keyword!(name);
    syn::custom_keyword!(state);
    syn::custom_keyword!(interrupt_before);
    syn::custom_keyword!(interrupt_after);
    syn::custom_keyword!(recursion_limit);
    syn::custom_keyword!(retry);
    syn::custom_keyword!(cache);
    syn::custom_keyword!(cache_store);
    syn::custom_keyword!(START);
    syn::custom_keyword!(END);
}

pub struct GraphDef {
    pub name: Option<LitStr>,
    pub state: Option<Type>,
    pub interrupt_before: Vec<Ident>,
    pub interrupt_after: Vec<Ident>,
    pub recursion_limit: Option<syn::LitInt>,
    pub krate: Option<syn::Path>,
    pub nodes: Vec<NodeDef>,
    pub edges: Vec<EdgeDef>,
    pub routes: Vec<RouteDef>,
    pub retries: Vec<PolicyDef>,
    pub caches: Vec<PolicyDef>,
    pub cache_store: Option<Expr>,
}

/// `retry node = policy;` or `cache node = policy;`: a policy for one node.
pub struct PolicyDef {
    pub node: Ident,
    pub policy: Expr,
}

pub struct NodeDef {
    pub name: Ident,
    pub func: NodeFunc,
    pub destinations: Vec<Endpoint>,
}

pub enum NodeFunc {
    /// `node x;` or `node x = path;`: an async fn (&State, &NodeContext).
    Path(syn::Path),
    /// `node x = <expr>;`: a closure taking (Arc<State>, NodeContext).
    Expr(Expr),
}

/// A node name, START or END, with its span.
#[derive(Clone)]
pub enum Endpoint {
    Start(proc_macro2::Span),
    End(proc_macro2::Span),
    Node(Ident),
}

impl Endpoint {
    pub fn span(&self) -> proc_macro2::Span {
        match self {
            Endpoint::Start(s) | Endpoint::End(s) => *s,
            Endpoint::Node(i) => i.span(),
        }
    }
}

pub struct EdgeDef {
    pub from: Vec<Endpoint>,
    /// True for `[a, b] -> c` (a fan-in join).
    pub join: bool,
    pub to: Endpoint,
    pub when: Vec<Condition>,
    pub when_span: Option<proc_macro2::Span>,
}

pub struct Condition {
    pub field: Ident,
    pub value: Expr,
}

pub struct RouteDef {
    pub from: Endpoint,
    pub targets: Vec<Endpoint>,
    pub router: Expr,
}

/// The tokens of a node's expression: everything up to a top-level `->` or `;` (an expression
/// parser would read `f -> [a]` as `f - (> ..)`).
fn node_expr_tokens(input: ParseStream) -> syn::Result<proc_macro2::TokenStream> {
    input.step(|cursor| {
        let mut tokens = proc_macro2::TokenStream::new();
        let mut rest = *cursor;
        loop {
            if let Some((p, next)) = rest.punct() {
                if p.as_char() == ';' {
                    break;
                }
                if p.as_char() == '-'
                    && p.spacing() == proc_macro2::Spacing::Joint
                    && next.punct().is_some_and(|(q, _)| q.as_char() == '>')
                {
                    break;
                }
            }
            match rest.token_tree() {
                Some((tt, next)) => {
                    tokens.extend(std::iter::once(tt));
                    rest = next;
                }
                None => break,
            }
        }
        if tokens.is_empty() {
            return Err(cursor.error("expected the node's function after `=`"));
        }
        Ok((tokens, rest))
    })
}

fn parse_endpoint(input: ParseStream) -> syn::Result<Endpoint> {
    if input.peek(kw::START) {
        let k: kw::START = input.parse()?;
        Ok(Endpoint::Start(k.span))
    } else if input.peek(kw::END) {
        let k: kw::END = input.parse()?;
        Ok(Endpoint::End(k.span))
    } else {
        Ok(Endpoint::Node(input.parse()?))
    }
}

fn parse_endpoint_list(input: ParseStream) -> syn::Result<Vec<Endpoint>> {
    let content;
    bracketed!(content in input);
    let list = Punctuated::<Endpoint, Token![,]>::parse_terminated_with(&content, parse_endpoint)?;
    Ok(list.into_iter().collect())
}

fn parse_ident_list(input: ParseStream) -> syn::Result<Vec<Ident>> {
    let content;
    bracketed!(content in input);
    let list = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
    Ok(list.into_iter().collect())
}

impl Parse for GraphDef {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut def = GraphDef {
            name: None,
            state: None,
            interrupt_before: Vec::new(),
            interrupt_after: Vec::new(),
            recursion_limit: None,
            krate: None,
            nodes: Vec::new(),
            edges: Vec::new(),
            routes: Vec::new(),
            retries: Vec::new(),
            caches: Vec::new(),
            cache_store: None,
        };
        while !input.is_empty() {
            let lookahead = input.lookahead1();
            if lookahead.peek(kw::name) && input.peek2(Token![:]) {
                let key: kw::name = input.parse()?;
                input.parse::<Token![:]>()?;
                if def.name.is_some() {
                    return Err(syn::Error::new(key.span, "`name` is given twice"));
                }
                def.name = Some(input.parse()?);
            } else if lookahead.peek(kw::state) && input.peek2(Token![:]) {
                let key: kw::state = input.parse()?;
                input.parse::<Token![:]>()?;
                if def.state.is_some() {
                    return Err(syn::Error::new(key.span, "`state` is given twice"));
                }
                def.state = Some(input.parse()?);
            } else if lookahead.peek(kw::interrupt_before) {
                input.parse::<kw::interrupt_before>()?;
                input.parse::<Token![:]>()?;
                def.interrupt_before.extend(parse_ident_list(input)?);
            } else if lookahead.peek(kw::interrupt_after) {
                input.parse::<kw::interrupt_after>()?;
                input.parse::<Token![:]>()?;
                def.interrupt_after.extend(parse_ident_list(input)?);
            } else if lookahead.peek(kw::recursion_limit) {
                let key: kw::recursion_limit = input.parse()?;
                input.parse::<Token![:]>()?;
                let limit: syn::LitInt = input.parse()?;
                if def.recursion_limit.is_some() {
                    return Err(syn::Error::new(
                        key.span,
                        "`recursion_limit` is given twice",
                    ));
                }
                if limit.base10_parse::<usize>().map_or(true, |n| n == 0) {
                    return Err(syn::Error::new(
                        limit.span(),
                        "`recursion_limit` is a whole number of supersteps, at least 1",
                    ));
                }
                def.recursion_limit = Some(limit);
            } else if lookahead.peek(Token![crate]) {
                let key: Token![crate] = input.parse()?;
                input.parse::<Token![:]>()?;
                if def.krate.is_some() {
                    return Err(syn::Error::new(key.span, "`crate` is given twice"));
                }
                def.krate = Some(input.parse()?);
            } else if lookahead.peek(kw::node) {
                input.parse::<kw::node>()?;
                let name: Ident = input.parse()?;
                let func = if input.peek(Token![=]) {
                    input.parse::<Token![=]>()?;
                    // A path to a node function, or any expression giving a node closure
                    // (`|s, ctx| async move { .. }`, `kit::graph::subgraph(..)`), up to the
                    // `->` of goto destinations or the `;`.
                    let expr: Expr = syn::parse2(node_expr_tokens(input)?)?;
                    match expr {
                        Expr::Path(p) if p.qself.is_none() => NodeFunc::Path(p.path),
                        other => NodeFunc::Expr(other),
                    }
                } else {
                    NodeFunc::Path(name.clone().into())
                };
                let destinations = if input.peek(Token![->]) {
                    input.parse::<Token![->]>()?;
                    parse_endpoint_list(input)?
                } else {
                    Vec::new()
                };
                def.nodes.push(NodeDef {
                    name,
                    func,
                    destinations,
                });
            } else if lookahead.peek(kw::edge) {
                input.parse::<kw::edge>()?;
                let (from, join) = if input.peek(syn::token::Bracket) {
                    (parse_endpoint_list(input)?, true)
                } else {
                    (vec![parse_endpoint(input)?], false)
                };
                input.parse::<Token![->]>()?;
                let to = parse_endpoint(input)?;
                let mut when = Vec::new();
                let mut when_span = None;
                if input.peek(kw::when) {
                    let k: kw::when = input.parse()?;
                    when_span = Some(k.span);
                    if input.peek(syn::token::Brace) {
                        let content;
                        braced!(content in input);
                        while !content.is_empty() {
                            let field: Ident = content.parse()?;
                            content.parse::<Token![:]>()?;
                            let value: Expr = content.parse()?;
                            when.push(Condition { field, value });
                            if content.is_empty() {
                                break;
                            }
                            content.parse::<Token![,]>()?;
                        }
                        if when.is_empty() {
                            return Err(syn::Error::new(
                                k.span,
                                "`when { }` needs at least one `field: value`",
                            ));
                        }
                    } else {
                        let field: Ident = input.parse()?;
                        input.parse::<Token![==]>()?;
                        let value: Expr = input.parse()?;
                        when.push(Condition { field, value });
                    }
                }
                def.edges.push(EdgeDef {
                    from,
                    join,
                    to,
                    when,
                    when_span,
                });
            } else if lookahead.peek(kw::cache_store) {
                let key: kw::cache_store = input.parse()?;
                input.parse::<Token![:]>()?;
                if def.cache_store.is_some() {
                    return Err(syn::Error::new(key.span, "`cache_store` is given twice"));
                }
                def.cache_store = Some(input.parse()?);
            } else if lookahead.peek(kw::cache) {
                input.parse::<kw::cache>()?;
                let node: Ident = input.parse()?;
                input.parse::<Token![=]>()?;
                let policy: Expr = input.parse()?;
                def.caches.push(PolicyDef { node, policy });
            } else if lookahead.peek(kw::retry) {
                input.parse::<kw::retry>()?;
                let node: Ident = input.parse()?;
                input.parse::<Token![=]>()?;
                let policy: Expr = input.parse()?;
                def.retries.push(PolicyDef { node, policy });
            } else if lookahead.peek(kw::route) {
                input.parse::<kw::route>()?;
                let from = parse_endpoint(input)?;
                input.parse::<Token![->]>()?;
                let targets = parse_endpoint_list(input)?;
                input.parse::<kw::by>()?;
                let router: Expr = input.parse()?;
                def.routes.push(RouteDef {
                    from,
                    targets,
                    router,
                });
            } else {
                return Err(lookahead.error());
            }
            input.parse::<Token![;]>()?;
        }
        Ok(def)
    }
}
