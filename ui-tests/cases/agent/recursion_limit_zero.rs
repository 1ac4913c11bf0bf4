// A run needs at least one superstep.
#[kit::agent(model = "openai:gpt-4o-mini", recursion_limit = 0)]
struct Helper;

fn main() {}
