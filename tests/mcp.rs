//! MCP against servers kit did not write: rmcp's own server side, in-process (a `ServerHandler`
//! written with rmcp's API, on a `tokio::io::duplex` pair), and kit's server called by rmcp's
//! own client, in-process and over Streamable HTTP. (The official reference server, run as a
//! child process, is in `mcp_everything.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use kit::agent::{Middleware, Runtime, ToolNext};
use kit::graph::Pause;
use kit::mcp::rmcp::model::SubscriptionFilter;
use kit::mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use kit::mcp::rmcp::service::{RequestContext, SubscriptionContext, SubscriptionSink};
use kit::mcp::rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use kit::mcp::{McpClient, McpHttpConfig, McpServer, McpToolset};
use kit::message::{Content, ContentPart, ToolStatus};
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolContext, ToolError, ToolExecution};
use kit::trace::{Collector, Tracer};
use kit::{Agent, Message, ToolCall};
use serde_json::{Value, json};
use tokio::sync::Notify;

// --- rmcp's own server side ------------------------------------------------------------------

/// A server written with rmcp's API alone: arithmetic, a failing tool, a slow one, a big one,
/// an image, structured content, a tool that adds a tool, and one that crashes the server.
#[derive(Clone, Default)]
struct RmcpServer {
    calls: Arc<AtomicUsize>,
    grown: Arc<AtomicBool>,
    slow_cancelled: Arc<AtomicBool>,
    /// Fired by the `crash` tool: the server stops serving.
    crash: Arc<Notify>,
    /// The clients' tool-list subscriptions (protocol 2026-07-28: `subscriptions/listen`).
    subscribers: Arc<std::sync::Mutex<Vec<SubscriptionSink>>>,
}

fn schema(v: Value) -> Arc<serde_json::Map<String, Value>> {
    Arc::new(v.as_object().unwrap().clone())
}

fn two_ints() -> Arc<serde_json::Map<String, Value>> {
    schema(json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]
    }))
}

fn empty() -> Arc<serde_json::Map<String, Value>> {
    schema(json!({"type": "object", "properties": {}}))
}

fn int_arg(req: &CallToolRequestParams, key: &str) -> i64 {
    req.arguments
        .as_ref()
        .and_then(|a| a.get(key))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

impl ServerHandler for RmcpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        use kit::mcp::rmcp::model::Tool as T;
        let mut tools = vec![
            T::new("add", "Adds two integers.", two_ints()),
            T::new("fail", "Always fails.", empty()),
            T::new("slow", "Never finishes.", empty()),
            T::new(
                "big",
                "Returns `n` characters.",
                schema(
                    json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
                ),
            ),
            T::new("picture", "Returns a picture.", empty()),
            T::new("weather", "Returns structured weather.", empty()),
            T::new("grow", "Adds the multiply tool.", empty()),
            T::new("crash", "Crashes the server.", empty()),
        ];
        if self.grown.load(Ordering::SeqCst) {
            tools.push(T::new("multiply", "Multiplies two integers.", two_ints()));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.subscribers
            .lock()
            .unwrap()
            .push(context.sink().clone());
        context.cancelled().await;
        Ok(())
    }

    async fn call_tool(
        &self,
        req: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let result = match req.name.as_ref() {
            "add" => CallToolResult::success(vec![ContentBlock::text(
                (int_arg(&req, "a") + int_arg(&req, "b")).to_string(),
            )]),
            "multiply" if self.grown.load(Ordering::SeqCst) => {
                CallToolResult::success(vec![ContentBlock::text(
                    (int_arg(&req, "a") * int_arg(&req, "b")).to_string(),
                )])
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text("the disk is full")]),
            "slow" => {
                context.ct.cancelled().await;
                self.slow_cancelled.store(true, Ordering::SeqCst);
                CallToolResult::error(vec![ContentBlock::text("cancelled")])
            }
            "big" => {
                let n = usize::try_from(int_arg(&req, "n")).unwrap_or(0);
                CallToolResult::success(vec![ContentBlock::text("x".repeat(n))])
            }
            "picture" => CallToolResult::success(vec![
                ContentBlock::text("A red pixel:"),
                ContentBlock::image("iVBORw0KGgo=", "image/png"),
            ]),
            "weather" => {
                let mut r = CallToolResult::success(vec![]);
                r.structured_content = Some(json!({"temperature": 21, "sky": "clear"}));
                r
            }
            "grow" => {
                self.grown.store(true, Ordering::SeqCst);
                // To the subscribers of 2026-07-28 clients, and unasked to older ones; before
                // the result, so a client knows of the change when it reads the result.
                let sinks: Vec<SubscriptionSink> = self.subscribers.lock().unwrap().clone();
                if sinks.is_empty() {
                    context.peer.notify_tool_list_changed().await.unwrap();
                }
                for sink in sinks {
                    sink.notify_tool_list_changed().await.unwrap();
                }
                CallToolResult::success(vec![ContentBlock::text("multiply added")])
            }
            "crash" => {
                self.crash.notify_one();
                std::future::pending::<()>().await;
                unreachable!()
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool named {other}"),
                    None,
                ));
            }
        };
        Ok(CallToolResponse::Complete(result))
    }
}

/// rmcp's server on one end of a duplex pipe, kit's client (built by `builder`) on the other.
/// The server stops when its `crash` token fires.
async fn connect(
    server: RmcpServer,
    builder: kit::mcp::McpClientBuilder,
) -> (McpClient, tokio::task::JoinHandle<()>) {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let crash = server.crash.clone();
    let task = tokio::spawn(async move {
        let running = server.serve(server_io).await.unwrap();
        tokio::select! {
            _ = running.waiting() => {}
            () = crash.notified() => {}
        }
    });
    let client = builder.connect_with(client_io).await.unwrap();
    (client, task)
}

async fn call(tools: &[Tool], name: &str, args: Value) -> Message {
    let tool = tools.iter().find(|t| t.name() == name).unwrap();
    let call = ToolCall::new(name, args);
    tool.execute(&call, ToolContext::detached())
        .await
        .unwrap()
        .message
}

#[tokio::test]
async fn a_servers_tools_are_listed_with_their_schemas() {
    let (client, _server) = connect(RmcpServer::default(), McpClient::builder("calc")).await;
    let tools = client.tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(Tool::name).collect();
    assert_eq!(
        names,
        [
            "add", "fail", "slow", "big", "picture", "weather", "grow", "crash"
        ]
    );
    let add = &tools[0];
    assert_eq!(add.description(), "Adds two integers.");
    assert_eq!(add.parameters()["required"], json!(["a", "b"]));
    assert_eq!(add.trace_tags(), ["mcp"]);
    assert_eq!(client.name(), "calc");
    // rmcp's server speaks the stateless revision; kit asks for it first.
    let info = client.server_info().unwrap();
    assert_eq!(info.protocol_version.to_string(), "2026-07-28");
}

#[tokio::test]
async fn calls_map_text_images_and_structured_content_to_tool_results() {
    let (client, _server) = connect(RmcpServer::default(), McpClient::builder("calc")).await;
    let tools = client.tools().await.unwrap();

    let sum = call(&tools, "add", json!({"a": 40, "b": 2})).await;
    assert_eq!(sum.text(), "42");
    assert_eq!(sum.status, Some(ToolStatus::Success));

    let picture = call(&tools, "picture", json!({})).await;
    assert_eq!(
        picture.content,
        Content::Parts(vec![
            ContentPart::text("A red pixel:"),
            ContentPart::image_base64("image/png", "iVBORw0KGgo="),
        ])
    );

    let weather = call(&tools, "weather", json!({})).await;
    let structured: Value = serde_json::from_str(&weather.text()).unwrap();
    assert_eq!(structured, json!({"temperature": 21, "sky": "clear"}));
}

#[tokio::test]
async fn is_error_from_the_server_is_an_error_result() {
    let (client, _server) = connect(RmcpServer::default(), McpClient::builder("calc")).await;
    let tools = client.tools().await.unwrap();
    let failed = call(&tools, "fail", json!({})).await;
    assert!(failed.is_error());
    assert_eq!(failed.text(), "the disk is full");
}

#[tokio::test]
async fn arguments_against_the_schema_are_refused_before_anything_is_sent() {
    let server = RmcpServer::default();
    let calls = server.calls.clone();
    let (client, _server) = connect(server, McpClient::builder("calc")).await;
    let tools = client.tools().await.unwrap();
    let bad = call(&tools, "add", json!({"a": "forty", "b": 2})).await;
    assert!(bad.is_error());
    assert!(
        bad.text().contains("invalid arguments for tool `add`"),
        "{}",
        bad.text()
    );
    assert!(
        bad.text().contains("`a`: expected integer"),
        "{}",
        bad.text()
    );
    let missing = call(&tools, "add", json!({"a": 1})).await;
    assert!(missing.text().contains("`b`"), "{}", missing.text());
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the server saw no call");
}

#[tokio::test]
async fn a_call_past_its_timeout_is_cancelled_and_answered_with_an_error() {
    let server = RmcpServer::default();
    let cancelled = server.slow_cancelled.clone();
    let (client, _server) = connect(
        server,
        McpClient::builder("calc").call_timeout(Duration::from_millis(200)),
    )
    .await;
    let tools = client.tools().await.unwrap();
    let slow = call(&tools, "slow", json!({})).await;
    assert!(slow.is_error());
    assert!(
        slow.text()
            .contains("the MCP server `calc` did not answer the call to `slow` within 200ms"),
        "{}",
        slow.text()
    );
    // The server was told (notifications/cancelled), and the connection still works.
    for _ in 0..500 {
        if cancelled.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        cancelled.load(Ordering::SeqCst),
        "the server saw the cancellation"
    );
    assert_eq!(
        call(&tools, "add", json!({"a": 1, "b": 2})).await.text(),
        "3"
    );
}

#[tokio::test]
async fn a_server_that_crashes_mid_call_gives_error_results_never_a_hang() {
    let (client, server) = connect(RmcpServer::default(), McpClient::builder("calc")).await;
    let tools = client.tools().await.unwrap();
    let crashed = call(&tools, "crash", json!({})).await;
    server.await.unwrap();
    assert!(crashed.is_error());
    assert!(
        crashed
            .text()
            .contains("closed the connection during the call to `crash`"),
        "{}",
        crashed.text()
    );
    let after = call(&tools, "add", json!({"a": 1, "b": 2})).await;
    assert!(after.is_error());
    assert!(
        after
            .text()
            .contains("the MCP server `calc` is not running")
            || after.text().contains("closed the connection"),
        "{}",
        after.text()
    );
}

#[tokio::test]
async fn responses_over_the_limits_are_cut_or_refused() {
    // Within the message limit but over the result cap: cut, with a marker.
    let (client, _server) = connect(
        RmcpServer::default(),
        McpClient::builder("calc").max_result_chars(1000),
    )
    .await;
    let tools = client.tools().await.unwrap();
    let cut = call(&tools, "big", json!({"n": 50_000})).await;
    assert!(cut.text().starts_with(&"x".repeat(1000)));
    assert!(
        cut.text()
            .contains("[... result truncated: showing 1000 of 50000 characters]")
    );

    // Over the message limit: dropped unread, and the call ends at its timeout.
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let _server = tokio::spawn(async move {
        let running = RmcpServer::default().serve(server_io).await.unwrap();
        let _ = running.waiting().await;
    });
    let (read, write) = tokio::io::split(client_io);
    let transport = kit::mcp::rmcp::transport::async_rw::AsyncRwTransport::new_client(read, write)
        .with_max_line_length(64 * 1024);
    let client = McpClient::builder("calc")
        .call_timeout(Duration::from_millis(500))
        .max_message_bytes(64 * 1024)
        .connect_with(transport)
        .await
        .unwrap();
    let tools = client.tools().await.unwrap();
    let refused = call(&tools, "big", json!({"n": 1_000_000})).await;
    assert!(refused.is_error());
    assert!(
        refused.text().contains("65536 byte message limit"),
        "{}",
        refused.text()
    );
    assert_eq!(
        call(&tools, "add", json!({"a": 2, "b": 2})).await.text(),
        "4"
    );
}

#[tokio::test]
async fn a_list_changed_notice_refreshes_the_tools() {
    let (client, _server) = connect(RmcpServer::default(), McpClient::builder("calc")).await;
    let before = client.tools().await.unwrap();
    assert!(!before.iter().any(|t| t.name() == "multiply"));
    let seen = client.list_changes();
    assert_eq!(
        call(&before, "grow", json!({})).await.text(),
        "multiply added"
    );
    assert!(
        client
            .wait_for_list_change(seen, Duration::from_secs(10))
            .await
    );
    let after = client.tools().await.unwrap();
    assert_eq!(
        call(&after, "multiply", json!({"a": 6, "b": 7}))
            .await
            .text(),
        "42"
    );
}

#[tokio::test]
async fn an_agent_sees_tools_added_while_it_runs() {
    let (client, _server) = connect(RmcpServer::default(), McpClient::builder("calc")).await;
    let model = ScriptedModel::new([
        Message::assistant_with_tool_calls("", vec![ToolCall::new("grow", json!({}))]),
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::new("multiply", json!({"a": 6, "b": 7}))],
        ),
        Message::assistant("6 × 7 = 42."),
    ]);
    let toolset = McpToolset::new([client.clone()]).await.unwrap();
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(toolset)
        .build()
        .unwrap();
    // The notice travels on its own; the agent's second model call comes after the first
    // tool result, which the server sent after the notice.
    let out = agent.invoke("Multiply 6 by 7.").await.unwrap();
    let results: Vec<String> = out
        .state()
        .messages
        .iter()
        .filter(|m| m.role == kit::message::Role::Tool)
        .map(Message::text)
        .collect();
    assert_eq!(results, ["multiply added", "42"]);
    let requests = model.requests();
    let offered =
        |i: usize| -> Vec<String> { requests[i].tools.iter().map(|s| s.name.clone()).collect() };
    assert!(!offered(0).contains(&"multiply".to_string()));
    assert!(
        offered(1).contains(&"multiply".to_string()),
        "{:?}",
        offered(1)
    );
}

/// A server that lists, after a change, a tool another server of the toolset already has does
/// not take that tool's calls, in either order of the servers; the model is offered the name
/// once.
#[tokio::test]
async fn a_server_cannot_take_another_servers_tool_by_listing_it_again() {
    for calc_first in [true, false] {
        let (calc, _server) = connect(RmcpServer::default(), McpClient::builder("calc")).await;
        let multiply = Tool::from_fn(
            "multiply",
            "Multiplies, as the other server does it.",
            json!({"type": "object"}),
            |_, _| async { Ok::<_, ToolError>("from the other server") },
        );
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let _other = McpServer::new("other").tool(multiply).serve(server_io);
        let other = McpClient::connect_with("other", client_io).await.unwrap();
        let clients = if calc_first {
            [calc.clone(), other]
        } else {
            [other, calc.clone()]
        };
        let toolset = McpToolset::new(clients).await.unwrap();
        let model = ScriptedModel::new([
            Message::assistant_with_tool_calls("", vec![ToolCall::new("grow", json!({}))]),
            Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::new("multiply", json!({"a": 6, "b": 7}))],
            ),
            Message::assistant("done"),
        ]);
        let agent = Agent::builder()
            .model(model.clone())
            .middleware(toolset)
            .build()
            .unwrap();
        let out = agent.invoke("Multiply 6 by 7.").await.unwrap();
        let results: Vec<String> = out
            .state()
            .messages
            .iter()
            .filter(|m| m.role == kit::message::Role::Tool)
            .map(Message::text)
            .collect();
        assert_eq!(results, ["multiply added", "from the other server"]);
        let offered: Vec<String> = model.requests()[1]
            .tools
            .iter()
            .map(|s| s.name.clone())
            .filter(|n| n == "multiply")
            .collect();
        assert_eq!(offered.len(), 1, "calc first: {calc_first}");
    }
}

/// A server listing its tools a page at a time, each tool with a long description.
#[derive(Clone)]
struct Paged {
    pages: usize,
    description_bytes: usize,
}

impl ServerHandler for Paged {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let page: usize = request
            .and_then(|r| r.cursor)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let tool = kit::mcp::rmcp::model::Tool::new(
            format!("tool_{page}"),
            "d".repeat(self.description_bytes),
            empty(),
        );
        let mut result = ListToolsResult::with_all_items(vec![tool]);
        result.next_cursor = (page + 1 < self.pages).then(|| (page + 1).to_string());
        Ok(result)
    }
}

/// A tool list read page by page is held, all pages together, to `max_message_bytes`: every
/// model call sends it. Under the limit every page is read.
#[tokio::test]
async fn a_paged_tool_list_is_bounded_by_its_bytes_in_all() {
    // Descriptions are cut to 4,096 characters, but what a server sends is counted as sent.
    for (pages, listed) in [(3, true), (40, false)] {
        let server = Paged {
            pages,
            description_bytes: 4000,
        };
        let (client_io, server_io) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            if let Ok(running) = server.serve(server_io).await {
                let _ = running.waiting().await;
            }
        });
        let client = McpClient::builder("paged")
            .max_message_bytes(64 * 1024)
            .connect_with(client_io)
            .await
            .unwrap();
        match client.tools().await {
            Ok(tools) => {
                assert!(listed, "{pages} pages of 4 KB passed a 64 KiB limit");
                assert_eq!(tools.len(), pages);
            }
            Err(e) => {
                assert!(!listed, "{pages} pages: {e}");
                let text = e.to_string();
                assert!(text.contains("max_message_bytes"), "{text}");
            }
        }
    }
}

/// kit's server runs at most `max_concurrent_calls` tool calls at once; one more is answered
/// at once as busy, and once a call finishes the next one runs.
#[tokio::test]
async fn kits_server_bounds_the_calls_it_runs_at_once() {
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let running = Arc::new(AtomicUsize::new(0));
    let wait = Tool::from_fn(
        "wait",
        "Waits to be released.",
        json!({"type": "object"}),
        {
            let (release, running) = (release.clone(), running.clone());
            move |_, _| {
                let (release, running) = (release.clone(), running.clone());
                async move {
                    running.fetch_add(1, Ordering::SeqCst);
                    let _ = release.acquire().await.map(|p| p.forget());
                    Ok::<_, ToolError>("released")
                }
            }
        },
    );
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let _serving = McpServer::new("slow")
        .tool(wait)
        .max_concurrent_calls(2)
        .serve(server_io);
    let client = McpClient::connect_with("slow", client_io).await.unwrap();
    let tools = client.tools().await.unwrap();
    let spawn_call = || {
        let tools = tools.clone();
        tokio::spawn(async move { call(&tools, "wait", json!({})).await })
    };
    let (first, second) = (spawn_call(), spawn_call());
    while running.load(Ordering::SeqCst) < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A third is refused at once, not queued.
    let busy = tokio::time::timeout(Duration::from_secs(10), call(&tools, "wait", json!({})))
        .await
        .expect("answered at once");
    assert_eq!(busy.status, Some(ToolStatus::Error));
    assert!(
        busy.text().contains("the server is busy"),
        "{}",
        busy.text()
    );
    assert_eq!(running.load(Ordering::SeqCst), 2, "the third never ran");
    release.add_permits(2);
    for done in [first, second] {
        assert_eq!(done.await.unwrap().text(), "released");
    }
    // Room again: the next call runs.
    release.add_permits(1);
    assert_eq!(call(&tools, "wait", json!({})).await.text(), "released");
}

/// A guardrail that refuses `add`, to show MCP calls pass through `wrap_tool_call`.
struct NoAdding;

#[kit::async_trait]
impl Middleware for NoAdding {
    fn name(&self) -> &str {
        "NoAdding"
    }
    fn hooks(&self) -> &[kit::agent::Hook] {
        &[]
    }
    async fn wrap_tool_call(
        &self,
        call: ToolCall,
        ctx: ToolContext,
        _rt: &Runtime,
        next: ToolNext<'_>,
    ) -> Result<ToolExecution, Pause> {
        if call.name == "add" {
            return Ok(ToolExecution::error(
                &call,
                "Error: adding is not allowed here.",
            ));
        }
        next.call(call, ctx).await
    }
}

#[tokio::test]
async fn guardrails_wrap_mcp_calls_whatever_order_they_were_added_in() {
    let server = RmcpServer::default();
    let calls = server.calls.clone();
    let (client, _server) = connect(server, McpClient::builder("calc")).await;
    let agent = Agent::builder()
        .model(ScriptedModel::new([
            Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::new("add", json!({"a": 1, "b": 1}))],
            ),
            Message::assistant("I may not add."),
        ]))
        .middleware(McpToolset::new([client]).await.unwrap())
        .middleware(NoAdding)
        .build()
        .unwrap();
    let out = agent.invoke("1 + 1?").await.unwrap();
    let result = out
        .state()
        .messages
        .iter()
        .find(|m| m.role == kit::message::Role::Tool)
        .unwrap();
    assert_eq!(result.text(), "Error: adding is not allowed here.");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_agent_calls_an_mcp_tool_end_to_end_and_the_trace_names_the_server() {
    let (client, _server) = connect(RmcpServer::default(), McpClient::builder("calc")).await;
    let collector = Collector::new();
    let agent = Agent::builder()
        .model(ScriptedModel::new([
            Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::new("add", json!({"a": 40, "b": 2}))],
            ),
            Message::assistant("40 + 2 = 42."),
        ]))
        .tools(client.tools().await.unwrap())
        .build()
        .unwrap();
    let out = agent
        .invoke("What is 40 + 2?")
        .tracer(Tracer::new().with_exporter(collector.clone()))
        .await
        .unwrap();
    assert_eq!(out.state().final_text(), "40 + 2 = 42.");
    let runs = collector.runs();
    let tool_run = runs.iter().find(|r| r.name == "add").unwrap();
    assert_eq!(tool_run.metadata["mcp_server"], "calc");
    assert!(tool_run.tags.contains(&"mcp".to_string()));
    let mcp_run = runs
        .iter()
        .find(|r| r.name == "tools/call add @ calc")
        .unwrap();
    assert_eq!(mcp_run.parent_id.as_deref(), Some(tool_run.id.as_str()));
    assert_eq!(mcp_run.metadata["mcp_server"], "calc");
    assert_eq!(mcp_run.metadata["mcp_method"], "tools/call");
    assert_eq!(mcp_run.metadata["mcp_protocol_version"], "2026-07-28");
}

// --- kit's server, rmcp's client ----------------------------------------------------------

/// Adds two integers.
#[kit::tool]
async fn add(a: i64, b: i64) -> Result<i64, ToolError> {
    Ok(a + b)
}

/// Always fails.
#[kit::tool]
async fn broken() -> Result<String, ToolError> {
    Err(ToolError::new("the printer is on fire"))
}

fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|b| b.as_text().map(|t| t.text.clone()))
        .collect()
}

#[tokio::test]
async fn kit_serves_tools_to_rmcps_client() {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let serving = McpServer::new("kit-calc")
        .instructions("Use add for sums.")
        .tool(Add)
        .tool(Broken)
        .serve(server_io);
    let client = ().serve(client_io).await.unwrap();
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "kit-calc");
    assert_eq!(info.instructions.as_deref(), Some("Use add for sums."));

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["add", "broken"]);
    assert_eq!(tools[0].input_schema["required"], json!(["a", "b"]));

    let sum = client
        .call_tool(
            CallToolRequestParams::new("add")
                .with_arguments(json!({"a": 40, "b": 2}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(text_of(&sum), "42");
    assert_ne!(sum.is_error, Some(true));

    let bad = client
        .call_tool(
            CallToolRequestParams::new("add")
                .with_arguments(json!({"a": "x"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    assert!(
        text_of(&bad).contains("invalid arguments for tool `add`"),
        "{}",
        text_of(&bad)
    );

    let failed = client
        .call_tool(CallToolRequestParams::new("broken"))
        .await
        .unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(text_of(&failed), "Error: the printer is on fire");

    let unknown = client
        .call_tool(CallToolRequestParams::new("subtract"))
        .await
        .unwrap_err();
    assert!(
        unknown.to_string().contains("there is no tool `subtract`"),
        "{unknown}"
    );

    // The client leaves; the server's task ends with it.
    client.cancel().await.unwrap();
    serving.wait().await.unwrap();
}

#[tokio::test]
async fn kit_serves_tools_to_its_own_client_speaking_2026_07_28() {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let _serving = McpServer::new("kit-calc").tool(Add).serve(server_io);
    let client = McpClient::connect_with("kit-calc", client_io)
        .await
        .unwrap();
    assert_eq!(
        client.server_info().unwrap().protocol_version.to_string(),
        "2026-07-28"
    );
    let tools = client.tools().await.unwrap();
    assert_eq!(
        call(&tools, "add", json!({"a": 20, "b": 22})).await.text(),
        "42"
    );
}

#[tokio::test]
async fn kit_serves_an_agent_over_streamable_http() {
    let helper = Agent::builder()
        .name("helper")
        .model(ScriptedModel::new([
            Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::new("add", json!({"a": 2, "b": 3}))],
            ),
            Message::assistant("2 + 3 = 5."),
        ]))
        .tool(Add)
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = McpServer::new("kit-agents")
        .agent(helper, "Answers arithmetic questions.")
        .serve_http(listener, McpHttpConfig::default())
        .unwrap();

    // rmcp's client, over Streamable HTTP.
    let transport = kit::mcp::rmcp::transport::StreamableHttpClientTransport::from_uri(
        server.url().to_string(),
    );
    let rmcp_client = ().serve(transport).await.unwrap();
    let tools = rmcp_client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "helper");
    let answer = rmcp_client
        .call_tool(
            CallToolRequestParams::new("helper").with_arguments(
                json!({"input": "What is 2 + 3?"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(text_of(&answer), "2 + 3 = 5.");
    let _ = rmcp_client.cancel().await;

    // kit's own client, over the same HTTP endpoint.
    let client = McpClient::http("agents", server.url())
        .connect()
        .await
        .unwrap();
    let tools = client.tools().await.unwrap();
    assert_eq!(tools[0].name(), "helper");
    assert_eq!(tools[0].description(), "Answers arithmetic questions.");
    client.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn two_servers_with_a_tool_of_the_same_name_need_a_prefix() {
    let (one, _s1) = connect(RmcpServer::default(), McpClient::builder("one")).await;
    let (two, _s2) = connect(RmcpServer::default(), McpClient::builder("two")).await;
    let err = McpToolset::new([one.clone(), two]).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("`one` and `two` both offer a tool named `add`"),
        "{err}"
    );
    let (two, _s2) = connect(
        RmcpServer::default(),
        McpClient::builder("two").prefix_tool_names(true),
    )
    .await;
    let toolset = McpToolset::new([one, two]).await.unwrap();
    let names: Vec<&str> = toolset.snapshot().iter().map(Tool::name).collect();
    assert!(
        names.contains(&"add") && names.contains(&"two_add"),
        "{names:?}"
    );
    // The prefixed tool still calls the server's `add`.
    let add = toolset
        .snapshot()
        .iter()
        .find(|t| t.name() == "two_add")
        .unwrap();
    let out = add
        .execute(
            &ToolCall::new("two_add", json!({"a": 1, "b": 2})),
            ToolContext::detached(),
        )
        .await
        .unwrap();
    assert_eq!(out.message.text(), "3");
}

#[tokio::test]
async fn connecting_to_nothing_is_a_clear_error() {
    let err = McpClient::stdio("ghost", "/nonexistent/kit-mcp-server", Vec::<String>::new())
        .connect()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("could not start the MCP server `ghost`"),
        "{err}"
    );

    let err = McpClient::http("nobody", "http://127.0.0.1:9/mcp")
        .connect_timeout(Duration::from_secs(20))
        .connect()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`nobody`"), "{err}");
}

/// A body read timeout too long for the clock (`Duration::MAX`: "no limit") means no limit:
/// a body sent in two parts is read and answered, where the deadline once overflowed and the
/// connection's task panicked without an answer.
#[tokio::test]
async fn a_body_read_timeout_of_duration_max_means_no_limit() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut config = McpHttpConfig::default();
    config.body_read_timeout = Duration::MAX;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = McpServer::new("no-limit")
        .tool(Add)
        .serve_http(listener, config)
        .unwrap();
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}
        }
    })
    .to_string();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body.as_bytes()[..10]).await.unwrap();
    // The body is not all there: the server waits for it, with a timer.
    tokio::time::sleep(Duration::from_millis(100)).await;
    stream.write_all(&body.as_bytes()[10..]).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("no answer within 10 s")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("no-limit"), "{answer}");
    server.shutdown().await;
}

/// Kit's MCP HTTP server holds against slow and greedy clients: a body trickled byte by byte
/// is cut at the body read timeout, a head that never ends at the header read timeout, and a
/// connection over the limit is answered 503 at once; a well-behaved client is served after.
#[tokio::test]
async fn the_http_server_cuts_slow_clients_and_refuses_connections_over_its_limit() {
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut config = McpHttpConfig::default();
    config.header_read_timeout = Duration::from_millis(400);
    config.body_read_timeout = Duration::from_millis(400);
    config.idle_timeout = Duration::from_secs(5);
    config.max_connections = 2;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = McpServer::new("limits")
        .tool(Add)
        .serve_http(listener, config)
        .unwrap();

    /// Reads until the server closes the connection; what it sent, and when it closed.
    async fn until_closed(
        stream: &mut (impl tokio::io::AsyncRead + Unpin),
        started: Instant,
    ) -> (String, Duration) {
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        let closed = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "the server kept a slow connection open");
        (
            String::from_utf8_lossy(&seen).into_owned(),
            started.elapsed(),
        )
    }

    // A body trickled a byte every 100 ms (so the connection is never idle) is cut.
    let slow_body = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut reader, mut writer) = slow_body.into_split();
    let started = Instant::now();
    writer
        .write_all(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
              Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{",
        )
        .await
        .unwrap();
    let trickle = async {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if writer.write_all(b" ").await.is_err() {
                break;
            }
        }
    };
    let ((_, took), ()) = tokio::join!(until_closed(&mut reader, started), trickle);
    assert!(
        took >= Duration::from_millis(400),
        "cut before the timeout: {took:?}"
    );
    assert!(took < Duration::from_secs(5), "cut only after {took:?}");

    // A head that never ends is cut at the header read timeout.
    let mut slow_head = tokio::net::TcpStream::connect(addr).await.unwrap();
    let started = Instant::now();
    slow_head
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let (_, took) = until_closed(&mut slow_head, started).await;
    assert!(
        took < Duration::from_secs(5),
        "a slow head held on for {took:?}"
    );

    // Two connections held open (the limit); a third is answered 503 at once.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"POST /mcp HTTP/1.1\r\n").await.unwrap();
        held.push(s);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut third = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (answer, took) = until_closed(&mut third, Instant::now()).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("maximum number of connections"), "{answer}");
    assert!(
        took < Duration::from_millis(300),
        "refused only after {took:?}"
    );
    drop(held);

    // The server still serves a well-behaved client.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let client = McpClient::http("limits", server.url())
        .connect()
        .await
        .unwrap();
    assert_eq!(client.tools().await.unwrap().len(), 1);
    client.close().await;
    server.shutdown().await;
}
