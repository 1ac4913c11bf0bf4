// Raw identifiers name what they stand for: the tool `r#move` is `move` (its type `Move`), the
// node `r#type` is `type`, reached by a route returning "type".
use std::sync::Arc;

use kit::graph::{NodeContext, Route};
use kit::State;
use kit::tool::ToolError;

/// Moves a piece.
#[kit::tool]
async fn r#move(to: String) -> Result<String, ToolError> {
    Ok(to)
}

#[derive(State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    #[state(reducer = kit::reducers::append)]
    seen: Vec<String>,
}

async fn r#type(_s: &S, _ctx: &NodeContext) -> SUpdate {
    SUpdate::new().seen(vec!["type".into()])
}

fn pick(_s: &S) -> Route {
    Route::to("type")
}

fn main() {
    assert_eq!(Move::NAME, "move");
    assert_eq!(Move::tool().name(), "move");
    let graph: kit::Graph<S> = kit::graph! {
        state: S;
        node start = |_s: Arc<S>, _ctx: NodeContext| async move { SUpdate::new() };
        node r#type;
        edge START -> start;
        route start -> [r#type] by pick;
        edge r#type -> END;
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let out = runtime
        .block_on(async { graph.invoke(SUpdate::new()).await })
        .unwrap();
    assert_eq!(out.state().seen, ["type"]);
}
