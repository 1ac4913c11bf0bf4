// model_opts(..) sets temperature, max_tokens, timeout_ms and retries.
#[kit::agent(model = "openai:gpt-4o-mini", model_opts(temprature = 0.2))]
struct Helper;

fn main() {}
