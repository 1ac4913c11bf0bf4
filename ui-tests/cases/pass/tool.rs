// Every form of `#[derive(Tool)]` the docs show compiles and runs.
use kit::tool::{Tool, ToolContext, ToolDefinition, ToolError, ToolHandler, ToolOutput};
use serde::Deserialize;

/// Searches the web.
///
/// Returns the top results as text.
#[derive(kit::Tool, Deserialize, schemars::JsonSchema)]
#[tool(name = "web-search", max_result_chars = 2000)]
struct Search {
    /// What to search for.
    query: String,
    /// How many results (default 5).
    #[serde(default = "five")]
    limit: u32,
    /// Restrict to this site.
    site: Option<String>,
}

fn five() -> u32 {
    5
}

impl ToolHandler for Search {
    type Output = Vec<String>;
    async fn run(self, _ctx: ToolContext) -> Result<Vec<String>, ToolError> {
        Ok(vec![format!("{} ({})", self.query, self.limit)])
    }
}

/// A tool without arguments.
#[derive(kit::Tool, Deserialize, schemars::JsonSchema)]
#[tool(description = "Tells the time.")]
struct Now;

impl ToolHandler for Now {
    type Output = &'static str;
    async fn run(self, _ctx: ToolContext) -> Result<&'static str, ToolError> {
        Ok("noon")
    }
}

fn main() {
    let search: Tool = Search::tool();
    assert_eq!(search.name(), "web-search");
    assert_eq!(search.max_result_chars(), Some(2000));
    assert_eq!(<Search as ToolDefinition>::NAME, "web-search");
    assert_eq!(Now::tool().description(), "Tells the time.");
    let dynamic = Tool::from_fn(
        "echo",
        "Echoes its input.",
        serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        |args, _ctx| async move { Ok::<_, ToolError>(ToolOutput::json(&args)) },
    );
    assert_eq!(dynamic.name(), "echo");
}
