// The decisions are approve, edit, reject and respond.
#[kit::agent(model = "openai:gpt-4o-mini", interrupt_on< refund = [approve, rejct] >)]
struct Refunder;

fn main() {}
