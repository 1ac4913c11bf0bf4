// A tool is reviewed once: its entry says everything about its review.
#[kit::agent(model = "openai:gpt-4o-mini", interrupt_on< refund = true, refund = [approve] >)]
struct Refunder;

fn main() {}
