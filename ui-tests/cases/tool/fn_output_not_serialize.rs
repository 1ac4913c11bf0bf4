// What a tool returns is serialized for the model: it must implement Serialize.
struct Opaque;

/// Makes something opaque.
#[kit::tool]
async fn make() -> Result<Opaque, kit::tool::ToolError> {
    Ok(Opaque)
}

fn main() {}
