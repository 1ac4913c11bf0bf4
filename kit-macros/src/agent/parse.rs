//! The grammar of `#[agent(...)]`, with validation.
//!
//! ```text
//! #[agent(
//!     name = "support",                      // optional (default: the struct name in snake_case)
//!     model = "openai:gpt-4o-mini",          // required: a "provider:model" string or an expression
//!     system_prompt = "You help customers.",
//!     tools = [Lookup::tool(), Refund::tool()],
//!     middleware = [TodoMiddleware::new()],
//!     subagents = [SubagentSpec::new("researcher", "Finds facts.")],
//!     checkpointer = Arc::new(MemoryCheckpointer::new()),
//!     recursion_limit = 200,
//!     async_subagents<
//!         researcher(description = "Deep research", graph_id = "research", url = "http://127.0.0.1:8787"),
//!         writer(description = "Drafts documents", graph_id = "writer", url = "http://127.0.0.1:8788",
//!                headers = {"Authorization": "Bearer token"}),
//!     >,
//! )]
//! struct Supervisor;
//! ```

use proc_macro2::TokenStream;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, LitStr, Token, braced};

use crate::common::{Errors, closest};

const KEYS: &[&str] = &[
    "name",
    "model",
    "system_prompt",
    "tools",
    "middleware",
    "subagents",
    "checkpointer",
    "recursion_limit",
    "compact_conversation",
    "overflow_recovery",
    "async_subagents",
];
const ASYNC_KEYS: &[&str] = &["description", "graph_id", "url", "headers"];

pub struct AgentDef {
    pub name: String,
    pub model: Expr,
    pub system_prompt: Option<Expr>,
    pub tools: Vec<Expr>,
    pub middleware: Vec<Expr>,
    pub subagents: Vec<Expr>,
    pub checkpointer: Option<Expr>,
    pub recursion_limit: Option<Expr>,
    pub compact_conversation: Option<Expr>,
    pub overflow_recovery: Option<Expr>,
    pub async_subagents: Vec<AsyncEntry>,
}

pub struct AsyncEntry {
    pub name: Ident,
    pub description: Expr,
    pub graph_id: Expr,
    pub url: Option<Expr>,
    pub headers: Vec<(LitStr, Expr)>,
}

enum Item {
    KeyValue(Ident, Expr),
    List(Ident, Vec<Expr>),
    Async(Ident, Vec<RawEntry>),
}

struct RawEntry {
    name: Ident,
    fields: Vec<(Ident, FieldValue)>,
}

enum FieldValue {
    Expr(Expr),
    Headers(Vec<(LitStr, Expr)>),
}

fn parse_list(input: ParseStream) -> syn::Result<Vec<Expr>> {
    let content;
    syn::bracketed!(content in input);
    Ok(Punctuated::<Expr, Token![,]>::parse_terminated(&content)?
        .into_iter()
        .collect())
}

fn parse_headers(input: ParseStream) -> syn::Result<Vec<(LitStr, Expr)>> {
    let content;
    braced!(content in input);
    let mut out = Vec::new();
    while !content.is_empty() {
        let key: LitStr = content.parse()?;
        content.parse::<Token![:]>()?;
        let value: Expr = content.parse()?;
        out.push((key, value));
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    Ok(out)
}

fn parse_entry(input: ParseStream) -> syn::Result<RawEntry> {
    let name: Ident = input.parse()?;
    let content;
    syn::parenthesized!(content in input);
    let mut fields = Vec::new();
    while !content.is_empty() {
        let key: Ident = content.parse()?;
        content.parse::<Token![=]>()?;
        let value = if key == "headers" {
            FieldValue::Headers(parse_headers(&content)?)
        } else {
            FieldValue::Expr(content.parse()?)
        };
        fields.push((key, value));
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    Ok(RawEntry { name, fields })
}

fn parse_items(input: ParseStream) -> syn::Result<Vec<Item>> {
    let mut items = Vec::new();
    while !input.is_empty() {
        let key: Ident = input.parse()?;
        if key == "async_subagents" {
            input.parse::<Token![<]>()?;
            let mut entries = Vec::new();
            while !input.peek(Token![>]) {
                entries.push(parse_entry(input)?);
                if input.peek(Token![>]) {
                    break;
                }
                input.parse::<Token![,]>()?;
            }
            input.parse::<Token![>]>()?;
            items.push(Item::Async(key, entries));
        } else {
            input.parse::<Token![=]>()?;
            if input.peek(syn::token::Bracket) {
                items.push(Item::List(key, parse_list(input)?));
            } else {
                items.push(Item::KeyValue(key, input.parse()?));
            }
        }
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(items)
}

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

fn lit_str(e: &Expr) -> Option<&LitStr> {
    match e {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Some(s),
        _ => None,
    }
}

pub fn parse(args: TokenStream, item: &syn::ItemStruct) -> syn::Result<AgentDef> {
    let items = parse_items.parse2(args)?;
    let mut errors = Errors::default();
    if !matches!(item.fields, syn::Fields::Unit) && !item.fields.is_empty() {
        errors.at(
            item.ident.span(),
            "#[agent] goes on a unit struct (`struct Support;`): the agent's definition lives in \
             the attribute, not in fields",
        );
    }
    let mut seen: Vec<String> = Vec::new();
    let mut def = AgentDef {
        name: snake_case(&item.ident.to_string()),
        model: syn::parse_quote!(()),
        system_prompt: None,
        tools: Vec::new(),
        middleware: Vec::new(),
        subagents: Vec::new(),
        checkpointer: None,
        recursion_limit: None,
        compact_conversation: None,
        overflow_recovery: None,
        async_subagents: Vec::new(),
    };
    let mut has_model = false;
    for item in items {
        let key = match &item {
            Item::KeyValue(k, _) | Item::List(k, _) | Item::Async(k, _) => k.clone(),
        };
        let name = key.to_string();
        if !KEYS.contains(&name.as_str()) {
            let hint = match closest(&name, KEYS.iter().copied()) {
                Some(c) => format!("; did you mean `{c}`?"),
                None => format!("; expected one of: {}", KEYS.join(", ")),
            };
            errors.at(key.span(), format!("unknown agent option `{name}`{hint}"));
            continue;
        }
        if seen.contains(&name) {
            errors.at(key.span(), format!("`{name}` is given twice"));
            continue;
        }
        seen.push(name.clone());
        match (name.as_str(), item) {
            ("tools", Item::List(_, list)) => def.tools = list,
            ("middleware", Item::List(_, list)) => def.middleware = list,
            ("subagents", Item::List(_, list)) => def.subagents = list,
            ("tools" | "middleware" | "subagents", _) => errors.at(
                key.span(),
                format!("`{name}` takes a list: `{name} = [a, b]`"),
            ),
            ("async_subagents", Item::Async(_, entries)) => {
                def.async_subagents = validate_async(entries, &mut errors);
            }
            ("async_subagents", _) => errors.at(
                key.span(),
                "`async_subagents` takes a block: `async_subagents< name(description = \"..\", \
                 graph_id = \"..\", url = \"..\"), .. >`",
            ),
            (_, Item::KeyValue(_, value)) => match name.as_str() {
                "name" => match lit_str(&value) {
                    Some(s) if !s.value().is_empty() => def.name = s.value(),
                    _ => errors.at(key.span(), "`name` takes a non-empty string literal"),
                },
                "model" => {
                    has_model = true;
                    def.model = value;
                }
                "system_prompt" => def.system_prompt = Some(value),
                "checkpointer" => def.checkpointer = Some(value),
                "recursion_limit" => def.recursion_limit = Some(value),
                "compact_conversation" => def.compact_conversation = Some(value),
                "overflow_recovery" => def.overflow_recovery = Some(value),
                _ => {}
            },
            (_, _) => errors.at(key.span(), format!("`{name}` takes a value: `{name} = ..`")),
        }
    }
    if !has_model {
        errors.at(
            item.ident.span(),
            "an #[agent] needs a model: add `model = \"openai:gpt-4o-mini\"` (a provider:model \
             string) or `model = my_model()`",
        );
    }
    errors.into_result()?;
    Ok(def)
}

fn validate_async(entries: Vec<RawEntry>, errors: &mut Errors) -> Vec<AsyncEntry> {
    let mut out: Vec<AsyncEntry> = Vec::new();
    for entry in entries {
        if out.iter().any(|e| e.name == entry.name) {
            errors.at(
                entry.name.span(),
                format!(
                    "async subagent `{}` is declared twice; names must be unique",
                    entry.name
                ),
            );
            continue;
        }
        let mut description = None;
        let mut graph_id = None;
        let mut url = None;
        let mut headers = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        for (key, value) in entry.fields {
            let name = key.to_string();
            if seen.contains(&name) {
                errors.at(key.span(), format!("`{name}` is given twice"));
                continue;
            }
            seen.push(name.clone());
            match (name.as_str(), value) {
                ("description", FieldValue::Expr(e)) => description = Some(e),
                ("graph_id", FieldValue::Expr(e)) => graph_id = Some(e),
                ("url", FieldValue::Expr(e)) => {
                    if let Some(s) = lit_str(&e) {
                        let v = s.value();
                        if !(v.starts_with("http://") || v.starts_with("https://")) {
                            errors.at(
                                s.span(),
                                "`url` must be an http:// or https:// base URL of the worker",
                            );
                        }
                    }
                    url = Some(e);
                }
                ("headers", FieldValue::Headers(h)) => headers = h,
                (other, _) => {
                    let hint = match closest(other, ASYNC_KEYS.iter().copied()) {
                        Some(c) => format!("; did you mean `{c}`?"),
                        None => format!("; expected one of: {}", ASYNC_KEYS.join(", ")),
                    };
                    errors.at(
                        key.span(),
                        format!("unknown async subagent field `{other}`{hint}"),
                    );
                }
            }
        }
        let mut missing = Vec::new();
        if description.is_none() {
            missing.push("description");
        }
        if graph_id.is_none() {
            missing.push("graph_id");
        }
        if !missing.is_empty() {
            errors.at(
                entry.name.span(),
                format!(
                    "async subagent `{}` is missing {}: every async subagent needs a \
                     `description` (for the model) and a `graph_id` (the remote graph)",
                    entry.name,
                    missing
                        .iter()
                        .map(|m| format!("`{m}`"))
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
            );
            continue;
        }
        if let (Some(description), Some(graph_id)) = (description, graph_id) {
            out.push(AsyncEntry {
                name: entry.name,
                description,
                graph_id,
                url,
                headers,
            });
        }
    }
    out
}
