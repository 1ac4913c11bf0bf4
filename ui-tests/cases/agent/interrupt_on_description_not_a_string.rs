// A review entry's description is the text shown to the reviewer: a string.
#[kit::agent(model = "openai:gpt-4o-mini", interrupt_on< refund(description = 5) >)]
struct Refunder;

fn main() {}
