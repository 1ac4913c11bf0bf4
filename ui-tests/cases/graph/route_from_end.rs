// END is only a target: nothing runs after it, so a route cannot start there.
use kit::graph::{NodeContext, Route};

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn a(_s: &S, _c: &NodeContext) {}
fn pick(_s: &S) -> Route {
    Route::to("a")
}

fn main() {
    let _ = kit::graph! {
        state: S;
        node a;
        edge START -> a;
        edge a -> END;
        route END -> [a] by pick;
    };
}
