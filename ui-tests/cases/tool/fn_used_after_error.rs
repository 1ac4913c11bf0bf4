// One mistake is one error: after a #[tool] error, the function, its tool value and the
// agents that take it still resolve.
/// Adds two numbers.
#[kit::tool(max_result_chars = 0)]
async fn add(a: i64, b: i64) -> Result<i64, kit::tool::ToolError> {
    Ok(a + b)
}

#[kit::agent(model = "openai:gpt-4o-mini", tools = [Add], interrupt_on< add = true >)]
struct Calculator;

fn main() {
    let _ = add(1, 2);
    let _: &str = Add::NAME;
    let _ = Add::tool();
    let _ = Calculator::invoke("1 + 2");
}
