// A response format is a type with a JSON Schema (schemars::JsonSchema) that deserializes.
#[derive(serde::Deserialize)]
struct Report {
    title: String,
}

#[kit::agent(model = "openai:gpt-4o-mini", response_format = Report)]
struct Writer;

fn main() {}
