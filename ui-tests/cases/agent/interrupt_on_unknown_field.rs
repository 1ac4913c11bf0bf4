// A review entry's fields are allowed and description.
#[kit::agent(model = "openai:gpt-4o-mini", interrupt_on< refund(alowed = [approve]) >)]
struct Refunder;

fn main() {}
