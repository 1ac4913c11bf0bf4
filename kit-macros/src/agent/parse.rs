//! The syntax of `#[agent(...)]`: scalar options (handed to darling as meta items), the
//! `response_format` type, and the `< .. >` blocks, each kept with its spans for the checks.
//!
//! ```text
//! args     := item ("," item)* ","?
//! item     := block | "response_format" ("=" Type | "(" Type ("," key "=" Expr)* ")")
//!           | key ("=" Expr | "(" meta-list ")")?            // darling reads these
//! block    := block-name "<" entry ("," entry)* ","? ">"
//! entry    := ident ("=" (bool | "[" ident,* "]") | "(" field ("," field)* ","? ")")?
//! field    := ident ("=" (Expr | "{" (LitStr ":" Expr),* "}") | "<" entry,* ">")?
//! ```
//!
//! Block entries only take a `bool` or a bracketed list after `=`, so the block's closing `>`
//! is never read as a comparison.

use darling::ast::NestedMeta;
use proc_macro2::TokenStream;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, LitBool, LitStr, Token, braced, bracketed, parenthesized};

/// The names that take a `< .. >` block.
pub const BLOCKS: &[&str] = &["subagents", "async_subagents", "interrupt_on", "pii"];

/// The attribute's arguments, split by who reads them.
pub struct Args {
    /// Scalar options, for darling.
    pub metas: Vec<NestedMeta>,
    /// `response_format = T` or `response_format(T, ..)`.
    pub response_format: Vec<RawResponseFormat>,
    /// The `< .. >` blocks, in order.
    pub blocks: Vec<Block>,
}

/// `response_format` as written.
pub struct RawResponseFormat {
    pub key: Ident,
    pub ty: syn::Type,
    pub options: Vec<(Ident, Expr)>,
}

/// `name< entry, .. >`.
pub struct Block {
    pub name: Ident,
    pub entries: Vec<Entry>,
}

/// One entry of a block.
pub struct Entry {
    pub name: Ident,
    pub value: EntryValue,
}

pub enum EntryValue {
    /// `email`
    Flag,
    /// `send_email = true`
    Bool(LitBool),
    /// `refund = [approve, reject]`
    List(Vec<Ident>),
    /// `researcher(description = "..", tools = [..])`
    Fields(Vec<Field>),
}

/// `key = value`, or a bare `key` (a word such as a PII strategy).
pub struct Field {
    pub key: Ident,
    pub value: FieldValue,
}

pub enum FieldValue {
    Word,
    Expr(Expr),
    /// `headers = {"Authorization": "Bearer .."}`
    Map(Vec<(LitStr, Expr)>),
    /// `interrupt_on< .. >` inside an entry (a subagent's own review gates).
    Block(Block),
}

pub fn parse(args: TokenStream) -> syn::Result<Args> {
    parse_args.parse2(args)
}

fn parse_args(input: ParseStream) -> syn::Result<Args> {
    let mut args = Args {
        metas: Vec::new(),
        response_format: Vec::new(),
        blocks: Vec::new(),
    };
    while !input.is_empty() {
        // `crate` is a keyword; the other keys are plain identifiers.
        let key = Ident::parse_any(input)?;
        if input.peek(Token![<]) {
            input.parse::<Token![<]>()?;
            let entries = parse_entries(input)?;
            input.parse::<Token![>]>()?;
            args.blocks.push(Block { name: key, entries });
        } else if key == "response_format" {
            args.response_format
                .push(parse_response_format(key, input)?);
        } else {
            args.metas.push(NestedMeta::Meta(parse_meta(key, input)?));
        }
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(args)
}

fn parse_meta(key: Ident, input: ParseStream) -> syn::Result<syn::Meta> {
    let path = syn::Path::from(key);
    if input.peek(Token![=]) {
        let eq_token = input.parse()?;
        let value: Expr = input.parse()?;
        Ok(syn::Meta::NameValue(syn::MetaNameValue {
            path,
            eq_token,
            value,
        }))
    } else if input.peek(syn::token::Paren) {
        let content;
        let paren = parenthesized!(content in input);
        Ok(syn::Meta::List(syn::MetaList {
            path,
            delimiter: syn::MacroDelimiter::Paren(paren),
            tokens: content.parse()?,
        }))
    } else {
        Ok(syn::Meta::Path(path))
    }
}

fn parse_response_format(key: Ident, input: ParseStream) -> syn::Result<RawResponseFormat> {
    if input.peek(Token![=]) {
        input.parse::<Token![=]>()?;
        let ty = input.parse()?;
        return Ok(RawResponseFormat {
            key,
            ty,
            options: Vec::new(),
        });
    }
    if !input.peek(syn::token::Paren) {
        return Err(syn::Error::new(
            key.span(),
            "`response_format` takes the answer's type: `response_format = Report`, or \
             `response_format(Report, strategy = tool, max_retries = 3)`",
        ));
    }
    let content;
    parenthesized!(content in input);
    let ty = content.parse()?;
    let mut options = Vec::new();
    while !content.is_empty() {
        content.parse::<Token![,]>()?;
        if content.is_empty() {
            break;
        }
        let name: Ident = content.parse()?;
        content.parse::<Token![=]>()?;
        options.push((name, content.parse()?));
    }
    Ok(RawResponseFormat { key, ty, options })
}

fn parse_entries(input: ParseStream) -> syn::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    while !input.peek(Token![>]) {
        let name: Ident = input.parse()?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            if input.peek(syn::token::Bracket) {
                let content;
                bracketed!(content in input);
                EntryValue::List(
                    Punctuated::<Ident, Token![,]>::parse_terminated(&content)?
                        .into_iter()
                        .collect(),
                )
            } else if input.peek(LitBool) {
                EntryValue::Bool(input.parse()?)
            } else {
                return Err(input.error(
                    "a block entry takes `true`, `false` or a list after `=` (`send_email = \
                     true`, `refund = [approve, reject]`); use `name(key = value, ..)` for more",
                ));
            }
        } else if input.peek(syn::token::Paren) {
            let content;
            parenthesized!(content in input);
            EntryValue::Fields(parse_fields(&content)?)
        } else {
            EntryValue::Flag
        };
        entries.push(Entry { name, value });
        if input.peek(Token![>]) {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(entries)
}

fn parse_fields(input: ParseStream) -> syn::Result<Vec<Field>> {
    let mut fields = Vec::new();
    while !input.is_empty() {
        let key = Ident::parse_any(input)?;
        let value = if input.peek(Token![<]) {
            input.parse::<Token![<]>()?;
            let entries = parse_entries(input)?;
            input.parse::<Token![>]>()?;
            FieldValue::Block(Block {
                name: key.clone(),
                entries,
            })
        } else if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            if input.peek(syn::token::Brace) {
                FieldValue::Map(parse_map(input)?)
            } else {
                FieldValue::Expr(input.parse()?)
            }
        } else {
            FieldValue::Word
        };
        fields.push(Field { key, value });
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(fields)
}

fn parse_map(input: ParseStream) -> syn::Result<Vec<(LitStr, Expr)>> {
    let content;
    braced!(content in input);
    let mut out = Vec::new();
    while !content.is_empty() {
        let key: LitStr = content.parse()?;
        content.parse::<Token![:]>()?;
        out.push((key, content.parse()?));
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    Ok(out)
}
