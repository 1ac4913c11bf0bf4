//! Built-in middleware: the agent's opt-in capabilities and guardrails.
//!
//! | middleware | agent option | what it adds |
//! |---|---|---|
//! | [`todos::TodoMiddleware`] | `middleware(..)` | planning with `write_todos` |
//! | [`filesystem::FilesystemMiddleware`] | `filesystem(..)` | a virtual filesystem (`ls`, `read_file`, `write_file`, `edit_file`, `delete`, `glob`, `grep`) in the state or a real directory, and eviction of large tool results to files |
//! | [`subagents::SubagentMiddleware`] | `subagents(..)` | the `task` tool: sync subagents |
//! | [`async_subagents::AsyncSubagentMiddleware`] | `async_subagents(..)` | `start/check/update/cancel/list_async_task(s)`: background work on remote workers |
//! | [`compaction::CompactionMiddleware`] | `compact_conversation(true)` | summarises old messages |
//! | [`overflow::OverflowRecoveryMiddleware`] | `overflow_recovery(true)` | compacts and retries when the provider says the context is full |
//! | [`pii::PiiMiddleware`] | `middleware(..)` | guardrail: redacts, masks, hashes or blocks emails, cards, IPs, MAC addresses, URLs and custom types in input, output (text and tool-call arguments) and tool results |
//! | [`moderation::ModerationMiddleware`] | `middleware(..)` | guardrail: checks input, output and tool results with OpenAI's moderation endpoint; ends the run, replaces the content or fails when something is flagged |
//! | [`review::HumanReviewMiddleware`] | `middleware(..)` | guardrail: pauses the run for a person to approve, edit, reject or answer the model's calls of chosen tools |
//! | [`guardrail::TopicFilter`] | `middleware(..)` | guardrail: refuses requests (and optionally answers) on blocked topics; [`guardrail`] documents how to write your own |
//! | [`fallback::ModelFallbackMiddleware`] | `middleware(..)` | tries other models, in order, when the model call fails |
//! | [`retry::ModelRetryMiddleware`] | `middleware(..)` | retries failed model calls with backoff (transient errors by default) |
//! | [`retry::ToolRetryMiddleware`] | `middleware(..)` | retries failed tool calls with backoff |
//! | [`call_limits::ModelCallLimitMiddleware`] | `middleware(..)` | limits model calls per run and per thread (end or fail) |
//! | [`call_limits::ToolCallLimitMiddleware`] | `middleware(..)` | limits calls of one tool or all, per run and per thread (block, end or fail) |
//! | [`context_editing::ContextEditingMiddleware`] | `middleware(..)` | clears old tool results from the request past a token budget |
//! | [`prompt_caching::AnthropicPromptCachingMiddleware`] | `middleware(..)` | places Anthropic cache breakpoints on every request |
//! | [`tool_selector::LLMToolSelectorMiddleware`] | `middleware(..)` | a cheap model picks the tools the agent's model sees |
//! | [`router::ModelRoutingMiddleware`] | `middleware(..)` | a cheap model picks the model that serves each request |
//! | [`budget::BudgetMiddleware`] | `budget(..)` | hard limits on tokens, dollars, wall time and model calls, per run and per subagent |
//!
//! The prebuilt middleware of LangChain 1.x keep its names (in events, traces and errors), its
//! options and the texts the model sees, so prompts written for LangChain carry over; in
//! `#[agent]` they go in `middleware = [..]`.

pub mod async_subagents;
pub mod budget;
pub mod call_limits;
mod capabilities;
pub mod compaction;
pub mod context_editing;
pub mod fallback;
pub mod filesystem;
pub mod guardrail;
pub mod moderation;
pub mod overflow;
pub mod pii;
pub mod prompt_caching;
pub(crate) mod python;
pub mod retry;
pub mod review;
pub mod router;
pub mod subagents;
mod support;
mod task_files;
pub mod todos;
pub mod tool_selector;

pub use capabilities::Subagent;
