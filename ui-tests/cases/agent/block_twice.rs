// A block is given once: merge the entries into one.
#[kit::agent(model = "openai:gpt-4o-mini", pii< email >, pii< url >)]
struct Helper;

fn main() {}
