//! Item 3: no secret leaves the process where it should not. Every secret of the issue is
//! planted — provider keys echoed back JSON-escaped, in a 200 whose body is an error, in a
//! malformed 200, in a stream's error event and in a custom header's value; the secrets trace
//! redaction must catch (`access_token=`, `client_secret=`, `aws_secret_access_key=`, URL and
//! DSN passwords, `Authorization: Token`, `privateKey`, `private-key`, `passphrase`); passwords
//! in provider, OTLP and async-subagent URLs; async-subagent headers — and each is looked for
//! at every exit: error texts, `Debug`, logs captured by a `tracing` subscriber, JSON-lines
//! traces, OTLP export to a local receiver, and what a host on another origin receives after a
//! redirect. Every count is zero.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kit::http::{HttpClient, HttpRequest};
use kit::middleware::async_subagents::AsyncSpec;
use kit::model::anthropic::AnthropicModel;
use kit::model::openai::OpenAiModel;
use kit::model::{ChatModel, ModelRequest};
use kit::protocol::{Endpoint, HttpRunClient, RunClient};
use kit::testing::ScriptedModel;
use kit::tool::{ToolError, ToolOutput};
use kit::trace::otlp::{OtlpExporter, Protocol};
use kit::trace::{Exporter, JsonLinesExporter, QueueConfig, Tracer};
use kit::{Agent, MemoryCheckpointer, Message, Tool, ToolCall};
use kit_testing::mock::{MockResponse, MockServer, SseFrame};
use serde_json::json;

use crate::support::{Capture, RawServer, Received, respond};

const OPENAI_KEY: &str = "sk-PLANTEDKEY00000000000001";
const ANTHROPIC_KEY: &str = "sk-ant-PLANTEDANTKEY0000002";
const CUSTOM_HEADER: &str = "PLANTEDCUSTOMHDR00003";
const AZURE_KEY: &str = "PLANTEDAZUREKEY00004";
const BASE_URL_PW: &str = "PLANTEDBASEPW00005";
const OTLP_PW: &str = "PLANTEDOTLPPW00006";
const OTLP_KEY: &str = "PLANTEDOTLPKEY00007";
const ASYNC_PW: &str = "PLANTEDASYNCPW00008";
const ASYNC_HEADER: &str = "PLANTEDASYNCHDR00009";
const ACCESS_TOKEN: &str = "PLANTEDACCESSTOK10";
const CLIENT_SECRET: &str = "PLANTEDCLIENTSEC11";
const AWS_SECRET: &str = "PLANTEDAWSSECRET12";
const URL_PW: &str = "PLANTEDURLPW13";
const DSN_PW: &str = "PLANTEDDSNPW14";
const TOKEN_AUTH: &str = "PLANTEDTOKENAUTH15";
const PRIVATE_KEY_CAMEL: &str = "PLANTEDPRIVKEY16";
const PRIVATE_KEY_DASH: &str = "PLANTEDPRIVKEY17";
const PASSPHRASE: &str = "PLANTEDPASSPHRASE18";

const SECRETS: &[(&str, &str)] = &[
    ("provider key (OpenAI)", OPENAI_KEY),
    ("provider key (Anthropic)", ANTHROPIC_KEY),
    ("custom header value", CUSTOM_HEADER),
    ("api-key header (Azure)", AZURE_KEY),
    ("provider base URL password", BASE_URL_PW),
    ("OTLP URL password", OTLP_PW),
    ("OTLP bearer key", OTLP_KEY),
    ("async subagent URL password", ASYNC_PW),
    ("async subagent header", ASYNC_HEADER),
    ("access_token=", ACCESS_TOKEN),
    ("client_secret=", CLIENT_SECRET),
    ("aws_secret_access_key=", AWS_SECRET),
    ("password in a URL", URL_PW),
    ("password in a DSN", DSN_PW),
    ("Authorization: Token", TOKEN_AUTH),
    ("privateKey", PRIVATE_KEY_CAMEL),
    ("private-key", PRIVATE_KEY_DASH),
    ("passphrase", PASSPHRASE),
];

/// The process-wide log capture (one subscriber for the test binary: `tracing` allows one).
fn logs() -> &'static Capture {
    static LOGS: OnceLock<Capture> = OnceLock::new();
    LOGS.get_or_init(|| {
        let capture = Capture::default();
        let _ = tracing::subscriber::set_global_default(capture.clone());
        capture
    })
}

/// What left through each exit.
#[derive(Default)]
struct Exits {
    errors: String,
    debug: String,
    redirect: String,
}

impl Exits {
    fn error(&mut self, e: &(impl std::fmt::Display + std::fmt::Debug)) {
        let _ = writeln!(self.errors, "{e}");
        let _ = writeln!(self.debug, "{e:?}");
    }
}

/// Every character as `\uXXXX`: how a JSON encoder may write a key it echoes.
fn json_escaped(s: &str) -> String {
    s.chars().map(|c| format!("\\u{:04x}", c as u32)).collect()
}

/// Every byte as `%XX`.
fn percent_escaped(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

fn request() -> ModelRequest {
    ModelRequest::new(vec![Message::user("hi")])
}

fn leaky_tool() -> Tool {
    Tool::from_fn(
        "deploy",
        "Deploys.",
        json!({"type": "object"}),
        |args, _ctx| async move {
            if args.get("fail").is_some() {
                return Err::<ToolOutput, _>(ToolError::new(format!(
                    "deploy failed: GET https://bob:{URL_PW}@example.com/x?access_token={ACCESS_TOKEN} \
                     with client_secret={CLIENT_SECRET} and aws_secret_access_key={AWS_SECRET}; \
                     db postgres://app:{DSN_PW}@db:5432/kit; Authorization: Token {TOKEN_AUTH}"
                )));
            }
            Ok(ToolOutput::json(&json!({
                "privateKey": PRIVATE_KEY_CAMEL,
                "private-key": PRIVATE_KEY_DASH,
                "passphrase": PASSPHRASE,
                "log": format!("env access_token={ACCESS_TOKEN} client_secret={CLIENT_SECRET}"),
            })))
        },
    )
}

#[tokio::test]
async fn planted_secrets_leave_through_no_exit() {
    let logs = logs();
    let mut exits = Exits::default();
    let dir = tempfile::tempdir().unwrap();
    let jsonl_path = dir.path().join("trace.jsonl");
    let receiver = RawServer::start(|_| respond(200, "application/json", "{}")).await;
    // Another origin (another port): what a redirect would hand credentials to.
    let elsewhere = RawServer::start(|_| respond(200, "application/json", "{}")).await;
    let redirect_to = |path: &str| {
        let location = format!("{}{path}", elsewhere.url);
        move |_: &Received| {
            let mut steps = respond(307, "text/plain", "");
            if let crate::support::Step::Send(head) = &mut steps[0] {
                *head = String::from_utf8_lossy(head)
                    .replace("\r\n\r\n", &format!("\r\nlocation: {location}\r\n\r\n"))
                    .into_bytes();
            }
            steps
        }
    };

    // The OTLP exporter: a password in its URL, a bearer key.
    let otlp_url = receiver
        .url
        .replace("http://", &format!("http://collector:{OTLP_PW}@"));
    let queue = QueueConfig {
        batch_timeout: Duration::from_millis(20),
        max_retries: 0,
        ..QueueConfig::default()
    };
    let otlp = Arc::new(
        OtlpExporter::builder(&otlp_url)
            .bearer(OTLP_KEY)
            .protocol(Protocol::Json)
            .queue(queue.clone())
            .build()
            .unwrap(),
    );
    let _ = writeln!(exits.debug, "{otlp:?}");
    // A misspelt endpoint with a password: the error must not repeat it.
    let bad = OtlpExporter::builder(format!("htp:/collector:{OTLP_PW}@host:99999/"))
        .bearer(OTLP_KEY)
        .build()
        .unwrap_err();
    exits.error(&bad);
    // An exporter whose collector redirects to another origin.
    let redirecting_collector = RawServer::start(redirect_to("/v1/traces")).await;
    let otlp_redirected = Arc::new(
        OtlpExporter::builder(&redirecting_collector.url)
            .bearer(OTLP_KEY)
            .queue(queue.clone())
            .build()
            .unwrap(),
    );
    // A collector that refuses the key and echoes it back.
    let echoing_collector = RawServer::start(|_| {
        respond(
            401,
            "text/plain",
            &format!("token {} is not valid here", json_escaped(OTLP_KEY)),
        )
    })
    .await;
    let otlp_refused = Arc::new(
        OtlpExporter::builder(&echoing_collector.url)
            .bearer(OTLP_KEY)
            .queue(queue.clone())
            .build()
            .unwrap(),
    );
    let tracer = Tracer::new()
        .with_exporter(JsonLinesExporter::new(&jsonl_path).unwrap())
        .with_exporter(otlp.clone())
        .with_exporter(otlp_redirected.clone())
        .with_exporter(otlp_refused.clone());

    // --- Provider keys echoed back by a hostile provider ---------------------------------
    let provider = MockServer::start().await.unwrap();
    let openai = OpenAiModel::new("gpt-4o-mini", OPENAI_KEY)
        .base_url(format!("{}/v1", provider.url()))
        .header("X-Custom-Auth", CUSTOM_HEADER)
        .http_client(HttpClient::new().max_retries(0));
    let _ = writeln!(exits.debug, "{openai:?}");
    let echoes = [
        // JSON-escaped, in an error status.
        MockResponse::json(
            401,
            &json!({"error": {"message": "placeholder", "type": "invalid_request_error"}}),
        ),
        // Inside a 200 whose body is an error.
        MockResponse::json(
            200,
            &json!({"error": {"message": format!("key {OPENAI_KEY} revoked")}}),
        ),
        // Inside a malformed 200 (valid JSON, wrong shape).
        MockResponse::json(
            200,
            &json!({"choices": format!("{OPENAI_KEY} {CUSTOM_HEADER}")}),
        ),
        // Inside a malformed 200 (not JSON at all).
        MockResponse::raw(
            200,
            "application/json",
            format!("<html>{OPENAI_KEY}</html>"),
        ),
        // The custom header's value, percent-encoded, and the key escaped twice.
        MockResponse::json(
            400,
            &json!({"error": {"message": format!(
                "header X-Custom-Auth={} refused; raw {}",
                percent_escaped(CUSTOM_HEADER),
                json!({"k": json_escaped(OPENAI_KEY)})
            )}}),
        ),
    ];
    for (i, echo) in echoes.into_iter().enumerate() {
        let echo = if i == 0 {
            MockResponse::raw(
                401,
                "application/json",
                format!(
                    "{{\"error\":{{\"message\":\"Incorrect API key provided: {}\",\"type\":\"invalid_request_error\",\"code\":\"invalid_api_key\"}}}}",
                    json_escaped(OPENAI_KEY)
                ),
            )
        } else {
            echo
        };
        provider.enqueue(echo);
        let err = openai
            .generate(&request())
            .await
            .expect_err("hostile answer");
        exits.error(&err);
    }
    // In a stream's error event (OpenAI), and in Anthropic's `error` event.
    provider.enqueue(MockResponse::sse([SseFrame::data(
        json!({"error": {"message": format!("bad key {OPENAI_KEY}"), "type": "invalid_request_error"}})
            .to_string(),
    )]));
    let mut stream = openai.stream(&request()).await.unwrap();
    while let Some(item) = futures::StreamExt::next(&mut stream).await {
        if let Err(e) = item {
            exits.error(&e);
        }
    }
    let anthropic = AnthropicModel::new("claude-haiku-4-5", ANTHROPIC_KEY)
        .base_url(provider.url())
        .http_client(HttpClient::new().max_retries(0));
    let _ = writeln!(exits.debug, "{anthropic:?}");
    provider.enqueue(MockResponse::sse([SseFrame::event(
        "error",
        json!({"type": "error", "error": {"type": "authentication_error",
               "message": format!("x-api-key {} is invalid", json_escaped(ANTHROPIC_KEY))}})
        .to_string(),
    )]));
    let mut stream = anthropic.stream(&request()).await.unwrap();
    while let Some(item) = futures::StreamExt::next(&mut stream).await {
        if let Err(e) = item {
            exits.error(&e);
        }
    }
    // Azure's api-key header, echoed in a 500.
    let azure = OpenAiModel::azure(&provider.url(), "dep", "2024-06-01", AZURE_KEY)
        .http_client(HttpClient::new().max_retries(0));
    provider.enqueue(MockResponse::raw(
        500,
        "text/plain",
        format!("upstream said: api-key: {AZURE_KEY}"),
    ));
    exits.error(&azure.generate(&request()).await.unwrap_err());

    // The same failures inside traced agent runs: the error reaches the agent error, the
    // trace (JSON lines, OTLP), and the `tracing` span's status.
    provider.enqueue(MockResponse::raw(
        401,
        "application/json",
        format!(
            "{{\"error\":{{\"message\":\"key {}\"}}}}",
            json_escaped(OPENAI_KEY)
        ),
    ));
    let agent = Agent::builder()
        .name("hostile-provider")
        .model(openai.clone())
        .build()
        .unwrap();
    let err = agent
        .invoke("hi")
        .tracer(tracer.clone())
        .await
        .expect_err("the provider refuses");
    exits.error(&err);

    // A base URL with a password, pointing nowhere.
    let nowhere = OpenAiModel::compatible(
        "local",
        "m",
        format!("http://user:{BASE_URL_PW}@127.0.0.1:9/v1"),
    )
    .http_client(HttpClient::new().max_retries(0));
    let _ = writeln!(exits.debug, "{nowhere:?}");
    exits.error(&nowhere.generate(&request()).await.unwrap_err());
    let invalid = HttpClient::new()
        .send(HttpRequest::get(&format!("ht!tp://user:{BASE_URL_PW}@x/")).bearer_auth(OPENAI_KEY))
        .await
        .unwrap_err();
    exits.error(&invalid);
    let _ = writeln!(
        exits.debug,
        "{:?}",
        HttpRequest::post(&format!("http://u:{BASE_URL_PW}@h/x"))
            .bearer_auth(OPENAI_KEY)
            .header("x-custom-auth", CUSTOM_HEADER)
    );

    // --- Redirects to another origin --------------------------------------------------------
    let redirecting = RawServer::start(redirect_to("/v1/chat/completions")).await;
    for model in [
        OpenAiModel::new("gpt-4o-mini", OPENAI_KEY)
            .base_url(format!("{}/v1", redirecting.url))
            .header("X-Custom-Auth", CUSTOM_HEADER),
        OpenAiModel::azure(&redirecting.url, "dep", "2024-06-01", AZURE_KEY),
    ] {
        let model = model.http_client(HttpClient::new().max_retries(0));
        exits.error(&model.generate(&request()).await.unwrap_err());
    }
    let anthropic_redirected = AnthropicModel::new("claude-haiku-4-5", ANTHROPIC_KEY)
        .base_url(&redirecting.url)
        .http_client(HttpClient::new().max_retries(0));
    exits.error(&anthropic_redirected.generate(&request()).await.unwrap_err());

    // --- Trace redaction: what tools return and raise ------------------------------------
    let model = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![
                ToolCall::with_id("t1", "deploy", json!({})),
                ToolCall::with_id("t2", "deploy", json!({"fail": true})),
            ],
        ),
        Message::assistant("deployed"),
    ]);
    let agent = Agent::builder()
        .name("deployer")
        .model(model)
        .tool(leaky_tool())
        .build()
        .unwrap();
    agent.invoke("deploy").tracer(tracer.clone()).await.unwrap();

    // --- Async subagents: a password in the URL, a credential header, a hostile worker ------
    let worker = MockServer::start().await.unwrap();
    let worker_url = worker
        .url()
        .replace("http://", &format!("http://svc:{ASYNC_PW}@"));
    worker.enqueue(MockResponse::json(
        200,
        &json!({"run_id": "r1", "thread_id": "..\\..\\other\\admin", "status": "pending"}),
    ));
    // A check is retried on 5xx: every attempt gets the echo.
    for _ in 0..3 {
        worker.enqueue(MockResponse::raw(
            500,
            "text/plain",
            format!("denied x-worker-key={ASYNC_HEADER} for {worker_url}"),
        ));
    }
    let spec = AsyncSpec::new("researcher", "Researches.", "research")
        .url(&worker_url)
        .header("x-worker-key", ASYNC_HEADER);
    let _ = writeln!(exits.debug, "{spec:?}");
    let redirecting_worker = RawServer::start(redirect_to("/runs")).await;
    let redirected_spec = AsyncSpec::new("elsewhere", "Elsewhere.", "research")
        .url(&redirecting_worker.url)
        .header("x-worker-key", ASYNC_HEADER)
        .header("authorization", format!("Bearer {ASYNC_HEADER}"));
    let supervisor_model = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![
                ToolCall::with_id(
                    "s1",
                    "start_async_task",
                    json!({"description": "dig", "subagent_name": "researcher"}),
                ),
                ToolCall::with_id(
                    "s2",
                    "start_async_task",
                    json!({"description": "dig", "subagent_name": "elsewhere"}),
                ),
            ],
        ),
        Message::assistant("started"),
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id(
                "s3",
                "check_async_task",
                json!({"task_id": "..\\..\\other\\admin"}),
            )],
        ),
        Message::assistant("checked"),
    ]);
    let supervisor = Agent::builder()
        .name("supervisor")
        .model(supervisor_model)
        .async_subagents([spec, redirected_spec])
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    for turn in ["start", "check"] {
        let state = supervisor
            .invoke(turn)
            .thread_id("sup")
            .tracer(tracer.clone())
            .await
            .unwrap()
            .into_state();
        let _ = writeln!(exits.debug, "{:?}", state.async_tasks);
        for m in &state.messages {
            let _ = writeln!(exits.errors, "{}", m.text());
        }
    }
    // The task id stayed one path segment under /runs/ on the first worker (every attempt).
    let paths: Vec<String> = worker.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths[0], "/runs", "{paths:?}");
    assert!(paths.len() >= 2, "{paths:?}");
    for path in &paths[1..] {
        assert_eq!(path, "/runs/..%5C..%5Cother%5Cadmin", "{paths:?}");
    }
    // The run client on its own: errors and Debug.
    let endpoint = Endpoint::new("researcher", "research")
        .url(worker_url.clone())
        .header("x-worker-key", ASYNC_HEADER);
    let _ = writeln!(exits.debug, "{endpoint:?}");
    worker.enqueue(MockResponse::raw(
        401,
        "text/plain",
        format!("bad key {}", percent_escaped(ASYNC_HEADER)),
    ));
    let client = HttpRunClient::with_http(HttpClient::new().max_retries(0));
    exits.error(&client.check(&endpoint, "r1").await.unwrap_err());
    worker.enqueue(MockResponse::raw(
        200,
        "application/json",
        format!("[\"{ASYNC_PW}\"]"),
    ));
    exits.error(&client.check(&endpoint, "r1").await.unwrap_err());

    // --- Collect every exit -------------------------------------------------------------------
    // (The tracer's flush also waits for the redirected exporter, whose batches fail.)
    let _ = tracer.flush(Duration::from_secs(20));
    assert!(
        otlp.flush(Duration::from_secs(20)),
        "{:?}",
        otlp.queue_stats()
    );
    for exporter in [&otlp_redirected, &otlp_refused] {
        let stats = exporter.queue_stats();
        let error = stats.last_error.expect("the refused exports failed");
        exits.error(&error);
        let _ = writeln!(exits.debug, "{exporter:?}");
    }
    let jsonl = std::fs::read_to_string(&jsonl_path).unwrap();
    let otlp_bodies: String = receiver
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    for r in elsewhere.requests() {
        exits.redirect.push_str(&r.all_text());
    }
    let log_text = logs.text();

    // The exits really carried the runs (so zero counts mean something).
    assert!(
        jsonl.contains("deployer") && jsonl.contains("supervisor"),
        "{jsonl}"
    );
    assert!(
        otlp_bodies.contains("deployer"),
        "the OTLP receiver got the runs"
    );
    assert!(exits.errors.contains("[REDACTED]"), "the echoes were there");
    assert!(jsonl.contains("[REDACTED]"));
    assert!(
        log_text.contains("kit::http"),
        "the subscriber captured kit's logs"
    );

    let exits_text: [(&str, &str); 6] = [
        ("errors", &exits.errors),
        ("Debug", &exits.debug),
        ("logs", &log_text),
        ("JSON lines", &jsonl),
        ("OTLP", &otlp_bodies),
        ("redirect", &exits.redirect),
    ];
    let mut table = String::from(
        "secret                          errors Debug  logs   JSONL  OTLP   redirect\n",
    );
    let mut counts: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (name, secret) in SECRETS {
        let _ = write!(table, "{name:<32}");
        for (exit, text) in &exits_text {
            let n = text.matches(secret).count();
            counts.insert((name, exit), n);
            let _ = write!(table, "{n:<7}");
        }
        table.push('\n');
    }
    println!("{table}");
    let leaks: Vec<_> = counts.iter().filter(|(_, n)| **n > 0).collect();
    assert!(
        leaks.is_empty(),
        "secrets leaked: {leaks:?}\n{table}\nerrors:\n{}\nDebug:\n{}",
        exits.errors,
        exits.debug
    );
    // Nothing at all reached the other origin.
    assert!(
        elsewhere.requests().is_empty(),
        "a redirect was followed to another origin: {}",
        exits.redirect
    );
}
