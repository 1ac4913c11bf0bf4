// #[tool] goes on an async function; an argument struct takes #[derive(Tool)].
/// Adds.
#[kit::tool]
struct Add {
    a: i64,
}

fn main() {}
