// Borrowed data cannot be deserialized from the model's JSON arguments, also inside a generic
// type; the error points at the offending type.
/// Greets someone.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
struct Greet {
    /// Who to greet.
    name: &'static str,
    /// Nicknames to try.
    nicknames: Vec<&'static str>,
    /// How many times.
    times: u32,
}

fn main() {}
