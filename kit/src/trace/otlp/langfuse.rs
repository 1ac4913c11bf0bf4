//! The Langfuse profile: `langfuse.*` attributes on top of the GenAI ones.

use serde_json::{Value, json};

use super::{Attrs, OtlpEncoder, attr, scalar_text, truncate};
use crate::trace::record::{RunKind, RunRecord, RunStatus};

impl OtlpEncoder {
    pub(super) fn langfuse_attrs(&self, a: &mut Attrs, run: &RunRecord) {
        let cap = |s: String| truncate(s, self.max_content_chars);
        let kind = match run.kind {
            RunKind::Agent => "agent",
            RunKind::Graph => "chain",
            RunKind::Model => "generation",
            RunKind::Tool => "tool",
            RunKind::Node | RunKind::Middleware | RunKind::Task | RunKind::Custom => "span",
        };
        a.str(attr::LF_TYPE, kind);
        let (input, output) = if run.kind == RunKind::Model {
            let mut messages = Vec::new();
            if let Some(system) = run.inputs.get("system").and_then(Value::as_str) {
                messages.push(json!({"role": "system", "content": system}));
            }
            match run.inputs.get("messages").and_then(Value::as_array) {
                Some(list) => messages.extend(list.iter().cloned()),
                None if !run.inputs.is_null() => messages.push(run.inputs.clone()),
                None => {}
            }
            let output = run
                .outputs
                .get("message")
                .cloned()
                .unwrap_or_else(|| run.outputs.clone());
            (Value::Array(messages), output)
        } else {
            (run.inputs.clone(), run.outputs.clone())
        };
        if !input.is_null() && input != json!([]) {
            a.str(attr::LF_INPUT, &cap(input.to_string()));
        }
        if !output.is_null() {
            a.str(attr::LF_OUTPUT, &cap(output.to_string()));
        }
        if let Some(model) = &run.model {
            if !model.model.is_empty() {
                a.str(attr::LF_MODEL, &model.model);
            }
            if !model.params.is_empty() {
                a.str(
                    attr::LF_MODEL_PARAMS,
                    &Value::Object(model.params.clone()).to_string(),
                );
            }
            if let Some(u) = &model.usage {
                let cached = u.cache_read_tokens.saturating_add(u.cache_creation_tokens);
                let mut usage = serde_json::Map::new();
                usage.insert("input".into(), json!(u.input_tokens.saturating_sub(cached)));
                usage.insert("output".into(), json!(u.output_tokens));
                if u.cache_read_tokens > 0 {
                    usage.insert("input_cache_read".into(), json!(u.cache_read_tokens));
                }
                if u.cache_creation_tokens > 0 {
                    usage.insert(
                        "input_cache_creation".into(),
                        json!(u.cache_creation_tokens),
                    );
                }
                usage.insert("total".into(), json!(u.total_tokens()));
                a.str(attr::LF_USAGE, &Value::Object(usage).to_string());
            }
            if let Some(cost) = model.cost.filter(|c| c.is_finite()) {
                a.str(attr::LF_COST, &json!({ "total": cost }).to_string());
            }
        }
        if run.status == RunStatus::Error {
            a.str(attr::LF_LEVEL, "ERROR");
            a.str(
                attr::LF_STATUS_MESSAGE,
                run.error.as_deref().unwrap_or("error"),
            );
        }
        for (k, v) in &run.metadata {
            a.str(
                &format!("{}{k}", attr::LF_METADATA_PREFIX),
                &super::encode::truncate(scalar_text(v), self.max_content_chars),
            );
        }
        if let Some(mode) = &run.execution_mode {
            a.str(&format!("{}execution_mode", attr::LF_METADATA_PREFIX), mode);
        }
        for (k, v) in &run.custom_fields {
            a.str(&format!("{}{k}", attr::LF_TRACE_METADATA_PREFIX), v);
        }
        if run.parent_id.is_none() {
            a.str(attr::LF_TRACE_NAME, &run.name);
        }
        if !run.tags.is_empty() {
            a.strs(attr::LF_TRACE_TAGS, &run.tags);
        }
        if let Some(env) = &run.environment {
            a.str(attr::LF_ENVIRONMENT, env);
        }
    }
}
