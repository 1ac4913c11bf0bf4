// `tools` takes a list of tools.
fn search() -> kit::Tool {
    unimplemented!()
}

#[kit::agent(model = "openai:gpt-4o-mini", tools = search())]
struct Helper;

fn main() {}
