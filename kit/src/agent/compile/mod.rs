//! Compiling an agent to a graph: one node per middleware hook, the model node, the tools
//! node, and the routing between them.

mod dangling;
mod hooks;
mod model;
mod tools;

use std::sync::Arc;

use crate::agent::middleware::{Hook, Middleware};
use crate::agent::{AgentError, AgentState};
use crate::graph::{END, Graph, GraphBuilder, NodeContext, NodeError, START};
use crate::model::{ChatModel, ModelOptions};
use crate::state::DynSchema;
use crate::tool::Tool;

use hooks::{HookNode, Next};
use model::model_node;
use tools::tools_node;

/// An agent error as a node error: the interrupt signal of [`Runtime::interrupt`] pauses the
/// run; everything else fails the node (and reaches the caller unchanged).
pub(super) fn node_error(e: AgentError) -> NodeError {
    match e {
        AgentError::Interrupted(pause) => pause.into(),
        other => other.into(),
    }
}

/// Everything the agent's nodes share.
pub(crate) struct AgentCore {
    pub(crate) name: Arc<str>,
    pub(crate) model: Arc<dyn ChatModel>,
    pub(crate) tools: Vec<Tool>,
    pub(crate) tool_index: crate::hash::FastMap<String, usize>,
    pub(crate) middleware: Vec<Arc<dyn Middleware>>,
    pub(crate) system_prompt: Option<String>,
    pub(crate) model_opts: ModelOptions,
    /// The tools the model sees (the format tool of a tool-strategy structured output too),
    /// built once.
    pub(crate) tool_specs: Arc<[crate::model::ToolSpec]>,
    /// The structured answer asked for, with the strategy this model gets.
    pub(crate) structured: Option<(
        crate::agent::StructuredOutput,
        crate::agent::StructuredStrategy,
    )>,
    pub(crate) recursion_limit: Option<usize>,
    /// The most tool calls run from one answer (see
    /// [`AgentBuilder::max_calls_per_answer`](crate::agent::AgentBuilder::max_calls_per_answer)).
    pub(crate) max_calls_per_answer: usize,
    /// The tracer a configuration set in code asks for (its trace endpoint and key), used
    /// where a run names none.
    pub(crate) tracer: Option<crate::trace::Tracer>,
}

/// [`AgentCore::max_calls_per_answer`] unless the builder sets it.
pub(crate) const DEFAULT_MAX_CALLS_PER_ANSWER: usize = 1000;

/// The node names of the loop, resolved once.
pub(super) struct Layout {
    pub(super) loop_start: String,
    pub(super) exit_start: String,
    pub(super) before_agent: Vec<(usize, String)>,
    pub(super) before_model: Vec<(usize, String)>,
    pub(super) after_model: Vec<(usize, String)>,
    pub(super) after_agent: Vec<(usize, String)>,
}

fn hook_nodes(mws: &[Arc<dyn Middleware>], hook: Hook, reverse: bool) -> Vec<(usize, String)> {
    let mut nodes: Vec<(usize, String)> = mws
        .iter()
        .enumerate()
        .filter(|(_, m)| m.hooks().contains(&hook))
        .map(|(i, m)| (i, format!("{}.{}", m.name(), hook.as_str())))
        .collect();
    if reverse {
        nodes.reverse();
    }
    nodes
}

pub(crate) fn build_graph(
    core: Arc<AgentCore>,
    schema: DynSchema,
    checkpointer: Option<Arc<dyn crate::checkpoint::Checkpointer>>,
    store: Option<Arc<dyn crate::store::Store>>,
) -> Result<Graph<AgentState>, AgentError> {
    let mws = &core.middleware;
    let before_agent = hook_nodes(mws, Hook::BeforeAgent, false);
    let before_model = hook_nodes(mws, Hook::BeforeModel, false);
    let after_model = hook_nodes(mws, Hook::AfterModel, true);
    let after_agent = hook_nodes(mws, Hook::AfterAgent, true);
    let layout = Arc::new(Layout {
        loop_start: before_model
            .first()
            .map(|(_, n)| n.clone())
            .unwrap_or_else(|| "model".to_string()),
        exit_start: after_agent
            .first()
            .map(|(_, n)| n.clone())
            .unwrap_or_else(|| END.to_string()),
        before_agent,
        before_model,
        after_model,
        after_agent,
    });

    let mut g = GraphBuilder::<AgentState>::new(core.name.to_string())
        .schema(schema)
        .error_kind(super::error_kind);
    if let Some(cp) = checkpointer {
        g = g.checkpointer(cp);
    }
    if let Some(store) = store {
        g = g.store(store);
    }
    let entry = layout
        .before_agent
        .first()
        .map(|(_, n)| n.clone())
        .unwrap_or_else(|| layout.loop_start.clone());
    g = g.edge(START, entry);

    // Hook chains: each hook routes itself (next hook, or its jump target).
    let chains: [(Hook, &Vec<(usize, String)>); 4] = [
        (Hook::BeforeAgent, &layout.before_agent),
        (Hook::BeforeModel, &layout.before_model),
        (Hook::AfterModel, &layout.after_model),
        (Hook::AfterAgent, &layout.after_agent),
    ];
    for (hook, chain) in chains {
        for (pos, (mw_index, name)) in chain.iter().enumerate() {
            let next = match chain.get(pos + 1) {
                Some((_, n)) => Next::Node(n.clone()),
                None => match hook {
                    Hook::BeforeAgent => Next::Node(layout.loop_start.clone()),
                    Hook::BeforeModel => Next::Node("model".to_string()),
                    Hook::AfterModel => Next::AfterModelRoute,
                    Hook::AfterAgent => Next::Node(END.to_string()),
                },
            };
            let node = HookNode {
                core: core.clone(),
                layout: layout.clone(),
                mw: *mw_index,
                hook,
                next,
                name: Arc::from(name.as_str()),
            };
            let node = Arc::new(node);
            g = g.node(
                name.clone(),
                move |state: Arc<AgentState>, ctx: NodeContext| {
                    let node = node.clone();
                    async move { node.run(state, ctx).await }
                },
            );
            g = g.destinations(name.clone(), destinations(&layout));
        }
    }

    let model_core = core.clone();
    let model_layout = layout.clone();
    g = g
        .node("model", move |state: Arc<AgentState>, ctx: NodeContext| {
            let core = model_core.clone();
            let layout = model_layout.clone();
            async move { model_node(core, layout, state, ctx).await }
        })
        .destinations("model", destinations(&layout));

    let tools_core = core.clone();
    g = g
        .node("tools", move |state: Arc<AgentState>, ctx: NodeContext| {
            let core = tools_core.clone();
            async move { tools_node(core, state, ctx).await }
        })
        .edge("tools", layout.loop_start.clone());

    g.compile()
        .map_err(|e| AgentError::Build(format!("the agent's graph is invalid: {e}")))
}

/// Every node an agent node may route to.
fn destinations(layout: &Layout) -> Vec<String> {
    let mut all: Vec<String> = layout
        .before_agent
        .iter()
        .chain(&layout.before_model)
        .chain(&layout.after_model)
        .chain(&layout.after_agent)
        .map(|(_, n)| n.clone())
        .collect();
    all.extend(["model".to_string(), "tools".to_string(), END.to_string()]);
    all
}
