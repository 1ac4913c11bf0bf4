//! `#[derive(Tool)]` end to end: the JSON Schema the model sees, and `Tool::execute` turning bad
//! arguments, handler errors and long results into tool messages the model can act on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kit::ToolCall;
use kit::tool::{Tool, ToolContext, ToolError, ToolHandler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// How results are ordered.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Order {
    /// Best match first.
    Relevance,
    /// Newest first.
    Newest,
}

/// Searches the knowledge base.
///
/// Use it before answering factual questions.
#[derive(kit::Tool, Deserialize, JsonSchema)]
#[tool(max_result_chars = 60)]
struct SearchDocs {
    /// What to look for.
    query: String,
    /// How many hits to return.
    #[serde(default = "default_limit")]
    limit: u32,
    /// Only documents in this language.
    language: Option<String>,
    /// Include archived documents.
    #[serde(default)]
    include_archived: bool,
    /// The order of the hits.
    #[serde(default = "default_order")]
    order: Order,
}

fn default_limit() -> u32 {
    3
}

fn default_order() -> Order {
    Order::Relevance
}

impl ToolHandler for SearchDocs {
    type Output = Vec<String>;
    async fn run(self, _ctx: ToolContext) -> Result<Vec<String>, ToolError> {
        if self.query == "outage" {
            return Err(ToolError::new(
                "the search index is rebuilding; try again in a minute",
            ));
        }
        let scope = match (&self.language, self.include_archived) {
            (Some(lang), _) => format!(" [{lang}]"),
            (None, true) => " [+archive]".to_string(),
            (None, false) => String::new(),
        };
        Ok((1..=self.limit)
            .map(|i| format!("{} #{i} ({:?}){scope}", self.query, self.order))
            .collect())
    }
}

fn call(args: Value) -> ToolCall {
    ToolCall::with_id("call_1", "search_docs", args)
}

#[test]
fn the_derived_schema_is_what_the_model_sees() {
    let tool = SearchDocs::tool();
    assert_eq!(tool.name(), "search_docs");
    assert_eq!(
        tool.description(),
        "Searches the knowledge base.\n\nUse it before answering factual questions."
    );
    assert_eq!(tool.max_result_chars(), Some(60));
    // Required: only the field without `Option` or a serde default. Doc comments describe
    // fields; serde defaults appear as `default`; `$schema`, `title` and the struct's own
    // description are left out (the description travels separately).
    assert_eq!(
        tool.parameters(),
        &json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "limit": {
                    "type": "integer", "format": "uint32", "minimum": 0, "default": 3,
                    "description": "How many hits to return.",
                },
                "language": {
                    "type": ["string", "null"],
                    "description": "Only documents in this language.",
                },
                "include_archived": {
                    "type": "boolean", "default": false,
                    "description": "Include archived documents.",
                },
                "order": {
                    "$ref": "#/$defs/Order", "default": "relevance",
                    "description": "The order of the hits.",
                },
            },
            "required": ["query"],
            "$defs": {"Order": {
                "description": "How results are ordered.",
                "oneOf": [
                    {"type": "string", "const": "relevance", "description": "Best match first."},
                    {"type": "string", "const": "newest", "description": "Newest first."},
                ],
            }},
        })
    );
    // The spec sent to providers carries the same three parts.
    let spec = tool.spec();
    assert_eq!(
        (spec.name.as_str(), &spec.parameters),
        ("search_docs", tool.parameters())
    );
}

#[tokio::test]
async fn valid_arguments_run_the_handler_with_defaults() {
    let tool = SearchDocs::tool();
    let out = tool
        .execute(
            &call(json!({"query": "tea", "limit": 1})),
            ToolContext::detached(),
        )
        .await
        .unwrap();
    let m = out.message;
    assert!(!m.is_error(), "{}", m.text());
    assert_eq!(m.text(), "[\"tea #1 (Relevance)\"]");
    assert_eq!(m.tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(m.name.as_deref(), Some("search_docs"));
}

#[tokio::test]
async fn invalid_arguments_become_an_error_result_the_model_can_fix() {
    let tool = SearchDocs::tool();
    let cases = [
        (json!({"limit": 2}), "`query` is required"),
        (
            json!({"query": 7}),
            "`query`: expected string, got number 7",
        ),
        (
            json!({"query": "x", "order": "oldest"}),
            "`order`: must be one of \"relevance\", \"newest\", got \"oldest\"",
        ),
        (
            json!({"query": "x", "limit": -1}),
            "`limit`: must be at least 0",
        ),
        (Value::String("{\"query\": \"x\"".into()), "not valid JSON"),
        (json!(["x"]), "must be a JSON object"),
    ];
    for (args, expected) in cases {
        let m = tool
            .execute(&call(args.clone()), ToolContext::detached())
            .await
            .unwrap()
            .message;
        assert!(m.is_error(), "{args}: {}", m.text());
        assert_eq!(
            m.tool_call_id.as_deref(),
            Some("call_1"),
            "the call is answered"
        );
        let text = m.text();
        assert!(
            text.contains("invalid arguments for tool `search_docs`"),
            "{text}"
        );
        assert!(text.contains(expected), "{args}: {text}");
        assert!(
            text.contains("Fix the arguments and call the tool again"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_handler_error_becomes_an_error_result() {
    let m = SearchDocs::tool()
        .execute(&call(json!({"query": "outage"})), ToolContext::detached())
        .await
        .unwrap()
        .message;
    assert!(m.is_error());
    assert_eq!(
        m.text(),
        "Error: the search index is rebuilding; try again in a minute"
    );
}

#[tokio::test]
async fn long_results_are_cut_with_a_visible_marker() {
    let m = SearchDocs::tool()
        .execute(
            &call(json!({"query": "tea", "limit": 10, "order": "newest"})),
            ToolContext::detached(),
        )
        .await
        .unwrap()
        .message;
    assert!(!m.is_error());
    let text = m.text();
    let (kept, marker) = text.split_once("\n\n").unwrap();
    assert_eq!(kept.chars().count(), 60);
    assert!(
        kept.starts_with("[\"tea #1 (Newest)\",\"tea #2 (Newest)\""),
        "{kept}"
    );
    assert!(
        marker.starts_with("[... result truncated: showing 60 of "),
        "{marker}"
    );
}

#[tokio::test]
async fn from_fn_tools_validate_against_their_schema_too() {
    let tool = Tool::from_fn(
        "convert",
        "Converts an amount between currencies.",
        json!({
            "type": "object",
            "properties": {
                "amount": {"type": "number", "minimum": 0},
                "to": {"type": "string", "enum": ["EUR", "USD"]},
            },
            "required": ["amount", "to"],
            "additionalProperties": false,
        }),
        |args, _ctx| async move {
            let amount = args["amount"].as_f64().unwrap_or_default();
            Ok::<_, ToolError>(format!(
                "{:.2} {}",
                amount * 1.08,
                args["to"].as_str().unwrap_or("")
            ))
        },
    );
    let ok = tool
        .execute(
            &ToolCall::with_id("c", "convert", json!({"amount": 100, "to": "USD"})),
            ToolContext::detached(),
        )
        .await
        .unwrap()
        .message;
    assert_eq!(ok.text(), "108.00 USD");
    let bad = tool
        .execute(
            &ToolCall::with_id("c", "convert", json!({"amount": -5, "to": "GBP", "fee": 1})),
            ToolContext::detached(),
        )
        .await
        .unwrap()
        .message;
    let text = bad.text();
    assert!(bad.is_error());
    assert!(text.contains("`amount`: must be at least 0"), "{text}");
    assert!(
        text.contains("`to`: must be one of \"EUR\", \"USD\""),
        "{text}"
    );
    assert!(text.contains("`fee` is not an accepted argument"), "{text}");
}
