//! The subset of the LangGraph threads API that Python deepagents' async subagents call
//! (through the LangGraph SDK), so a deepagents supervisor can use a kit worker:
//!
//! | route | what |
//! |---|---|
//! | `POST /threads` | creates a thread (`thread_id`, `metadata`, `if_exists` = `raise` \| `do_nothing`) |
//! | `GET /threads/{thread_id}` | the thread: `status` (`idle`, `busy`, `interrupted`, `error`), `values` (with `messages`), `interrupts` |
//! | `POST /threads/{thread_id}/runs` | queues a run: `assistant_id`, `input` or `command.resume`, `metadata`, `multitask_strategy` (`enqueue`, `interrupt`, `rollback`, `reject`), `if_not_exists` = `create` |
//! | `GET /threads/{thread_id}/runs` | the thread's runs, newest first (`limit`, `offset`) |
//! | `GET /threads/{thread_id}/runs/{run_id}` | one run |
//! | `POST /threads/{thread_id}/runs/{run_id}/cancel` | cancels it |
//!
//! Run statuses follow LangGraph: a cancelled run is `interrupted`; a run that paused for
//! human input is `success` and its thread is `interrupted` (with the `interrupts`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::auth::Identity;
use super::queue::Shared;
use super::routes::{
    ApiError, ApiResult, NamedIn, body_object, cancel_run, check_new_thread_id, mine, opt_object,
    opt_str, paging, run_input, thread_unavailable, time, unknown_id,
};
use super::store::{RunInput, RunRecord, RunStatus, ThreadRecord};

type S = State<Arc<Shared>>;
type Who = Extension<Identity>;
type Body = Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>;

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/threads", post(create_thread))
        .route("/threads/{thread_id}", get(get_thread))
        .route("/threads/{thread_id}/runs", post(create_run).get(list_runs))
        .route("/threads/{thread_id}/runs/{run_id}", get(get_run))
        .route("/threads/{thread_id}/runs/{run_id}/cancel", post(cancel))
        .route(
            "/threads/{thread_id}/stream",
            post(super::stream::post_stream).get(super::stream::get_stream),
        )
        .route(
            "/threads/{thread_id}/commands",
            post(super::commands::post_command),
        )
}

fn status(run: &RunRecord) -> &'static str {
    match run.status {
        RunStatus::Cancelled => "interrupted",
        RunStatus::Interrupted => "success",
        other => other.as_str(),
    }
}

fn run_json(run: &RunRecord) -> Value {
    let mut kwargs = serde_json::Map::new();
    match &run.input {
        RunInput::Input(v) => {
            kwargs.insert("input".into(), v.clone());
        }
        RunInput::Resume(v) => {
            kwargs.insert("command".into(), json!({"resume": v}));
        }
    }
    let mut out = json!({
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": run.graph_id,
        "created_at": time(run.created_at),
        "updated_at": time(run.updated_at),
        "status": status(run),
        "metadata": run.metadata,
        "multitask_strategy": run.multitask_strategy,
        "kwargs": kwargs,
    });
    if let Some(e) = &run.error {
        out["error"] = json!(e);
    }
    out
}

fn thread_json(thread: &ThreadRecord, latest: Option<&RunRecord>) -> Value {
    let status = match latest.map(|r| r.status) {
        Some(RunStatus::Pending | RunStatus::Running) => "busy",
        Some(RunStatus::Interrupted) => "interrupted",
        Some(RunStatus::Error | RunStatus::Timeout) => "error",
        _ => "idle",
    };
    let mut interrupts = serde_json::Map::new();
    if let Some(run) = latest.filter(|r| r.status == RunStatus::Interrupted)
        && let Some(list) = run.output.as_ref().and_then(|o| o.get("interrupts"))
    {
        interrupts.insert(run.run_id.clone(), list.clone());
    }
    json!({
        "thread_id": thread.thread_id,
        "created_at": time(thread.created_at),
        "updated_at": time(thread.updated_at),
        "metadata": thread.metadata,
        "status": status,
        "values": thread.values.clone().unwrap_or_else(|| json!({})),
        "interrupts": interrupts,
    })
}

fn unknown_thread(id: &str) -> ApiError {
    ApiError::not_found(format!(
        "no thread `{id}` on this worker; create it with POST /threads first"
    ))
}

/// A thread `who` owns; another identity's thread is answered exactly as a missing one.
pub(crate) async fn thread_or_404(
    shared: &Shared,
    id: &str,
    who: &Identity,
) -> ApiResult<ThreadRecord> {
    shared
        .store
        .get_thread(id)
        .await?
        .filter(|t| t.owner == who.as_str())
        .ok_or_else(|| unknown_thread(id))
}

async fn create_thread(
    State(shared): S,
    Extension(who): Who,
    body: Body,
) -> ApiResult<Json<Value>> {
    let body = body_object(body, shared.config.body_limit)?;
    let metadata = opt_object(&body, "metadata")?;
    let thread_id = opt_str(&body, "thread_id")?;
    if let Some(id) = &thread_id
        && let Some(existing) = shared.store.get_thread(id).await?
    {
        if existing.owner != who.as_str() {
            return Err(thread_unavailable(id));
        }
        return match opt_str(&body, "if_exists")?.as_deref() {
            Some("do_nothing") => {
                let latest = shared.store.thread_runs(id, 1, 0).await?;
                Ok(Json(thread_json(&existing, latest.first())))
            }
            _ => Err(ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                format!("thread `{id}` already exists; send `if_exists: \"do_nothing\"` to get it"),
            )),
        };
    }
    if let Some(id) = &thread_id {
        check_new_thread_id(id, NamedIn::Body)?;
    }
    let id = thread_id.unwrap_or_else(crate::ids::time_ordered);
    let thread = shared
        .store
        .create_thread(&id, who.as_str(), metadata)
        .await?;
    if thread.owner != who.as_str() {
        // Created by another identity between the look-up and the insert.
        return Err(thread_unavailable(&id));
    }
    Ok(Json(thread_json(&thread, None)))
}

async fn get_thread(
    State(shared): S,
    Extension(who): Who,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let thread = thread_or_404(&shared, &id, &who).await?;
    let latest = shared.store.thread_runs(&id, 1, 0).await?;
    Ok(Json(thread_json(&thread, latest.first())))
}

async fn create_run(
    State(shared): S,
    Extension(who): Who,
    Path(thread_id): Path<String>,
    body: Body,
) -> ApiResult<Json<Value>> {
    let body = body_object(body, shared.config.body_limit)?;
    match shared.store.get_thread(&thread_id).await? {
        Some(thread) if thread.owner == who.as_str() => {}
        // Another identity's thread is not found, whatever `if_not_exists` says.
        Some(_) => return Err(unknown_thread(&thread_id)),
        None if opt_str(&body, "if_not_exists")?.as_deref() == Some("create") => {
            check_new_thread_id(&thread_id, NamedIn::Path)?;
            let thread = shared
                .store
                .create_thread(&thread_id, who.as_str(), json!({}))
                .await?;
            if thread.owner != who.as_str() {
                return Err(thread_unavailable(&thread_id));
            }
        }
        None => return Err(unknown_thread(&thread_id)),
    }
    let graph_id = opt_str(&body, "assistant_id")?.ok_or_else(|| {
        ApiError::bad_request(format!(
            "`assistant_id` is missing: name the hosted graph to run (one of {})",
            shared.graph_ids.join(", ")
        ))
    })?;
    let input = match (body.get("input"), body.get("command")) {
        (None | Some(Value::Null), None | Some(Value::Null)) => RunInput::Resume(Value::Null),
        _ => run_input(&body)?,
    };
    super::routes::submit_from_body(&shared, who, Some(thread_id), graph_id, input, &body).await
}

async fn list_runs(
    State(shared): S,
    Extension(who): Who,
    Path(thread_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let (limit, offset) = paging(&query)?;
    thread_or_404(&shared, &thread_id, &who).await?;
    let runs = shared.store.thread_runs(&thread_id, limit, offset).await?;
    Ok(Json(Value::Array(runs.iter().map(run_json).collect())))
}

async fn run_on_thread(
    shared: &Shared,
    thread_id: &str,
    run_id: &str,
    who: &Identity,
) -> ApiResult<RunRecord> {
    match shared
        .store
        .get_run(run_id)
        .await?
        .and_then(|r| mine(r, who))
    {
        Some(run) if run.thread_id == thread_id => Ok(run),
        _ => Err(unknown_id(run_id)),
    }
}

async fn get_run(
    State(shared): S,
    Extension(who): Who,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let run = run_on_thread(&shared, &thread_id, &run_id, &who).await?;
    Ok(Json(run_json(&run)))
}

async fn cancel(
    State(shared): S,
    Extension(who): Who,
    Path((thread_id, run_id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let run = run_on_thread(&shared, &thread_id, &run_id, &who).await?;
    let wait = matches!(query.get("wait").map(String::as_str), Some("1" | "true"));
    let run = cancel_run(&shared, &run, wait).await?;
    Ok(Json(run_json(&run)))
}
