// START is only a source: a route cannot lead back to it (route to the first node instead).
use kit::graph::{NodeContext, Route};

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn a(_s: &S, _c: &NodeContext) {}
fn pick(_s: &S) -> Route {
    Route::end()
}

fn main() {
    let _ = kit::graph! {
        state: S;
        node a;
        edge START -> a;
        route a -> [START, END] by pick;
    };
}
