// A #[tool] function returns Result<T, E>: an Err is what the model sees when it fails.
/// Says hello.
#[kit::tool]
async fn hello(name: String) -> String {
    format!("hello {name}")
}

fn main() {}
