//! [`ScriptedModel`]: a chat model that replays a script. Clearly not a real model: its provider
//! name is `scripted`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::message::Message;
use crate::model::{
    ChatModel, FinishReason, ModelChunk, ModelError, ModelProfile, ModelRequest, ModelResponse,
    ModelStream, StreamAssembler,
};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum ScriptStep {
    /// Answer with this message (streamed word by word, tool calls in two argument chunks).
    Reply(Message),
    /// Stream exactly these chunks.
    Chunks(Vec<ModelChunk>),
    /// Fail with this error.
    Fail(ModelError),
}

impl From<Message> for ScriptStep {
    fn from(m: Message) -> Self {
        ScriptStep::Reply(m)
    }
}

type Responder = dyn Fn(&ModelRequest) -> Result<Message, ModelError> + Send + Sync;

/// A chat model that replays a script of answers (or computes them with a function), and
/// records every request it receives.
///
/// ```
/// use kit::testing::ScriptedModel;
/// use kit::{Message, ToolCall};
/// use serde_json::json;
///
/// let model = ScriptedModel::new([
///     Message::assistant_with_tool_calls("", vec![ToolCall::new("add", json!({"a": 1, "b": 2}))]),
///     Message::assistant("3"),
/// ]);
/// assert_eq!(model.remaining(), 2);
/// ```
#[derive(Clone)]
pub struct ScriptedModel {
    name: String,
    script: Arc<Mutex<VecDeque<ScriptStep>>>,
    responder: Option<Arc<Responder>>,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
    calls: Arc<Mutex<usize>>,
    profile: ModelProfile,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("name", &self.name)
            .field("remaining", &self.remaining())
            .finish()
    }
}

impl ScriptedModel {
    /// A model that gives these answers, in order.
    pub fn new<I, S>(steps: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<ScriptStep>,
    {
        ScriptedModel {
            name: "scripted".to_string(),
            script: Arc::new(Mutex::new(steps.into_iter().map(Into::into).collect())),
            responder: None,
            requests: Arc::new(Mutex::new(Vec::new())),
            calls: Arc::new(Mutex::new(0)),
            profile: ModelProfile::default(),
        }
    }

    /// A model whose answer is a function of the request (stateless, like the benchmark's).
    pub fn from_fn<F>(f: F) -> Self
    where
        F: Fn(&ModelRequest) -> Result<Message, ModelError> + Send + Sync + 'static,
    {
        let mut m = Self::new(Vec::<ScriptStep>::new());
        m.responder = Some(Arc::new(f));
        m
    }

    /// Renames the model (its `model_name`).
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the capabilities (e.g. to test a model without tool calling).
    #[must_use]
    pub fn with_profile(mut self, profile: ModelProfile) -> Self {
        self.profile = profile;
        self
    }

    /// Appends steps to the script.
    pub fn push(&self, step: impl Into<ScriptStep>) {
        lock(&self.script).push_back(step.into());
    }

    /// Answers still in the script.
    pub fn remaining(&self) -> usize {
        lock(&self.script).len()
    }

    /// Every request received so far, oldest first. A model made with
    /// [`from_fn`](Self::from_fn) keeps none (it serves benchmarks, where the copies would cost);
    /// give it a script with [`new`](Self::new) to inspect requests.
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.requests).clone()
    }

    /// How many calls were made.
    pub fn calls(&self) -> usize {
        *lock(&self.calls)
    }

    fn next_step(&self, request: &ModelRequest) -> Result<ScriptStep, ModelError> {
        let n = {
            let mut calls = lock(&self.calls);
            *calls += 1;
            *calls
        };
        if self.responder.is_none() {
            // Keep requests for assertions; function models are for benchmarks and stay lean.
            lock(&self.requests).push(request.clone());
        }
        if let Some(step) = lock(&self.script).pop_front() {
            return Ok(step);
        }
        match &self.responder {
            Some(f) => f(request).map(ScriptStep::Reply),
            None => Err(ModelError::Other(format!(
                "ScriptedModel `{}` has no answer left for call {n}; add more steps to its script",
                self.name
            ))),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn response_of(message: Message) -> ModelResponse {
    let finish_reason = if message.tool_calls.is_empty() {
        FinishReason::Stop
    } else {
        FinishReason::ToolCalls
    };
    ModelResponse {
        message,
        finish_reason,
    }
}

/// Splits an answer into realistic chunks: words, and each tool call's arguments in two parts.
fn chunk_message(message: &Message) -> Vec<ModelChunk> {
    let mut chunks = Vec::new();
    let text = message.text();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c == ' ' && i > start {
            chunks.push(ModelChunk::Text {
                text: text[start..i].to_string(),
            });
            start = i;
        }
    }
    if start < text.len() {
        chunks.push(ModelChunk::Text {
            text: text[start..].to_string(),
        });
    }
    for (index, call) in message.tool_calls.iter().enumerate() {
        let args = match &call.args {
            serde_json::Value::String(raw) => raw.clone(),
            other => other.to_string(),
        };
        let mid = args
            .char_indices()
            .map(|(i, _)| i)
            .nth(args.chars().count() / 2)
            .unwrap_or(0);
        chunks.push(ModelChunk::ToolCall {
            index,
            id: Some(call.id.clone()),
            name: Some(call.name.clone()),
            args: args[..mid].to_string(),
        });
        chunks.push(ModelChunk::ToolCall {
            index,
            id: None,
            name: None,
            args: args[mid..].to_string(),
        });
    }
    if let Some(usage) = message.usage {
        chunks.push(ModelChunk::Usage { usage });
    }
    chunks.push(ModelChunk::Finish {
        reason: if message.tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        },
    });
    chunks
}

/// Gives a scripted message fresh ids, so one script can be replayed without id clashes.
fn fresh(mut message: Message) -> Message {
    message.id = crate::ids::random();
    message
}

#[async_trait::async_trait]
impl ChatModel for ScriptedModel {
    fn provider(&self) -> &str {
        "scripted"
    }

    fn model_name(&self) -> &str {
        &self.name
    }

    fn profile(&self) -> ModelProfile {
        self.profile.clone()
    }

    async fn generate(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        match self.next_step(request)? {
            ScriptStep::Reply(m) => Ok(response_of(fresh(m))),
            ScriptStep::Chunks(chunks) => {
                let mut a = StreamAssembler::new();
                for c in &chunks {
                    a.push(c);
                }
                Ok(a.finish())
            }
            ScriptStep::Fail(e) => Err(e),
        }
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let chunks = match self.next_step(request)? {
            ScriptStep::Reply(m) => chunk_message(&m),
            ScriptStep::Chunks(chunks) => chunks,
            ScriptStep::Fail(e) => return Err(e),
        };
        Ok(Box::pin(futures::stream::iter(chunks.into_iter().map(Ok))))
    }
}
