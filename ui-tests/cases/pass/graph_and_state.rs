// Every syntax the docs show compiles.
use std::sync::Arc;

use kit::graph::{NodeContext, Route};
use kit::State;

#[derive(State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Ticket {
    kind: String,
    urgent: bool,
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
    #[state(reducer = kit::reducers::merge_or_remove, update = std::collections::BTreeMap<String, Option<i64>>)]
    scores: std::collections::BTreeMap<String, i64>,
    #[state(dynamic)]
    extra: kit::state::DynState,
}

async fn classify(_t: &Ticket, _ctx: &NodeContext) -> TicketUpdate {
    TicketUpdate::new().kind("refund")
}
async fn refund(_t: &Ticket, _ctx: &NodeContext) -> TicketUpdate {
    TicketUpdate::new().log(vec!["refund".into()])
}
async fn escalate(_t: &Ticket, _ctx: &NodeContext) -> Result<TicketUpdate, kit::graph::NodeError> {
    Ok(TicketUpdate::new())
}
async fn summary(_t: &Ticket, _ctx: &NodeContext) {}
fn pick(t: &Ticket) -> Route {
    if t.urgent { Route::to("review") } else { Route::end() }
}

fn main() {
    let _graph: kit::Graph<Ticket> = kit::graph! {
        name: "support";
        state: Ticket;
        interrupt_before: [refund];
        node classify;
        node refund;
        node escalate;
        node summary;
        node review = |_s: Arc<Ticket>, _ctx: NodeContext| async move { TicketUpdate::new() };
        edge START -> classify;
        edge classify -> refund when kind == "refund";
        edge classify -> escalate when { kind: "other", urgent: true };
        edge [refund, escalate] -> summary;
        route summary -> [review, END] by pick;
        edge review -> END;
    };
}
