//! The HTTP routes of the run protocol (`/runs`), the shared request handling, and the JSON
//! error responses.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Extension, Path, State};
use axum::http::{Method, StatusCode, Uri};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};

use super::FollowUp;
use super::auth::Identity;
use super::auth::{Auth, require_identity};
use super::queue::{Shared, Stop};
use super::store::{NewRun, RunInput, RunRecord, RunStatus, StoreError};

/// An error answer: `{"error": code, "message": what is wrong and what to do}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// What the answer says is wrong.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// The HTTP status.
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }
}

/// What `POST /runs` makes of a body before it looks at the store: the graph id, or the client
/// error's message (for [`crate::fuzz`]).
pub(crate) fn parse_run_request(body: &[u8]) -> Result<String, String> {
    let parse = || -> ApiResult<String> {
        let body = body_object(Ok(Bytes::copy_from_slice(body)), usize::MAX)?;
        let graph_id = opt_str(&body, "assistant_id")?
            .or(opt_str(&body, "graph_id")?)
            .ok_or_else(|| ApiError::bad_request("`assistant_id` is missing"))?;
        run_input(&body)?;
        opt_str(&body, "thread_id")?;
        opt_object(&body, "metadata")?;
        Strategy::parse(
            opt_str(&body, "multitask_strategy")?.as_deref(),
            FollowUp::Enqueue,
        )?;
        Ok(graph_id)
    };
    parse().map_err(|e| e.message().to_string())
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({"error": self.code, "message": self.message})),
        )
            .into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::GraphMismatch { .. } => {
                ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string())
            }
            StoreError::DuplicateRun(_) => {
                ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string())
            }
            StoreError::ForeignThread(id) => thread_unavailable(&id),
            other => {
                // The details (SQL, paths) go to the log, not to the client.
                tracing::error!(error = %other, "run store failure while serving a request");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    "the worker could not read or write its run store; retry later (the \
                     worker's logs say what failed)",
                )
            }
        }
    }
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// The longest thread id a client may choose, in bytes. A thread id is repeated in every run,
/// event batch and change notice of the thread (and is part of their keys), so its length is
/// bounded like any other peer input; 256 bytes hold any UUID (36) or readable name.
pub(crate) const MAX_THREAD_ID_BYTES: usize = 256;

/// Where a client named the thread a request creates.
#[derive(Clone, Copy)]
pub(crate) enum NamedIn {
    /// `thread_id` in the body (it may be left out for a fresh id).
    Body,
    /// The request's path.
    Path,
}

/// Checks the id a client chose for a thread the request creates (not for one that exists:
/// an id stored before this limit keeps working).
pub(crate) fn check_new_thread_id(id: &str, named: NamedIn) -> ApiResult<()> {
    let (what, otherwise) = match named {
        NamedIn::Body => ("`thread_id`", ", or omit `thread_id` to get a fresh one"),
        NamedIn::Path => ("the thread id in the path", ""),
    };
    if id.is_empty() {
        return Err(ApiError::bad_request(format!(
            "{what} is empty; choose a thread id{otherwise}"
        )));
    }
    if id.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "{what} holds a control character; choose a thread id of printable \
             characters{otherwise}"
        )));
    }
    if id.len() > MAX_THREAD_ID_BYTES {
        return Err(ApiError::bad_request(format!(
            "{what} is {} bytes long; a new thread's id has at most {MAX_THREAD_ID_BYTES} bytes \
             (a UUID has 36){otherwise}",
            id.len()
        )));
    }
    Ok(())
}

/// The answer to creating a thread id that another identity owns. It says no more than that
/// the id cannot be used (the same answer whoever owns it).
pub(crate) fn thread_unavailable(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "thread_unavailable",
        format!(
            "thread id `{id}` cannot be used; choose another thread id, or omit `thread_id` to \
             get a fresh one"
        ),
    )
}

/// Parses a request body as a JSON object; an empty body is `{}`.
pub(crate) fn body_object(
    body: Result<Bytes, BytesRejection>,
    limit: usize,
) -> ApiResult<Map<String, Value>> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!(
                    "the request body is larger than this worker accepts ({limit} bytes); send \
                     less, or raise the worker's body_limit"
                ),
            )
        } else {
            ApiError::bad_request(format!("the request body could not be read: {rejection}"))
        }
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    // Counted before parsing: parsed, `{"a":0}` costs 90 times its bytes.
    if !crate::json::containers_within(&bytes, crate::json::MAX_PEER_CONTAINERS) {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "the request body holds more than {} JSON objects and arrays; send less",
                crate::json::MAX_PEER_CONTAINERS
            ),
        ));
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v @ Value::Object(_)) if !crate::json::nests_within(&v, crate::json::MAX_KEPT_DEPTH) => {
            Err(ApiError::bad_request(format!(
                "the request body nests more than {} levels deep; kit keeps what \
                 it is sent in threads and event logs, which read no deeper than 128 levels: \
                 send a flatter body",
                crate::json::MAX_KEPT_DEPTH
            )))
        }
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(ApiError::bad_request(format!(
            "the request body must be a JSON object, got {}",
            kind_of(&other)
        ))),
        Err(e) => Err(ApiError::bad_request(format!(
            "the request body is not valid JSON ({e}); send a JSON object"
        ))),
    }
}

pub(crate) use crate::text::json_type as kind_of;

/// An optional string field.
pub(crate) fn opt_str(body: &Map<String, Value>, key: &str) -> ApiResult<Option<String>> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(ApiError::bad_request(format!(
            "`{key}` must be a string, got {}",
            kind_of(other)
        ))),
    }
}

/// An optional object field (metadata).
pub(crate) fn opt_object(body: &Map<String, Value>, key: &str) -> ApiResult<Value> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(json!({})),
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        Some(other) => Err(ApiError::bad_request(format!(
            "`{key}` must be an object, got {}",
            kind_of(other)
        ))),
    }
}

/// The follow-up strategy of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    Enqueue,
    Interrupt,
    Reject,
}

impl Strategy {
    pub(crate) fn parse(s: Option<&str>, default: FollowUp) -> ApiResult<Self> {
        match s {
            None => Ok(match default {
                FollowUp::Enqueue => Strategy::Enqueue,
                FollowUp::Interrupt => Strategy::Interrupt,
            }),
            Some("enqueue") => Ok(Strategy::Enqueue),
            Some("interrupt") | Some("rollback") => Ok(Strategy::Interrupt),
            Some("reject") => Ok(Strategy::Reject),
            Some(other) => Err(ApiError::bad_request(format!(
                "`multitask_strategy` must be one of enqueue, interrupt, rollback, reject; got \
                 `{other}`"
            ))),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Strategy::Enqueue => "enqueue",
            Strategy::Interrupt => "interrupt",
            Strategy::Reject => "reject",
        }
    }
}

/// A run to submit.
pub(crate) struct Submit {
    pub(crate) owner: Identity,
    pub(crate) thread_id: Option<String>,
    pub(crate) graph_id: String,
    pub(crate) input: RunInput,
    pub(crate) metadata: Value,
    pub(crate) strategy: Strategy,
}

/// Validates and queues a run; handles the thread's active runs per the strategy.
pub(crate) async fn submit(shared: &Shared, s: Submit) -> ApiResult<RunRecord> {
    let Some(hosted) = shared.graphs.get(&s.graph_id) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_assistant",
            format!(
                "this worker hosts no graph `{}` (the `assistant_id`); it hosts: {}",
                s.graph_id,
                shared.graph_ids.join(", ")
            ),
        ));
    };
    if let RunInput::Input(input) = &s.input {
        hosted.check_input(input).map_err(|m| {
            ApiError::invalid(format!(
                "the input of graph `{}` is not valid: {m}",
                s.graph_id
            ))
        })?;
    }
    if shared.shutting_down() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "this worker is shutting down; retry on another worker or after its restart",
        ));
    }
    // A thread id made here names no thread yet: nothing to look up (two reads fewer per
    // fresh run; the store's insert still checks owner and graph in its transaction).
    let fresh = s.thread_id.is_none();
    // Time-ordered, like run ids: a fresh thread's rows land beside the last one's in every
    // index keyed by thread (threads, runs by thread, the event log), so the run ends a store
    // commits together share pages instead of each rewriting a random one.
    let thread_id = s.thread_id.unwrap_or_else(crate::ids::time_ordered);
    // Another identity's thread is never looked into (its runs are not interrupted or
    // rejected on its behalf); the store checks the owner again when it inserts the run.
    if !fresh {
        match shared.store.get_thread(&thread_id).await? {
            Some(thread) if thread.owner != s.owner.as_str() => {
                return Err(thread_unavailable(&thread_id));
            }
            Some(_) => {}
            None => check_new_thread_id(&thread_id, NamedIn::Body)?,
        }
    }
    let active = if fresh {
        Vec::new()
    } else {
        active_runs(shared, &thread_id).await?
    };
    if !active.is_empty() {
        match s.strategy {
            Strategy::Enqueue => {}
            Strategy::Reject => {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "thread_busy",
                    format!(
                        "thread `{thread_id}` already has a run in progress ({}); wait for it, \
                         or send multitask_strategy `enqueue` or `interrupt`",
                        active[0].run_id
                    ),
                ));
            }
            Strategy::Interrupt => {
                // Newest first: the queued runs are cancelled before the running one ends
                // and would let the next of them start.
                for run in active.iter().rev() {
                    cancel_run(shared, run, false).await?;
                }
            }
        }
    }
    let run = shared
        .store
        .create_run(NewRun {
            run_id: crate::ids::time_ordered(),
            thread_id,
            graph_id: s.graph_id,
            input: s.input,
            metadata: s.metadata,
            multitask_strategy: Some(s.strategy.as_str().to_string()),
            owner: s.owner.as_str().to_string(),
        })
        .await?;
    shared.wake();
    Ok(run)
}

/// The pending and running runs of a thread.
async fn active_runs(shared: &Shared, thread_id: &str) -> ApiResult<Vec<RunRecord>> {
    Ok(shared.store.active_thread_runs(thread_id).await?)
}

/// Cancels a run: a pending one at once; a running one is stopped (here, or through the
/// store by the worker executing it). With `wait`, waits a bounded time for it to end.
pub(crate) async fn cancel_run(
    shared: &Shared,
    run: &RunRecord,
    wait: bool,
) -> ApiResult<RunRecord> {
    let Some(after) = shared.store.request_cancel(&run.run_id).await? else {
        return Err(unknown_id(&run.run_id));
    };
    if after.status != RunStatus::Running {
        if run.status == RunStatus::Pending && after.status == RunStatus::Cancelled {
            // Ended without running: its stream says so, as a run that ran says it (a client
            // following the run waits for that event).
            shared.record_ending(&after).await;
        }
        return Ok(after);
    }
    let here = shared.stop_local(&run.run_id, Stop::Cancel);
    if !wait {
        return Ok(after);
    }
    let deadline = crate::deadline::tokio_from_now(shared.config.cancel_wait);
    loop {
        // Runs stopped here end with a `finished` signal; runs on other workers are polled.
        let signal = shared.finished.notified();
        if let Some(now) = shared.store.get_run(&run.run_id).await?
            && (now.status.is_terminal() || tokio::time::Instant::now() >= deadline)
        {
            return Ok(now);
        }
        let poll = if here || shared.is_running_here(&run.run_id) {
            Duration::from_secs(1)
        } else {
            Duration::from_millis(100)
        };
        let _ = tokio::time::timeout(poll.min(shared.config.cancel_wait), signal).await;
        if tokio::time::Instant::now() >= deadline {
            return shared
                .store
                .get_run(&run.run_id)
                .await?
                .ok_or_else(|| unknown_id(&run.run_id));
        }
    }
}

pub(crate) fn unknown_id(id: &str) -> ApiError {
    ApiError::not_found(format!(
        "no run or thread `{id}` on this worker; use the `run_id` or `thread_id` returned by \
         POST /runs"
    ))
}

/// A run of `who` by run id, or the latest run of a thread of `who` by thread id. Runs and
/// threads of other identities are answered as unknown.
pub(crate) async fn resolve(shared: &Shared, id: &str, who: &Identity) -> ApiResult<RunRecord> {
    if let Some(run) = shared.store.get_run(id).await? {
        return mine(run, who).ok_or_else(|| unknown_id(id));
    }
    shared
        .store
        .thread_runs(id, 1, 0)
        .await?
        .into_iter()
        .next()
        .and_then(|run| mine(run, who))
        .ok_or_else(|| unknown_id(id))
}

/// The run, when `who` owns it.
pub(crate) fn mine(run: RunRecord, who: &Identity) -> Option<RunRecord> {
    (run.owner == who.as_str()).then_some(run)
}

pub(crate) fn time(ms: u64) -> String {
    crate::ids::rfc3339_from_millis(ms, true)
}

/// A run as the run protocol serves it.
pub(crate) fn run_json(run: &RunRecord) -> Value {
    let mut out = json!({
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": run.graph_id,
        "status": run.status.as_str(),
        "created_at": time(run.created_at),
        "updated_at": time(run.updated_at),
        "attempts": run.attempts,
        "metadata": run.metadata,
    });
    // Where the run's thread streams its events: supervisors follow it instead of polling.
    if let Ok(segment) = crate::protocol::task_path_segment(&run.thread_id) {
        out["links"] = json!({"stream": format!("/threads/{segment}/stream")});
    }
    if let Some(s) = &run.multitask_strategy {
        out["multitask_strategy"] = json!(s);
    }
    if let Some(t) = run.started_at {
        out["started_at"] = json!(time(t));
    }
    if let Some(t) = run.finished_at {
        out["finished_at"] = json!(time(t));
    }
    if let Some(Value::Object(output)) = &run.output {
        for key in ["values", "result", "interrupts"] {
            if let Some(v) = output.get(key) {
                out[key] = v.clone();
            }
        }
    }
    if let Some(e) = &run.error {
        out["error"] = json!(e);
    }
    out
}

type Body = Result<Bytes, BytesRejection>;
type S = State<Arc<Shared>>;
type Who = Extension<Identity>;

async fn ok() -> Json<Value> {
    Json(json!({"ok": true}))
}

/// `POST /runs`: `{"assistant_id", "input" | "command": {"resume"}, "thread_id"?,
/// "metadata"?, "multitask_strategy"?}`.
async fn create_run(State(shared): S, Extension(who): Who, body: Body) -> ApiResult<Json<Value>> {
    let body = body_object(body, shared.config.body_limit)?;
    let graph_id = opt_str(&body, "assistant_id")?
        .or(opt_str(&body, "graph_id")?)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "`assistant_id` is missing: name the hosted graph to run (one of {})",
                shared.graph_ids.join(", ")
            ))
        })?;
    let input = run_input(&body)?;
    let thread_id = opt_str(&body, "thread_id")?;
    submit_from_body(&shared, who, thread_id, graph_id, input, &body).await
}

/// Queues a run with the `metadata` and `multitask_strategy` of its request body and answers
/// with the run.
pub(crate) async fn submit_from_body(
    shared: &Shared,
    owner: Identity,
    thread_id: Option<String>,
    graph_id: String,
    input: RunInput,
    body: &Map<String, Value>,
) -> ApiResult<Json<Value>> {
    let run = submit(
        shared,
        Submit {
            owner,
            thread_id,
            graph_id,
            input,
            metadata: opt_object(body, "metadata")?,
            strategy: Strategy::parse(
                opt_str(body, "multitask_strategy")?.as_deref(),
                shared.config.follow_up,
            )?,
        },
    )
    .await?;
    Ok(Json(run_json(&run)))
}

/// The `input` (or `command.resume`) of a run request.
pub(crate) fn run_input(body: &Map<String, Value>) -> ApiResult<RunInput> {
    if let Some(command) = body.get("command").filter(|c| !c.is_null()) {
        let Some(resume) = command.get("resume") else {
            return Err(ApiError::bad_request(
                "`command` must be an object with `resume` (the answer to the thread's \
                 interrupts)",
            ));
        };
        return Ok(RunInput::Resume(resume.clone()));
    }
    match body.get("input") {
        Some(v @ Value::Object(_)) => Ok(RunInput::Input(v.clone())),
        None | Some(Value::Null) => Err(ApiError::bad_request(
            "`input` is missing: send an object, for agents `{\"messages\": [{\"role\": \
             \"user\", \"content\": \"...\"}]}`",
        )),
        Some(other) => Err(ApiError::bad_request(format!(
            "`input` must be an object, got {}",
            kind_of(other)
        ))),
    }
}

async fn get_run(
    State(shared): S,
    Extension(who): Who,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let run = resolve(&shared, &id, &who).await?;
    Ok(Json(run_json(&run)))
}

/// `POST /runs/{id}/input`: `{"message": text}` (or `{"input": {...}}`), optional
/// `multitask_strategy`. A new run on the same thread.
async fn post_input(
    State(shared): S,
    Extension(who): Who,
    Path(id): Path<String>,
    body: Body,
) -> ApiResult<Json<Value>> {
    let body = body_object(body, shared.config.body_limit)?;
    let current = resolve(&shared, &id, &who).await?;
    let input = match (opt_str(&body, "message")?, body.get("input")) {
        (Some(message), _) => {
            let hosted = shared.graphs.get(&current.graph_id).ok_or_else(|| {
                ApiError::new(
                    StatusCode::CONFLICT,
                    "unknown_assistant",
                    format!(
                        "the run's graph `{}` is not hosted by this worker",
                        current.graph_id
                    ),
                )
            })?;
            RunInput::Input(hosted.message_input(&message))
        }
        (None, Some(_)) => run_input(&body)?,
        (None, None) => {
            return Err(ApiError::bad_request(
                "`message` is missing: send {\"message\": \"the follow-up instructions\"}",
            ));
        }
    };
    submit_from_body(
        &shared,
        who,
        Some(current.thread_id),
        current.graph_id,
        input,
        &body,
    )
    .await
}

async fn post_cancel(
    State(shared): S,
    Extension(who): Who,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let run = resolve(&shared, &id, &who).await?;
    let run = cancel_run(&shared, &run, true).await?;
    Ok(Json(run_json(&run)))
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(format!(
        "no route {method} {}; this worker serves POST /runs, GET /runs/{{id}}, POST \
         /runs/{{id}}/input, POST /runs/{{id}}/cancel, the LangGraph threads API under \
         /threads, and GET /ok",
        uri.path()
    ))
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

/// The worker's whole router.
///
/// A request is authenticated from its head before its body is read: a client without an
/// identity is answered at once and holds no body buffer, however large its body.
pub(crate) fn router(shared: Arc<Shared>, auth: Auth) -> Router {
    let limit = shared.config.body_limit;
    let body_limits = super::body::BodyLimits {
        max: limit,
        timeout: shared.config.body_read_timeout,
    };
    // Layers run outermost last-added first: identity, then the body.
    let api = Router::new()
        .route("/runs", post(create_run))
        .route("/runs/{id}", get(get_run))
        .route("/runs/{id}/input", post(post_input))
        .route("/runs/{id}/cancel", post(post_cancel))
        .merge(super::interop::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn_with_state(body_limits, super::body::guard))
        .layer(from_fn_with_state(auth, require_identity));
    Router::new()
        .route("/ok", get(ok))
        .merge(api)
        .layer(DefaultBodyLimit::max(limit))
        // Outermost: a browser's cross-site request is refused before it is authenticated.
        .layer(axum::middleware::from_fn(
            super::cross_site::refuse_cross_site,
        ))
        .with_state(shared)
}

/// Reads `limit` and `offset` query parameters.
pub(crate) fn paging(query: &HashMap<String, String>) -> ApiResult<(usize, usize)> {
    let read = |key: &str, default: usize| -> ApiResult<usize> {
        match query.get(key) {
            None => Ok(default),
            Some(v) => v.parse::<usize>().map_err(|_| {
                ApiError::bad_request(format!(
                    "query parameter `{key}` must be a non-negative integer, got `{v}`"
                ))
            }),
        }
    };
    Ok((read("limit", 10)?.min(1000), read("offset", 0)?))
}
