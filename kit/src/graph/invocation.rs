//! A run waiting to start: `graph.invoke(input).thread_id("t1").await`.
//!
//! `invoke` and `resume` (on graphs and agents) return an [`Invocation`]: a request builder in
//! reqwest's style. Set per-run options on it, then `.await` it for the outcome, or call
//! [`stream`](Invocation::stream) for its events. [`options`](Invocation::options) takes a
//! whole [`RunOptions`] at once.

use std::future::IntoFuture;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::{Durability, Resume, RunOptions};
use crate::checkpoint::Checkpointer;
use crate::event::EventStream;
use crate::trace::{TraceOptions, Tracer};

/// What a run starts from: new input, or a resume of a paused (or failed) thread.
#[derive(Debug)]
pub enum RunRequest<I> {
    /// Input applied on top of the thread's state.
    Input(I),
    /// An answer to the thread's interrupts (or [`Resume::Continue`]).
    Resume(Resume),
    /// An answer to the thread's interrupts with an update applied first (LangGraph's
    /// `Command(resume=..., update=...)`).
    Command {
        /// The answer.
        resume: Resume,
        /// Applied to the state before the resumed step runs.
        update: I,
    },
}

/// Something that runs: a graph or an agent. The seam between [`Invocation`] and what it
/// invokes; you use it through `invoke` and `resume`.
pub trait Runnable: Sync {
    /// The input of a new run.
    type Input: Send + 'static;
    /// What a run ends with.
    type Output: Send + 'static;
    /// What a failed run ends with.
    type Error: Send + 'static;

    /// Runs to the end (or a pause).
    fn run(
        &self,
        request: RunRequest<Self::Input>,
        opts: RunOptions,
    ) -> BoxFuture<'_, Result<Self::Output, Self::Error>>;

    /// Runs and streams the run's events.
    fn run_streamed(&self, request: RunRequest<Self::Input>, opts: RunOptions) -> EventStream;
}

/// A run of a graph or an agent, waiting to start: set its options, then `.await` it.
///
/// ```
/// use kit::testing::ScriptedModel;
/// use kit::{Agent, MemoryCheckpointer, Message};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::AgentError> {
/// let model = ScriptedModel::new([Message::assistant("Hello!"), Message::assistant("Again!")]);
/// let agent = Agent::builder()
///     .model(model)
///     .checkpointer(Arc::new(MemoryCheckpointer::new()))
///     .build()?;
/// agent.invoke("Hi").thread_id("t1").await?;
/// let out = agent.invoke("Hi again").thread_id("t1").recursion_limit(20).await?;
/// assert_eq!(out.state().messages.len(), 4);
/// # Ok(()) }
/// ```
#[must_use = "a run does nothing until it is awaited or streamed"]
pub struct Invocation<'a, R: Runnable + ?Sized, O = <R as Runnable>::Output> {
    /// What runs; an error when it could not be had (a declared agent that failed to build).
    target: Result<&'a R, R::Error>,
    request: RunRequest<R::Input>,
    opts: RunOptions,
    /// Turns the run's output into what the caller asked for (a typed structured answer).
    finish: fn(R::Output) -> Result<O, R::Error>,
}

impl<'a, R: Runnable + ?Sized> Invocation<'a, R> {
    pub(crate) fn new(target: &'a R, request: RunRequest<R::Input>) -> Self {
        Invocation {
            target: Ok(target),
            request,
            opts: RunOptions::new(),
            finish: Ok,
        }
    }
}

impl<'a, R: Runnable + ?Sized, O> Invocation<'a, R, O> {
    /// A run of `target` whose output `finish` turns into `O`; when `target` is an error the
    /// run fails with it. What `#[agent]` generates uses it.
    #[doc(hidden)]
    pub fn declared(
        target: Result<&'a R, R::Error>,
        request: RunRequest<R::Input>,
        finish: fn(R::Output) -> Result<O, R::Error>,
    ) -> Self {
        Invocation {
            target,
            request,
            opts: RunOptions::new(),
            finish,
        }
    }

    /// Uses these options (replacing any set before).
    pub fn options(mut self, opts: &RunOptions) -> Self {
        self.opts = opts.clone();
        self
    }

    /// The conversation thread; with a checkpointer, state persists under it.
    #[doc(alias = "thread")]
    pub fn thread_id(mut self, thread_id: impl Into<String>) -> Self {
        self.opts = self.opts.thread_id(thread_id);
        self
    }

    /// Starts from an earlier checkpoint (forks the thread).
    pub fn checkpoint_id(mut self, checkpoint_id: impl Into<String>) -> Self {
        self.opts = self.opts.checkpoint_id(checkpoint_id);
        self
    }

    /// Uses this checkpointer for the run.
    pub fn checkpointer(mut self, checkpointer: Arc<dyn Checkpointer>) -> Self {
        self.opts = self.opts.checkpointer(checkpointer);
        self
    }

    /// Uses this long-term store for the run (see [`RunOptions::store`]).
    pub fn store(mut self, store: impl crate::store::IntoStore) -> Self {
        self.opts = self.opts.store(store);
        self
    }

    /// The most supersteps the run may take.
    pub fn recursion_limit(mut self, limit: usize) -> Self {
        self.opts = self.opts.recursion_limit(limit);
        self
    }

    /// Cancels the run when `token` is cancelled (see [`CancelToken`](super::CancelToken)).
    pub fn cancel_token(mut self, token: super::CancelToken) -> Self {
        self.opts = self.opts.cancel_token(token);
        self
    }

    /// When checkpoints are written.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.opts = self.opts.durability(durability);
        self
    }

    /// Adds a metadata entry (stored with checkpoints and traces).
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.opts = self.opts.metadata(key, value);
        self
    }

    /// Trace options (name, user, session, tags).
    pub fn trace(mut self, trace: TraceOptions) -> Self {
        self.opts = self.opts.trace(trace);
        self
    }

    /// Records this run with `tracer` instead of the global one.
    pub fn tracer(mut self, tracer: Tracer) -> Self {
        self.opts = self.opts.tracer(tracer);
        self
    }

    /// What the run does when another run is on its thread (see
    /// [`RunOptions::multitask_strategy`]).
    pub fn multitask_strategy(mut self, strategy: crate::checkpoint::MultitaskStrategy) -> Self {
        self.opts = self.opts.multitask_strategy(strategy);
        self
    }

    /// Starts the run and streams its events instead of waiting for its outcome. The stream
    /// ends after `run_end` (or `error`); dropping it cancels the run.
    pub fn stream(self) -> EventStream
    where
        R::Error: std::fmt::Display,
    {
        match self.target {
            Ok(target) => target.run_streamed(self.request, self.opts),
            Err(e) => {
                let event = crate::event::Event::error("agent", e.to_string(), "build");
                Box::pin(futures::stream::once(async move { event }))
            }
        }
    }
}

impl<'a, R, O> IntoFuture for Invocation<'a, R, O>
where
    R: Runnable + ?Sized,
    O: Send + 'a,
{
    type Output = Result<O, R::Error>;
    type IntoFuture = BoxFuture<'a, Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        let Invocation {
            target,
            request,
            opts,
            finish,
        } = self;
        match target {
            Ok(target) => {
                let run = target.run(request, opts);
                Box::pin(async move { finish(run.await?) })
            }
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }
}
