//! An agent with two tools — a `#[kit::tool]` function and a `#[derive(kit::Tool)]` argument
//! struct — answering a question that needs both, through a real provider when you have a key.
//!
//! ```sh
//! cargo run --example tools                                   # offline: kit's scripted model
//! OPENAI_API_KEY=sk-... cargo run --example tools             # openai:gpt-4o-mini
//! ANTHROPIC_API_KEY=sk-ant-... cargo run --example tools      # anthropic:claude-haiku-4-5
//! KIT_MODEL=ollama:llama3.1 cargo run --example tools         # any provider:model
//! ```
//!
//! The first line of output says which model answered. With `KIT_TOOLS_MOCK_PROVIDER=1` a
//! local server speaking OpenAI's wire format stands in for the provider, so the real-provider
//! path (HTTP, tool schemas, tool-call parsing) runs without a key; CI runs it that way.

use std::sync::{Arc, OnceLock};

use kit::model::{self, ChatModel, ModelError, ModelOptions, ModelRequest, pricing};
use kit::testing::ScriptedModel;
use kit::tool::{ToolContext, ToolError, ToolHandler};
use kit::{Config, Message, Role, ToolCall, Usage};
use kit_testing::mock::openai::{self, MockOpenAi};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Answers weather questions with its two tools.
#[kit::agent(
    name = "forecaster",
    model = chosen_model()?,
    system_prompt = "You answer weather questions. Always use get_weather for weather and \
        calculate for arithmetic; answer in one sentence.",
    tools = [GetWeather, Calculate::tool()],
)]
struct Forecaster;

// ---------------------------------------------------------------------------------------------
// Tools

/// Temperature unit.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Unit {
    /// Degrees Celsius.
    #[default]
    Celsius,
    /// Degrees Fahrenheit.
    Fahrenheit,
}

// A `#[kit::tool]` function: its doc comment is the description the model reads, each
// parameter a property of the schema (`#[arg(default)]` makes one optional); results longer
// than 500 characters are cut.

/// Gets the current weather in a city (demo data: Paris, Oslo and Lagos).
#[kit::tool(max_result_chars = 500)]
async fn get_weather(
    /// The city, e.g. `Paris`.
    city: String,
    /// The unit of the temperature (default celsius).
    #[arg(default)]
    unit: Unit,
) -> Result<Value, ToolError> {
    let (celsius, sky) = match city.to_lowercase().as_str() {
        "paris" => (18.0, "sunny"),
        "oslo" => (4.0, "light rain"),
        "lagos" => (31.0, "humid, clouds"),
        _ => {
            return Err(ToolError::new(format!(
                "no weather data for `{city}`; this demo knows Paris, Oslo and Lagos"
            )));
        }
    };
    let temperature = match unit {
        Unit::Celsius => celsius,
        Unit::Fahrenheit => celsius * 9.0 / 5.0 + 32.0,
    };
    Ok(json!({"city": city, "temperature": temperature, "unit": unit, "sky": sky}))
}

/// An arithmetic operation.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
enum Op {
    #[serde(rename = "+")]
    Add,
    #[serde(rename = "-")]
    Subtract,
    #[serde(rename = "*")]
    Multiply,
    #[serde(rename = "/")]
    Divide,
}

// The same kind of tool as an argument struct: `#[derive(kit::Tool)]` gives the schema, a
// `ToolHandler` impl does the work; the form for arguments that are a type of their own.

/// Computes `a <op> b` exactly. Use it for any arithmetic.
#[derive(kit::Tool, Deserialize, JsonSchema)]
struct Calculate {
    /// The left operand.
    a: f64,
    /// The operation.
    op: Op,
    /// The right operand.
    b: f64,
}

impl ToolHandler for Calculate {
    type Output = Value;
    async fn run(self, _ctx: ToolContext) -> Result<Value, ToolError> {
        // The arguments were checked against the schema before this runs.
        let Calculate { a, op, b } = self;
        let result = match op {
            Op::Add => a + b,
            Op::Subtract => a - b,
            Op::Multiply => a * b,
            Op::Divide if b == 0.0 => return Err(ToolError::new("division by zero")),
            Op::Divide => a / b,
        };
        Ok(json!({ "result": result }))
    }
}

// ---------------------------------------------------------------------------------------------
// The model: a real provider when one is configured, else the scripted stand-in.

/// Where the provider is reached: the environment, or the local stand-in server (set by `run`).
static PROVIDER_CONFIG: OnceLock<Config> = OnceLock::new();

fn provider_config() -> Config {
    PROVIDER_CONFIG
        .get()
        .cloned()
        .unwrap_or_else(Config::from_env)
}

/// The configured `provider:model`: `KIT_MODEL`, else the first key set; `None` runs offline.
fn provider_spec(config: &Config) -> Option<String> {
    std::env::var("KIT_MODEL")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| {
            config
                .openai_api_key
                .as_ref()
                .map(|_| "openai:gpt-4o-mini".to_string())
        })
        .or_else(|| {
            config
                .anthropic_api_key
                .as_ref()
                .map(|_| "anthropic:claude-haiku-4-5".to_string())
        })
}

/// The model `Forecaster` runs on (evaluated when the agent is built, on first use).
fn chosen_model() -> Result<Arc<dyn ChatModel>, ModelError> {
    let config = provider_config();
    match provider_spec(&config) {
        Some(spec) => model::init(&spec, &config, ModelOptions::default().temperature(0.0)),
        None => Ok(Arc::new(scripted())),
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mock = match std::env::var_os("KIT_TOOLS_MOCK_PROVIDER") {
        Some(_) => Some(mock_provider().await?),
        None => None,
    };
    if let Some(server) = &mock {
        let _ = PROVIDER_CONFIG.set(server.config());
    }
    // Build the agent first, so a provider that cannot be set up is reported before anything.
    Forecaster::agent()?;
    let spec = provider_spec(&provider_config());
    match &spec {
        Some(spec) => println!("model: {spec} (real provider)"),
        None => println!(
            "model: scripted (offline; set OPENAI_API_KEY, ANTHROPIC_API_KEY or \
             KIT_MODEL=provider:model to use a real provider)"
        ),
    }

    let question = "What's the weather in Paris and in Oslo, and how much warmer is Paris?";
    println!("question: {question}");
    let out = Forecaster::invoke(question).await?;

    let mut usage = Usage::default();
    for m in &out.state().messages {
        for call in &m.tool_calls {
            println!("tool call: {}({})", call.name, call.args);
        }
        if m.role == Role::Tool {
            let tag = if m.is_error() { "error" } else { "result" };
            println!("  {tag}: {}", m.text());
        }
        if let Some(u) = &m.usage {
            usage.add(u);
        }
    }
    println!("answer: {}", out.state().final_text());
    if let Some(server) = &mock {
        println!(
            "mock provider at {} answered {} requests",
            server.base_url(),
            server.request_count()
        );
    }
    if usage.total_tokens() > 0 {
        let cost = spec
            .and_then(|spec| pricing::cost(&spec, &usage))
            .map(|c| format!(", about ${c:.5}"))
            .unwrap_or_default();
        println!(
            "tokens: {} in, {} out{cost}",
            usage.input_tokens, usage.output_tokens
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Offline stand-ins: a scripted model, and a local server answering as a provider would.

/// Plays a tool-calling model offline: weather for both cities in parallel, then the
/// difference with the calculator, then an answer built from the tool results it was given.
fn scripted() -> ScriptedModel {
    ScriptedModel::from_fn(|request: &ModelRequest| {
        let results: Vec<Value> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool && !m.is_error())
            .filter_map(|m| serde_json::from_str(&m.text()).ok())
            .collect();
        let temperature = |city: &str| {
            results
                .iter()
                .find(|r| r["city"] == city)
                .and_then(|r| r["temperature"].as_f64())
        };
        let difference = results.iter().find_map(|r| r["result"].as_f64());
        Ok(
            match (temperature("Paris"), temperature("Oslo"), difference) {
                (Some(paris), Some(oslo), Some(diff)) => Message::assistant(format!(
                    "Paris is {paris}°C and sunny, Oslo {oslo}°C with light rain: Paris is {diff} \
                 degrees warmer."
                )),
                (Some(paris), Some(oslo), None) => Message::assistant_with_tool_calls(
                    "",
                    vec![ToolCall::new(
                        "calculate",
                        json!({"a": paris, "op": "-", "b": oslo}),
                    )],
                ),
                _ => Message::assistant_with_tool_calls(
                    "I'll look up both cities.",
                    vec![
                        ToolCall::new("get_weather", json!({"city": "Paris"})),
                        ToolCall::new("get_weather", json!({"city": "Oslo"})),
                    ],
                ),
            },
        )
    })
    .named("weather-demo")
}

/// A local OpenAI-compatible server answering the demo's three turns as a model would.
async fn mock_provider() -> std::io::Result<MockOpenAi> {
    let server = MockOpenAi::start().await?;
    server.enqueue_all([
        openai::json(openai::tool_calls_completion(&[
            ("call_1", "get_weather", json!({"city": "Paris"})),
            ("call_2", "get_weather", json!({"city": "Oslo"})),
        ])),
        openai::json(openai::tool_calls_completion(&[(
            "call_3",
            "calculate",
            json!({"a": 18, "op": "-", "b": 4}),
        )])),
        openai::json(openai::completion(
            "Paris is 18°C and sunny, Oslo 4°C with light rain: Paris is 14 degrees warmer.",
        )),
    ]);
    Ok(server)
}
