// A reviewed tool allows at least one decision; `= false` turns its review off instead.
#[kit::agent(model = "openai:gpt-4o-mini", interrupt_on< refund = [] >)]
struct Refunder;

fn main() {}
