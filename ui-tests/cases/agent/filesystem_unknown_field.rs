// filesystem(..) takes `dir = ".."` (a real directory); the bare word keeps files in the state.
#[kit::agent(model = "openai:gpt-4o-mini", filesystem(root = "./ws"))]
struct Helper;

fn main() {}
