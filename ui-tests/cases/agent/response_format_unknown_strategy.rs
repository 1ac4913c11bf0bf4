// The structured-output strategies are auto, provider and tool.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Report {
    title: String,
}

#[kit::agent(model = "openai:gpt-4o-mini", response_format(Report, strategy = native))]
struct Writer;

fn main() {}
