#!/usr/bin/env bash
# Runs the offline examples and checks their output for the lines that prove they worked.
set -euo pipefail
cd "$(dirname "$0")/.."

expect() {
  local example=$1; shift
  local out
  # stdin is not a terminal, so interactive examples take their non-interactive path.
  out=$(cargo run -q --all-features --example "$example" 2>&1 </dev/null) || {
    echo "$out"; echo "example $example failed"; exit 1; }
  for line in "$@"; do
    if ! grep -qF -- "$line" <<<"$out"; then
      echo "$out"; echo "example $example: missing '$line'"; exit 1
    fi
  done
  echo "example $example: ok"
}

expect graph "paused in \`refund\`" "resolution: refunded" "3 checkpoints"
expect agent "← convert: \"108.00 USD\"" "follow-up answer: Together that is 171.50 USD." "guardrail: I can only help with currency questions."
expect filesystem "← write_file (error): Error: parallel file mutations to the same path are not allowed." "@@ lines 101-103 of 250 | next offset 103 @@" "on disk, todo.md"
OPENAI_API_KEY= ANTHROPIC_API_KEY= KIT_MODEL= expect tools "model: scripted (offline" "tool call: get_weather({\"city\":\"Paris\"})" "tool call: calculate(" "answer: Paris is 18°C and sunny, Oslo 4°C with light rain: Paris is 14 degrees warmer."
KIT_TOOLS_MOCK_PROVIDER=1 OPENAI_API_KEY= ANTHROPIC_API_KEY= KIT_MODEL= expect tools "model: openai:gpt-4o-mini (real provider)" "tool call: get_weather({\"city\":\"Oslo\"})" "result: {\"result\":14" "answer: Paris is 18°C and sunny" "answered 3 requests"
expect memory "[process 2] restored 2 messages from turn 1" \
  "assistant: You told me earlier: \"Hi, I'm Ada and my favourite colour is green.\"" \
  "the second process continued the conversation from the file"
expect memory_store "files kept in the thread: [\"/scratch.md\"]" "← recall: 0.55 Ada drinks green tea, never coffee" "← read_file (error): Error: File '/scratch.md' not found" "[store] events: [\"Ada moved to Lyon in March\"]" "there at first: true, after 1.2 s: false; swept 1 expired item(s)"
expect deep_agent "[task:researcher:research] researcher-model: - tokio" "← write_file: Updated file /report.md" "[completed] Write the report to /report.md"
expect guardrails "model saw:  Refund order 42 and email the receipt to [REDACTED_EMAIL]. Card: ****-****-****-1111." "stdin is not a terminal: approving every call" "← send_email: sent to customer-42: Refunded 30.00 to card ****-****-****-1111." "final answer: Summary: lookup_order done, refund done, send_email done." "streamed: Done: 30.00 EUR went back to the card **** **** **** 1111 you paid with."
expect trace_viewer "trace: 16 runs in 1 trace(s), 1 failed, 4 model calls, 1388 → 128 tokens, \$0.0055" "└─ execute_tool refund" "✗ Error: payment gateway timeout after 5s" "viewer: " "kit-trace.html"
expect async_subagents "status while the tool waits: running" "follow-up queued on the same task" "result: Report on the Rust 1.0 release: 3 sources agree about the Rust 1.0 release" "agent: researcher  status: success" "worker stopped"
expect runtime_assembly "tools: [\"lookup_order\", \"refund\", \"send_email\"]" "not enabled: [\"check_stock\"]" "paused for review: refund(" "Refunds move money — allowed: approve, reject" "answer: Refunded 49.90 EUR on order A-17 and emailed customer 7." "the model was called 3 times with temperature 0.2 and max_tokens 400"
OPENAI_API_KEY= ANTHROPIC_API_KEY= KIT_MODEL= expect quickstart "using kit's scripted model" "[researcher] says: Churn is" "← start_async_task:" "⏸ human review: send_email" "(stdin is not a terminal: approving automatically)" "async tasks: [\"analyst (success)\"]" "Questions go to [REDACTED_EMAIL]." "look at it: open file://" "  [completed] Email the ops team" 'files: ["/brief.md"]' "checkpoints in target/kit-quickstart/threads.sqlite"
expect resilience "answered by gpt-4o-mini" "requests: 2 to Anthropic, 1 to OpenAI" "stopped: node \`model\` failed in step 6: budget exhausted: input_tokens 3000 of 2500 allowed" "answer: Four words defined." "spent over both runs: 5000 input tokens"
# Needs the Temporal dev server .ci/temporal.sh started (KIT_TEST_TEMPORAL_ADDRESS).
expect temporal "connected to Temporal at $KIT_TEST_TEMPORAL_ADDRESS" "paused in \`approve\`: \"refund 49.90 EUR on order A-17?\"" "refund log: looked up order A-17 → reviewer said \"approve\" → paid 49.90 EUR back" "node activities: [\"look_up\", \"approve\", \"approve\", \"pay\"]" "agent answer: We have 12 units of A-17." "agent activities: [\"model\", \"tools\", \"model\"]" "worker stopped"
expect mcp "tool from MCP: check_stock — Looks up how many units of a product are in stock." "← check_stock: 12 units of A-17 (blue kettle) in the Lyon warehouse" "← check_stock (error): Error: no product with SKU Z-99" "trace runs of MCP calls: [\"tools/call check_stock @ inventory\", \"tools/call check_stock @ inventory\"]"
# The same tool served over stdio, as an MCP host would run it: a handshake and one call.
mcp_stdio=$({ printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"ci","version":"0"}}}' \
  '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"check_stock","arguments":{"sku":"A-17"}}}'
  sleep 3; } |  # keep stdin open until the answers are out: the server stops at end of input
  timeout 60 cargo run -q --all-features --example mcp -- serve 2>/dev/null) || true
for line in '"serverInfo":{"name":"inventory"' '"text":"12 units of A-17 (blue kettle) in the Lyon warehouse"'; do
  grep -qF -- "$line" <<<"$mcp_stdio" || { echo "$mcp_stdio"; echo "example mcp -- serve: missing '$line'"; exit 1; }
done
echo "example mcp -- serve (stdio): ok"
