// A PII type is found by a regex or by a detector function, not both.
fn find(_: &str) -> Vec<kit::middleware::pii::PiiMatch> {
    Vec::new()
}

#[kit::agent(model = "openai:gpt-4o-mini", pii< badge(regex = "B-\\d+", detector = find) >)]
struct Helper;

fn main() {}
