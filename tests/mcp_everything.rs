//! MCP against the official reference server, `@modelcontextprotocol/server-everything`
//! (TypeScript, the MCP SDK kit did not write), run as a child process over stdio and over
//! Streamable HTTP. `.ci/mcp.sh` installs it; see `support/mcp.rs` for running these locally.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/mcp.rs"]
mod support_mcp;

use std::time::Duration;

use kit::mcp::{McpClient, McpClientBuilder};
use kit::message::{Content, ContentPart, Role};
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolContext};
use kit::{Agent, Message, ToolCall};
use serde_json::{Value, json};
use support_mcp::everything;
use tokio::io::AsyncBufReadExt;

/// The reference server over stdio, or `None` when it is not installed (outside CI).
fn stdio_server() -> Option<McpClientBuilder> {
    let (program, mut args) = everything()?;
    args.push("stdio".into());
    Some(McpClient::stdio("everything", program, args))
}

async fn call(tools: &[Tool], name: &str, args: Value) -> Message {
    let tool = tools
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("the reference server has no tool `{name}`"));
    tool.execute(&ToolCall::new(name, args), ToolContext::detached())
        .await
        .unwrap()
        .message
}

#[tokio::test]
async fn the_reference_servers_tools_are_listed_and_called() {
    let Some(server) = stdio_server() else { return };
    let client = server.connect().await.unwrap();
    let info = client.server_info().unwrap();
    assert!(info.server_info.is_some());
    // The reference server (TypeScript SDK 1.x) knows only the `initialize` handshake: kit
    // asked for 2026-07-28 first and fell back.
    assert_eq!(info.protocol_version.to_string(), "2025-11-25");
    let tools = client.tools().await.unwrap();
    for name in [
        "echo",
        "get-sum",
        "get-tiny-image",
        "get-structured-content",
    ] {
        assert!(
            tools.iter().any(|t| t.name() == name),
            "no `{name}` in the list"
        );
    }
    let echo = tools.iter().find(|t| t.name() == "echo").unwrap();
    assert_eq!(echo.parameters()["required"], json!(["message"]));

    let echoed = call(&tools, "echo", json!({"message": "hello"})).await;
    assert_eq!(echoed.text(), "Echo: hello");

    let sum = call(&tools, "get-sum", json!({"a": 40, "b": 2})).await;
    assert!(!sum.is_error());
    assert!(sum.text().contains("42"), "{}", sum.text());

    let image = call(&tools, "get-tiny-image", json!({})).await;
    let Content::Parts(parts) = &image.content else {
        panic!("the image came back as text: {:?}", image.content)
    };
    assert!(
        parts.iter().any(|p| matches!(p, ContentPart::Image { .. })),
        "{parts:?}"
    );

    let weather = call(
        &tools,
        "get-structured-content",
        json!({"location": "Chicago"}),
    )
    .await;
    assert!(weather.text().contains("temperature"), "{}", weather.text());
    client.close().await;
}

#[tokio::test]
async fn the_tools_the_server_adds_after_the_handshake_are_picked_up() {
    let Some(server) = stdio_server() else { return };
    let client = server.connect().await.unwrap();
    // The server registers its task tool once the handshake is done, and says so with
    // `notifications/tools/list_changed`.
    assert!(
        client
            .wait_for_list_change(0, Duration::from_secs(30))
            .await,
        "the reference server sent no list_changed"
    );
    let tools = client.tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name() == "simulate-research-query"),
        "{:?}",
        tools.iter().map(Tool::name).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn bad_arguments_are_refused_by_the_servers_schema_before_sending() {
    let Some(server) = stdio_server() else { return };
    let client = server.connect().await.unwrap();
    let tools = client.tools().await.unwrap();
    let bad = call(
        &tools,
        "get-structured-content",
        json!({"location": "Atlantis"}),
    )
    .await;
    assert!(bad.is_error());
    assert!(
        bad.text()
            .contains("invalid arguments for tool `get-structured-content`"),
        "{}",
        bad.text()
    );
}

#[tokio::test]
async fn a_tool_that_throws_is_an_error_result() {
    let Some(server) = stdio_server() else { return };
    let client = server.connect().await.unwrap();
    let tools = client.tools().await.unwrap();
    let failed = call(
        &tools,
        "gzip-file-as-resource",
        json!({"name": "x.gz", "data": "ftp://example.invalid/x"}),
    )
    .await;
    assert!(failed.is_error(), "{}", failed.text());
    assert!(
        failed.text().contains("Unsupported URL protocol"),
        "{}",
        failed.text()
    );
}

#[tokio::test]
async fn a_slow_call_times_out_into_an_error_result_and_the_server_keeps_serving() {
    let Some(server) = stdio_server() else { return };
    let client = server
        .call_timeout(Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    let tools = client.tools().await.unwrap();
    let slow = call(
        &tools,
        "trigger-long-running-operation",
        json!({"duration": 30, "steps": 2}),
    )
    .await;
    assert!(slow.is_error());
    assert!(
        slow.text()
            .contains("did not answer the call to `trigger-long-running-operation`"),
        "{}",
        slow.text()
    );
    assert_eq!(
        call(&tools, "echo", json!({"message": "still here"}))
            .await
            .text(),
        "Echo: still here"
    );
}

#[tokio::test]
async fn a_server_killed_mid_call_is_an_error_result_and_is_started_again_for_the_next_call() {
    let Some(server) = stdio_server() else { return };
    let client = server.connect().await.unwrap();
    let tools = client.tools().await.unwrap();
    let first_pid = client.process_id().unwrap();
    let pending = {
        let tools = tools.clone();
        tokio::spawn(async move {
            call(
                &tools,
                "trigger-long-running-operation",
                json!({"duration": 60, "steps": 2}),
            )
            .await
        })
    };
    // Kill the server once the call is on its way (whether it was sent yet or not, the call
    // must end with an error, not hang).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(kill_process(first_pid), "could not kill the server");
    let crashed = tokio::time::timeout(Duration::from_secs(60), pending)
        .await
        .expect("the call hung after the server died")
        .unwrap();
    assert!(crashed.is_error());
    assert!(
        crashed.text().contains("closed the connection")
            || crashed.text().contains("did not answer"),
        "{}",
        crashed.text()
    );

    // The next call starts the server again.
    let after = call(&tools, "echo", json!({"message": "anyone?"})).await;
    assert_eq!(after.text(), "Echo: anyone?");
    assert_eq!(client.restarts(), 1);
    assert_ne!(client.process_id(), Some(first_pid));
}

#[tokio::test]
async fn a_dead_server_past_its_restarts_is_explained_with_its_exit() {
    let Some(server) = stdio_server() else { return };
    let client = server.max_restarts(0).connect().await.unwrap();
    let tools = client.tools().await.unwrap();
    assert!(kill_process(client.process_id().unwrap()));
    let mut after = call(&tools, "echo", json!({"message": "anyone?"})).await;
    // The exit is noticed when the pipe closes; a call racing it fails on the closed pipe.
    if !after.text().contains("is not running") {
        after = call(&tools, "echo", json!({"message": "anyone?"})).await;
    }
    assert!(after.is_error());
    assert!(after.text().contains("is not running"), "{}", after.text());
    assert!(after.text().contains("max_restarts"), "{}", after.text());
    assert!(after.text().contains("exited"), "{}", after.text());
}

#[tokio::test]
async fn dropping_the_client_and_its_tools_stops_the_server() {
    let Some(server) = stdio_server() else { return };
    let client = server.connect().await.unwrap();
    let tools = client.tools().await.unwrap();
    let pid = client.process_id().unwrap();
    assert!(running(pid));
    drop(tools);
    drop(client);
    for _ in 0..600 {
        if !running(pid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!running(pid), "the server outlived its client");
}

/// Whether a process runs (a zombie waiting to be reaped does not).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        })
        .unwrap_or(false)
}

/// Kills a process with SIGKILL, through `kill(1)`.
fn kill_process(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[tokio::test]
async fn an_agent_calls_the_reference_server_end_to_end() {
    let Some(server) = stdio_server() else { return };
    let client = server.connect().await.unwrap();
    let agent = Agent::builder()
        .model(ScriptedModel::new([
            Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::new("get-sum", json!({"a": 19, "b": 23}))],
            ),
            Message::assistant("19 + 23 = 42."),
        ]))
        .middleware(client.toolset().await.unwrap())
        .build()
        .unwrap();
    let out = agent.invoke("What is 19 + 23?").await.unwrap();
    let result = out
        .state()
        .messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    assert!(!result.is_error(), "{}", result.text());
    assert!(result.text().contains("42"), "{}", result.text());
    assert_eq!(out.state().final_text(), "19 + 23 = 42.");
}

#[tokio::test]
async fn the_reference_server_over_streamable_http() {
    let Some((program, mut args)) = everything() else {
        return;
    };
    args.push("streamableHttp".into());
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = stderr.next_line().await {
            if line.contains("listening on port") {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(ready, Ok(true)),
        "the reference server did not start"
    );
    tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });

    let client = McpClient::http("everything-http", format!("http://127.0.0.1:{port}/mcp"))
        .connect()
        .await
        .unwrap();
    let tools = client.tools().await.unwrap();
    assert_eq!(
        call(&tools, "echo", json!({"message": "over http"}))
            .await
            .text(),
        "Echo: over http"
    );
    client.close().await;
    let _ = child.kill().await;
}
