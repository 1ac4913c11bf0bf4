// response_format(..) takes the type, then `strategy` and `max_retries`; others are errors.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Report {
    title: String,
}

#[kit::agent(model = "openai:gpt-4o-mini", response_format(Report, max_tries = 3))]
struct Writer;

fn main() {}
