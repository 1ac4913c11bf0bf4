//! The scalar options of `#[agent]`, read by darling: unknown keys get a did-you-mean,
//! duplicates an error, each at the user's token.

use darling::FromMeta;
use syn::spanned::Spanned;

use crate::common::AnyExpr;

/// Every key = value option. The blocks and `response_format` are read before darling; their
/// fields here only make darling's did-you-mean know them and explain the right form.
#[derive(FromMeta, Default)]
#[darling(default)]
pub struct Options {
    pub name: Option<AnyExpr>,
    pub model: Option<AnyExpr>,
    pub model_opts: Option<ModelOpts>,
    pub config: Option<AnyExpr>,
    pub system_prompt: Option<AnyExpr>,
    pub tools: Option<List>,
    pub middleware: Option<List>,
    pub subagents: Option<List>,
    pub general_purpose_subagent: Option<Switch>,
    pub todos: Option<Switch>,
    pub filesystem: Option<Filesystem>,
    pub compact_conversation: Option<Switch>,
    pub overflow_recovery: Option<Switch>,
    pub checkpointer: Option<AnyExpr>,
    pub store: Option<AnyExpr>,
    pub budget: Option<AnyExpr>,
    pub recursion_limit: Option<AnyExpr>,
    pub async_subagents: Option<BlockOnly>,
    pub interrupt_on: Option<BlockOnly>,
    pub pii: Option<BlockOnly>,
    pub response_format: Option<AnyExpr>,
    #[darling(rename = "crate")]
    pub krate: Option<syn::Path>,
}

/// `tools = [a, b]`: a bracketed list of expressions.
pub struct List(pub Vec<syn::Expr>);

impl FromMeta for List {
    fn from_meta(item: &syn::Meta) -> darling::Result<Self> {
        let key = item
            .path()
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        match item {
            syn::Meta::NameValue(syn::MetaNameValue {
                value: syn::Expr::Array(a),
                ..
            }) => Ok(List(a.elems.iter().cloned().collect())),
            syn::Meta::NameValue(nv) => Err(darling::Error::custom(format!(
                "`{key}` takes a list in brackets: `{key} = [a, b]` (an empty `[]` is fine)"
            ))
            .with_span(&nv.value)),
            other => Err(darling::Error::custom(format!(
                "`{key}` takes a list in brackets: `{key} = [a, b]`"
            ))
            .with_span(other)),
        }
    }
}

/// A capability switch: the bare word turns it on, `= expr` decides (a `bool`).
pub enum Switch {
    On,
    Expr(syn::Expr),
}

impl FromMeta for Switch {
    fn from_word() -> darling::Result<Self> {
        Ok(Switch::On)
    }

    fn from_expr(expr: &syn::Expr) -> darling::Result<Self> {
        Ok(Switch::Expr(expr.clone()))
    }
}

/// `model_opts(temperature = 0.2, ..)` or `model_opts = expr` (a `ModelOptions`).
pub enum ModelOpts {
    Fields(Box<ModelOptsFields>),
    Expr(syn::Expr),
}

/// The fields of `ModelOptions` that a declaration sets.
#[derive(FromMeta, Default)]
#[darling(default)]
pub struct ModelOptsFields {
    pub temperature: Option<AnyExpr>,
    pub max_tokens: Option<AnyExpr>,
    pub timeout_ms: Option<AnyExpr>,
    pub retries: Option<AnyExpr>,
}

impl FromMeta for ModelOpts {
    fn from_list(items: &[darling::ast::NestedMeta]) -> darling::Result<Self> {
        ModelOptsFields::from_list(items).map(|f| ModelOpts::Fields(Box::new(f)))
    }

    fn from_expr(expr: &syn::Expr) -> darling::Result<Self> {
        Ok(ModelOpts::Expr(expr.clone()))
    }
}

/// `filesystem` (in the agent's state), `filesystem(dir = "..")` (a real directory) or
/// `filesystem = expr` (a `FilesystemMiddleware`).
pub enum Filesystem {
    State,
    Dir(syn::Expr),
    Expr(syn::Expr),
}

#[derive(FromMeta, Default)]
#[darling(default)]
struct FilesystemFields {
    dir: Option<AnyExpr>,
}

impl FromMeta for Filesystem {
    fn from_word() -> darling::Result<Self> {
        Ok(Filesystem::State)
    }

    fn from_list(items: &[darling::ast::NestedMeta]) -> darling::Result<Self> {
        match FilesystemFields::from_list(items)?.dir {
            Some(dir) => Ok(Filesystem::Dir(dir.0)),
            None => Err(darling::Error::custom(
                "`filesystem(..)` takes the directory: `filesystem(dir = \"./workspace\")`; write \
                 `filesystem` alone to keep files in the agent's state",
            )),
        }
    }

    fn from_expr(expr: &syn::Expr) -> darling::Result<Self> {
        Ok(Filesystem::Expr(expr.clone()))
    }
}

/// An option that only takes a `< .. >` block; any other form is explained.
pub struct BlockOnly;

impl FromMeta for BlockOnly {
    fn from_meta(item: &syn::Meta) -> darling::Result<Self> {
        let name = item
            .path()
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        let example = match name.as_str() {
            "interrupt_on" => "interrupt_on< send_email = true, refund = [approve, reject] >",
            "pii" => "pii< email(redact), credit_card(mask) >",
            _ => {
                "async_subagents< analyst(description = \"..\", graph_id = \"..\", url = \"..\") >"
            }
        };
        Err(
            darling::Error::custom(format!("`{name}` takes a block: `{example}`"))
                .with_span(&item.path().span()),
        )
    }
}
