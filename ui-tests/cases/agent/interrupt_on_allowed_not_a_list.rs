// `allowed` lists the decisions in brackets, even a single one: `allowed = [approve]`.
#[kit::agent(model = "openai:gpt-4o-mini", interrupt_on< refund(allowed = approve) >)]
struct Refunder;

fn main() {}
