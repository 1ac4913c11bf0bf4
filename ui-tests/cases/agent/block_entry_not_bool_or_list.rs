// A block entry takes `true`, `false` or a list after `=`; other values go in `name(key = ..)`.
#[kit::agent(model = "openai:gpt-4o-mini", interrupt_on< refund = "yes" >)]
struct Refunder;

fn main() {}
