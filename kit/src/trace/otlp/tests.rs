//! Unit tests of the OTLP mapping.

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::{Span, span, status};
use serde_json::{Value, json};

use crate::trace::record::{ModelInfo, RunKind, RunRecord, RunStatus};

use super::encode::error_type;
use super::exporter::builder_from_vars;
use super::*;
use crate::message::Usage;
use crate::trace::record::ToolInfo;

fn record(kind: RunKind, name: &str) -> RunRecord {
    let mut run = RunRecord::for_test("0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071", name, kind);
    run.trace_id = "0190f3c2-a7b8-7c3e-8000-000000000001".into();
    run.parent_id = Some("0190f3c2-a7b8-7c3e-8000-000000000001".into());
    run
}

fn attrs(span: &Span) -> BTreeMap<String, any_value::Value> {
    span.attributes
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap().value.unwrap()))
        .collect()
}

fn s(v: &any_value::Value) -> &str {
    match v {
        any_value::Value::StringValue(s) => s,
        other => panic!("not a string: {other:?}"),
    }
}

#[test]
fn ids_are_uuid_bytes_and_never_zero() {
    assert_eq!(
        span_id("00000000-0000-0000-0000-000000000000"),
        [0, 0, 0, 0, 0, 0, 0, 1]
    );
    assert_eq!(trace_id("00000000-0000-0000-0000-000000000000")[15], 1);
    let hashed = span_id("not-a-uuid");
    assert_ne!(hashed, [0; 8]);
    assert_eq!(hashed, span_id("not-a-uuid"));
}

#[test]
fn model_run_maps_to_a_client_chat_span() {
    let mut run = record(RunKind::Model, "gpt-4o");
    run.model = Some(ModelInfo {
        provider: "openai".into(),
        model: "gpt-4o".into(),
        params: serde_json::from_value(json!({"temperature": 0.2, "max_tokens": 100})).unwrap(),
        usage: Some(Usage {
            input_tokens: 120,
            output_tokens: 48,
            cache_read_tokens: 20,
            cache_creation_tokens: 0,
            ..Default::default()
        }),
        cost: Some(0.0125),
        structured_output: None,
        finish_reason: Some("stop".into()),
    });
    run.inputs = json!({"system": "Be brief.", "messages": [
        {"id": "m1", "role": "user", "content": "hi"},
        {"id": "m2", "role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "add", "args": {"a": 1}}]},
        {"id": "m3", "role": "tool", "content": "2", "tool_call_id": "c1", "name": "add"}
    ]});
    run.outputs = json!({"message": {"id": "m4", "role": "assistant", "content": "two"}});
    run.thread_id = Some("t-1".into());
    let enc = OtlpEncoder::new(Protocol::Protobuf, Profile::Langfuse);
    let span = enc.span(&run);
    assert_eq!(span.name, "chat gpt-4o");
    assert_eq!(span.kind, span::SpanKind::Client as i32);
    let a = attrs(&span);
    assert_eq!(s(&a[attr::OPERATION]), "chat");
    assert_eq!(s(&a[attr::PROVIDER]), "openai");
    assert_eq!(a[attr::INPUT_TOKENS], any_value::Value::IntValue(120));
    assert_eq!(a[attr::CACHE_READ_TOKENS], any_value::Value::IntValue(20));
    assert_eq!(a[attr::TEMPERATURE], any_value::Value::DoubleValue(0.2));
    assert_eq!(a[attr::MAX_TOKENS], any_value::Value::IntValue(100));
    assert_eq!(a[attr::COST], any_value::Value::DoubleValue(0.0125));
    let input: Value = serde_json::from_str(s(&a[attr::INPUT_MESSAGES])).unwrap();
    assert_eq!(
        input[0],
        json!({"role": "user", "parts": [{"type": "text", "content": "hi"}]})
    );
    assert_eq!(input[1]["parts"][0]["type"], "tool_call");
    assert_eq!(
        input[2]["parts"][0],
        json!({"type": "tool_call_response", "id": "c1", "response": "2"})
    );
    let output: Value = serde_json::from_str(s(&a[attr::OUTPUT_MESSAGES])).unwrap();
    assert_eq!(output[0]["finish_reason"], "stop");
    let system: Value = serde_json::from_str(s(&a[attr::SYSTEM_INSTRUCTIONS])).unwrap();
    assert_eq!(system[0]["content"], "Be brief.");
    assert_eq!(s(&a[attr::LF_TYPE]), "generation");
    let usage: Value = serde_json::from_str(s(&a[attr::LF_USAGE])).unwrap();
    assert_eq!(
        usage,
        json!({"input": 100, "output": 48, "input_cache_read": 20, "total": 168})
    );
    let cost: Value = serde_json::from_str(s(&a[attr::LF_COST])).unwrap();
    assert_eq!(cost, json!({"total": 0.0125}));
    let lf_input: Value = serde_json::from_str(s(&a[attr::LF_INPUT])).unwrap();
    assert_eq!(
        lf_input[0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(s(&a[attr::CONVERSATION_ID]), "t-1");
    assert!(
        !a.contains_key(attr::LF_TRACE_NAME),
        "only the root names the trace"
    );
}

#[test]
fn tool_and_error_mapping() {
    let mut run = record(RunKind::Tool, "lookup");
    run.tool = Some(ToolInfo {
        name: "lookup".into(),
        call_id: "c9".into(),
        description: "Looks things up.".into(),
    });
    run.inputs = json!({"q": "x"});
    run.status = RunStatus::Error;
    run.error = Some("timeout: no answer in 5s".into());
    let span = OtlpEncoder::new(Protocol::Json, Profile::Otlp).span(&run);
    assert_eq!(span.name, "execute_tool lookup");
    assert_eq!(span.kind, span::SpanKind::Internal as i32);
    let status = span.status.clone().unwrap();
    assert_eq!(status.code, status::StatusCode::Error as i32);
    assert_eq!(status.message, "timeout: no answer in 5s");
    assert_eq!(span.events[0].name, "exception");
    let a = attrs(&span);
    assert_eq!(s(&a[attr::ERROR_TYPE]), "timeout");
    assert_eq!(s(&a[attr::TOOL_CALL_ID]), "c9");
    assert_eq!(s(&a[attr::TOOL_ARGUMENTS]), r#"{"q":"x"}"#);
    assert!(!a.keys().any(|k| k.starts_with("langfuse.")));
    assert_eq!(error_type("the model failed: boom"), "_OTHER");
    assert_eq!(error_type("plain"), "_OTHER");
}

#[test]
fn environment_groups_resources_and_is_absent_unless_given() {
    let a = record(RunKind::Custom, "a");
    let mut b = record(RunKind::Custom, "b");
    b.environment = Some("staging".into());
    let req = OtlpEncoder::new(Protocol::Json, Profile::Otlp)
        .service_name("svc")
        .request(&[a, b]);
    assert_eq!(req.resource_spans.len(), 2);
    let envs: Vec<bool> = req
        .resource_spans
        .iter()
        .map(|rs| {
            rs.resource
                .as_ref()
                .unwrap()
                .attributes
                .iter()
                .any(|kv| kv.key == attr::ENVIRONMENT)
        })
        .collect();
    assert_eq!(envs, vec![false, true]);
}

#[test]
fn truncation_marks_the_cut() {
    let t = truncate("héllo wörld".into(), 3);
    assert_eq!(t, "hé…[truncated]");
}

fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

fn header<'a>(b: &'a OtlpExporterBuilder, name: &str) -> Option<&'a str> {
    b.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn settings_from_the_environment() {
    // Nothing, or only half of it: no exporter.
    assert!(builder_from_vars(vars(&[])).unwrap().is_none());
    assert!(
        builder_from_vars(vars(&[("KIT_TRACE_ENDPOINT", "http://h:4318")]))
            .unwrap()
            .is_none()
    );
    assert!(
        builder_from_vars(vars(&[("KIT_TRACE_API_KEY", "k")]))
            .unwrap()
            .is_none()
    );
    // Endpoint + key: OTLP protobuf with a bearer key.
    let b = builder_from_vars(vars(&[
        ("KIT_TRACE_ENDPOINT", "http://h:4318"),
        ("KIT_TRACE_API_KEY", "k1"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(b.url(), "http://h:4318/v1/traces");
    assert_eq!(b.protocol, Protocol::Protobuf);
    assert_eq!(b.profile, Profile::Otlp);
    assert_eq!(header(&b, "authorization"), Some("Bearer k1"));
    // JSON on request.
    let b = builder_from_vars(vars(&[
        ("KIT_TRACE_ENDPOINT", "http://h:4318"),
        ("KIT_TRACE_API_KEY", "k1"),
        ("KIT_TRACE_PROTOCOL", "http/json"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(b.protocol, Protocol::Json);
    // Langfuse by format, key pair in the API key.
    let b = builder_from_vars(vars(&[
        ("KIT_TRACE_ENDPOINT", "https://cloud.langfuse.com"),
        ("KIT_TRACE_API_KEY", "pk-lf-1:sk-lf-2"),
        ("KIT_TRACE_FORMAT", "langfuse"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(b.profile, Profile::Langfuse);
    assert_eq!(
        b.url(),
        "https://cloud.langfuse.com/api/public/otel/v1/traces"
    );
    assert_eq!(
        header(&b, "authorization"),
        Some("Basic cGstbGYtMTpzay1sZi0y")
    );
    assert_eq!(header(&b, "x-langfuse-ingestion-version"), Some("4"));
    // Langfuse by URL, key pair in their own variables.
    let b = builder_from_vars(vars(&[
        (
            "KIT_TRACE_ENDPOINT",
            "https://lf.example.com/api/public/otel",
        ),
        ("KIT_LANGFUSE_PUBLIC_KEY", "pk"),
        ("KIT_LANGFUSE_SECRET_KEY", "sk"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(b.profile, Profile::Langfuse);
    assert_eq!(b.url(), "https://lf.example.com/api/public/otel/v1/traces");
    // Wrong settings say what to do.
    let e = builder_from_vars(vars(&[
        ("KIT_TRACE_ENDPOINT", "https://cloud.langfuse.com"),
        ("KIT_TRACE_API_KEY", "just-one-key"),
        ("KIT_TRACE_FORMAT", "langfuse"),
    ]))
    .unwrap_err();
    assert!(e.to_string().contains("public_key:secret_key"), "{e}");
    let e = builder_from_vars(vars(&[
        ("KIT_TRACE_ENDPOINT", "http://h"),
        ("KIT_TRACE_API_KEY", "k"),
        ("KIT_TRACE_FORMAT", "zipkin"),
    ]))
    .unwrap_err();
    assert!(e.to_string().contains("otlp"), "{e}");
}

#[test]
fn urls_per_profile() {
    let b = OtlpExporter::builder("http://h:4318/");
    assert_eq!(b.url(), "http://h:4318/v1/traces");
    let b = OtlpExporter::builder("http://h/custom/v1/traces");
    assert_eq!(b.url(), "http://h/custom/v1/traces");
    let b = OtlpExporter::builder("https://lf.example.com").langfuse("pk", "sk");
    assert_eq!(b.url(), "https://lf.example.com/api/public/otel/v1/traces");
    let b = OtlpExporter::builder("https://lf.example.com/api/public/otel").langfuse("pk", "sk");
    assert_eq!(b.url(), "https://lf.example.com/api/public/otel/v1/traces");
    assert!(!format!("{b:?}").contains("Basic"));
}
