//! What a worker can host: the [`Hosted`] trait, implemented for [`Agent`] and [`Graph`].

use std::sync::Arc;

use serde_json::{Value, json};

use super::store::RunInput;
use crate::agent::{Agent, AgentInput, AgentState};
use crate::checkpoint::Checkpointer;
use crate::graph::{Graph, Interrupt, Outcome, Resume, RunOptions, RunRequest, Runnable};
use crate::state::State;

/// The checkpoint metadata key holding the id of the worker run that wrote it. Recovery
/// reads it to tell whether a crashed run had started (then it resumes) or not (then it
/// starts over from its input).
pub const RUN_ID_METADATA_KEY: &str = "kit_worker_run_id";

/// One run for a hosted graph to execute.
#[derive(Clone)]
pub struct HostedRun {
    /// The thread (the checkpointer's thread id).
    pub thread_id: String,
    /// The worker's run id.
    pub run_id: String,
    /// What to execute.
    pub input: RunInput,
    /// The worker's checkpointer: threads keep their state across runs in it.
    pub checkpointer: Arc<dyn Checkpointer>,
    /// True when an earlier attempt of this run was cut short by a dead worker. (A run put back
    /// in the queue by a clean shutdown has it false.) Whether the run had started is read
    /// from the thread's checkpoint either way: see [`RUN_ID_METADATA_KEY`].
    pub recovered: bool,
    /// Where the run sends its events: the worker writes them to the thread's event log
    /// (served by `/threads/{id}/stream`). `None` when nobody listens.
    pub events: Option<crate::event::EventSink>,
}

impl std::fmt::Debug for HostedRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostedRun")
            .field("thread_id", &self.thread_id)
            .field("run_id", &self.run_id)
            .field("input", &self.input)
            .field("recovered", &self.recovered)
            .finish_non_exhaustive()
    }
}

/// What a finished (or paused) run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct HostedOutput {
    /// The thread's state as JSON (for agents, with `messages`).
    pub values: Value,
    /// The final answer in text, when the graph has one (agents: the last assistant text).
    pub result: Option<String>,
    /// The interrupts the run paused on (empty when it finished).
    pub interrupts: Vec<Interrupt>,
}

impl HostedOutput {
    /// The output as stored and served: `{"values", "result"?, "interrupts"?}`.
    ///
    /// ```
    /// use kit::server::HostedOutput;
    /// use serde_json::json;
    ///
    /// let out = HostedOutput { values: json!({"n": 1}), result: Some("done".into()), interrupts: vec![] };
    /// assert_eq!(out.to_json(), json!({"values": {"n": 1}, "result": "done"}));
    /// let bare = HostedOutput { result: None, ..out.clone() };
    /// assert_eq!(bare.into_json(), json!({"values": {"n": 1}}));
    /// ```
    pub fn to_json(&self) -> Value {
        self.clone().into_json()
    }

    /// [`to_json`](Self::to_json), moving the values instead of copying them.
    pub fn into_json(self) -> Value {
        let mut out = serde_json::Map::new();
        out.insert("values".into(), self.values);
        if let Some(result) = self.result {
            out.insert("result".into(), Value::String(result));
        }
        if !self.interrupts.is_empty() {
            out.insert(
                "interrupts".into(),
                serde_json::to_value(&self.interrupts).unwrap_or(Value::Null),
            );
        }
        Value::Object(out)
    }
}

/// A hosted run failed. `message` is shown to the client: it says what went wrong without
/// internals.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct HostedError {
    /// A short machine-readable kind (`invalid_input`, `model`, `node_failed`, ...).
    pub kind: String,
    /// What went wrong.
    pub message: String,
}

impl HostedError {
    /// An error of this kind.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        HostedError {
            kind: kind.into(),
            message: message.into(),
        }
    }
}

/// Something a worker runs under a `graph_id`: an agent, a graph, or your own type.
///
/// ```
/// use kit::server::{Hosted, HostedError, HostedOutput, HostedRun};
/// use serde_json::{Value, json};
///
/// /// Echoes its input.
/// struct Echo;
///
/// #[kit::async_trait]
/// impl Hosted for Echo {
///     fn check_input(&self, _input: &Value) -> Result<(), String> {
///         Ok(())
///     }
///     async fn run(&self, run: HostedRun) -> Result<HostedOutput, HostedError> {
///         let input = match run.input {
///             kit::server::store::RunInput::Input(v) => v,
///             kit::server::store::RunInput::Resume(v) => v,
///         };
///         Ok(HostedOutput { values: json!({"echo": input}), result: None, interrupts: vec![] })
///     }
/// }
/// ```
#[crate::async_trait]
pub trait Hosted: Send + Sync + 'static {
    /// Checks a run's input before the run is queued; the error says what is wrong with it
    /// (the client gets it with HTTP 422).
    fn check_input(&self, input: &Value) -> Result<(), String>;

    /// The input of a follow-up message (`POST /runs/{id}/input`). The default is
    /// `{"messages": [{"role": "user", "content": message}]}`.
    fn message_input(&self, message: &str) -> Value {
        json!({"messages": [{"role": "user", "content": message}]})
    }

    /// Executes one run to its end (or pause). Dropping the future cancels the run.
    async fn run(&self, run: HostedRun) -> Result<HostedOutput, HostedError>;
}

fn clip(s: String) -> String {
    crate::text::clip(&s, 2000)
}

/// How a run continues, read from the thread's checkpoint: a run that an earlier attempt
/// started (a worker died or shut down in the middle of it) continues where that attempt
/// Carries out a hosted run on a graph or an agent (`target`, whose graph is `graph`): answers
/// a resume, reports a run that a crash left finished, continues one it left unfinished, or
/// starts one with the parsed input.
async fn execute<R, S>(
    target: &R,
    graph: &Graph<S>,
    run: &HostedRun,
    input: impl FnOnce(&Value) -> Result<R::Input, HostedError>,
    fail: impl Fn(R::Error) -> HostedError,
) -> Result<Outcome<S>, HostedError>
where
    R: Runnable<Output = Outcome<S>>,
    S: State,
{
    let opts = options(run);
    Ok(match &run.input {
        RunInput::Resume(value) => {
            let resume = if value.is_null() {
                Resume::Continue
            } else {
                Resume::Value(value.clone())
            };
            target
                .run(RunRequest::Resume(resume), opts)
                .await
                .map_err(fail)?
        }
        RunInput::Input(value) => match plan(graph, &opts, run).await? {
            Plan::Finished(state, interrupts) if interrupts.is_empty() => Outcome::Done(state),
            Plan::Finished(state, interrupts) => Outcome::Interrupted(crate::graph::Interrupted {
                interrupts,
                state,
                checkpoint_id: None,
            }),
            Plan::Resume => target
                .run(RunRequest::Resume(Resume::Continue), opts)
                .await
                .map_err(fail)?,
            Plan::Invoke => target
                .run(RunRequest::Input(input(value)?), opts)
                .await
                .map_err(fail)?,
        },
    })
}

/// stopped; any other run starts from its input.
enum Plan<S> {
    /// Start from the run's input.
    Invoke,
    /// The run had started: continue its pending work.
    Resume,
    /// The run had already finished before its worker died: this is its state.
    Finished(S, Vec<Interrupt>),
}

async fn plan<S: State>(
    graph: &Graph<S>,
    opts: &RunOptions,
    run: &HostedRun,
) -> Result<Plan<S>, HostedError> {
    let snapshot = graph.get_state(opts).await.map_err(|e| {
        HostedError::new(
            "checkpoint",
            clip(format!(
                "could not read the thread's checkpoint to resume: {e}"
            )),
        )
    })?;
    let Some(snapshot) = snapshot else {
        return Ok(Plan::Invoke);
    };
    let mine = snapshot
        .checkpoint
        .metadata
        .get(RUN_ID_METADATA_KEY)
        .and_then(Value::as_str)
        == Some(run.run_id.as_str());
    if !mine {
        return Ok(Plan::Invoke);
    }
    if snapshot.next.is_empty() {
        Ok(Plan::Finished(snapshot.values, Vec::new()))
    } else if !snapshot.interrupts.is_empty() {
        Ok(Plan::Finished(snapshot.values, snapshot.interrupts))
    } else {
        Ok(Plan::Resume)
    }
}

fn options(run: &HostedRun) -> RunOptions {
    let opts = RunOptions::new()
        .thread_id(run.thread_id.clone())
        .checkpointer(run.checkpointer.clone())
        .metadata(RUN_ID_METADATA_KEY, run.run_id.clone());
    match &run.events {
        Some(sink) => opts.events(sink.clone()),
        None => opts,
    }
}

fn output<S: serde::Serialize>(
    state: &S,
    result: Option<String>,
    interrupts: Vec<Interrupt>,
) -> Result<HostedOutput, HostedError> {
    let values = serde_json::to_value(state).map_err(|e| {
        HostedError::new(
            "serialization",
            format!("the run finished but its state could not be written as JSON: {e}"),
        )
    })?;
    Ok(HostedOutput {
        values,
        result,
        interrupts,
    })
}

fn agent_output(outcome: Outcome<AgentState>) -> Result<HostedOutput, HostedError> {
    match outcome {
        Outcome::Done(state) => {
            let text = state.final_text();
            output(&state, Some(text), Vec::new())
        }
        Outcome::Interrupted(i) => output(&i.state, None, i.interrupts),
    }
}

#[crate::async_trait]
impl Hosted for Agent {
    fn check_input(&self, input: &Value) -> Result<(), String> {
        AgentInput::try_from(input.clone())
            .map(|_| ())
            .map_err(|e| match e {
                crate::AgentError::Build(m) => m,
                other => other.to_string(),
            })
    }

    async fn run(&self, run: HostedRun) -> Result<HostedOutput, HostedError> {
        let fail = |e: crate::AgentError| HostedError::new(e.kind(), clip(e.to_string()));
        let input = |value: &Value| {
            AgentInput::try_from(value.clone())
                .map_err(|e| HostedError::new("invalid_input", clip(e.to_string())))
        };
        let outcome = execute(self, self.graph(), &run, input, fail).await?;
        agent_output(outcome)
    }
}

#[crate::async_trait]
impl<S: State> Hosted for Graph<S> {
    fn check_input(&self, input: &Value) -> Result<(), String> {
        serde_json::from_value::<S::Update>(input.clone())
            .map(|_| ())
            .map_err(|e| {
                format!(
                    "the input is not a valid update of graph `{}`: {e}",
                    self.name()
                )
            })
    }

    async fn run(&self, run: HostedRun) -> Result<HostedOutput, HostedError> {
        let fail = |e: crate::GraphError| HostedError::new(e.kind(), clip(e.to_string()));
        let input = |value: &Value| {
            serde_json::from_value::<S::Update>(value.clone()).map_err(|e| {
                HostedError::new(
                    "invalid_input",
                    format!("the input is not a valid update: {e}"),
                )
            })
        };
        let outcome = execute(self, self, &run, input, fail).await?;
        match outcome {
            Outcome::Done(state) => output(&state, None, Vec::new()),
            Outcome::Interrupted(i) => output(&i.state, None, i.interrupts),
        }
    }
}
