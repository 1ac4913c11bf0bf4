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

pub mod async_subagents;
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
pub mod todos;
pub mod tool_selector;

pub use capabilities::Subagent;
