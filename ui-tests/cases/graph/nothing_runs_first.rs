// Without an edge (or a route) from START, nothing would run: an error at the graph.
use kit::graph::{NodeContext, Route};

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn draft(_s: &S, _c: &NodeContext) {}
fn again(s: &S) -> Route {
    if s.n < 3 { Route::to("draft") } else { Route::end() }
}

fn main() {
    let _ = kit::graph! {
        state: S;
        node draft;
        route draft -> [draft, END] by again;
    };
}
