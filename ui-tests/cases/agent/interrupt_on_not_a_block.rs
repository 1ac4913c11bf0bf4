// interrupt_on takes a block: `interrupt_on< tool = true, .. >`.
#[kit::agent(model = "openai:gpt-4o-mini", interrupt_on = ["refund"])]
struct Refunder;

fn main() {}
