//! The parsers the fuzzer feeds, and the fuzzer.

use std::panic::{AssertUnwindSafe, catch_unwind};

use kit::checkpoint::resolve_channels;
use kit::http::{HeaderMap, HeaderValue, HttpLimits, parse_retry_after, retry_after_value};
use kit::{AgentState, State};

use super::Hostile;

/// A parser of outside input that [`fuzz`] can feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// `text/event-stream` decoding ([`kit::http::SseDecoder`]).
    Sse,
    /// OpenAI answers ([`kit::fuzz::openai_response`]).
    OpenAiJson,
    /// OpenAI streams ([`kit::fuzz::openai_stream`]).
    OpenAiStream,
    /// Anthropic answers ([`kit::fuzz::anthropic_response`]).
    AnthropicJson,
    /// Anthropic streams ([`kit::fuzz::anthropic_stream`]).
    AnthropicStream,
    /// OpenAI Responses API answers ([`kit::fuzz::openai_responses_response`]).
    ResponsesJson,
    /// OpenAI Responses API streams ([`kit::fuzz::openai_responses_stream`]).
    ResponsesStream,
    /// Provider error bodies ([`kit::fuzz::provider_error`]).
    ProviderError,
    /// Worker request bodies ([`kit::fuzz::run_request`]; a no-op without the `server` feature).
    RunRequest,
    /// Task ids from a worker ([`kit::protocol::task_path_segment`]).
    TaskId,
    /// Tool arguments ([`kit::tool::validate_args`], [`kit::model::parse_args`]).
    ToolArgs,
    /// `glob` patterns ([`kit::fuzz::glob_matches`]).
    Glob,
    /// `grep` patterns ([`kit::fuzz::grep_lines`]).
    Grep,
    /// Headers carrying durations ([`kit::http::parse_retry_after`]).
    RetryAfter,
    /// Checkpoint chains and blobs from a damaged store ([`kit::checkpoint::resolve_channels`],
    /// [`State::restore_channel`]).
    Checkpoint,
}

impl Target {
    /// Every target.
    pub const ALL: [Target; 15] = [
        Target::Sse,
        Target::OpenAiJson,
        Target::OpenAiStream,
        Target::AnthropicJson,
        Target::AnthropicStream,
        Target::ResponsesJson,
        Target::ResponsesStream,
        Target::ProviderError,
        Target::RunRequest,
        Target::TaskId,
        Target::ToolArgs,
        Target::Glob,
        Target::Grep,
        Target::RetryAfter,
        Target::Checkpoint,
    ];

    /// The target's name, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Target::Sse => "sse",
            Target::OpenAiJson => "openai_json",
            Target::OpenAiStream => "openai_stream",
            Target::AnthropicJson => "anthropic_json",
            Target::AnthropicStream => "anthropic_stream",
            Target::ResponsesJson => "responses_json",
            Target::ResponsesStream => "responses_stream",
            Target::ProviderError => "provider_error",
            Target::RunRequest => "run_request",
            Target::TaskId => "task_id",
            Target::ToolArgs => "tool_args",
            Target::Glob => "glob",
            Target::Grep => "grep",
            Target::RetryAfter => "retry_after",
            Target::Checkpoint => "checkpoint",
        }
    }

    /// Generates one input, notes its start in `shown`, and runs it; true when the parser
    /// accepted it.
    fn run_one(self, h: &mut Hostile, shown: &mut String) -> bool {
        let excerpt = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(200)]).into_owned();
        match self {
            Target::Sse => {
                let body = h.sse();
                let limits = HttpLimits {
                    max_sse_line_bytes: 4096,
                    max_sse_event_bytes: 8192,
                    ..HttpLimits::default()
                };
                *shown = excerpt(&body);
                kit::fuzz::sse(&body, &limits).is_ok()
            }
            Target::OpenAiJson => {
                let body = h.openai_json();
                *shown = excerpt(&body);
                kit::fuzz::openai_response(&body).is_ok()
            }
            Target::OpenAiStream => {
                let body = h.openai_stream();
                *shown = excerpt(&body);
                kit::fuzz::openai_stream(&body).is_ok()
            }
            Target::AnthropicJson => {
                let body = h.anthropic_json();
                *shown = excerpt(&body);
                kit::fuzz::anthropic_response(&body).is_ok()
            }
            Target::AnthropicStream => {
                let body = h.anthropic_stream();
                *shown = excerpt(&body);
                kit::fuzz::anthropic_stream(&body).is_ok()
            }
            Target::ResponsesJson => {
                let body = h.responses_json();
                *shown = excerpt(&body);
                kit::fuzz::openai_responses_response(&body).is_ok()
            }
            Target::ResponsesStream => {
                let body = h.responses_stream();
                *shown = excerpt(&body);
                kit::fuzz::openai_responses_stream(&body).is_ok()
            }
            Target::ProviderError => {
                let body = h.error_body();
                let status = *h.rng.pick(&[0u16, 200, 400, 401, 413, 429, 500, 529, 999]);
                *shown = excerpt(&body);
                let error = kit::fuzz::provider_error(status, &String::from_utf8_lossy(&body));
                !error.to_string().is_empty()
            }
            Target::RunRequest => {
                let body = h.run_request();
                *shown = excerpt(&body);
                #[cfg(feature = "server")]
                let ok = kit::fuzz::run_request(&body).is_ok();
                #[cfg(not(feature = "server"))]
                let ok = false;
                ok
            }
            Target::TaskId => {
                let id = h.task_id();
                shown.clone_from(&id);
                match kit::protocol::task_path_segment(&id) {
                    Ok(segment) => {
                        // One whole segment: nothing a URL would read as a separator or a dot
                        // segment.
                        assert!(
                            !segment.contains(['/', '\\', '?', '#'])
                                && segment != ".."
                                && segment != ".",
                            "{id:?} became {segment:?}"
                        );
                        true
                    }
                    Err(_) => false,
                }
            }
            Target::ToolArgs => {
                let (schema, args) = h.tool_args();
                let text = args.to_string();
                *shown = text.chars().take(200).collect();
                let ok = kit::tool::validate_args(&schema, &args).is_ok();
                let _ = kit::model::parse_args(&text);
                ok
            }
            Target::Glob => {
                let pattern = h.glob_pattern();
                let path = h.path();
                *shown = pattern.chars().take(200).collect();
                kit::fuzz::glob_matches(&pattern, &path).is_ok()
            }
            Target::Grep => {
                let (pattern, regex) = h.grep_pattern();
                let text = h.text();
                shown.clone_from(&pattern);
                kit::fuzz::grep_lines(&pattern, regex, &text).is_ok()
            }
            Target::RetryAfter => {
                let value = h.retry_after();
                shown.clone_from(&value);
                let mut ok = false;
                if let Ok(v) = HeaderValue::from_str(&value) {
                    let mut headers = HeaderMap::new();
                    let name = if h.rng.one_in(2) {
                        "retry-after"
                    } else {
                        "retry-after-ms"
                    };
                    headers.insert(name, v);
                    ok = parse_retry_after(&headers).is_some();
                }
                let _ = retry_after_value(&value, std::time::SystemTime::now());
                ok
            }
            Target::Checkpoint => {
                let (versions, blobs) = h.checkpoint_chains();
                *shown = format!("{versions:?}");
                let resolved = resolve_channels(&versions, |channel, version| {
                    Ok(blobs
                        .iter()
                        .find(|b| b.channel == channel && b.version == version)
                        .cloned())
                });
                // Accepted when the chains resolve; the blobs are decoded either way.
                let ok = resolved.is_ok();
                let mut state = AgentState::default();
                let schema = Default::default();
                for index in 0..AgentState::channels().len() {
                    let full = h.blob();
                    let delta = h.blob();
                    let deltas: Vec<&[u8]> = vec![delta.as_slice()];
                    let full = h.rng.one_in(2).then_some(full.as_slice());
                    let _ = state.restore_channel(&schema, index, full, &deltas);
                }
                ok
            }
        }
    }
}

/// What [`fuzz`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The target fed.
    pub target: Target,
    /// Inputs fed.
    pub inputs: u64,
    /// Inputs the parser accepted (the rest were refused with a typed error).
    pub accepted: u64,
    /// Inputs that panicked.
    pub panics: u64,
    /// The first panicking input (its start), if any.
    pub first_panic: Option<String>,
}

/// Feeds `target` `inputs` hostile inputs generated from `seed`, catching panics.
pub fn fuzz(target: Target, inputs: u64, seed: u64) -> Report {
    let mut h = Hostile::new(seed ^ (target as u64).wrapping_mul(0x1000_0000_01b3));
    let mut report = Report {
        target,
        inputs: 0,
        accepted: 0,
        panics: 0,
        first_panic: None,
    };
    let mut shown = String::new();
    for _ in 0..inputs {
        report.inputs += 1;
        match catch_unwind(AssertUnwindSafe(|| target.run_one(&mut h, &mut shown))) {
            Ok(accepted) => report.accepted += u64::from(accepted),
            Err(_) => {
                report.panics += 1;
                if report.first_panic.is_none() {
                    report.first_panic = Some(shown.clone());
                }
                // The generator state after a panic is unknown: go on from a fresh seed.
                h = Hostile::new(seed.wrapping_add(report.inputs));
            }
        }
    }
    report
}
