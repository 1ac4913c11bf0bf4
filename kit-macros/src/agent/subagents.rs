//! The `subagents< .. >` and `async_subagents< .. >` blocks: checked entries and the specs
//! they build.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, Ident, LitStr};

use super::fields::Fields;
use super::parse::{Block, EntryValue};
use super::review::{self, Reviewed};
use crate::common::{Errors, lit_str};

const SYNC_KEYS: &[&str] = &[
    "description",
    "system_prompt",
    "tools",
    "model",
    "middleware",
    "agent",
    "interrupt_on",
    "inherit_guardrails",
    "without_guardrails",
];
const ASYNC_KEYS: &[&str] = &["description", "graph_id", "url", "headers", "client"];

/// `researcher(description = "..", ..)` in `subagents< .. >`.
pub struct SyncSubagent {
    pub name: Ident,
    pub description: Expr,
    pub system_prompt: Option<Expr>,
    pub tools: Option<Vec<Expr>>,
    pub model: Option<Expr>,
    pub middleware: Vec<Expr>,
    /// `agent = Writer`: another `#[agent]` struct.
    pub agent: Option<Expr>,
    /// `interrupt_on< .. >`: the child's own review gates.
    pub interrupt_on: Vec<Reviewed>,
    /// `inherit_guardrails = false`.
    pub inherit_guardrails: Option<Expr>,
    /// `without_guardrails = ["PIIMiddleware[email]"]`.
    pub without_guardrails: Vec<Expr>,
}

/// `analyst(description = "..", graph_id = "..", ..)` in `async_subagents< .. >`.
pub struct AsyncSubagent {
    pub name: Ident,
    pub description: Expr,
    pub graph_id: Expr,
    pub url: Option<Expr>,
    pub headers: Vec<(LitStr, Expr)>,
    pub client: Option<Expr>,
}

/// The fields of an entry, or an error when it has none.
fn entry_fields(
    kind: &str,
    keys: &[&str],
    example: &str,
    name: &Ident,
    value: EntryValue,
    errors: &mut Errors,
) -> Option<Fields> {
    match value {
        EntryValue::Fields(fields) => {
            Some(Fields::read(kind, name.span(), fields, keys, &[], errors))
        }
        _ => {
            errors.at(
                name.span(),
                format!("{kind} `{name}` needs its fields: `{name}({example})`"),
            );
            None
        }
    }
}

fn required(
    fields: &mut Fields,
    key: &str,
    what: &str,
    name: &Ident,
    errors: &mut Errors,
) -> Option<Expr> {
    let value = fields.expr(key, errors);
    if value.is_none() {
        errors.at(
            fields.span,
            format!("{what} `{name}` is missing `{key}`: the parent model chooses by it"),
        );
    }
    value
}

pub fn sync_block(block: Block, seen: &mut Vec<Ident>, errors: &mut Errors) -> Vec<SyncSubagent> {
    let mut out = Vec::new();
    for entry in block.entries {
        if !unique(&entry.name, seen, errors) {
            continue;
        }
        let Some(mut fields) = entry_fields(
            "subagent",
            SYNC_KEYS,
            "description = \"..\", system_prompt = \"..\"",
            &entry.name,
            entry.value,
            errors,
        ) else {
            continue;
        };
        let description = required(&mut fields, "description", "subagent", &entry.name, errors);
        let interrupt_on = fields
            .block("interrupt_on", errors)
            .map(|entries| review::block(entries, errors))
            .unwrap_or_default();
        let spec = SyncSubagent {
            interrupt_on,
            inherit_guardrails: fields.expr("inherit_guardrails", errors),
            without_guardrails: fields
                .list("without_guardrails", errors)
                .unwrap_or_default(),
            system_prompt: fields.expr("system_prompt", errors),
            tools: fields.list("tools", errors),
            model: fields.expr("model", errors),
            middleware: fields.list("middleware", errors).unwrap_or_default(),
            agent: fields.expr("agent", errors),
            name: entry.name,
            description: description.unwrap_or_else(|| syn::parse_quote!("")),
        };
        if let Some(agent) = &spec.agent {
            // An agent brings its own prompt, tools, model and middleware.
            let given = [
                ("system_prompt", spec.system_prompt.is_some()),
                ("tools", spec.tools.is_some()),
                ("model", spec.model.is_some()),
                ("middleware", !spec.middleware.is_empty()),
            ];
            for (key, _) in given.iter().filter(|(_, on)| *on) {
                errors.push(syn::Error::new_spanned(
                    agent,
                    format!(
                        "subagent `{}` is the agent `agent = ..`, which has its own `{key}`: \
                         set it in that agent's declaration",
                        spec.name
                    ),
                ));
            }
        }
        out.push(spec);
    }
    out
}

pub fn async_block(block: Block, seen: &mut Vec<Ident>, errors: &mut Errors) -> Vec<AsyncSubagent> {
    let mut out = Vec::new();
    for entry in block.entries {
        if !unique(&entry.name, seen, errors) {
            continue;
        }
        let Some(mut fields) = entry_fields(
            "async subagent",
            ASYNC_KEYS,
            "description = \"..\", graph_id = \"..\", url = \"..\"",
            &entry.name,
            entry.value,
            errors,
        ) else {
            continue;
        };
        let description = fields.expr("description", errors);
        let graph_id = fields.expr("graph_id", errors);
        let url = fields.expr("url", errors);
        if let Some(s) = url.as_ref().and_then(lit_str) {
            let v = s.value();
            if !(v.starts_with("http://") || v.starts_with("https://")) {
                errors.at(
                    s.span(),
                    "`url` must be an http:// or https:// base URL of the worker",
                );
            }
        }
        let headers = fields.map("headers", errors);
        let client = fields.expr("client", errors);
        let missing: Vec<String> = [("description", &description), ("graph_id", &graph_id)]
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| format!("`{k}`"))
            .collect();
        let (Some(description), Some(graph_id)) = (description, graph_id) else {
            errors.at(
                entry.name.span(),
                format!(
                    "async subagent `{}` is missing {}: every async subagent needs a \
                     `description` (for the model) and a `graph_id` (the remote graph)",
                    entry.name,
                    missing.join(" and ")
                ),
            );
            continue;
        };
        out.push(AsyncSubagent {
            name: entry.name,
            description,
            graph_id,
            url,
            headers,
            client,
        });
    }
    out
}

fn unique(name: &Ident, seen: &mut Vec<Ident>, errors: &mut Errors) -> bool {
    if seen.contains(name) {
        errors.at(
            name.span(),
            format!("subagent `{name}` is declared twice; names must be unique"),
        );
        return false;
    }
    seen.push(name.clone());
    true
}

impl SyncSubagent {
    /// The `SubagentSpec` this entry builds (inside the agent's `build()`).
    pub fn spec(&self, kit: &TokenStream) -> TokenStream {
        let name = self.name.to_string();
        let description = &self.description;
        let mut spec = match &self.agent {
            // Built with the parent, so the parent's guardrails are added to it.
            Some(agent) => quote_spanned! {agent.span()=>
                #kit::middleware::subagents::SubagentSpec::from_builder(
                    #name,
                    #description,
                    <#agent as #kit::agent::DeclaredAgent>::builder()?,
                )
            },
            None => quote!(#kit::middleware::subagents::SubagentSpec::new(#name, #description)),
        };
        for r in &self.interrupt_on {
            let tool = r.tool.to_string();
            let on = review::gate(r, kit);
            spec = quote!(#spec.interrupt_on(#tool, #on));
        }
        if let Some(on) = &self.inherit_guardrails {
            spec = quote_spanned!(on.span()=> #spec.inherit_guardrails(#on));
        }
        for name in &self.without_guardrails {
            spec = quote_spanned!(name.span()=> #spec.without_guardrail(#name));
        }
        if let Some(p) = &self.system_prompt {
            spec = quote_spanned!(p.span()=> #spec.system_prompt(#p));
        }
        if let Some(tools) = &self.tools {
            let tools = tools
                .iter()
                .map(|t| quote_spanned!(t.span()=> #kit::tool::IntoTool::into_tool(#t)));
            spec = quote!(#spec.tools([#(#tools),*]));
        }
        if let Some(m) = &self.model {
            spec = quote_spanned!(m.span()=> #spec.model(#m));
        }
        for m in &self.middleware {
            spec = quote_spanned!(m.span()=> #spec.middleware(#m));
        }
        spec
    }
}

impl AsyncSubagent {
    /// The `AsyncSpec` this entry builds.
    pub fn spec(&self, kit: &TokenStream) -> TokenStream {
        let name = self.name.to_string();
        let description = &self.description;
        let graph_id = &self.graph_id;
        let mut spec = quote! {
            #kit::middleware::async_subagents::AsyncSpec::new(#name, #description, #graph_id)
        };
        if let Some(url) = &self.url {
            spec = quote_spanned!(url.span()=> #spec.url(#url));
        }
        for (k, v) in &self.headers {
            spec = quote_spanned!(v.span()=> #spec.header(#k, #v));
        }
        if let Some(client) = &self.client {
            spec = quote_spanned!(client.span()=> #spec.client(#client));
        }
        spec
    }
}
