// Providers accept tool names of letters, digits, `_` and `-` only.
/// Gets the weather.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
#[tool(name = "get weather")]
struct GetWeather {
    /// The city.
    city: String,
}

fn main() {}
