// A tool's arguments are a JSON object: an enum cannot be the argument type.
/// Picks a colour.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
enum Pick {
    Red,
    Green,
}

fn main() {}
