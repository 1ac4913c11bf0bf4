//! The valid samples the generators start from, and the tokens they sprinkle in.

/// Tokens that parsers of text, JSON, event streams, URLs and patterns trip on.
pub(super) const TOKENS: &[&str] = &[
    "\n",
    "\r",
    "\r\n",
    "\n\n",
    ":",
    "data:",
    "data: ",
    "event: error\n",
    "id: \0\n",
    "retry: 99999999999999999999\n",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "\\",
    "\\u",
    "\\ud800",
    "\\udfff",
    "\\u0000",
    "\u{feff}",
    "\0",
    ",",
    "null",
    "true",
    "-1",
    "0",
    "1e400",
    "-1e400",
    "18446744073709551616",
    "-9223372036854775809",
    "340282366920938463463374607431768211456",
    "999999999999999999999999999999",
    "NaN",
    "\u{10ffff}",
    "é",
    "{a,}",
    "**",
    "[!",
    "..",
    "%2e%2e",
    "%00",
    "%",
    "/",
    "?",
    "#",
    "[DONE]",
];

pub(super) const SSE_SEEDS: &[&str] = &[
    "event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
    "data: {\"a\":1}\r\n\r\n: keep-alive\r\n\r\ndata: [DONE]\r\n\r\n",
    "id: 7\nevent: x\ndata: line1\ndata: line2\n\nretry: 100\n\n",
    "data:no-space\rdata: cr\r\r",
    ": comment only\n\n\n\n",
];

pub(super) const OPENAI_JSON_SEEDS: &[&str] = &[
    r#"{"id":"c1","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":3}}}"#,
    r#"{"choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"add","arguments":"{\"a\":1,\"b\":2}"}},{"function":{"name":"x","arguments":{"k":[1,2]}}}]},"finish_reason":"tool_calls"}]}"#,
    r#"{"choices":[{"message":{"refusal":"no"}}]}"#,
    r#"{"error":{"message":"Incorrect API key","type":"invalid_request_error","code":"invalid_api_key"}}"#,
    r#"{"choices":[]}"#,
];

pub(super) const OPENAI_STREAM_SEEDS: &[&str] = &[
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":18446744073709551615}}\n\ndata: [DONE]\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"add\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":18446744073709551615,\"function\":{\"arguments\":\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
    "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n",
];

pub(super) const ANTHROPIC_JSON_SEEDS: &[&str] = &[
    r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"Hi"},{"type":"tool_use","id":"tu_1","name":"add","input":{"a":1}}],"stop_reason":"tool_use","usage":{"input_tokens":18446744073709551615,"output_tokens":2,"cache_read_input_tokens":18446744073709551615,"cache_creation_input_tokens":7}}"#,
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    r#"{"content":[{"type":"thinking","thinking":"..."}],"stop_reason":"end_turn"}"#,
];

pub(super) const ANTHROPIC_STREAM_SEEDS: &[&str] = &[
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":18446744073709551615,\"cache_read_input_tokens\":9}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"add\",\"input\":{}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":9,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}\n\n",
    "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
];

pub(super) const ERROR_SEEDS: &[&str] = &[
    r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
    r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
    r#"{"object":"error","message":"bad","type":"BadRequestError","code":400}"#,
    r#"{"error":"model 'nope' not found"}"#,
    "<html>502 Bad Gateway</html>",
];

pub(super) const RUN_REQUEST_SEEDS: &[&str] = &[
    r#"{"assistant_id":"research","input":{"messages":[{"role":"user","content":"hi"}]},"metadata":{"k":1},"multitask_strategy":"enqueue"}"#,
    r#"{"assistant_id":"research","thread_id":"t1","command":{"resume":{"approved":true}}}"#,
    r#"{"graph_id":"g","input":{},"multitask_strategy":"rollback"}"#,
    "   ",
];

pub(super) const BLOB_SEEDS: &[&str] = &[
    r#"[{"id":"m1","role":"user","content":"hi"},{"id":"m2","role":"assistant","content":"yo","tool_calls":[{"id":"c","name":"t","args":{}}],"usage":{"input_tokens":18446744073709551615,"output_tokens":1}}]"#,
    r#"{"/a.txt":{"content":"x","encoding":"utf-8"}}"#,
    "[]",
    "null",
];
