// Every macro works when kit is renamed: `crate = path` tells it where the runtime lives, and
// nothing it generates names `::kit`.
extern crate kit as runtime;

mod kit {}

#[derive(runtime::State, Clone, Default, serde::Serialize, serde::Deserialize)]
#[state(crate = runtime)]
struct S {
    #[state(reducer = runtime::reducers::append)]
    log: Vec<String>,
}

/// Adds two numbers.
#[derive(runtime::Tool, serde::Deserialize, schemars::JsonSchema)]
#[tool(crate = runtime)]
struct Add {
    a: i64,
    b: i64,
}

impl runtime::tool::ToolHandler for Add {
    type Output = i64;
    async fn run(self, _ctx: runtime::tool::ToolContext) -> Result<i64, runtime::tool::ToolError> {
        Ok(self.a + self.b)
    }
}

/// Looks up an order.
#[runtime::tool(crate = runtime)]
async fn lookup(id: String) -> Result<String, runtime::tool::ToolError> {
    Ok(id)
}

async fn note(_: &S, _: &runtime::NodeContext) -> SUpdate {
    SUpdate::new().log(vec!["hi".to_string()])
}

#[runtime::agent(
    crate = runtime,
    model = "openai:gpt-4o-mini",
    tools = [Add::tool(), Lookup],
    todos,
    filesystem,
    interrupt_on< lookup = true, add = false, write_todos = false >,
    pii< email >,
    checkpointer = std::sync::Arc::new(runtime::MemoryCheckpointer::new()),
)]
struct Helper;

fn main() {
    let _graph: runtime::Graph<S> = runtime::graph! {
        crate: runtime;
        state: S;
        recursion_limit: 10;
        node note;
        edge START -> note;
        edge note -> END;
    };
    let _ = Helper::build();
}
