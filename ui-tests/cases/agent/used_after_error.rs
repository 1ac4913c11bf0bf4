// One mistake is one error: after an #[agent] error, its generated methods still resolve
// (with the typed outcome of its response format).
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Report {
    title: String,
}

#[kit::agent(model = "openai:gpt-4o-mini", response_format = Report, sytem_prompt = "hi")]
struct Writer;

async fn run() {
    let _: &str = Writer::NAME;
    let _ = Writer::build();
    if let Ok(kit::agent::TypedOutcome::Done { output, .. }) = Writer::invoke("hi").thread_id("t").await {
        let _: String = output.title;
    }
    let _ = Writer::resume_review(kit::middleware::review::Decision::approve()).await;
    let _ = Writer::stream_events("hi", &kit::RunOptions::new());
}

fn main() {
    let _ = run();
}
