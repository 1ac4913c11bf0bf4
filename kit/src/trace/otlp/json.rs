//! OTLP/JSON, written directly (no protobuf types needed): hex ids, integer enums,
//! lowerCamelCase keys, 64-bit integers as decimal strings, as the OTLP specification's JSON
//! encoding says.

use serde_json::{Map, Value, json};

use super::OtlpEncoder;
use super::encode::{AttrValue, SpanData};
use crate::trace::record::RunRecord;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn any(value: &AttrValue) -> Value {
    match value {
        AttrValue::Str(s) => json!({ "stringValue": s }),
        AttrValue::Int(n) => json!({ "intValue": n.to_string() }),
        AttrValue::Double(x) if x.is_finite() => json!({ "doubleValue": x }),
        AttrValue::Double(_) => json!({ "stringValue": "NaN" }),
        AttrValue::Strs(list) => json!({ "arrayValue": {
            "values": list.iter().map(|s| json!({ "stringValue": s })).collect::<Vec<_>>(),
        }}),
    }
}

fn attributes(list: &[(String, AttrValue)]) -> Value {
    Value::Array(
        list.iter()
            .map(|(k, v)| json!({ "key": k, "value": any(v) }))
            .collect(),
    )
}

fn span(s: &SpanData) -> Value {
    let mut o = Map::new();
    o.insert("traceId".into(), Value::from(hex(&s.trace_id)));
    o.insert("spanId".into(), Value::from(hex(&s.span_id)));
    if let Some(parent) = &s.parent_span_id {
        o.insert("parentSpanId".into(), Value::from(hex(parent)));
    }
    o.insert("name".into(), Value::from(s.name.clone()));
    // SPAN_KIND_INTERNAL = 1, SPAN_KIND_CLIENT = 3.
    o.insert("kind".into(), Value::from(if s.client { 3 } else { 1 }));
    o.insert(
        "startTimeUnixNano".into(),
        Value::from(s.start_time_unix_nano.to_string()),
    );
    o.insert(
        "endTimeUnixNano".into(),
        Value::from(s.end_time_unix_nano.to_string()),
    );
    o.insert("attributes".into(), attributes(&s.attributes));
    if !s.events.is_empty() {
        let events: Vec<Value> = s
            .events
            .iter()
            .map(|e| {
                json!({
                    "timeUnixNano": e.time_unix_nano.to_string(),
                    "name": e.name,
                    "attributes": attributes(&e.attributes),
                })
            })
            .collect();
        o.insert("events".into(), Value::Array(events));
    }
    // STATUS_CODE_ERROR = 2; an unset status is written as an empty object.
    o.insert(
        "status".into(),
        match &s.error {
            Some(message) => json!({ "message": message, "code": 2 }),
            None => json!({}),
        },
    );
    Value::Object(o)
}

impl OtlpEncoder {
    /// The OTLP/JSON request body for a batch of runs: one `resourceSpans` entry per
    /// environment, scope `kit`.
    pub fn json_request(&self, runs: &[RunRecord]) -> Value {
        let resource_spans: Vec<Value> = self
            .resources(runs)
            .into_iter()
            .map(|(resource, spans)| {
                json!({
                    "resource": { "attributes": attributes(&resource) },
                    "scopeSpans": [{
                        "scope": { "name": "kit", "version": env!("CARGO_PKG_VERSION") },
                        "spans": spans.iter().map(span).collect::<Vec<_>>(),
                    }],
                })
            })
            .collect();
        json!({ "resourceSpans": resource_spans })
    }
}

/// An OTLP/JSON answer's `partialSuccess`: the spans rejected and why.
pub(super) fn partial_success(body: &[u8]) -> Option<(u64, String)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let partial = v
        .get("partialSuccess")
        .or_else(|| v.get("partial_success"))?;
    let rejected = partial
        .get("rejectedSpans")
        .or_else(|| partial.get("rejected_spans"))
        .and_then(|n| n.as_u64().or_else(|| n.as_str()?.parse().ok()))?;
    let message = partial
        .get("errorMessage")
        .or_else(|| partial.get("error_message"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Some((rejected, message))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::trace::otlp::{Profile, Protocol};
    use crate::trace::queue::BatchEncoder;

    fn run() -> RunRecord {
        serde_json::from_value(json!({
            "id": "0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071",
            "trace_id": "0190f3c2-a7b8-7c3e-8000-000000000001",
            "parent_id": "0190f3c2-a7b8-7c3e-8000-000000000001",
            "name": "lookup", "kind": "tool", "start_ns": 10, "end_ns": 20, "status": "error",
            "error": "timeout: no answer", "tags": ["crm"], "environment": "prod",
            "model": {"provider": "openai", "model": "gpt-4o", "usage": {"input_tokens": 3, "output_tokens": 2, "reasoning_tokens": 1}}
        }))
        .unwrap()
    }

    #[test]
    fn otlp_json_needs_no_protobuf() {
        let enc = OtlpEncoder::new(Protocol::Json, Profile::Otlp).service_name("svc");
        let body: Value = serde_json::from_slice(&enc.encode(&[run()]).unwrap()).unwrap();
        let rs = &body["resourceSpans"][0];
        let resource = rs["resource"]["attributes"].as_array().unwrap();
        assert!(
            resource.contains(&json!({"key": "service.name", "value": {"stringValue": "svc"}}))
        );
        assert!(resource.contains(
            &json!({"key": "deployment.environment.name", "value": {"stringValue": "prod"}})
        ));
        let span = &rs["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "0190f3c2a7b87c3e8000000000000001");
        assert_eq!(span["parentSpanId"], "8000000000000001");
        assert_eq!(span["kind"], 1);
        assert_eq!(span["startTimeUnixNano"], "10");
        assert_eq!(
            span["status"],
            json!({"message": "timeout: no answer", "code": 2})
        );
        assert_eq!(span["events"][0]["name"], "exception");
        let attrs = span["attributes"].as_array().unwrap();
        let get = |k: &str| {
            attrs
                .iter()
                .find(|a| a["key"] == k)
                .map(|a| a["value"].clone())
        };
        assert_eq!(
            get("gen_ai.usage.input_tokens"),
            Some(json!({"intValue": "3"}))
        );
        assert_eq!(
            get("gen_ai.usage.reasoning.output_tokens"),
            Some(json!({"intValue": "1"}))
        );
        assert_eq!(
            get("kit.tags"),
            Some(json!({"arrayValue": {"values": [{"stringValue": "crm"}]}}))
        );
        assert_eq!(get("error.type"), Some(json!({"stringValue": "timeout"})));
        // An answer's partial success, in either key style; nonsense is nothing.
        assert_eq!(
            partial_success(br#"{"partialSuccess":{"rejectedSpans":"2","errorMessage":"bad"}}"#),
            Some((2, "bad".into()))
        );
        assert_eq!(partial_success(b"not json"), None);
    }

    #[test]
    fn protobuf_is_sent_only_with_the_otlp_feature() {
        let enc = OtlpEncoder::new(Protocol::Protobuf, Profile::Otlp);
        let expected = if cfg!(feature = "otlp") {
            "application/x-protobuf"
        } else {
            "application/json"
        };
        assert_eq!(enc.content_type(), expected);
        assert!(!enc.encode(&[run()]).unwrap().is_empty());
    }
}
