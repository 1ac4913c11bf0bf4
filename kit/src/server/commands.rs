//! `POST /threads/{thread_id}/commands`: the Agent Protocol's commands over HTTP, the
//! counterpart of the thread stream. A command is `{"id", "method", "params"}`; the answer is
//! `{"type": "success", "id", "result"}` or `{"type": "error", "id", "error", "message"}`
//! (with the HTTP status of the failure).
//!
//! | method | params | what kit does |
//! |---|---|---|
//! | `run.start` | `assistantId`, `input`, `metadata`? | a thread paused on an interrupt is resumed with `input` as the answer; otherwise a run with `input` is queued (behind a run in progress: kit queues rather than injecting into a running graph). Creates the thread when missing. Result: `{"runId"}` |
//! | `input.respond` | `namespace`, `interruptId`, `response` (or `responses` with one entry) | resumes the thread with `response` when `interruptId` is what its latest run waits for (`no_such_interrupt` otherwise). Result: `{"runId"}` |
//!
//! Other protocol commands answer `not_supported`, unknown ones `unknown_command`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::auth::Identity;
use super::queue::Shared;
use super::routes::{ApiError, Strategy, Submit, body_object, submit, thread_unavailable};
use super::store::{RunInput, RunStatus};

/// Commands of the protocol kit does not serve (yet).
const NOT_SUPPORTED: [&str; 7] = [
    "input.inject",
    "state.get",
    "state.listCheckpoints",
    "state.fork",
    "subscription.subscribe",
    "subscription.unsubscribe",
    "subscription.reconnect",
];

/// A failed command: the protocol's error code, the message, the HTTP status.
struct Failure {
    code: &'static str,
    message: String,
    status: StatusCode,
}

impl Failure {
    fn new(code: &'static str, status: StatusCode, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
            status,
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new("invalid_argument", StatusCode::BAD_REQUEST, message)
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        let code = if e.status().is_server_error() {
            "unknown_error"
        } else {
            "invalid_argument"
        };
        Failure::new(code, e.status(), e.message())
    }
}

type Body = Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>;

/// `POST /threads/{thread_id}/commands`.
pub(crate) async fn post_command(
    State(shared): State<Arc<Shared>>,
    Extension(who): Extension<Identity>,
    Path(thread_id): Path<String>,
    body: Body,
) -> Response {
    let body = match body_object(body, shared.config.body_limit) {
        Ok(body) => body,
        Err(e) => return answer(Value::Null, Err(e.into())),
    };
    let id = match body.get("id") {
        None | Some(Value::Null) => Value::Null,
        Some(v) if v.is_u64() => v.clone(),
        Some(_) => {
            return answer(
                Value::Null,
                Err(Failure::invalid(
                    "`id` must be a non-negative integer the answer can repeat",
                )),
            );
        }
    };
    let result = run(&shared, &who, &thread_id, &body).await;
    answer(id, result)
}

fn answer(id: Value, result: Result<Value, Failure>) -> Response {
    match result {
        Ok(result) => Json(json!({"type": "success", "id": id, "result": result})).into_response(),
        Err(f) => (
            f.status,
            Json(json!({"type": "error", "id": id, "error": f.code, "message": f.message})),
        )
            .into_response(),
    }
}

async fn run(
    shared: &Shared,
    who: &Identity,
    thread_id: &str,
    body: &Map<String, Value>,
) -> Result<Value, Failure> {
    let method = body.get("method").and_then(Value::as_str).ok_or_else(|| {
        Failure::invalid("`method` is missing: send `run.start` or `input.respond`")
    })?;
    let params = match body.get("params") {
        Some(Value::Object(p)) => p.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => return Err(Failure::invalid("`params` must be an object")),
    };
    match method {
        "run.start" => run_start(shared, who, thread_id, &params).await,
        "input.respond" => input_respond(shared, who, thread_id, &params).await,
        m if NOT_SUPPORTED.contains(&m) => Err(Failure::new(
            "not_supported",
            StatusCode::NOT_IMPLEMENTED,
            format!(
                "this worker does not serve `{m}` yet; it serves run.start and input.respond \
                 (state: GET /threads/{{thread_id}})"
            ),
        )),
        other => Err(Failure::new(
            "unknown_command",
            StatusCode::BAD_REQUEST,
            format!(
                "`{}` is not a command; send `run.start` or `input.respond`",
                crate::text::clip(other, 80)
            ),
        )),
    }
}

fn metadata(params: &Map<String, Value>) -> Result<Value, Failure> {
    match params.get("metadata") {
        None | Some(Value::Null) => Ok(json!({})),
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        Some(_) => Err(Failure::invalid("`metadata` must be an object")),
    }
}

async fn run_start(
    shared: &Shared,
    who: &Identity,
    thread_id: &str,
    params: &Map<String, Value>,
) -> Result<Value, Failure> {
    let graph_id = params
        .get("assistantId")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            Failure::invalid(format!(
                "`assistantId` is missing: name the hosted graph to run (one of {})",
                shared.graph_ids.join(", ")
            ))
        })?;
    let input = params.get("input").cloned().unwrap_or(Value::Null);
    let latest = match shared
        .store
        .get_thread(thread_id)
        .await
        .map_err(ApiError::from)?
    {
        Some(thread) if thread.owner != who.as_str() => {
            return Err(thread_unavailable(thread_id).into());
        }
        Some(_) => shared
            .store
            .thread_runs(thread_id, 1, 0)
            .await
            .map_err(ApiError::from)?
            .into_iter()
            .next(),
        None => None,
    };
    let input = match latest {
        Some(run) if run.status == RunStatus::Interrupted => RunInput::Resume(input),
        _ if input.is_object() => RunInput::Input(input),
        _ => {
            return Err(Failure::invalid(
                "`input` must be an object (for agents `{\"messages\": [...]}`) when the thread \
                 is not waiting for an answer",
            ));
        }
    };
    start(
        shared,
        who,
        thread_id,
        graph_id.to_string(),
        input,
        metadata(params)?,
    )
    .await
}

async fn input_respond(
    shared: &Shared,
    who: &Identity,
    thread_id: &str,
    params: &Map<String, Value>,
) -> Result<Value, Failure> {
    let entry = match params.get("responses") {
        Some(Value::Array(list)) if list.len() == 1 => list[0]
            .as_object()
            .cloned()
            .ok_or_else(|| Failure::invalid("each of `responses` must be an object"))?,
        Some(Value::Array(_)) => {
            return Err(Failure::new(
                "not_supported",
                StatusCode::NOT_IMPLEMENTED,
                "this worker answers one interrupt per command; send one entry in `responses` \
                 (or `interruptId` and `response`)",
            ));
        }
        Some(_) => return Err(Failure::invalid("`responses` must be a list")),
        None => params.clone(),
    };
    let interrupt_id = entry
        .get("interruptId")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            Failure::invalid("`interruptId` is missing: the id of an input.requested event")
        })?;
    let response = entry.get("response").cloned().unwrap_or(Value::Null);
    let thread = super::interop::thread_or_404(shared, thread_id, who).await?;
    let latest = shared
        .store
        .thread_runs(&thread.thread_id, 1, 0)
        .await
        .map_err(ApiError::from)?
        .into_iter()
        .next();
    let waiting = latest.filter(|r| r.status == RunStatus::Interrupted);
    let Some(run) = waiting else {
        return Err(Failure::new(
            "no_such_interrupt",
            StatusCode::CONFLICT,
            "the thread is not waiting for an answer (its latest run did not pause on an \
             interrupt)",
        ));
    };
    let pending: Vec<&str> = run
        .output
        .as_ref()
        .and_then(|o| o.get("interrupts"))
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(|i| i.get("id")?.as_str()).collect())
        .unwrap_or_default();
    if !pending.contains(&interrupt_id) {
        return Err(Failure::new(
            "no_such_interrupt",
            StatusCode::CONFLICT,
            format!(
                "the thread does not wait on interrupt `{}`; it waits on: {}",
                crate::text::clip(interrupt_id, 80),
                pending.join(", ")
            ),
        ));
    }
    if pending.len() > 1 {
        return Err(Failure::new(
            "not_supported",
            StatusCode::NOT_IMPLEMENTED,
            "the thread waits on several interrupts; this worker resumes one at a time, answer \
             with POST /runs and `command.resume`",
        ));
    }
    start(
        shared,
        who,
        thread_id,
        run.graph_id,
        RunInput::Resume(response),
        metadata(&entry)?,
    )
    .await
}

async fn start(
    shared: &Shared,
    who: &Identity,
    thread_id: &str,
    graph_id: String,
    input: RunInput,
    metadata: Value,
) -> Result<Value, Failure> {
    let run = submit(
        shared,
        Submit {
            owner: who.clone(),
            thread_id: Some(thread_id.to_string()),
            graph_id,
            input,
            metadata,
            strategy: Strategy::Enqueue,
        },
    )
    .await?;
    Ok(json!({"runId": run.run_id, "threadId": run.thread_id}))
}
