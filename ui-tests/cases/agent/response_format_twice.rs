// An agent answers in one format: `response_format` twice is an error at the second.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Report {
    title: String,
}

#[kit::agent(model = "openai:gpt-4o-mini", response_format = Report, response_format = Report)]
struct Writer;

fn main() {}
