// #[arg(..)] describes what the model sends; kit's injected parameters take none.
use kit::tool::{ToolContext, ToolError};

/// Tells the call id.
#[kit::tool]
async fn whoami(#[arg(description = "the context")] ctx: ToolContext) -> Result<String, ToolError> {
    Ok(ctx.call_id().to_string())
}

fn main() {}
