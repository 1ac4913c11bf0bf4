//! The queued OTLP exporter against a real HTTP receiver on 127.0.0.1: strict decoding of the
//! protobuf and JSON bodies, GenAI attributes, the Langfuse profile, redaction of planted
//! secrets in the exported bodies, and the failure matrix (the agent's result never changes).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kit::agent::Agent;
use kit::middleware::subagents::SubagentSpec;
use kit::model::ModelOptions;
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolError, ToolOutput};
use kit::trace::otlp::{OtlpExporter, Protocol};
use kit::trace::{Collector, ExportError, Exporter, QueueConfig, RunKind, TraceOptions, Tracer};
use kit::{MemoryCheckpointer, Message, ToolCall, Usage};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// A mock OTLP receiver: records every request and answers from a script (then 200).

#[derive(Clone, Default)]
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    delay: Duration,
    /// Wait for [`Mock::release`] before answering.
    gated: bool,
}

impl Reply {
    fn status(status: u16) -> Self {
        Reply {
            status,
            ..Default::default()
        }
    }
    fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }
    fn delay(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }
    fn gated(mut self) -> Self {
        self.gated = true;
        self
    }
}

#[derive(Debug, Clone)]
struct Captured {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    /// The body as sent (gzip).
    raw: Vec<u8>,
    /// The body, gunzipped.
    body: Vec<u8>,
    at: Instant,
}

struct MockState {
    requests: Mutex<Vec<Captured>>,
    script: Mutex<VecDeque<Reply>>,
    gate: tokio::sync::Semaphore,
}

#[derive(Clone)]
struct Mock {
    state: Arc<MockState>,
    url: String,
}

impl Mock {
    fn start(script: impl IntoIterator<Item = Reply>) -> Mock {
        let state = Arc::new(MockState {
            requests: Mutex::new(Vec::new()),
            script: Mutex::new(script.into_iter().collect()),
            gate: tokio::sync::Semaphore::new(0),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(state.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        Mock { state, url }
    }

    fn requests(&self) -> Vec<Captured> {
        self.state.requests.lock().unwrap().clone()
    }

    fn release(&self) {
        self.state.gate.add_permits(1000);
    }
}

async fn handle(
    axum::extract::State(state): axum::extract::State<Arc<MockState>>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::response::Response {
    let headers: BTreeMap<String, String> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let raw = body.to_vec();
    let plain = if headers.get("content-encoding").map(String::as_str) == Some("gzip") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .expect("the body is valid gzip");
        out
    } else {
        raw.clone()
    };
    state.requests.lock().unwrap().push(Captured {
        method: method.to_string(),
        path: uri.path().to_string(),
        headers,
        raw,
        body: plain,
        at: Instant::now(),
    });
    let reply = state.script.lock().unwrap().pop_front().unwrap_or(Reply {
        status: 200,
        ..Default::default()
    });
    if reply.gated {
        let _permit = state.gate.acquire().await.unwrap();
    }
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut response = axum::response::Response::builder().status(reply.status);
    for (k, v) in &reply.headers {
        response = response.header(*k, v);
    }
    response.body(axum::body::Body::from(reply.body)).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Decoding and looking things up.

/// Decodes a captured body strictly: protobuf with prost, JSON with serde into the proto types
/// (hex ids, integer enums and lowerCamelCase keys or it fails).
fn decode(c: &Captured) -> ExportTraceServiceRequest {
    match c.headers.get("content-type").map(String::as_str) {
        Some("application/x-protobuf") => prost::Message::decode(&c.body[..]).unwrap(),
        Some("application/json") => serde_json::from_slice(&c.body).unwrap(),
        other => panic!("unexpected content type {other:?}"),
    }
}

struct Exported {
    resource: Vec<KeyValue>,
    span: Span,
}

fn spans(requests: &[Captured]) -> Vec<Exported> {
    let mut out = Vec::new();
    for r in requests {
        for rs in decode(r).resource_spans {
            let resource = rs.resource.map(|r| r.attributes).unwrap_or_default();
            for ss in rs.scope_spans {
                let scope = ss.scope.unwrap();
                assert_eq!(scope.name, "kit");
                assert_eq!(scope.version, env!("CARGO_PKG_VERSION"));
                for span in ss.spans {
                    out.push(Exported {
                        resource: resource.clone(),
                        span,
                    });
                }
            }
        }
    }
    out
}

fn value<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn text<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match value(attrs, key)? {
        any_value::Value::StringValue(s) => Some(s),
        other => panic!("{key} is not a string: {other:?}"),
    }
}

fn int(attrs: &[KeyValue], key: &str) -> Option<i64> {
    match value(attrs, key)? {
        any_value::Value::IntValue(n) => Some(*n),
        other => panic!("{key} is not an int: {other:?}"),
    }
}

fn json_attr(attrs: &[KeyValue], key: &str) -> Value {
    serde_json::from_str(text(attrs, key).unwrap_or_else(|| panic!("{key} missing"))).unwrap()
}

fn find<'a>(spans: &'a [Exported], name: &str) -> &'a Span {
    &spans
        .iter()
        .find(|e| e.span.name == name)
        .unwrap_or_else(|| {
            let names: Vec<&str> = spans.iter().map(|e| e.span.name.as_str()).collect();
            panic!("no span {name:?} in {names:?}")
        })
        .span
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

// ---------------------------------------------------------------------------------------------
// The agent under trace: a tool call, a subagent, usage on the model answers.

fn with_usage(mut m: Message, input: u64, output: u64, cost: f64) -> Message {
    m.usage = Some(Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: 0,
        cache_creation_tokens: 0,
        ..Default::default()
    });
    m.metadata.insert("cost_usd".into(), json!(cost));
    m
}

fn lookup() -> Tool {
    Tool::from_fn(
        "lookup",
        "Looks a customer up.",
        json!({"type": "object", "properties": {"email": {"type": "string"}}}),
        |args, _ctx| async move {
            Ok::<_, ToolError>(ToolOutput::text(format!(
                "customer {} is on the gold plan",
                args["email"].as_str().unwrap_or("")
            )))
        },
    )
}

fn support_agent() -> Agent {
    let parent_model = ScriptedModel::new([
        with_usage(
            Message::assistant_with_tool_calls(
                "",
                vec![
                    ToolCall::with_id("c1", "lookup", json!({"email": "ada@example.com"})),
                    ToolCall::with_id(
                        "c2",
                        "task",
                        json!({"description": "summarise", "subagent_type": "helper"}),
                    ),
                ],
            ),
            120,
            30,
            0.0012,
        ),
        with_usage(
            Message::assistant("Ada is on the gold plan."),
            200,
            12,
            0.0009,
        ),
    ]);
    let child_model = ScriptedModel::new([with_usage(
        Message::assistant("summary ready"),
        40,
        5,
        0.0002,
    )]);
    Agent::builder()
        .name("support")
        .model(parent_model)
        .model_opts(ModelOptions::default().temperature(0.5).max_tokens(256))
        .tool(lookup())
        .subagents([SubagentSpec::new("helper", "Helps.").model(child_model)])
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap()
}

fn trace_options() -> TraceOptions {
    TraceOptions::new()
        .name("support chat")
        .user_id("user-1")
        .session_id("sess-9")
        .execution_mode("chat")
        .field("tenant", "acme")
}

/// What the agent returns with no tracing at all: the reference for every case.
async fn baseline() -> (String, usize) {
    let out = support_agent()
        .invoke("help me")
        .thread_id("t-base")
        .await
        .unwrap()
        .into_state();
    (out.final_text(), out.messages.len())
}

/// Runs the agent with `exporter` (and a collector, to count the runs), flushes, and returns
/// the agent's result, the number of runs and whether the flush got everything through.
async fn run_traced(
    exporter: Arc<OtlpExporter>,
    opts: TraceOptions,
) -> ((String, usize), usize, bool) {
    let collector = Collector::new();
    let tracer = Tracer::new()
        .with_exporter(collector.clone())
        .with_exporter(exporter.clone());
    let out = support_agent()
        .invoke("help me")
        .thread_id("thread-7")
        .tracer(tracer.clone())
        .trace(opts)
        .await
        .expect("the agent's run is not affected by the exporter")
        .into_state();
    let flushed = exporter.flush(Duration::from_secs(20));
    (
        (out.final_text(), out.messages.len()),
        collector.runs().len(),
        flushed,
    )
}

fn fast_queue() -> QueueConfig {
    QueueConfig {
        batch_timeout: Duration::from_millis(50),
        request_timeout: Duration::from_secs(5),
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_secs(5),
        max_retries: 2,
        shutdown_timeout: Duration::from_secs(2),
        ..QueueConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn otlp_protobuf_export_decodes_strictly_with_genai_attributes() {
    let mock = Mock::start([]);
    let exporter = Arc::new(
        OtlpExporter::builder(&mock.url)
            .bearer("test-key-123")
            .service_name("support-bot")
            .queue(fast_queue())
            .build()
            .unwrap(),
    );
    let (result, n_runs, flushed) =
        run_traced(exporter.clone(), trace_options().environment("staging")).await;
    assert_eq!(result, baseline().await);
    assert!(flushed, "{:?}", exporter.queue_stats());

    let requests = mock.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1/traces");
        assert_eq!(r.headers["content-type"], "application/x-protobuf");
        assert_eq!(r.headers["content-encoding"], "gzip");
        assert_eq!(r.headers["authorization"], "Bearer test-key-123");
        assert!(r.headers["user-agent"].starts_with("kit/"));
        assert!(r.raw.starts_with(&[0x1f, 0x8b]), "gzip magic");
        assert!(
            !contains(&r.body, "test-key-123"),
            "the exporter's key is not in the body"
        );
    }
    let spans = spans(&requests);
    assert_eq!(spans.len(), n_runs, "one span per run");
    let stats = exporter.queue_stats();
    assert_eq!(stats.runs.exported, n_runs as u64);
    assert_eq!(
        (stats.runs.dropped, stats.runs.failed, stats.retries),
        (0, 0, 0)
    );

    // Resource: service and environment (given here).
    for e in &spans {
        assert_eq!(text(&e.resource, "service.name"), Some("support-bot"));
        assert_eq!(text(&e.resource, "telemetry.sdk.name"), Some("kit"));
        assert_eq!(
            text(&e.resource, "deployment.environment.name"),
            Some("staging")
        );
    }
    // The tree: one root, shared trace id, every parent present, ids well-formed.
    let roots: Vec<&Span> = spans
        .iter()
        .map(|e| &e.span)
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1);
    let root = roots[0];
    assert_eq!(root.name, "invoke_agent support chat");
    let ids: HashMap<&[u8], &Span> = spans
        .iter()
        .map(|e| (e.span.span_id.as_slice(), &e.span))
        .collect();
    assert_eq!(ids.len(), spans.len(), "span ids are unique");
    for e in &spans {
        let s = &e.span;
        assert_eq!(s.trace_id, root.trace_id, "{}", s.name);
        assert_eq!(s.trace_id.len(), 16);
        assert_eq!(s.span_id.len(), 8);
        assert_ne!(s.span_id, vec![0; 8]);
        if !s.parent_span_id.is_empty() {
            assert!(
                ids.contains_key(s.parent_span_id.as_slice()),
                "{} dangles",
                s.name
            );
        }
        assert!(s.end_time_unix_nano >= s.start_time_unix_nano);
        // Inherited dimensions on every span.
        assert_eq!(
            text(&s.attributes, "gen_ai.conversation.id"),
            Some("thread-7"),
            "{}",
            s.name
        );
        assert_eq!(text(&s.attributes, "user.id"), Some("user-1"));
        assert_eq!(text(&s.attributes, "session.id"), Some("sess-9"));
        assert_eq!(text(&s.attributes, "kit.execution_mode"), Some("chat"));
        assert_eq!(text(&s.attributes, "kit.custom.tenant"), Some("acme"));
        // Plain OTLP carries no Langfuse attributes.
        assert!(
            !s.attributes
                .iter()
                .any(|kv| kv.key.starts_with("langfuse."))
        );
        let expected_kind = if s.name.starts_with("chat ") { 3 } else { 1 };
        assert_eq!(s.kind, expected_kind, "{}", s.name);
    }
    // The root is an agent span.
    assert_eq!(
        text(&root.attributes, "gen_ai.operation.name"),
        Some("invoke_agent")
    );
    assert_eq!(
        text(&root.attributes, "gen_ai.agent.name"),
        Some("support chat")
    );
    assert_eq!(
        json_attr(&root.attributes, "kit.input")["messages"][0]["content"],
        "help me"
    );

    // Model calls: chat spans with provider, model, params, usage, cost, messages.
    let chats: Vec<&Span> = spans
        .iter()
        .map(|e| &e.span)
        .filter(|s| s.name == "chat scripted")
        .collect();
    assert_eq!(chats.len(), 3, "two parent turns, one subagent turn");
    let first = chats
        .iter()
        .find(|s| int(&s.attributes, "gen_ai.usage.input_tokens") == Some(120))
        .unwrap();
    let a = &first.attributes;
    assert_eq!(text(a, "gen_ai.operation.name"), Some("chat"));
    assert_eq!(text(a, "gen_ai.provider.name"), Some("scripted"));
    assert_eq!(text(a, "gen_ai.request.model"), Some("scripted"));
    assert_eq!(text(a, "gen_ai.response.model"), Some("scripted"));
    assert_eq!(int(a, "gen_ai.usage.output_tokens"), Some(30));
    assert_eq!(int(a, "gen_ai.request.max_tokens"), Some(256));
    assert_eq!(
        value(a, "gen_ai.request.temperature"),
        Some(&any_value::Value::DoubleValue(0.5))
    );
    assert_eq!(
        value(a, "gen_ai.usage.cost"),
        Some(&any_value::Value::DoubleValue(0.0012))
    );
    let input = json_attr(a, "gen_ai.input.messages");
    assert_eq!(
        input[0],
        json!({"role": "user", "parts": [{"type": "text", "content": "help me"}]})
    );
    let output = json_attr(a, "gen_ai.output.messages");
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["finish_reason"], "tool_calls");
    assert_eq!(output[0]["parts"][0]["type"], "tool_call");
    assert_eq!(output[0]["parts"][0]["name"], "lookup");
    assert_eq!(
        output[0]["parts"][0]["arguments"]["email"],
        "ada@example.com"
    );

    // Tool calls.
    let tool = find(&spans, "execute_tool lookup");
    let a = &tool.attributes;
    assert_eq!(text(a, "gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(text(a, "gen_ai.tool.name"), Some("lookup"));
    assert_eq!(text(a, "gen_ai.tool.call.id"), Some("c1"));
    assert_eq!(
        text(a, "gen_ai.tool.description"),
        Some("Looks a customer up.")
    );
    assert_eq!(
        json_attr(a, "gen_ai.tool.call.arguments")["email"],
        "ada@example.com"
    );
    assert_eq!(
        text(a, "gen_ai.tool.call.result"),
        Some("customer ada@example.com is on the gold plan")
    );
    // The subagent hangs under the `task` tool span.
    let task = find(&spans, "execute_tool task");
    let helper = find(&spans, "invoke_agent helper");
    assert_eq!(helper.parent_span_id, task.span_id);
    assert_eq!(text(&helper.attributes, "kit.run_kind"), Some("agent"));
}

#[tokio::test]
async fn otlp_json_export_uses_the_otlp_json_mapping() {
    let mock = Mock::start([]);
    let exporter = Arc::new(
        OtlpExporter::builder(format!("{}/custom/v1/traces", mock.url))
            .protocol(Protocol::Json)
            .header("x-team", "support")
            .queue(QueueConfig {
                gzip: false,
                ..fast_queue()
            })
            .build()
            .unwrap(),
    );
    let (result, n_runs, flushed) = run_traced(exporter.clone(), trace_options()).await;
    assert_eq!(result, baseline().await);
    assert!(flushed);
    let requests = mock.requests();
    for r in &requests {
        assert_eq!(r.path, "/custom/v1/traces");
        assert_eq!(r.headers["content-type"], "application/json");
        assert_eq!(r.headers["x-team"], "support");
        assert!(!r.headers.contains_key("content-encoding"));
        assert!(!r.headers.contains_key("authorization"));
        // OTLP JSON, not proto3 JSON: hex ids, integer enums, lowerCamelCase keys.
        let raw: Value = serde_json::from_slice(&r.body).unwrap();
        let span = &raw["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        let trace_id = span["traceId"].as_str().unwrap();
        assert_eq!(trace_id.len(), 32);
        assert!(trace_id.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(span["spanId"].as_str().unwrap().len(), 16);
        assert!(span["kind"].is_u64());
        assert!(span["startTimeUnixNano"].is_string() || span["startTimeUnixNano"].is_u64());
        assert!(span.get("start_time_unix_nano").is_none());
    }
    let spans = spans(&requests);
    assert_eq!(spans.len(), n_runs);
    // No environment given: none exported.
    for e in &spans {
        assert!(text(&e.resource, "deployment.environment.name").is_none());
        assert!(
            !e.span
                .attributes
                .iter()
                .any(|kv| kv.key.contains("environment"))
        );
    }
    let root = spans
        .iter()
        .find(|e| e.span.parent_span_id.is_empty())
        .unwrap();
    let root_id = kit::trace::otlp::trace_id(&uuid_of(&root.span.trace_id));
    assert_eq!(root_id.to_vec(), root.span.trace_id);
}

fn uuid_of(bytes: &[u8]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[tokio::test]
async fn langfuse_profile_sends_its_headers_and_attributes() {
    let mock = Mock::start([]);
    let exporter = Arc::new(
        OtlpExporter::builder(&mock.url)
            .langfuse("pk-lf-test-1234", "sk-lf-test-5678")
            .queue(fast_queue())
            .build()
            .unwrap(),
    );
    let (result, n_runs, flushed) = run_traced(exporter.clone(), trace_options()).await;
    assert_eq!(result, baseline().await);
    assert!(flushed);
    let requests = mock.requests();
    for r in &requests {
        assert_eq!(r.path, "/api/public/otel/v1/traces");
        assert_eq!(r.headers["content-type"], "application/x-protobuf");
        // base64("pk-lf-test-1234:sk-lf-test-5678")
        assert_eq!(
            r.headers["authorization"],
            "Basic cGstbGYtdGVzdC0xMjM0OnNrLWxmLXRlc3QtNTY3OA=="
        );
        assert_eq!(r.headers["x-langfuse-ingestion-version"], "4");
        assert_eq!(r.headers["x-langfuse-public-key"], "pk-lf-test-1234");
        assert_eq!(r.headers["x-langfuse-sdk-name"], "kit");
        assert!(!contains(&r.body, "sk-lf-test-5678"));
    }
    let spans = spans(&requests);
    assert_eq!(spans.len(), n_runs);
    for e in &spans {
        let a = &e.span.attributes;
        // Trace-level attributes on every span.
        assert_eq!(text(a, "user.id"), Some("user-1"));
        assert_eq!(text(a, "session.id"), Some("sess-9"));
        assert_eq!(text(a, "langfuse.trace.metadata.tenant"), Some("acme"));
        assert_eq!(
            text(a, "langfuse.observation.metadata.execution_mode"),
            Some("chat")
        );
        assert!(text(a, "langfuse.environment").is_none(), "only when given");
        let is_root = e.span.parent_span_id.is_empty();
        assert_eq!(text(a, "langfuse.trace.name").is_some(), is_root);
        let expected = match text(a, "kit.run_kind").unwrap() {
            "agent" => "agent",
            "graph" => "chain",
            "model" => "generation",
            "tool" => "tool",
            _ => "span",
        };
        assert_eq!(
            text(a, "langfuse.observation.type"),
            Some(expected),
            "{}",
            e.span.name
        );
    }
    let root = spans
        .iter()
        .find(|e| e.span.parent_span_id.is_empty())
        .unwrap();
    assert_eq!(
        text(&root.span.attributes, "langfuse.trace.name"),
        Some("support chat")
    );
    let input = json_attr(&root.span.attributes, "langfuse.observation.input");
    assert_eq!(input["messages"][0]["content"], "help me");
    let output = json_attr(&root.span.attributes, "langfuse.observation.output");
    assert!(output.to_string().contains("Ada is on the gold plan."));

    let generation = spans
        .iter()
        .map(|e| &e.span)
        .find(|s| int(&s.attributes, "gen_ai.usage.input_tokens") == Some(200))
        .unwrap();
    let a = &generation.attributes;
    assert_eq!(text(a, "langfuse.observation.model.name"), Some("scripted"));
    assert_eq!(
        json_attr(a, "langfuse.observation.usage_details"),
        json!({"input": 200, "output": 12, "total": 212})
    );
    assert_eq!(
        json_attr(a, "langfuse.observation.cost_details"),
        json!({"total": 0.0009})
    );
    let params = json_attr(a, "langfuse.observation.model.parameters");
    assert_eq!(params["max_tokens"], 256);
    // A chat for Langfuse: the system prompt first, then what is new since the model last
    // answered (the tool's result; the user's message is the first generation's input).
    let input = json_attr(a, "langfuse.observation.input");
    assert_eq!(input[0]["role"], "system");
    let roles: Vec<&str> = input
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(roles, ["system", "tool", "tool"], "{input:#}");
    let first = spans
        .iter()
        .map(|e| &e.span)
        .find(|s| {
            s.name.starts_with("chat")
                && int(&s.attributes, "gen_ai.usage.input_tokens") != Some(200)
        })
        .unwrap();
    let first_input = json_attr(&first.attributes, "langfuse.observation.input");
    let user = first_input
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap();
    assert_eq!(user["content"], "help me");
    let output = json_attr(a, "langfuse.observation.output");
    assert_eq!(output["content"], "Ada is on the gold plan.");
    let tool = find(&spans, "execute_tool lookup");
    assert_eq!(
        json_attr(&tool.attributes, "langfuse.observation.input"),
        json!({"email": "ada@example.com"})
    );
}

#[tokio::test]
async fn langfuse_errors_and_environment() {
    let mock = Mock::start([]);
    let exporter = Arc::new(
        OtlpExporter::builder(format!("{}/api/public/otel", mock.url))
            .langfuse("pk-lf-a", "sk-lf-b")
            .queue(fast_queue())
            .build()
            .unwrap(),
    );
    let tracer = Tracer::new().with_exporter(exporter.clone());
    let agent = Agent::builder()
        .name("failing")
        .model(ScriptedModel::new(Vec::<Message>::new()))
        .build()
        .unwrap();
    let err = agent
        .invoke("hi")
        .tracer(tracer)
        .trace(TraceOptions::new().environment("production"))
        .await;
    assert!(err.is_err(), "the scripted model has no answer");
    assert!(exporter.flush(Duration::from_secs(20)));
    let requests = mock.requests();
    assert_eq!(requests[0].path, "/api/public/otel/v1/traces");
    let spans = spans(&requests);
    let root = spans
        .iter()
        .find(|e| e.span.parent_span_id.is_empty())
        .unwrap();
    let a = &root.span.attributes;
    assert_eq!(text(a, "langfuse.observation.level"), Some("ERROR"));
    let message = text(a, "langfuse.observation.status_message").unwrap();
    assert!(message.contains("no answer left"), "{message}");
    assert_eq!(text(a, "langfuse.environment"), Some("production"));
    assert_eq!(
        text(&root.resource, "deployment.environment.name"),
        Some("production")
    );
    let status = root.span.status.clone().unwrap();
    assert_eq!(status.code, 2);
    assert_eq!(status.message, message);
    assert!(text(a, "error.type").is_some());
    let event = &root.span.events[0];
    assert_eq!(event.name, "exception");
    assert_eq!(text(&event.attributes, "exception.message"), Some(message));
}

// ---------------------------------------------------------------------------------------------
// Redaction: secrets planted everywhere they can enter a trace never reach an exported body.

const PLANTED: &[&str] = &[
    "PLANTEDINPUT",
    "PLANTEDARGKEY",
    "PLANTEDARGPASS",
    "PLANTEDOUTPUT",
    "PLANTEDMETA",
    "PLANTEDMETAKEY",
    "PLANTEDFIELD",
    "PLANTEDFIELDKEY",
    "PLANTEDERROR",
    "PLANTEDPARAM",
    "PLANTEDHEADER",
    "PLANTEDANSWER",
    "PLANTEDNESTED",
];

fn leaky_agent() -> Agent {
    let model = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![
                ToolCall::with_id(
                    "c1",
                    "lookup",
                    json!({
                        "email": "ada@example.com",
                        "api_key": "PLANTEDARGKEY",
                        "auth": {"password": "PLANTEDARGPASS"},
                    }),
                ),
                ToolCall::with_id("c2", "charge", json!({"amount": 5})),
            ],
        ),
        Message::assistant("Done. Your new key is sk-proj-PLANTEDANSWER0000000000"),
    ]);
    let charge = Tool::from_fn(
        "charge",
        "Charges a card.",
        json!({"type": "object", "properties": {"amount": {"type": "number"}}}),
        |_args, _ctx| async move {
            Err::<ToolOutput, _>(ToolError::new(
                "gateway refused: Authorization: Bearer PLANTEDERROR000000 was rejected",
            ))
        },
    );
    let leaky_lookup = Tool::from_fn(
        "lookup",
        "Looks a customer up.",
        json!({"type": "object"}),
        |_args, _ctx| async move {
            Ok::<_, ToolError>(ToolOutput::text(
                "found; session token=PLANTEDOUTPUT123 and key sk-ant-PLANTEDOUTPUT99999",
            ))
        },
    );
    let mut extra = serde_json::Map::new();
    extra.insert("api_key".into(), json!("PLANTEDPARAM"));
    extra.insert(
        "headers".into(),
        json!({"Authorization": "Bearer PLANTEDHEADER0000", "x": {"secret": "PLANTEDNESTED"}}),
    );
    Agent::builder()
        .name("leaky")
        .model(model)
        .model_opts(ModelOptions {
            extra,
            ..ModelOptions::default()
        })
        .tool(leaky_lookup)
        .tool(charge)
        .build()
        .unwrap()
}

#[tokio::test]
async fn planted_secrets_never_reach_an_exported_body() {
    let mocks = [Mock::start([]), Mock::start([]), Mock::start([])];
    let exporters = [
        Arc::new(
            OtlpExporter::builder(&mocks[0].url)
                .bearer("sk-proj-EXPORTERKEY000000000")
                .queue(fast_queue())
                .build()
                .unwrap(),
        ),
        Arc::new(
            OtlpExporter::builder(&mocks[1].url)
                .protocol(Protocol::Json)
                .queue(fast_queue())
                .build()
                .unwrap(),
        ),
        Arc::new(
            OtlpExporter::builder(&mocks[2].url)
                .langfuse("pk-lf-x", "sk-lf-EXPORTERSECRET")
                .protocol(Protocol::Json)
                .queue(fast_queue())
                .build()
                .unwrap(),
        ),
    ];
    let collector = Collector::new();
    let mut tracer = Tracer::new().with_exporter(collector.clone());
    for e in &exporters {
        tracer = tracer.with_exporter(e.clone());
    }
    let out = leaky_agent()
        .invoke("Please rotate my key sk-proj-PLANTEDINPUT000000000000 today")
        .tracer(tracer)
        .trace(
            TraceOptions::new()
                .user_id("u-1")
                .metadata("authorization", "Bearer PLANTEDMETA0000")
                .metadata("note", "api_key=PLANTEDMETAKEY")
                .field("note", "Bearer PLANTEDFIELD000000")
                .field("api_key", "PLANTEDFIELDKEY"),
        )
        .await
        .unwrap()
        .into_state();
    // The secrets really went through the run (the model answered with one).
    assert!(out.final_text().contains("PLANTEDANSWER"));
    assert!(out.messages[0].text().contains("PLANTEDINPUT"));

    let runs = collector.runs();
    assert!(
        runs.iter()
            .any(|r| r.status == kit::trace::RunStatus::Error && r.kind == RunKind::Tool)
    );
    let mut bodies = 0;
    for (mock, exporter) in mocks.iter().zip(&exporters) {
        assert!(exporter.flush(Duration::from_secs(20)));
        for r in mock.requests() {
            bodies += 1;
            for secret in PLANTED.iter().chain(&["EXPORTERKEY", "EXPORTERSECRET"]) {
                assert!(
                    !contains(&r.body, secret),
                    "{secret} leaked into {} body",
                    r.headers["content-type"]
                );
            }
            assert!(
                contains(&r.body, "[REDACTED]"),
                "the planted values were there"
            );
            spans(&[r]);
        }
    }
    assert!(bodies >= 3);
    let local = serde_json::to_string(&runs).unwrap();
    for secret in PLANTED {
        assert!(
            !local.contains(secret),
            "{secret} leaked into the run records"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The failure matrix: every failure is swallowed and counted; the agent's result is unchanged.

struct Case {
    result: (String, usize),
    runs: usize,
    flushed: bool,
    stats: kit::trace::QueueStats,
    requests: Vec<Captured>,
}

async fn case(script: Vec<Reply>, queue: QueueConfig) -> Case {
    let mock = Mock::start(script);
    let exporter = Arc::new(
        OtlpExporter::builder(&mock.url)
            .bearer("k")
            .queue(queue)
            .build()
            .unwrap(),
    );
    let (result, runs, flushed) = run_traced(exporter.clone(), trace_options()).await;
    Case {
        result,
        runs,
        flushed,
        stats: exporter.queue_stats(),
        requests: mock.requests(),
    }
}

/// A queue that sends everything in one batch at flush time.
fn one_batch() -> QueueConfig {
    QueueConfig {
        batch_timeout: Duration::from_secs(600),
        ..fast_queue()
    }
}

fn assert_all_failed(c: &Case, status: u16) {
    assert!(!c.flushed);
    assert_eq!(c.stats.runs.queued, c.runs as u64);
    assert_eq!(c.stats.runs.failed, c.runs as u64, "{:?}", c.stats);
    assert_eq!(c.stats.runs.exported, 0);
    assert_eq!(c.stats.retries, 0, "{status} is not retried");
    assert_eq!(c.requests.len(), 1);
    assert_eq!(c.stats.batches_failed, 1);
    match &c.stats.last_error {
        Some(ExportError::Status { status: s, .. }) => assert_eq!(*s, status),
        other => panic!("unexpected last error {other:?}"),
    }
}

#[tokio::test]
async fn failure_400_is_counted_not_retried() {
    let expected = baseline().await;
    let c = case(
        vec![Reply {
            status: 400,
            body: b"invalid span: missing traceId".to_vec(),
            ..Default::default()
        }],
        one_batch(),
    )
    .await;
    assert_eq!(c.result, expected);
    assert_all_failed(&c, 400);
    let message = c.stats.last_error.unwrap().to_string();
    assert!(message.contains("missing traceId"), "{message}");
    assert!(message.contains("/v1/traces"), "{message}");
}

#[tokio::test]
async fn failure_401_says_to_check_the_key() {
    let expected = baseline().await;
    let c = case(vec![Reply::status(401)], one_batch()).await;
    assert_eq!(c.result, expected);
    assert_all_failed(&c, 401);
    assert!(
        c.stats
            .last_error
            .unwrap()
            .to_string()
            .contains("KIT_TRACE_API_KEY")
    );
}

#[tokio::test]
async fn a_batch_refused_as_too_large_is_split_in_halves_and_delivered() {
    let expected = baseline().await;
    let c = case(vec![Reply::status(413)], one_batch()).await;
    assert_eq!(c.result, expected);
    assert!(c.flushed, "{:?}", c.stats);
    assert_eq!(c.stats.runs.exported, c.runs as u64, "{:?}", c.stats);
    assert_eq!(c.stats.runs.failed, 0);
    assert_eq!(c.stats.batches_ok, 2);
    assert_eq!(c.stats.batches_failed, 0);
    assert_eq!(
        c.requests.len(),
        3,
        "the refused batch, then its two halves"
    );
    assert_eq!(
        c.stats.last_error, None,
        "a split that got through is not a failure"
    );
    let ids = |r: &[Captured]| -> Vec<Vec<u8>> {
        let mut ids: Vec<_> = spans(r).into_iter().map(|e| e.span.span_id).collect();
        ids.sort();
        ids
    };
    let (first, second) = (ids(&c.requests[1..2]), ids(&c.requests[2..3]));
    assert!(!first.is_empty() && !second.is_empty());
    let mut halves = [first, second].concat();
    halves.sort();
    assert_eq!(
        halves,
        ids(&c.requests[..1]),
        "the halves resend exactly the batch"
    );
    assert_eq!(halves.len(), c.runs);
}

#[tokio::test]
async fn a_single_run_refused_as_too_large_fails_and_says_what_to_lower() {
    let expected = baseline().await;
    let c = case(vec![Reply::status(413); 500], one_batch()).await;
    assert_eq!(c.result, expected);
    assert!(!c.flushed);
    assert_eq!(c.stats.runs.failed, c.runs as u64, "{:?}", c.stats);
    assert_eq!(c.stats.runs.exported, 0);
    assert_eq!(c.stats.retries, 0, "413 is split, not retried");
    // Halving down to single runs: a binary tree with one leaf per run.
    assert_eq!(c.requests.len(), 2 * c.runs - 1);
    assert_eq!(c.stats.batches_failed, c.runs as u64);
    let message = c.stats.last_error.unwrap().to_string();
    assert!(message.contains("max_content_chars"), "{message}");
}

#[tokio::test]
async fn failure_429_with_retry_after_is_retried_after_the_wait() {
    let expected = baseline().await;
    let c = case(
        vec![Reply::status(429).header("retry-after", "1")],
        one_batch(),
    )
    .await;
    assert_eq!(c.result, expected);
    assert!(c.flushed, "{:?}", c.stats);
    assert_eq!(c.stats.runs.exported, c.runs as u64);
    assert_eq!(c.stats.runs.failed, 0);
    assert_eq!(c.stats.retries, 1);
    assert_eq!(c.requests.len(), 2);
    assert_eq!(
        c.requests[0].body, c.requests[1].body,
        "the same batch again"
    );
    // Retry-After: 1 honoured (the second attempt came at least a second after the first).
    assert!(c.requests[1].at.duration_since(c.requests[0].at) >= Duration::from_secs(1));
}

#[tokio::test]
async fn failure_429_asking_too_long_a_wait_drops_the_batch() {
    let expected = baseline().await;
    let c = case(
        vec![Reply::status(429).header("retry-after", "3600")],
        one_batch(),
    )
    .await;
    assert_eq!(c.result, expected);
    assert_eq!(c.stats.runs.failed, c.runs as u64);
    assert_eq!(c.requests.len(), 1, "no retry sooner than asked");
    assert!(matches!(
        c.stats.last_error,
        Some(ExportError::RetryAfterTooLong { .. })
    ));
}

#[tokio::test]
async fn failure_503_is_retried_with_backoff() {
    let expected = baseline().await;
    let c = case(vec![Reply::status(503), Reply::status(503)], one_batch()).await;
    assert_eq!(c.result, expected);
    assert!(c.flushed);
    assert_eq!(c.stats.runs.exported, c.runs as u64);
    assert_eq!(c.stats.retries, 2);
    assert_eq!(c.requests.len(), 3);
}

#[tokio::test]
async fn failure_503_forever_gives_up_after_the_retries() {
    let expected = baseline().await;
    let c = case(vec![Reply::status(503); 10], one_batch()).await;
    assert_eq!(c.result, expected);
    assert!(!c.flushed);
    assert_eq!(c.stats.runs.failed, c.runs as u64);
    assert_eq!(c.stats.retries, 2, "max_retries");
    assert_eq!(c.requests.len(), 3);
    assert!(matches!(
        c.stats.last_error,
        Some(ExportError::Status { status: 503, .. })
    ));
}

#[tokio::test]
async fn failure_timeout_is_retried_then_counted() {
    let expected = baseline().await;
    let slow = Reply::status(200).delay(Duration::from_secs(3));
    let c = case(
        vec![slow.clone(), slow],
        QueueConfig {
            request_timeout: Duration::from_millis(300),
            max_retries: 1,
            ..one_batch()
        },
    )
    .await;
    assert_eq!(c.result, expected);
    assert!(!c.flushed);
    assert_eq!(c.stats.runs.failed, c.runs as u64);
    assert_eq!(c.stats.retries, 1);
    assert_eq!(c.stats.requests, 2);
    let e = c.stats.last_error.unwrap();
    assert!(matches!(e, ExportError::Timeout { .. }), "{e:?}");
    assert!(e.to_string().contains("request_timeout"));
}

#[tokio::test]
async fn failure_closed_port_is_counted() {
    let expected = baseline().await;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let exporter = Arc::new(
        OtlpExporter::builder(format!("http://127.0.0.1:{port}"))
            .queue(QueueConfig {
                max_retries: 1,
                ..one_batch()
            })
            .build()
            .unwrap(),
    );
    let (result, runs, flushed) = run_traced(exporter.clone(), trace_options()).await;
    assert_eq!(result, expected);
    assert!(!flushed);
    let stats = exporter.queue_stats();
    assert_eq!(stats.runs.failed, runs as u64);
    assert_eq!(stats.requests, 2, "one retry");
    let e = stats.last_error.unwrap();
    assert!(matches!(e, ExportError::Connect(_)), "{e:?}");
    assert!(e.to_string().contains("KIT_TRACE_ENDPOINT"));
}

#[tokio::test]
async fn failure_dropped_connection_is_retried() {
    let expected = baseline().await;
    // A receiver that reads the request and hangs up without answering, once; then a good one
    // is not available, so the retries run out too.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(Mutex::new(0usize));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            *count.lock().unwrap() += 1;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            drop(stream);
        }
    });
    let exporter = Arc::new(
        OtlpExporter::builder(format!("http://{addr}"))
            .queue(QueueConfig {
                max_retries: 2,
                ..one_batch()
            })
            .build()
            .unwrap(),
    );
    let (result, runs, flushed) = run_traced(exporter.clone(), trace_options()).await;
    assert_eq!(result, expected);
    assert!(!flushed);
    let stats = exporter.queue_stats();
    assert_eq!(stats.runs.failed, runs as u64);
    assert_eq!(stats.retries, 2);
    assert!(*accepted.lock().unwrap() >= 3);
    assert!(
        matches!(stats.last_error, Some(ExportError::Transport(_))),
        "{:?}",
        stats.last_error
    );
}

#[tokio::test]
async fn failure_queue_full_drops_and_counts_without_blocking() {
    let expected = baseline().await;
    // The receiver holds the first request until released: the worker is stuck on it, the
    // two-run queue fills up, and the rest of the runs are dropped.
    let mock = Mock::start([Reply::status(200).gated()]);
    let exporter = Arc::new(
        OtlpExporter::builder(&mock.url)
            .queue(QueueConfig {
                capacity: 2,
                max_batch_runs: 1,
                request_timeout: Duration::from_secs(60),
                ..fast_queue()
            })
            .build()
            .unwrap(),
    );
    let collector = Collector::new();
    let tracer = Tracer::new()
        .with_exporter(collector.clone())
        .with_exporter(exporter.clone());
    let out = support_agent()
        .invoke("help me")
        .thread_id("thread-7")
        .tracer(tracer)
        .trace(trace_options())
        .await
        .unwrap()
        .into_state();
    assert_eq!((out.final_text(), out.messages.len()), expected);
    let runs = collector.runs().len() as u64;
    let stats = exporter.queue_stats();
    assert!(stats.runs.dropped >= 1, "{stats:?}");
    assert_eq!(stats.runs.queued + stats.runs.dropped, runs);
    mock.release();
    assert!(
        !exporter.flush(Duration::from_secs(20)),
        "runs were dropped"
    );
    let stats = exporter.queue_stats();
    assert_eq!(stats.runs.exported, stats.runs.queued);
    assert_eq!(stats.runs.failed, 0);
    assert_eq!(spans(&mock.requests()).len() as u64, stats.runs.queued);
    // A later flush with nothing new lost is clean again.
    assert!(exporter.flush(Duration::from_secs(20)));
}

#[tokio::test]
async fn shutdown_drains_the_queue() {
    let mock = Mock::start([]);
    let exporter = Arc::new(
        OtlpExporter::builder(&mock.url)
            .queue(QueueConfig {
                batch_timeout: Duration::from_secs(600),
                ..fast_queue()
            })
            .build()
            .unwrap(),
    );
    let (_, runs, _) = run_traced(exporter.clone(), trace_options()).await;
    let before = mock.requests().len();
    // More runs, then shut down without a flush: they are sent on the way out.
    let tracer = Tracer::new().with_exporter(exporter.clone());
    support_agent()
        .invoke("again")
        .tracer(tracer)
        .await
        .unwrap();
    assert!(exporter.shutdown(Duration::from_secs(10)));
    assert!(mock.requests().len() > before);
    let stats = exporter.queue_stats();
    assert_eq!(stats.runs.exported, stats.runs.queued);
    assert!(stats.runs.exported > runs as u64);
    // After shutdown, runs are dropped and counted, never blocking.
    let late: kit::trace::RunRecord = serde_json::from_value(json!({
        "id": "0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071",
        "trace_id": "0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071",
        "name": "late", "kind": "custom", "start_ns": 1, "end_ns": 2, "status": "ok"
    }))
    .unwrap();
    exporter.export(late);
    assert_eq!(exporter.queue_stats().runs.dropped, 1);
}

#[test]
fn export_works_outside_any_tokio_runtime() {
    let mock = Mock::start([]);
    let exporter = OtlpExporter::builder(&mock.url)
        .queue(fast_queue())
        .build()
        .unwrap();
    let run: kit::trace::RunRecord = serde_json::from_value(json!({
        "id": "0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071",
        "trace_id": "0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071",
        "name": "plain thread", "kind": "custom", "start_ns": 1, "end_ns": 2, "status": "ok"
    }))
    .unwrap();
    exporter.export(run);
    assert!(exporter.flush(Duration::from_secs(20)));
    let spans = spans(&mock.requests());
    assert_eq!(spans[0].span.name, "plain thread");
    drop(exporter);
}

#[tokio::test]
async fn config_trace_fields_set_in_code_start_the_exporter() {
    let mock = Mock::start([]);
    let mut config = kit::Config {
        trace_endpoint: Some(mock.url.clone()),
        trace_api_key: Some("collector-key-123".into()),
        ..kit::Config::default()
    };
    // Settings beyond endpoint and key come from `extra` (then the environment).
    config
        .extra
        .insert("KIT_TRACE_PROTOCOL".into(), "json".into());
    config
        .extra
        .insert("KIT_TRACE_SERVICE_NAME".into(), "configured-in-code".into());
    let agent = Agent::builder()
        .name("configured")
        .model(ScriptedModel::new([Message::assistant("hi")]))
        .config(config.clone())
        .build()
        .unwrap();
    agent.invoke("hello").await.unwrap();
    let tracer = Tracer::from_config(&config);
    assert!(tracer.is_active());
    assert!(tracer.flush(Duration::from_secs(20)));
    let requests = mock.requests();
    assert!(!requests.is_empty(), "spans arrived");
    assert_eq!(requests[0].path, "/v1/traces");
    assert_eq!(
        requests[0].headers["authorization"],
        "Bearer collector-key-123"
    );
    assert_eq!(requests[0].headers["content-type"], "application/json");
    let spans = spans(&requests);
    let root = find(&spans, "invoke_agent configured");
    assert!(root.parent_span_id.is_empty());
    assert_eq!(
        text(&spans[0].resource, "service.name"),
        Some("configured-in-code")
    );
    // Built again from the same settings: the same exporter, not a second queue.
    let again = Agent::builder()
        .model(ScriptedModel::new([Message::assistant("hi")]))
        .config(config.clone())
        .build()
        .unwrap();
    again.invoke("again").await.unwrap();
    assert!(Tracer::from_config(&config).same_as(&tracer));
}

/// A collector's partial success (OTLP/JSON `partialSuccess`): the rejected spans count as
/// failed and its message is kept, clipped to 300 characters whether it has a kibibyte or
/// sixty.
#[tokio::test]
async fn a_partial_success_counts_the_rejected_spans_and_clips_its_message() {
    for size in [1 << 10, 60 << 10] {
        let answer = json!({"partialSuccess": {"rejectedSpans": "2",
                                               "errorMessage": "r".repeat(size)}});
        let mock = Mock::start([Reply {
            status: 200,
            headers: vec![("content-type", "application/json".into())],
            body: answer.to_string().into_bytes(),
            ..Default::default()
        }]);
        let exporter = Arc::new(
            OtlpExporter::builder(format!("{}/v1/traces", mock.url))
                .protocol(Protocol::Json)
                .queue(QueueConfig {
                    max_batch_runs: 10_000,
                    batch_timeout: Duration::from_secs(60),
                    ..fast_queue()
                })
                .build()
                .unwrap(),
        );
        let (_, n_runs, _) = run_traced(exporter.clone(), trace_options()).await;
        let stats = exporter.queue_stats();
        assert_eq!(stats.runs.failed, 2, "{size}: {stats:?}");
        assert_eq!(stats.runs.exported, n_runs as u64 - 2);
        match stats.last_error {
            Some(ExportError::PartiallyRejected { rejected, message }) => {
                assert_eq!(rejected, 2);
                assert!(message.chars().count() <= 301, "{size}: {}", message.len());
                assert!(message.starts_with("rrr"));
            }
            other => panic!("{size}: expected a partial rejection, got {other:?}"),
        }
    }
}
