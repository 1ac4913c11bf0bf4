// filesystem(..) takes the directory; the bare word `filesystem` keeps files in the state.
#[kit::agent(model = "openai:gpt-4o-mini", filesystem())]
struct Helper;

fn main() {}
