// A state is a struct of named fields (channels).
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
enum S {
    #[default]
    A,
}

fn main() {}
