//! Item 5: bounded randomized fuzzing of every parser of outside input (the generators of
//! `kit_testing::hostile`, seeded, so a failure replays), and the same input at 1 KiB and
//! 1 MiB for each parser, which must end the same way.
//!
//! `KIT_FUZZ_INPUTS` sets the inputs per parser (default 2,000 here; the benchmark's `fuzz`
//! workload runs a million), `KIT_FUZZ_SEED` the seed (default 1).

use std::collections::BTreeMap;
use std::time::SystemTime;

use kit::checkpoint::{BlobKind, ChannelBlob, resolve_channels};
use kit::http::{HttpLimits, MAX_PEER_DELAY, retry_after_value};
use kit_testing::hostile::{Target, fuzz};
use serde_json::json;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn no_panic(target: Target) {
    let inputs = env("KIT_FUZZ_INPUTS", 2000);
    let report = fuzz(target, inputs, env("KIT_FUZZ_SEED", 1));
    println!(
        "fuzz {}: {} inputs, {} accepted, {} panics",
        target.name(),
        report.inputs,
        report.accepted,
        report.panics
    );
    assert_eq!(report.inputs, inputs);
    assert_eq!(
        report.panics,
        0,
        "{} panicked; first input: {:?}",
        target.name(),
        report.first_panic
    );
}

#[test]
fn hostile_event_streams_never_panic_the_sse_decoder() {
    no_panic(Target::Sse);
}

#[test]
fn hostile_openai_answers_never_panic() {
    no_panic(Target::OpenAiJson);
}

#[test]
fn hostile_openai_streams_never_panic() {
    no_panic(Target::OpenAiStream);
}

#[test]
fn hostile_anthropic_answers_never_panic() {
    no_panic(Target::AnthropicJson);
}

#[test]
fn hostile_anthropic_streams_never_panic() {
    no_panic(Target::AnthropicStream);
}

#[test]
fn hostile_responses_answers_never_panic() {
    no_panic(Target::ResponsesJson);
}

#[test]
fn hostile_responses_streams_never_panic() {
    no_panic(Target::ResponsesStream);
}

#[test]
fn hostile_provider_error_bodies_never_panic() {
    no_panic(Target::ProviderError);
}

#[test]
fn hostile_run_protocol_bodies_never_panic_the_worker() {
    no_panic(Target::RunRequest);
}

#[test]
fn hostile_task_ids_always_stay_one_path_segment() {
    no_panic(Target::TaskId);
}

#[test]
fn hostile_tool_arguments_never_panic_validation() {
    no_panic(Target::ToolArgs);
}

#[test]
fn hostile_glob_patterns_never_panic() {
    no_panic(Target::Glob);
}

#[test]
fn hostile_grep_patterns_never_panic() {
    no_panic(Target::Grep);
}

#[test]
fn hostile_duration_headers_never_panic() {
    no_panic(Target::RetryAfter);
}

#[test]
fn damaged_checkpoint_chains_and_blobs_never_panic() {
    no_panic(Target::Checkpoint);
}

// ---------------------------------------------------------------------------------------------
// The same input at 1 KiB and at 1 MiB.

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

/// `unit` repeated to about `size` bytes.
fn fill(unit: &str, size: usize) -> String {
    unit.repeat((size / unit.len()).max(1))
}

/// Runs `parse` on the input built at both sizes and checks that both end alike.
fn alike<T: std::fmt::Debug>(name: &str, build: impl Fn(usize) -> T, check: impl Fn(&T, usize)) {
    for size in [KIB, MIB] {
        let outcome = build(size);
        check(&outcome, size);
        let shown = format!("{outcome:?}");
        println!("{name} at {size} bytes: {}", &shown[..shown.len().min(120)]);
    }
}

#[test]
fn every_parser_ends_alike_at_1_kib_and_1_mib() {
    // An event stream: one event of `size` data; a line of `size` bytes without a newline.
    alike(
        "sse one big event",
        |n| {
            kit::fuzz::sse(
                fill("data: abcdefgh\n", n).as_bytes(),
                &HttpLimits::default(),
            )
        },
        |r, n| assert_eq!(r.as_ref().unwrap().len(), 1, "{n}"),
    );
    alike(
        "sse unterminated line",
        |n| {
            kit::fuzz::sse(
                format!("data: {}", "a".repeat(n)).as_bytes(),
                &HttpLimits::default(),
            )
        },
        |r, n| assert_eq!(r.as_ref().unwrap()[0].data.len(), n, "{n}"),
    );
    // Provider answers: a long text; JSON nested deeper than the parser allows.
    alike(
        "openai long answer",
        |n| {
            kit::fuzz::openai_response(
                json!({"choices": [{"message": {"content": "a".repeat(n)}}]})
                    .to_string()
                    .as_bytes(),
            )
        },
        |r, n| assert_eq!(r.as_ref().unwrap().message.text().len(), n),
    );
    alike(
        "openai nested arrays",
        |n| kit::fuzz::openai_response(fill("[", n).as_bytes()),
        |r, _| assert!(r.is_err()),
    );
    const DELTA: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ab\"}}]}\n\n";
    alike(
        "openai stream of many deltas",
        |n| {
            let body = format!("{}data: [DONE]\n\n", fill(DELTA, n));
            kit::fuzz::openai_stream(body.as_bytes())
        },
        |r, n| {
            let frames = (n / DELTA.len()).max(1);
            assert_eq!(r.as_ref().unwrap().message.text().len(), 2 * frames)
        },
    );
    alike(
        "anthropic long answer",
        |n| {
            kit::fuzz::anthropic_response(
                json!({"content": [{"type": "text", "text": "a".repeat(n)}], "stop_reason": "end_turn"})
                    .to_string()
                    .as_bytes(),
            )
        },
        |r, n| assert_eq!(r.as_ref().unwrap().message.text().len(), n),
    );
    alike(
        "anthropic stream cut short",
        |n| {
            let frame = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ab\"}}\n\n";
            kit::fuzz::anthropic_stream(fill(frame, n).as_bytes())
        },
        |r, _| assert!(r.is_err(), "no stop: incomplete"),
    );
    alike(
        "provider error with a long message",
        |n| {
            kit::fuzz::provider_error(
                429,
                &json!({"error": {"message": "x".repeat(n)}}).to_string(),
            )
        },
        |e, _| assert!(matches!(e, kit::model::ModelError::RateLimited { .. })),
    );
    alike(
        "run request with a long message",
        |n| {
            kit::fuzz::run_request(
                json!({"assistant_id": "a", "input": {"messages": [{"role": "user", "content": "x".repeat(n)}]}})
                    .to_string()
                    .as_bytes(),
            )
        },
        |r, _| assert_eq!(r.as_deref(), Ok("a")),
    );
    alike(
        "task id of slashes",
        |n| kit::protocol::task_path_segment(&fill("a/", n)),
        |r, n| {
            let segment = r.as_ref().unwrap();
            assert!(!segment.contains('/'));
            assert_eq!(segment.len(), 4 * (n / 2));
        },
    );
    alike(
        "tool arguments: a wide array",
        |n| {
            let schema = json!({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}});
            let xs: Vec<u64> = (0..n / 8).map(|i| i as u64).collect();
            kit::tool::validate_args(&schema, &json!({"xs": xs}))
        },
        |r, _| assert!(r.is_ok()),
    );
    alike(
        "glob brace groups",
        |n| kit::fuzz::glob_matches(&fill("{a,}", n), "/a"),
        |r, _| {
            assert!(
                r.as_ref()
                    .is_err_and(|e| e.contains("FsLimits::max_pattern"))
            )
        },
    );
    alike(
        "glob: a long name against a pattern that retries every position",
        |n| {
            let pattern = format!("*{}b", "a".repeat(120));
            kit::fuzz::glob_matches(&pattern, &format!("/{}", "a".repeat(n)))
        },
        // About 120 steps per character: a kibibyte is matched, a mebibyte spends the
        // budget and says which limit it met.
        |r, n| match n {
            KIB => assert_eq!(r, &Ok(false)),
            _ => assert!(
                r.as_ref()
                    .is_err_and(|e| e.contains("FsLimits::max_glob_steps"))
            ),
        },
    );
    alike(
        "grep for a nested-star regex",
        |n| kit::fuzz::grep_lines("(a*)*b", true, &"a".repeat(n)),
        |r, _| assert_eq!(r, &Ok(0)),
    );
    alike(
        "retry-after with many digits",
        |n| retry_after_value(&"9".repeat(n), SystemTime::now()),
        |r, _| assert_eq!(r, &Some(MAX_PEER_DELAY)),
    );
    alike(
        "checkpoint chain that loops at its end",
        |n| {
            let count = n / 64;
            let blobs: Vec<ChannelBlob> = (0..count)
                .map(|i| ChannelBlob {
                    channel: "c".into(),
                    version: format!("v{i}"),
                    prev_version: Some(format!("v{}", if i == 0 { count - 1 } else { i - 1 })),
                    kind: BlobKind::Delta,
                    data: b"[]".to_vec(),
                })
                .collect();
            let index: BTreeMap<&str, &ChannelBlob> =
                blobs.iter().map(|b| (b.version.as_str(), b)).collect();
            let versions = BTreeMap::from([("c".to_string(), format!("v{}", count - 1))]);
            resolve_channels(&versions, |_, v| Ok(index.get(v).map(|b| (*b).clone())))
                .map(|c| c.len())
        },
        |r, _| assert!(r.as_ref().is_err_and(|e| e.to_string().contains("loops"))),
    );
}

/// The parsers of reasoning, server blocks and the Responses API, at 1 KiB and 1 MiB: the
/// same outcome at both sizes, in time linear in the input.
#[test]
fn reasoning_and_responses_parsers_end_alike_at_1_kib_and_1_mib() {
    // Anthropic: one thinking block streamed as many thinking deltas, then its signature.
    const THINK: &str = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"ab\"}}\n\n";
    alike(
        "anthropic thinking deltas",
        |n| {
            let body = format!(
                "event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"thinking\",\"thinking\":\"\"}}}}\n\n{}event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"signature_delta\",\"signature\":\"sig\"}}}}\n\nevent: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"end_turn\"}}}}\n\nevent: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n",
                fill(THINK, n)
            );
            kit::fuzz::anthropic_stream(body.as_bytes())
        },
        |r, n| {
            let r = r.as_ref().unwrap();
            let thinking: Vec<_> = r.message.content.reasoning().collect();
            assert_eq!(thinking.len(), 1);
            assert_eq!(thinking[0].text.len(), 2 * (n / THINK.len()).max(1));
            assert_eq!(thinking[0].signature.as_deref(), Some("sig"));
        },
    );
    // Anthropic: a server tool's input split into many pieces.
    alike(
        "anthropic server tool input pieces",
        |n| {
            let piece = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"aa\"}}\n\n";
            let body = format!(
                "event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"server_tool_use\",\"id\":\"s\",\"name\":\"web_search\",\"input\":{{}}}}}}\n\nevent: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{{\\\"q\\\": \\\"\"}}}}\n\n{}event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"}}\"}}}}\n\nevent: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\nevent: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n",
                fill(piece, n)
            );
            kit::fuzz::anthropic_stream(body.as_bytes())
        },
        |r, _| {
            let r = r.as_ref().unwrap();
            let kit::Content::Parts(parts) = &r.message.content else {
                panic!("a provider block: {:?}", r.message.content)
            };
            assert!(
                matches!(&parts[0], kit::ContentPart::ProviderBlock { block, .. } if block["input"]["q"].as_str().is_some_and(|q| q.starts_with("aa")))
            );
        },
    );
    // OpenAI-compatible: reasoning_content deltas, and a Mistral answer of many chunks.
    const REASON: &str =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"ab\"}}]}\n\n";
    alike(
        "openai-compatible reasoning deltas",
        |n| {
            let body = format!(
                "{}data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"x\"}},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n",
                fill(REASON, n)
            );
            kit::fuzz::openai_stream(body.as_bytes())
        },
        |r, n| {
            let r = r.as_ref().unwrap();
            assert_eq!(r.message.text(), "x");
            let reasoning: Vec<_> = r.message.content.reasoning().collect();
            assert_eq!(reasoning[0].text.len(), 2 * (n / REASON.len()).max(1));
        },
    );
    alike(
        "mistral answer of many chunks",
        |n| {
            let parts: Vec<serde_json::Value> = (0..(n / 32).max(1))
                .map(|i| {
                    if i % 2 == 0 {
                        json!({"type": "text", "text": "ab"})
                    } else {
                        json!({"type": "thinking", "thinking": [{"type": "text", "text": "cd"}]})
                    }
                })
                .collect();
            kit::fuzz::openai_response(
                json!({"choices": [{"message": {"content": parts}}]})
                    .to_string()
                    .as_bytes(),
            )
        },
        |r, n| {
            assert_eq!(
                r.as_ref().unwrap().message.text().len(),
                2 * (n / 32).max(1).div_ceil(2)
            )
        },
    );
    // Responses API: a long answer, and a stream of many text deltas.
    alike(
        "responses long answer",
        |n| {
            kit::fuzz::openai_responses_response(
                json!({"output": [{"type": "message", "content": [{"type": "output_text", "text": "a".repeat(n)}]}], "status": "completed"})
                    .to_string()
                    .as_bytes(),
            )
        },
        |r, n| assert_eq!(r.as_ref().unwrap().message.text().len(), n),
    );
    const TEXT: &str = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"ab\"}\n\n";
    alike(
        "responses stream of many deltas",
        |n| {
            let body = format!(
                "{}event: response.completed\ndata: {{\"type\":\"response.completed\",\"response\":{{\"status\":\"completed\"}}}}\n\n",
                fill(TEXT, n)
            );
            kit::fuzz::openai_responses_stream(body.as_bytes())
        },
        |r, n| {
            assert_eq!(
                r.as_ref().unwrap().message.text().len(),
                2 * (n / TEXT.len()).max(1)
            )
        },
    );
    alike(
        "responses stream cut short",
        |n| kit::fuzz::openai_responses_stream(fill(TEXT, n).as_bytes()),
        |r, _| assert!(r.is_err(), "no response.completed: incomplete"),
    );
}
