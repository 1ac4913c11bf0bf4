//! A compiled graph run as a node of another graph, even over another state type.
//!
//! The parent's state is mapped to the child's input, the child runs to its end, and its final
//! state is mapped back to an update of the parent. The child runs as a subgraph of the
//! parent's run, as LangGraph's do:
//!
//! - its checkpoints live in the parent's checkpointer, under the parent's thread, in their own
//!   namespace `<node>:<task id>` (nested: `outer:..|inner:..`);
//! - an interrupt inside it pauses the parent and reaches the parent's caller (its
//!   `namespace` says where); `resume` goes back into the child, which continues from its own
//!   checkpoint: its finished nodes do not run again;
//! - its events stream through the parent's stream, with the subgraph's namespace;
//! - its state can be read with the child graph's `get_state` and
//!   [`RunOptions::checkpoint_ns`](crate::RunOptions::checkpoint_ns) (the namespace of a
//!   paused task is on its interrupts).
//!
//! ```
//! use std::sync::Arc;
//!
//! use kit::graph::{GraphBuilder, NodeContext};
//! use kit::{END, START, State};
//!
//! #[derive(State, Clone, Default, serde::Serialize, serde::Deserialize)]
//! struct Essay {
//!     topic: String,
//!     text: String,
//! }
//!
//! #[derive(State, Clone, Default, serde::Serialize, serde::Deserialize)]
//! struct Research {
//!     question: String,
//!     #[state(reducer = kit::reducers::append)]
//!     notes: Vec<String>,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::GraphError> {
//! let research = GraphBuilder::<Research>::new("research")
//!     .sync_node("search", |r: &Research, _: &NodeContext| {
//!         ResearchUpdate::new().notes(vec![format!("facts about {}", r.question)])
//!     })
//!     .edge(START, "search")
//!     .edge("search", END)
//!     .compile()?;
//! let essay = GraphBuilder::<Essay>::new("essay")
//!     .subgraph(
//!         "research",
//!         research,
//!         |e: &Essay| ResearchUpdate::new().question(e.topic.clone()),
//!         |r: &Research| EssayUpdate::new().text(r.notes.join("; ")),
//!     )
//!     .edge(START, "research")
//!     .edge("research", END)
//!     .compile()?;
//! let out = essay.invoke(EssayUpdate::new().topic("otters")).await?;
//! assert_eq!(out.state().text, "facts about otters");
//! # Ok(()) }
//! ```

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Graph, NodeContext, NodeError, NodeOutput, Outcome, Pause, Resume};
use crate::state::State;

/// The node that runs `graph` as a subgraph: `input` maps the parent's state to the child's
/// input, `output` maps the child's final state to the parent's update. Give it to
/// [`GraphBuilder::node`](super::GraphBuilder::node), or write
/// `node research = kit::graph::subgraph(..);` in `graph!`;
/// [`GraphBuilder::subgraph`](super::GraphBuilder::subgraph) does both at once.
pub fn subgraph<P, C, I, O>(
    graph: Graph<C>,
    input: I,
    output: O,
) -> impl Fn(Arc<P>, NodeContext) -> BoxFuture<'static, Result<NodeOutput<P>, NodeError>>
+ Send
+ Sync
+ 'static
where
    P: State,
    C: State,
    I: Fn(&P) -> C::Update + Send + Sync + 'static,
    O: Fn(&C) -> P::Update + Send + Sync + 'static,
{
    let shared = Arc::new((graph, input, output));
    move |state: Arc<P>, ctx: NodeContext| {
        let shared = shared.clone();
        Box::pin(async move {
            let (graph, input, output) = &*shared;
            // Stable across a resume of the same task: the child finds its checkpoints again.
            let segment = format!("{}:{}", ctx.node(), ctx.task_id());
            let opts = ctx.child_options(&segment, None);
            let persistent = opts.thread_id.is_some() && opts.checkpointer.is_some();
            let outcome = match ctx.child_resume() {
                Some(resume) => graph.resume(resume).options(&opts).await,
                None => {
                    // A child that already has checkpoints here (the parent stopped after the
                    // child ran, and runs the task again) continues; it does not start over.
                    let existing =
                        persistent && matches!(graph.get_state(&opts).await, Ok(Some(_)));
                    if existing {
                        graph.resume(Resume::Continue).options(&opts).await
                    } else {
                        graph.invoke(input(&state)).options(&opts).await
                    }
                }
            };
            match outcome {
                Ok(Outcome::Done(child)) => Ok(NodeOutput::update(output(&child))),
                Ok(Outcome::Interrupted(paused)) => Err(Pause::new(paused.interrupts).into()),
                Err(e) => Err(NodeError::from_boxed(Box::new(e))),
            }
        })
    }
}
