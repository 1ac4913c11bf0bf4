// Deriving Tool gives the schema; the body comes from `ToolHandler`.
/// Adds two integers.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
struct Add {
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
}

fn main() {
    let _ = Add::tool();
}
