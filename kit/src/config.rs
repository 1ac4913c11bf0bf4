//! Credentials and endpoints: a [`Config`] value, filled from the environment by default.

use std::collections::BTreeMap;

/// Where kit finds provider credentials, endpoints and the trace backend.
///
/// `Config::from_env()` reads the usual variables; set fields in code to override them.
///
/// | field | environment variable |
/// |---|---|
/// | `openai_api_key` | `OPENAI_API_KEY` |
/// | `openai_base_url` | `OPENAI_BASE_URL` (default `https://api.openai.com/v1`) |
/// | `anthropic_api_key` | `ANTHROPIC_API_KEY` |
/// | `anthropic_base_url` | `ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`) |
/// | `ollama_base_url` | `OLLAMA_BASE_URL` (default `http://localhost:11434/v1`) |
/// | `trace_endpoint` | `KIT_TRACE_ENDPOINT` |
/// | `trace_api_key` | `KIT_TRACE_API_KEY` |
#[derive(Clone, Default, PartialEq)]
pub struct Config {
    /// OpenAI API key.
    pub openai_api_key: Option<String>,
    /// OpenAI-compatible base URL.
    pub openai_base_url: Option<String>,
    /// Anthropic API key.
    pub anthropic_api_key: Option<String>,
    /// Anthropic base URL.
    pub anthropic_base_url: Option<String>,
    /// Ollama's OpenAI-compatible base URL.
    pub ollama_base_url: Option<String>,
    /// Trace export endpoint.
    pub trace_endpoint: Option<String>,
    /// Trace export API key.
    pub trace_api_key: Option<String>,
    /// Other settings by name (for custom providers).
    pub extra: BTreeMap<String, String>,
}

impl std::fmt::Debug for Config {
    /// Never prints secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |o: &Option<String>| if o.is_some() { "<set>" } else { "<unset>" };
        // URLs may carry a password (`https://user:pw@host`): shown without it.
        let url = |o: &Option<String>| o.as_deref().map(crate::http::redact_url_text);
        f.debug_struct("Config")
            .field("openai_api_key", &set(&self.openai_api_key))
            .field("openai_base_url", &url(&self.openai_base_url))
            .field("anthropic_api_key", &set(&self.anthropic_api_key))
            .field("anthropic_base_url", &url(&self.anthropic_base_url))
            .field("ollama_base_url", &url(&self.ollama_base_url))
            .field("trace_endpoint", &url(&self.trace_endpoint))
            .field("trace_api_key", &set(&self.trace_api_key))
            .finish_non_exhaustive()
    }
}

/// A variable's value without surrounding whitespace (a key pasted from a file keeps its
/// line break), `None` when unset or blank. A value that is not UTF-8 is reported by name and
/// treated as unset.
fn env(name: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(v) => Some(v.trim().to_string()).filter(|v| !v.is_empty()),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => {
            tracing::warn!("{name} is set but not valid UTF-8; it is ignored");
            None
        }
    }
}

impl Config {
    /// Reads the environment variables listed above.
    pub fn from_env() -> Self {
        Config {
            openai_api_key: env("OPENAI_API_KEY"),
            openai_base_url: env("OPENAI_BASE_URL"),
            anthropic_api_key: env("ANTHROPIC_API_KEY"),
            anthropic_base_url: env("ANTHROPIC_BASE_URL"),
            ollama_base_url: env("OLLAMA_BASE_URL"),
            trace_endpoint: env("KIT_TRACE_ENDPOINT"),
            trace_api_key: env("KIT_TRACE_API_KEY"),
            extra: BTreeMap::new(),
        }
    }
}
