//! The `tracing` spans kit advertises (`otel.name`, `gen_ai.*`) on agent, chat and tool runs,
//! seen by a real subscriber with no exporter configured. A binary of its own: `tracing`
//! caches each callsite's interest process-wide, and tests registering callsites on other
//! threads at the same moment could race the subscriber's registration.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kit::agent::Agent;
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolError};
use kit::trace::Tracer;
use kit::{Message, ToolCall};
use serde_json::{Value, json};

fn lookup() -> Tool {
    Tool::from_fn(
        "lookup",
        "Looks a customer up.",
        json!({"type": "object", "properties": {"id": {"type": "string"}}}),
        |args: Value, _| async move {
            Ok::<_, ToolError>(format!("customer {}", args["id"].as_str().unwrap_or("?")))
        },
    )
}

// ---------------------------------------------------------------------------------------------
// A real `tracing` subscriber that keeps every span's name and fields.

#[derive(Default)]
struct Spans {
    next: AtomicU64,
    fields: Mutex<BTreeMap<u64, BTreeMap<String, String>>>,
}

struct Visitor<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

#[derive(Clone, Default)]
struct Capture(Arc<Spans>);

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let id = self.0.next.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fields = BTreeMap::new();
        fields.insert("span".to_string(), span.metadata().name().to_string());
        span.record(&mut Visitor(&mut fields));
        self.0.fields.lock().unwrap().insert(id, fields);
        tracing::span::Id::from_u64(id)
    }
    fn record(&self, span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        if let Some(fields) = self.0.fields.lock().unwrap().get_mut(&span.into_u64()) {
            values.record(&mut Visitor(fields));
        }
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(flavor = "current_thread")]
async fn the_advertised_spans_reach_a_real_subscriber() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let mut answer = Message::assistant_with_tool_calls(
        "",
        vec![ToolCall::with_id("c1", "lookup", json!({"id": "7"}))],
    );
    answer.usage = Some(kit::Usage {
        input_tokens: 30,
        output_tokens: 5,
        ..Default::default()
    });
    let model = ScriptedModel::new([answer, Message::assistant("Found.")]);
    let agent = Agent::builder()
        .name("support")
        .model(model)
        .tool(lookup())
        .build()
        .unwrap();
    // No exporter at all: the spans are still there for `tracing` users.
    agent
        .invoke("who is 7?")
        .tracer(Tracer::new())
        .await
        .unwrap();

    let spans: Vec<BTreeMap<String, String>> =
        capture.0.fields.lock().unwrap().values().cloned().collect();
    let find = |name: &str| {
        spans
            .iter()
            .find(|s| s.get("otel.name").map(String::as_str) == Some(name))
            .unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
    };
    let agent_span = find("invoke_agent support");
    assert_eq!(agent_span["span"], "kit.run");
    assert_eq!(agent_span["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(agent_span["gen_ai.agent.name"], "support");
    assert_eq!(agent_span["kit.run_kind"], "agent");
    let chat = find("chat scripted");
    assert_eq!(chat["gen_ai.operation.name"], "chat");
    assert_eq!(chat["gen_ai.provider.name"], "scripted");
    assert_eq!(chat["gen_ai.request.model"], "scripted");
    assert_eq!(chat["otel.kind"], "client");
    assert!(
        spans
            .iter()
            .any(|s| s.get("gen_ai.usage.input_tokens").map(String::as_str) == Some("30"))
    );
    let tool = find("execute_tool lookup");
    assert_eq!(tool["gen_ai.tool.name"], "lookup");
    assert_eq!(tool["gen_ai.tool.call.id"], "c1");
    assert_eq!(tool["gen_ai.operation.name"], "execute_tool");
}
