//! Agents on reasoning models, over real HTTP to the mock providers replaying real-shaped
//! traffic: the reasoning a provider requires back comes back byte for byte on every later
//! request (Anthropic's thinking blocks with their signatures, DeepSeek's
//! `reasoning_content`), and an agent runs on the Responses API with text, tools and
//! streaming.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use futures::StreamExt;
use kit::agent::Agent;
use kit::tool::{ToolContext, ToolError, ToolHandler};
use kit::{EventKind, MemoryCheckpointer, RunOptions};
use kit_testing::mock::MockServer;
use kit_testing::mock::fixtures::{self, Fixture};
use serde_json::{Value, json};

/// Looks up the weather of a city.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
struct GetWeather {
    /// The city.
    city: String,
}

impl ToolHandler for GetWeather {
    type Output = Value;
    async fn run(self, _ctx: ToolContext) -> Result<Value, ToolError> {
        Ok(json!({"city": self.city, "celsius": 18}))
    }
}

fn fixture(name: &str) -> &'static Fixture {
    fixtures::get(name).unwrap_or_else(|| panic!("no fixture {name}"))
}

/// The thinking blocks a non-streamed fixture answered with, as sent.
fn thinking_blocks_of(fixture: &Fixture) -> Vec<Value> {
    let body: Value = serde_json::from_str(fixture.body).unwrap();
    body["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")))
        .cloned()
        .collect()
}

/// The blocks of the assistant turns of a recorded Anthropic request.
fn assistant_blocks(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["content"].as_array().unwrap().clone())
        .collect()
}

#[tokio::test]
async fn anthropic_thinking_with_tools_goes_back_byte_for_byte_over_two_turns() {
    let server = MockServer::start().await.unwrap();
    let first = fixture("messages/thinking_tool_use.json");
    server.enqueue_all([
        first.response(),
        fixture("messages/text.json").response(),
        fixture("messages/text.json").response(),
    ]);
    let agent = Agent::builder()
        .model(first.model(&server))
        .tool(GetWeather::tool())
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("weather");
    let out = agent
        .invoke("Weather in Paris?")
        .options(&opts)
        .await
        .unwrap();
    assert_eq!(out.state().final_text(), "Paris is the capital of France.");
    // The second turn of the conversation, on the same thread.
    agent.invoke("And tomorrow?").options(&opts).await.unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let sent = thinking_blocks_of(first);
    assert_eq!(sent.len(), 1);
    for (i, request) in requests.iter().enumerate().skip(1) {
        let blocks = assistant_blocks(&request.body);
        // The tool-use turn starts with its thinking block, exactly as it came.
        assert_eq!(blocks[0], sent[0], "request {i}: {blocks:#?}");
        assert_eq!(blocks[1]["type"], "tool_use", "request {i}");
        // Byte for byte in the body: the signature and the text are the very strings sent.
        let signature = sent[0]["signature"].as_str().unwrap();
        assert!(request.body_text.contains(signature), "request {i}");
    }
}

#[tokio::test]
async fn streamed_thinking_blocks_go_back_in_order_with_their_signatures() {
    let server = MockServer::start().await.unwrap();
    let first = fixture("messages/thinking_tool_use.stream");
    server.enqueue_all([first.response(), fixture("messages/text.stream").response()]);
    let agent = Agent::builder()
        .model(first.model(&server))
        .tool(GetWeather::tool())
        .build()
        .unwrap();
    // Streaming: the thinking arrives as reasoning deltas, then the call.
    let events: Vec<kit::Event> = agent
        .stream_events("Weather in Paris?", &RunOptions::new())
        .collect()
        .await;
    let reasoning: String = events
        .iter()
        .filter(|e| e.kind() == EventKind::ModelDelta)
        .filter_map(|e| e.data.to_json()["reasoning"].as_str().map(String::from))
        .collect();
    assert_eq!(
        reasoning,
        "The user asks for the weather in Paris. I should call get_weather with city Paris.\
         Celsius is fine."
    );
    let second = &server.requests()[1];
    let blocks = assistant_blocks(&second.body);
    let kinds: Vec<&str> = blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["thinking", "thinking", "tool_use"]);
    // Each block's signature as the signature_delta sent it, untouched.
    for block in &blocks[..2] {
        let signature = block["signature"].as_str().unwrap();
        assert!(signature.len() > 100);
        assert!(
            first
                .body
                .contains(&format!("\"signature\":\"{signature}\""))
        );
    }
    assert_eq!(blocks[2]["input"], json!({"city": "Paris"}));
}

#[tokio::test]
async fn deepseek_reasoning_content_goes_back_with_its_tool_calls() {
    let server = MockServer::start().await.unwrap();
    let first = fixture("deepseek/reasoning_tool_call.json");
    server.enqueue_all([
        first.response(),
        fixture("deepseek/reasoning_answer.json").response(),
    ]);
    let agent = Agent::builder()
        .model(first.model(&server))
        .tool(GetWeather::tool())
        .build()
        .unwrap();
    let out = agent.invoke("Weather in Paris?").await.unwrap();
    assert_eq!(out.state().final_text(), "It is 18°C in Paris.");
    let requests = server.requests();
    let messages = requests[1].body["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    let sent: Value = serde_json::from_str(first.body).unwrap();
    assert_eq!(
        assistant["reasoning_content"], sent["choices"][0]["message"]["reasoning_content"],
        "{assistant:#}"
    );
    assert_eq!(
        assistant["tool_calls"][0]["id"],
        "call_00_aB3dE5fG7hJ9kL1mN3pQ5rS7"
    );
    // The final answer's reasoning is kept on the message too.
    let last = out.state().messages.last().unwrap();
    assert_eq!(
        last.content.reasoning().next().map(|r| r.text.as_str()),
        Some("The tool says 18°C. Answer briefly.")
    );
}

#[tokio::test]
async fn another_providers_reasoning_never_reaches_a_server() {
    // A conversation begun on DeepSeek continues on Groq: Groq answers 400 to
    // `reasoning_content`, so it must not get it.
    let server = MockServer::start().await.unwrap();
    let deepseek = fixture("deepseek/reasoning_tool_call.json");
    let groq = fixture("groq/reasoning.json");
    server.enqueue_all([deepseek.response(), groq.response(), groq.response()]);
    let checkpointer = Arc::new(MemoryCheckpointer::new());
    let opts = RunOptions::new().thread_id("t");
    let first = Agent::builder()
        .model(deepseek.model(&server))
        .tool(GetWeather::tool())
        .checkpointer(checkpointer.clone())
        .build()
        .unwrap();
    first
        .invoke("Weather in Paris?")
        .options(&opts)
        .await
        .unwrap();
    let second = Agent::builder()
        .model(groq.model(&server))
        .tool(GetWeather::tool())
        .checkpointer(checkpointer)
        .build()
        .unwrap();
    second.invoke("Thanks!").options(&opts).await.unwrap();
    let last = server.requests().pop().unwrap();
    assert!(
        !last.body_text.contains("reasoning_content"),
        "{}",
        last.body_text
    );
    assert!(
        !last.body_text.contains("\"reasoning\""),
        "{}",
        last.body_text
    );
    assert!(
        !last.body_text.contains("I'll call get_weather"),
        "{}",
        last.body_text
    );
}

#[tokio::test]
async fn an_agent_on_the_responses_api_calls_tools_and_streams() {
    let server = MockServer::start().await.unwrap();
    let call = fixture("responses/reasoning_call.json");
    server.enqueue_all([
        call.response(),
        fixture("responses/text.json").response(),
        fixture("responses/function_call.stream").response(),
        fixture("responses/reasoning.stream").response(),
    ]);
    let agent = Agent::builder()
        .model(call.model(&server))
        .system_prompt("Answer briefly.")
        .tool(GetWeather::tool())
        .build()
        .unwrap();
    let out = agent.invoke("Weather in Paris?").await.unwrap();
    assert_eq!(out.state().final_text(), "Paris is the capital of France.");

    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/responses");
    let first = &requests[0].body;
    assert_eq!(first["instructions"], "Answer briefly.");
    assert_eq!(first["store"], false);
    assert_eq!(first["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(first["tools"][0]["name"], "get_weather");
    assert_eq!(
        first["input"][0],
        json!({"role": "user", "content": "Weather in Paris?"})
    );
    // The second request carries the reasoning item (with its encrypted content), the call
    // and its output, in order.
    let input = requests[1].body["input"].as_array().unwrap();
    let kinds: Vec<&str> = input
        .iter()
        .map(|i| i["type"].as_str().unwrap_or("message"))
        .collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );
    let sent: Value = serde_json::from_str(call.body).unwrap();
    assert_eq!(
        input[1]["encrypted_content"],
        sent["output"][0]["encrypted_content"]
    );
    assert_eq!(input[1]["summary"], sent["output"][0]["summary"]);
    assert_eq!(input[2]["call_id"], "call_7VaiUXZYuuuwWwviCrckxq6t");
    assert_eq!(input[3]["call_id"], "call_7VaiUXZYuuuwWwviCrckxq6t");
    assert_eq!(input[3]["output"], "{\"celsius\":18,\"city\":\"Paris\"}");

    // Streamed: a call streamed as argument deltas, then the answer with a reasoning summary.
    let events: Vec<kit::Event> = agent
        .stream_events("And in Oslo?", &RunOptions::new())
        .collect()
        .await;
    let text: String = events
        .iter()
        .filter(|e| e.kind() == EventKind::ModelDelta)
        .filter_map(|e| e.data.to_json()["text"].as_str().map(String::from))
        .collect();
    assert_eq!(text, "Paris is the capital of France.");
    let reasoning: String = events
        .iter()
        .filter(|e| e.kind() == EventKind::ModelDelta)
        .filter_map(|e| e.data.to_json()["reasoning"].as_str().map(String::from))
        .collect();
    assert_eq!(reasoning, "**Checking the weather tool**");
    assert!(events.iter().any(|e| e.kind() == EventKind::ToolEnd));
    assert_eq!(events.last().unwrap().data.to_json()["status"], "done");
    let last = server.requests().pop().unwrap();
    assert_eq!(last.body["stream"], true);
    let usage_end = events
        .iter()
        .rfind(|e| e.kind() == EventKind::ModelEnd)
        .unwrap();
    assert_eq!(usage_end.data.to_json()["usage"]["reasoning_tokens"], 64);
}
