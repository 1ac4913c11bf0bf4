// An #[agent] struct names one agent: it cannot be generic.
#[kit::agent(model = "openai:gpt-4o-mini")]
struct Helper<T>(std::marker::PhantomData<T>);

fn main() {}
