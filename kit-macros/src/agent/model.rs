//! The checked declaration of an agent: every option in one place, ready to expand. All the
//! errors of a declaration are collected, not the first one only.

use darling::FromMeta;
use proc_macro2::TokenStream;
use quote::quote;
use syn::{Expr, Ident};

use super::options::{Filesystem, ModelOpts, Options, Switch};
use super::parse::{self, RawResponseFormat};
use super::pii::{self, Pii};
use super::review::{self, Reviewed};
use super::subagents::{self, AsyncSubagent, SyncSubagent};
use crate::common::{Errors, hint, lit_str, snake_case};

/// A declared agent.
pub struct Agent {
    pub ident: Ident,
    pub vis: syn::Visibility,
    pub krate: Option<syn::Path>,
    pub name: String,
    pub model: Expr,
    pub model_opts: Option<ModelOpts>,
    pub config: Option<Expr>,
    pub system_prompt: Option<Expr>,
    pub tools: Vec<Expr>,
    pub middleware: Vec<Expr>,
    /// `subagents = [..]`: specs built at run time.
    pub subagent_values: Vec<Expr>,
    pub subagents: Vec<SyncSubagent>,
    pub general_purpose_subagent: Option<Switch>,
    pub async_subagents: Vec<AsyncSubagent>,
    pub todos: Option<Switch>,
    pub filesystem: Option<Filesystem>,
    pub interrupt_on: Vec<Reviewed>,
    pub pii: Vec<Pii>,
    pub response_format: Option<ResponseFormat>,
    pub compact_conversation: Option<Switch>,
    pub overflow_recovery: Option<Switch>,
    pub checkpointer: Option<Expr>,
    pub store: Option<Expr>,
    pub budget: Option<Expr>,
    pub recursion_limit: Option<Expr>,
}

/// `response_format = T` with its options.
pub struct ResponseFormat {
    pub ty: syn::Type,
    pub strategy: Option<Ident>,
    pub max_retries: Option<Expr>,
}

const STRATEGIES: &[&str] = &["auto", "provider", "tool"];

/// What survives an invalid declaration, so the stand-in methods match the real ones.
pub struct Fallback {
    pub krate: Option<syn::Path>,
    pub response_type: Option<syn::Type>,
}

impl Agent {
    /// Reads and checks the whole declaration.
    pub fn from_args(
        args: TokenStream,
        item: &syn::ItemStruct,
    ) -> Result<Agent, Box<(syn::Error, Fallback)>> {
        let mut errors = Errors::default();
        let mut fallback = Fallback {
            krate: None,
            response_type: None,
        };
        let parsed = match parse::parse(args) {
            Ok(p) => p,
            Err(e) => return Err(Box::new((e, fallback))),
        };
        if !matches!(item.fields, syn::Fields::Unit) && !item.fields.is_empty() {
            errors.at(
                item.ident.span(),
                "#[agent] goes on a unit struct (`struct Support;`): the agent's definition \
                 lives in the attribute, not in fields",
            );
        }
        if !item.generics.params.is_empty() {
            errors.push(syn::Error::new_spanned(
                &item.generics,
                "an #[agent] struct cannot be generic: it names one agent",
            ));
        }
        let options = match Options::from_list(&parsed.metas) {
            Ok(o) => o,
            Err(e) => {
                errors.darling(e);
                // Keep the options that read on their own (the first of each key), so one bad
                // option does not make the others look missing.
                let mut good: Vec<darling::ast::NestedMeta> = Vec::new();
                for meta in &parsed.metas {
                    let key = |m: &darling::ast::NestedMeta| match m {
                        darling::ast::NestedMeta::Meta(m) => Some(m.path().clone()),
                        darling::ast::NestedMeta::Lit(_) => None,
                    };
                    let fresh = !good.iter().any(|g| key(g) == key(meta));
                    if fresh && Options::from_list(std::slice::from_ref(meta)).is_ok() {
                        good.push(meta.clone());
                    }
                }
                Options::from_list(&good).unwrap_or_default()
            }
        };
        fallback.krate = options.krate.clone();
        let response_format = response_format(parsed.response_format, &mut errors);
        fallback.response_type = response_format.as_ref().map(|r| r.ty.clone());

        let mut subagents = Vec::new();
        let mut async_subagents = Vec::new();
        let mut interrupt_on = Vec::new();
        let mut pii = Vec::new();
        let mut seen_blocks: Vec<Ident> = Vec::new();
        let mut subagent_names: Vec<Ident> = Vec::new();
        for block in parsed.blocks {
            let name = block.name.to_string();
            if seen_blocks.contains(&block.name) {
                errors.at(
                    block.name.span(),
                    format!("`{name}< .. >` is given twice; merge the two blocks"),
                );
                continue;
            }
            seen_blocks.push(block.name.clone());
            match name.as_str() {
                "subagents" => {
                    subagents = subagents::sync_block(block, &mut subagent_names, &mut errors)
                }
                "async_subagents" => {
                    async_subagents =
                        subagents::async_block(block, &mut subagent_names, &mut errors)
                }
                "interrupt_on" => interrupt_on = review::block(block, &mut errors),
                "pii" => pii = pii::block(block, &mut errors),
                _ => errors.at(
                    block.name.span(),
                    format!("unknown block `{name}< .. >`{}", hint(&name, parse::BLOCKS)),
                ),
            }
        }

        let name = match options.name.map(|e| e.0) {
            Some(e) => match lit_str(&e) {
                Some(s) if !s.value().is_empty() => s.value(),
                _ => {
                    errors.push(syn::Error::new_spanned(
                        e,
                        "`name` takes a non-empty string literal",
                    ));
                    String::new()
                }
            },
            None => snake_case(&item.ident.to_string()),
        };
        let model = match options.model {
            Some(m) => m.0,
            None => {
                errors.at(
                    item.ident.span(),
                    "an #[agent] needs a model: add `model = \"openai:gpt-4o-mini\"` (a \
                     provider:model string) or `model = my_model()`",
                );
                syn::parse_quote!(())
            }
        };
        if let Some(limit) = &options.recursion_limit
            && let Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) = &limit.0
            && i.base10_parse::<u64>().is_ok_and(|n| n == 0)
        {
            errors.at(i.span(), "`recursion_limit` must be at least 1");
        }
        if let Err(e) = errors.into_result() {
            return Err(Box::new((e, fallback)));
        }
        Ok(Agent {
            ident: item.ident.clone(),
            vis: item.vis.clone(),
            krate: options.krate,
            name,
            model,
            model_opts: options.model_opts,
            config: options.config.map(|e| e.0),
            system_prompt: options.system_prompt.map(|e| e.0),
            tools: options.tools.map(|l| l.0).unwrap_or_default(),
            middleware: options.middleware.map(|l| l.0).unwrap_or_default(),
            subagent_values: options.subagents.map(|l| l.0).unwrap_or_default(),
            subagents,
            general_purpose_subagent: options.general_purpose_subagent,
            async_subagents,
            todos: options.todos,
            filesystem: options.filesystem,
            interrupt_on,
            pii,
            response_format,
            compact_conversation: options.compact_conversation,
            overflow_recovery: options.overflow_recovery,
            checkpointer: options.checkpointer.map(|e| e.0),
            store: options.store.map(|e| e.0),
            budget: options.budget.map(|e| e.0),
            recursion_limit: options.recursion_limit.map(|e| e.0),
        })
    }

    /// The names of all the agent's tools as constant expressions, when every one is known at
    /// compile time: each entry of `tools` is a `#[tool]` value (`LookupOrder`) or
    /// `Args::tool()`, and no `middleware = [..]` can add tools of its own.
    pub fn tool_names(&self) -> Option<Vec<TokenStream>> {
        if !self.middleware.is_empty() {
            return None;
        }
        let mut names = Vec::new();
        for tool in &self.tools {
            names.push(tool_name(tool)?);
        }
        let mut builtin: Vec<&str> = Vec::new();
        if self.todos.is_some() {
            builtin.push("write_todos");
        }
        if self.filesystem.is_some() {
            builtin.extend([
                "ls",
                "read_file",
                "write_file",
                "edit_file",
                "delete",
                "glob",
                "grep",
            ]);
        }
        if !self.subagents.is_empty()
            || !self.subagent_values.is_empty()
            || self.general_purpose_subagent.is_some()
        {
            builtin.push("task");
        }
        if !self.async_subagents.is_empty() || !self.subagent_values.is_empty() {
            builtin.extend([
                "start_async_task",
                "check_async_task",
                "update_async_task",
                "cancel_async_task",
                "list_async_tasks",
            ]);
        }
        names.extend(builtin.into_iter().map(|n| quote!(#n)));
        Some(names)
    }
}

/// `<T>::NAME` for a tool written as a type's value (`LookupOrder`) or `T::tool()`.
fn tool_name(tool: &Expr) -> Option<TokenStream> {
    match tool {
        Expr::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last()?;
            let first = last.ident.to_string().chars().next()?;
            first.is_uppercase().then(|| {
                let path = &p.path;
                quote!(<#path>::NAME)
            })
        }
        Expr::Call(call) if call.args.is_empty() => {
            let Expr::Path(p) = &*call.func else {
                return None;
            };
            let mut path = p.path.clone();
            if p.qself.is_some() || path.segments.len() < 2 || path.segments.last()?.ident != "tool"
            {
                return None;
            }
            path.segments.pop();
            path.segments.pop_punct();
            Some(quote!(<#path>::NAME))
        }
        _ => None,
    }
}

fn response_format(raw: Vec<RawResponseFormat>, errors: &mut Errors) -> Option<ResponseFormat> {
    let mut raw = raw.into_iter();
    let first = raw.next()?;
    for again in raw {
        errors.at(again.key.span(), "`response_format` is given twice");
    }
    let mut format = ResponseFormat {
        ty: first.ty,
        strategy: None,
        max_retries: None,
    };
    for (key, value) in first.options {
        match key.to_string().as_str() {
            "strategy" => match &value {
                Expr::Path(p)
                    if p.path
                        .get_ident()
                        .is_some_and(|i| STRATEGIES.contains(&i.to_string().as_str())) =>
                {
                    format.strategy = p.path.get_ident().cloned();
                }
                other => {
                    let text = quote!(#other).to_string();
                    errors.push(syn::Error::new_spanned(
                        other,
                        format!("unknown strategy `{text}`{}", hint(&text, STRATEGIES)),
                    ));
                }
            },
            "max_retries" => format.max_retries = Some(value),
            other => errors.at(
                key.span(),
                format!(
                    "unknown response_format option `{other}`{}",
                    hint(other, &["strategy", "max_retries"])
                ),
            ),
        }
    }
    Some(format)
}
