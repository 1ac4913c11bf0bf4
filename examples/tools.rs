//! An agent with two tools — one from `#[derive(Tool)]`, one from `Tool::from_fn` — answering a
//! question that needs both, through a real provider when you have a key.
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

use std::sync::Arc;

use kit::model::{self, ChatModel, ModelError, ModelOptions, ModelRequest, pricing};
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolContext, ToolError, ToolHandler};
use kit::{Agent, Config, Message, Role, ToolCall, Usage};
use kit_testing::mock::openai::{self, MockOpenAi};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

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

/// Gets the current weather in a city (demo data: Paris, Oslo and Lagos).
#[derive(kit::Tool, Deserialize, JsonSchema)]
#[tool(max_result_chars = 500)]
struct GetWeather {
    /// The city, e.g. `Paris`.
    city: String,
    /// The unit of the temperature (default celsius).
    #[serde(default)]
    unit: Unit,
}

impl ToolHandler for GetWeather {
    type Output = Value;
    async fn run(self, _ctx: ToolContext) -> Result<Value, ToolError> {
        let (celsius, sky) = match self.city.to_lowercase().as_str() {
            "paris" => (18.0, "sunny"),
            "oslo" => (4.0, "light rain"),
            "lagos" => (31.0, "humid, clouds"),
            _ => {
                return Err(ToolError::new(format!(
                    "no weather data for `{}`; this demo knows Paris, Oslo and Lagos",
                    self.city
                )));
            }
        };
        let temperature = match self.unit {
            Unit::Celsius => celsius,
            Unit::Fahrenheit => celsius * 9.0 / 5.0 + 32.0,
        };
        Ok(json!({"city": self.city, "temperature": temperature, "unit": self.unit, "sky": sky}))
    }
}

/// A calculator built at run time from a JSON Schema.
fn calculator() -> Tool {
    Tool::from_fn(
        "calculate",
        "Computes `a <op> b` exactly. Use it for any arithmetic.",
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": "The left operand."},
                "op": {"type": "string", "enum": ["+", "-", "*", "/"], "description": "The operation."},
                "b": {"type": "number", "description": "The right operand."},
            },
            "required": ["a", "op", "b"],
            "additionalProperties": false,
        }),
        |args, _ctx| async move {
            // The arguments were checked against the schema before this runs.
            let a = args["a"].as_f64().unwrap_or_default();
            let b = args["b"].as_f64().unwrap_or_default();
            let result = match args["op"].as_str().unwrap_or_default() {
                "+" => a + b,
                "-" => a - b,
                "*" => a * b,
                _ if b == 0.0 => return Err(ToolError::new("division by zero")),
                _ => a / b,
            };
            Ok::<_, ToolError>(json!({"result": result}))
        },
    )
}

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

/// A real provider when one is configured (`KIT_MODEL`, else a key), else the scripted model;
/// with a line saying which.
fn choose_model(config: &Config) -> Result<(Arc<dyn ChatModel>, String), ModelError> {
    let spec = std::env::var("KIT_MODEL")
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
        });
    Ok(match spec {
        Some(spec) => {
            let model = model::init(&spec, config, ModelOptions::default().temperature(0.0))?;
            (model, format!("model: {spec} (real provider)"))
        }
        None => (
            Arc::new(scripted()),
            "model: scripted (offline; set OPENAI_API_KEY, ANTHROPIC_API_KEY or \
             KIT_MODEL=provider:model to use a real provider)"
                .to_string(),
        ),
    })
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

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mock = match std::env::var_os("KIT_TOOLS_MOCK_PROVIDER") {
        Some(_) => Some(mock_provider().await?),
        None => None,
    };
    let config = match &mock {
        Some(server) => server.config(),
        None => Config::from_env(),
    };
    let (model, which) = choose_model(&config)?;
    println!("{which}");
    let model_name = model.model_name().to_string();

    let agent = Agent::builder()
        .name("forecaster")
        .model(model)
        .system_prompt(
            "You answer weather questions. Always use get_weather for weather and calculate for \
             arithmetic; answer in one sentence.",
        )
        .tools([GetWeather::tool(), calculator()])
        .build()?;
    let question = "What's the weather in Paris and in Oslo, and how much warmer is Paris?";
    println!("question: {question}");
    let out = agent.invoke(question).await?;

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
        let cost = pricing::cost(&model_name, &usage)
            .map(|c| format!(", about ${c:.5}"))
            .unwrap_or_default();
        println!(
            "tokens: {} in, {} out{cost}",
            usage.input_tokens, usage.output_tokens
        );
    }
    Ok(())
}
