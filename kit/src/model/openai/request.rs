//! What a request of an OpenAI model sends: the Chat Completions body, and the HTTP request
//! (path, auth, headers) of either API.

use serde_json::{Map, Value, json};

use super::wire::Writer;
use super::{Auth, MaxTokensParam, OpenAiApi, OpenAiModel};
use crate::http::HttpRequest;
use crate::model::common::{f32_json, merge_extra};
use crate::model::{ModelRequest, ToolChoice, ToolSpec};

/// A kit tool as a Chat Completions function tool (with its `strict` when set).
fn function_tool(t: &ToolSpec) -> Value {
    let mut function = json!({
        "name": t.name,
        "description": t.description,
        "parameters": t.parameters,
    });
    if let (Some(strict), Value::Object(f)) = (t.strict, &mut function) {
        f.insert("strict".into(), Value::Bool(strict));
    }
    json!({"type": "function", "function": function})
}

impl OpenAiModel {
    /// How this model writes a conversation.
    pub(super) fn writer(&self) -> Writer<'_> {
        Writer {
            provider: &self.provider,
            system_role: self.system_role.as_str(),
            echo_reasoning: self.send_reasoning,
        }
    }

    /// The request body for `request` (what is sent; public for inspection and tests).
    ///
    /// ```
    /// use kit::model::openai::OpenAiModel;
    /// use kit::model::{ModelOptions, ModelRequest};
    /// use kit::Message;
    ///
    /// let mut request = ModelRequest::new(vec![Message::user("hi")]).system("Be brief.");
    /// request.options = ModelOptions::default().reasoning_effort("low");
    /// let body = OpenAiModel::new("o4-mini", "sk-…").request_body(&request, true);
    /// assert_eq!(body["messages"][0]["role"], "developer");
    /// assert_eq!(body["reasoning_effort"], "low");
    /// assert_eq!(body["stream_options"]["include_usage"], true);
    /// ```
    pub fn request_body(&self, request: &ModelRequest, stream: bool) -> Value {
        if self.api == OpenAiApi::Responses {
            return self.responses_body(request, stream);
        }
        let opts = request.options.clone().or(&self.defaults);
        let mut body = Map::new();
        body.insert("model".into(), Value::from(self.model.clone()));
        body.insert(
            "messages".into(),
            Value::Array(
                self.writer()
                    .messages(request.system.as_deref(), &request.messages),
            ),
        );
        let mut tools: Vec<Value> = request.tools.iter().map(function_tool).collect();
        tools.extend(self.builtin_tools.iter().cloned());
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        if !request.tools.is_empty() {
            let choice = match &request.tool_choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
            };
            body.insert("tool_choice".into(), choice);
            if let Some(parallel) = opts.parallel_tool_calls {
                body.insert("parallel_tool_calls".into(), Value::Bool(parallel));
            }
        }
        if let Some(format) = &request.response_format {
            body.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {
                    "name": format.name,
                    "schema": format.schema,
                    "strict": format.strict,
                }}),
            );
        }
        if let Some(t) = opts.temperature {
            body.insert("temperature".into(), f32_json(t));
        }
        if let Some(n) = opts.max_tokens {
            let field = match self.max_tokens_param {
                MaxTokensParam::MaxCompletionTokens => "max_completion_tokens",
                MaxTokensParam::MaxTokens => "max_tokens",
            };
            body.insert(field.into(), json!(n));
        }
        if let Some(effort) = &opts.reasoning_effort {
            body.insert("reasoning_effort".into(), Value::from(effort.clone()));
        }
        body.insert("stream".into(), Value::Bool(stream));
        if stream && self.stream_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        merge_extra(&mut body, &opts.extra);
        Value::Object(body)
    }

    pub(super) fn http_request(&self, request: &ModelRequest, stream: bool) -> HttpRequest {
        let opts = request.options.clone().or(&self.defaults);
        let path = match self.api {
            OpenAiApi::ChatCompletions => "chat/completions",
            OpenAiApi::Responses => "responses",
        };
        let mut r = HttpRequest::post(&format!("{}/{path}", self.base_url))
            .json(&self.request_body(request, stream));
        for (k, v) in &self.query {
            r = r.query(k, v);
        }
        r = match &self.auth {
            Auth::None => r,
            Auth::Bearer(key) => r.bearer_auth(key),
            Auth::Header(name, value) => r.header(name, value),
        };
        for (k, v) in &self.headers {
            r = r.header(k, v);
        }
        if stream {
            r = r.header("accept", "text/event-stream");
        }
        if let Some(ms) = opts.timeout_ms {
            r = r.timeout(std::time::Duration::from_millis(ms));
        }
        if let Some(n) = opts.retries {
            r = r.max_retries(n);
        }
        r
    }
}
