// A route lists the nodes its function may return: `route a -> [b, END] by pick;`.
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
        route a -> [] by pick;
    };
}
