// One mistake is one error: after a #[derive(Tool)] error, `T::tool()` and `T::NAME` still
// resolve.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
#[tool(name = "")]
/// Adds.
struct Add {
    a: i64,
}

fn main() {
    let _ = Add::tool();
    let _: &str = Add::NAME;
}
