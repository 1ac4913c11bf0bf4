// The allowed decisions are the words approve, edit, reject and respond, not strings.
#[kit::agent(model = "openai:gpt-4o-mini", interrupt_on< refund(allowed = [approve, "reject"]) >)]
struct Refunder;

fn main() {}
