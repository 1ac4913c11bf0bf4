//! MCP both ways, offline: kit serves a tool over Streamable HTTP on localhost, and an agent
//! uses it through an MCP client, as it would any MCP server's tools.
//!
//! ```sh
//! cargo run --example mcp            # the demo
//! cargo run --example mcp -- serve   # serve the tool over stdio, for an
//!                                   # MCP host (an IDE, Claude Desktop)
//! ```
//!
//! Any MCP server works the same way: `McpClient::stdio("files", "npx",
//! ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"])`, or `McpClient::http(name, url)`.

use kit::mcp::{McpClient, McpHttpConfig, McpServer};
use kit::testing::ScriptedModel;
use kit::tool::ToolError;
use kit::trace::{Collector, Tracer};
use kit::{Agent, Message, Role, ToolCall};
use serde_json::json;

/// Looks up how many units of a product are in stock.
#[kit::tool]
async fn check_stock(
    /// The product's SKU, e.g. `A-17`.
    sku: String,
) -> Result<String, ToolError> {
    match sku.as_str() {
        "A-17" => Ok("12 units of A-17 (blue kettle) in the Lyon warehouse".to_string()),
        other => Err(ToolError::new(format!("no product with SKU {other}"))),
    }
}

fn server() -> McpServer {
    McpServer::new("inventory")
        .instructions("Ask check_stock before promising a delivery.")
        .tool(CheckStock)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("serve") {
        eprintln!("serving `inventory` over stdio (logs go to stderr)");
        server().serve_stdio().await?;
        return Ok(());
    }

    // 1. kit as an MCP server, on a local port.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let http = server().serve_http(listener, McpHttpConfig::default())?;
    println!("serving `inventory` at {}", http.url());

    // 2. kit as an MCP client: the server's tools become kit tools.
    let client = McpClient::http("inventory", http.url()).connect().await?;
    let tools = client.tools().await?;
    for tool in &tools {
        println!("tool from MCP: {} — {}", tool.name(), tool.description());
    }

    // 3. An agent uses them like any tool (guardrails, tracing and all). Offline, a scripted
    //    model plays the model; write `.model("openai:gpt-4o-mini")` for a real one.
    let agent = Agent::builder()
        .name("shop-assistant")
        .model(ScriptedModel::new([
            Message::assistant_with_tool_calls(
                "",
                vec![
                    ToolCall::new("check_stock", json!({"sku": "A-17"})),
                    ToolCall::new("check_stock", json!({"sku": "Z-99"})),
                ],
            ),
            Message::assistant(
                "We have 12 blue kettles (A-17) in Lyon; Z-99 is not a product we sell.",
            ),
        ]))
        .middleware(client.toolset().await?)
        .build()?;
    let collector = Collector::new();
    let out = agent
        .invoke("Do you have A-17 and Z-99 in stock?")
        .tracer(Tracer::new().with_exporter(collector.clone()))
        .await?;
    for message in &out.state().messages {
        if message.role == Role::Tool {
            let marker = if message.is_error() { " (error)" } else { "" };
            println!(
                "← {}{marker}: {}",
                message.name.as_deref().unwrap_or("?"),
                message.text()
            );
        }
    }
    println!("answer: {}", out.state().final_text());
    let mut mcp_runs: Vec<String> = collector
        .runs()
        .into_iter()
        .filter(|r| r.name.starts_with("tools/call"))
        .map(|r| r.name)
        .collect();
    mcp_runs.sort();
    println!("trace runs of MCP calls: {mcp_runs:?}");

    client.close().await;
    http.shutdown().await;
    Ok(())
}
