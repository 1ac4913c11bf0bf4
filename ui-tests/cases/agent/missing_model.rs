// An agent without a model cannot run: the error points at the struct.
#[kit::agent(system_prompt = "hi")]
struct Helper;

fn main() {}
