//! The filesystem middleware: `ls`, `read_file`, `write_file`, `edit_file`, `delete`, `glob`
//! and `grep` over a pluggable backend, and eviction of large tool results to files.
//!
//! By default the files live in the agent state's `files` channel ([`StateBackend`]): they
//! are per thread, checkpointed with it, and merged by path at the end of each turn (a `None`
//! deletes). [`DirectoryBackend`] uses a real directory instead, confined to its root, and
//! [`StoreBackend`] the long-term store:
//!
//! | | [`StateBackend`] (default) | [`DirectoryBackend`] | [`StoreBackend`] |
//! | --- | --- | --- | --- |
//! | Files live in | the `files` channel of the agent state | a directory on disk | the agent's long-term [store](crate::store) |
//! | Per thread | yes: each thread has its own files | no: every thread and run shares the directory | no: every thread using the store and namespace shares them |
//! | Checkpointed, restored with the thread, rewound with time travel | yes | no | no |
//! | Visible to other programs | no (read `AgentState::files`) | yes | through the store |
//! | A write is seen by | the next model turn (updates apply at the end of the turn) | every later call, at once | every later call, at once |
//! | Size | every file is part of the thread's checkpoints | unlimited by kit | listing reads the namespace's files |
//!
//! [`StoreBackend`] keeps files in the agent's long-term [store](crate::store), shared by every
//! thread; route a prefix to it with [`CompositeBackend`] and keep the rest per thread, as
//! deepagents does for `/memories/`:
//!
//! ```
//! use kit::agent::Agent;
//! use kit::middleware::filesystem::{CompositeBackend, FilesystemMiddleware, StateBackend, StoreBackend};
//! use kit::store::MemoryStore;
//! use kit::testing::ScriptedModel;
//! use kit::{Message, ToolCall};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let write = |path: &str| Message::assistant_with_tool_calls("", vec![ToolCall::new(
//!     "write_file", json!({"file_path": path, "content": "Ada prefers tea\n"}),
//! )]);
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new([write("/memories/ada.md"), Message::assistant("Saved.")]))
//!     .filesystem(FilesystemMiddleware::new().backend(
//!         CompositeBackend::new(StateBackend::new()).route("/memories/", StoreBackend::new())?,
//!     ))
//!     .store(MemoryStore::new())
//!     .build()?;
//! let state = agent.invoke("Remember that I prefer tea.").await?.into_state();
//! assert!(state.files.is_empty()); // not in the thread: in the store
//! let store = agent.graph().store().expect("given above");
//! let ns = kit::store::Namespace::new(["filesystem"])?;
//! assert_eq!(store.get(&ns, "/ada.md").await?.unwrap().value["content"], "Ada prefers tea\n");
//! # Ok(()) }
//! ```
//!
//! Other storage (a database, an object store) plugs in by implementing [`FsBackend`].
//!
//! ```
//! use kit::agent::Agent;
//! use kit::middleware::filesystem::FilesystemMiddleware;
//! use kit::testing::ScriptedModel;
//! use kit::{Message, RunOptions, ToolCall};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::agent::AgentError> {
//! let model = ScriptedModel::new([
//!     Message::assistant_with_tool_calls("", vec![ToolCall::with_id(
//!         "c1", "write_file", json!({"file_path": "/notes.txt", "content": "buy milk\n"}),
//!     )]),
//!     Message::assistant("Noted."),
//! ]);
//! let agent = Agent::builder()
//!     .model(model)
//!     .filesystem(FilesystemMiddleware::new())
//!     .build()?;
//! let state = agent.invoke("Remember to buy milk").await?.into_state();
//! assert_eq!(state.files["/notes.txt"].content, "buy milk\n");
//! # Ok(()) }
//! ```
//!
//! **Tools and texts.** Names, arguments, defaults, output formats and error texts follow
//! deepagents' filesystem middleware, so prompts written for it work: `read_file` pages with a
//! `@@ lines 1-100 of 150 | next offset 100 @@` header, `ls` and `glob` answer with a list such
//! as `['/a.txt', '/dir/']`, errors start with `Error: ` and have the error status.
//! `write_file` overwrites (early deepagents refused to), `grep` is literal with an opt-in
//! `regex` mode, and paths are checked the same way by every backend (a relative path is taken
//! from `/`; `..` may not leave the root).
//!
//! **Parallel calls.** Calls of one model turn run in parallel and see the files as they were
//! at that turn. Two mutations (`write_file`, `edit_file`, `delete`) of the same path in one
//! turn would race, so the second one (in call order) is answered with
//! `Error: parallel file mutations to the same path are not allowed.` and never runs.
//!
//! **Large results.** A result of any other tool longer than the eviction threshold (default
//! 80,000 characters) is written to `/large_tool_results/<call id>` and replaced by a message
//! with the path, how to page through it with `read_file`, and a preview of its head and tail.

mod backend;
mod eviction;
mod glob;
mod limits;
mod page;
mod path;
mod tools;

pub use backend::{
    CompositeBackend, DirEntry, DirectoryBackend, FileChanges, FsBackend, FsError, StateBackend,
    StoreBackend,
};
pub use eviction::{LARGE_TOOL_RESULTS_DIR, eviction_path, sanitize_call_id};
pub use limits::FsLimits;
pub use page::FilePage;
pub use path::{MAX_PATH_BYTES, PathError, normalize_path};

/// Compiles a `glob` pattern and matches one path against it (for [`crate::fuzz`]).
pub(crate) fn glob_matches(
    pattern: &str,
    path: &str,
    base: &str,
    limits: &FsLimits,
) -> Result<bool, String> {
    let mut steps = glob::Steps::new(limits.max_glob_steps);
    glob::Glob::with_limits(pattern, limits)?
        .matches(path, base, &mut steps)
        .map_err(|glob::Spent| glob::spent_error(limits.max_glob_steps))
}

pub(crate) use tools::grep_lines;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use crate::agent::AgentState;
use crate::agent::Placement;
use crate::agent::{AgentStateUpdate, Hook, HookResult, HookUpdate, Middleware, Runtime, ToolNext};
use crate::graph::Pause;
use crate::message::{Content, ContentPart, Message, Role, ToolCall};
use crate::state::Write;
use crate::tool::{Tool, ToolContext, ToolExecution};

/// The default eviction threshold and `read_file` page budget, in characters (deepagents'
/// 20,000 tokens at 4 characters per token).
pub const DEFAULT_MAX_CHARS: usize = 80_000;

/// One of the filesystem tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FsTool {
    /// `ls`: list a directory.
    Ls,
    /// `read_file`: read a file a page at a time (always enabled).
    ReadFile,
    /// `write_file`: create or overwrite a file.
    WriteFile,
    /// `edit_file`: replace an exact string.
    EditFile,
    /// `delete`: delete a file or a directory.
    Delete,
    /// `glob`: find files by pattern.
    Glob,
    /// `grep`: search file contents.
    Grep,
}

impl FsTool {
    /// Every tool, in the order the model sees them.
    pub const ALL: [FsTool; 7] = [
        FsTool::Ls,
        FsTool::ReadFile,
        FsTool::WriteFile,
        FsTool::EditFile,
        FsTool::Delete,
        FsTool::Glob,
        FsTool::Grep,
    ];

    /// The tool's name.
    pub fn name(self) -> &'static str {
        match self {
            FsTool::Ls => "ls",
            FsTool::ReadFile => "read_file",
            FsTool::WriteFile => "write_file",
            FsTool::EditFile => "edit_file",
            FsTool::Delete => "delete",
            FsTool::Glob => "glob",
            FsTool::Grep => "grep",
        }
    }

    /// The tool with this name.
    pub fn from_name(name: &str) -> Option<FsTool> {
        FsTool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// True for the tools that change files (`write_file`, `edit_file`, `delete`).
    pub fn is_mutation(self) -> bool {
        matches!(self, FsTool::WriteFile | FsTool::EditFile | FsTool::Delete)
    }
}

/// Adds a filesystem to an agent: the tools, their system-prompt section, the same-path
/// guard for parallel mutations, and large-result eviction.
///
/// ```
/// use kit::middleware::filesystem::{FilesystemMiddleware, FsTool};
///
/// // Read-only tools; evict results over 20,000 characters.
/// let fs = FilesystemMiddleware::new()
///     .expose([FsTool::Ls, FsTool::Glob, FsTool::Grep])
///     .eviction_threshold(Some(20_000));
/// assert_eq!(
///     fs.enabled_tools(),
///     [FsTool::Ls, FsTool::ReadFile, FsTool::Glob, FsTool::Grep]
/// );
/// ```
pub struct FilesystemMiddleware {
    backend: Arc<dyn FsBackend>,
    enabled: Vec<FsTool>,
    eviction_threshold: Option<usize>,
    /// Thresholds of particular tools, over the general one.
    tool_thresholds: BTreeMap<String, usize>,
    max_output_chars: usize,
    limits: FsLimits,
    system_prompt: Option<String>,
    descriptions: BTreeMap<FsTool, String>,
}

impl std::fmt::Debug for FilesystemMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilesystemMiddleware")
            .field("enabled", &self.enabled)
            .field("eviction_threshold", &self.eviction_threshold)
            .field("max_output_chars", &self.max_output_chars)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Default for FilesystemMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

crate::shared::into_shared! {
    /// What [`FilesystemMiddleware::backend`] accepts: a backend, or one already shared.
    IntoFsBackend::into_fs_backend => FsBackend
}

impl FilesystemMiddleware {
    /// All seven tools over the agent state ([`StateBackend`]), evicting tool results over
    /// [`DEFAULT_MAX_CHARS`].
    pub fn new() -> Self {
        FilesystemMiddleware {
            backend: Arc::new(StateBackend),
            enabled: FsTool::ALL.to_vec(),
            eviction_threshold: Some(DEFAULT_MAX_CHARS),
            tool_thresholds: BTreeMap::new(),
            max_output_chars: DEFAULT_MAX_CHARS,
            limits: FsLimits::default(),
            system_prompt: None,
            descriptions: BTreeMap::new(),
        }
    }

    /// Stores files in `backend` instead of the agent state.
    #[must_use]
    pub fn backend(mut self, backend: impl IntoFsBackend) -> Self {
        self.backend = backend.into_fs_backend();
        self
    }

    /// Exposes only these tools (`read_file` is always exposed). Tool names never change.
    #[must_use]
    pub fn expose(mut self, tools: impl IntoIterator<Item = FsTool>) -> Self {
        let mut wanted: HashSet<FsTool> = tools.into_iter().collect();
        wanted.insert(FsTool::ReadFile);
        self.enabled = FsTool::ALL
            .into_iter()
            .filter(|t| wanted.contains(t))
            .collect();
        self
    }

    /// Results of other tools longer than this many characters are evicted to a file; `None`
    /// turns eviction off. Default [`DEFAULT_MAX_CHARS`].
    #[must_use]
    pub fn eviction_threshold(mut self, chars: Option<usize>) -> Self {
        self.eviction_threshold = chars;
        self
    }

    /// Results of `tool` longer than this many characters are evicted to a file, whatever the
    /// general threshold (even with eviction otherwise off): a subagent's report (`task`) over
    /// a size goes to the filesystem and the parent gets its path, as deepagents does for large
    /// tool results.
    #[must_use]
    pub fn evict_tool_results_over(mut self, tool: impl Into<String>, chars: usize) -> Self {
        self.set_tool_threshold(tool, chars);
        self
    }

    /// [`evict_tool_results_over`](Self::evict_tool_results_over) in place.
    pub(crate) fn set_tool_threshold(&mut self, tool: impl Into<String>, chars: usize) {
        self.tool_thresholds.insert(tool.into(), chars);
    }

    /// The eviction threshold of `tool`'s results, if its results are evicted.
    fn threshold_of(&self, tool: &str) -> Option<usize> {
        match self.tool_thresholds.get(tool) {
            Some(&chars) => Some(chars),
            None if FsTool::from_name(tool).is_some() => None,
            None => self.eviction_threshold,
        }
    }

    /// The most characters one `read_file` page (and an `ls`, `glob` or `grep` answer) holds;
    /// longer output is cut with a notice. Default [`DEFAULT_MAX_CHARS`].
    #[must_use]
    pub fn max_output_chars(mut self, chars: usize) -> Self {
        self.max_output_chars = chars.max(1);
        self
    }

    /// What one tool call may read or expand (see [`FsLimits`]).
    #[must_use]
    pub fn limits(mut self, limits: FsLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Replaces the system-prompt section that describes the tools.
    #[must_use]
    pub fn prompt(mut self, text: impl Into<String>) -> Self {
        self.system_prompt = Some(text.into());
        self
    }

    /// Replaces one tool's description.
    #[must_use]
    pub fn tool_description(mut self, tool: FsTool, description: impl Into<String>) -> Self {
        self.descriptions.insert(tool, description.into());
        self
    }

    /// The exposed tools, in the order the model sees them.
    pub fn enabled_tools(&self) -> &[FsTool] {
        &self.enabled
    }

    fn enabled_mutation(&self, name: &str) -> bool {
        FsTool::from_name(name).is_some_and(|t| t.is_mutation() && self.enabled.contains(&t))
    }

    fn default_system_prompt(&self) -> String {
        let names: Vec<String> = self
            .enabled
            .iter()
            .map(|t| format!("`{}`", t.name()))
            .collect();
        let mut text = format!(
            "## Filesystem tools {}\n\nYou have a filesystem. Paths are absolute and start with \
             `/`.\n",
            names.join(", ")
        );
        for tool in &self.enabled {
            let line = match tool {
                FsTool::Ls => "- ls: list the files and directories in a directory",
                FsTool::ReadFile => {
                    "- read_file: read a file, 100 lines at a time by default; page through \
                     large files with offset and limit"
                }
                FsTool::WriteFile => "- write_file: create a file, or replace its content",
                FsTool::EditFile => {
                    "- edit_file: replace an exact string in a file (read the file first)"
                }
                FsTool::Delete => "- delete: delete a file, or a directory with its contents",
                FsTool::Glob => "- glob: find files by pattern, e.g. `**/*.py`",
                FsTool::Grep => {
                    "- grep: search files for literal text (set `regex` to true for a regular \
                     expression)"
                }
            };
            text.push('\n');
            text.push_str(line);
        }
        if self.enabled.iter().any(|t| t.is_mutation()) {
            text.push_str(
                "\n\nChange a file with one call per turn: two changes to the same path in one \
                 turn are refused.",
            );
        }
        if self.eviction_threshold.is_some() {
            text.push_str(&format!(
                "\n\n## Large tool results\n\nA tool result that is too large is saved to \
                 `{LARGE_TOOL_RESULTS_DIR}/<tool_call_id>` and you get a preview instead. Read \
                 it in parts with read_file (offset and limit), or search it with grep."
            ));
        }
        text
    }

    /// Answers the second and later mutations of the same path in the last model turn.
    fn refuse_parallel_mutations(&self, state: &AgentState) -> Vec<Message> {
        let Some(ai) = state.last_ai_index().map(|i| &state.messages[i]) else {
            return Vec::new();
        };
        let pending: HashSet<&str> = state
            .pending_tool_calls()
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        let mut touched: HashSet<String> = HashSet::new();
        let mut refused = Vec::new();
        for call in &ai.tool_calls {
            if !pending.contains(call.id.as_str()) || !self.enabled_mutation(&call.name) {
                continue;
            }
            let Some(path) = call
                .args
                .get("file_path")
                .and_then(serde_json::Value::as_str)
                .and_then(|p| normalize_path(p).ok())
            else {
                continue; // the tool reports the bad argument itself
            };
            if !touched.insert(path) {
                refused.push(
                    Message::tool_error(&call.id, tools::PARALLEL_MUTATION_ERROR)
                        .with_name(&call.name),
                );
            }
        }
        refused
    }

    async fn evict(&self, call: &ToolCall, ctx: &ToolContext, execution: &mut ToolExecution) {
        let Some(threshold) = self.threshold_of(&call.name) else {
            return;
        };
        let text = execution.message.content.text();
        // Bytes bound characters from above: most results skip the count.
        if text.len() <= threshold || text.chars().count() <= threshold {
            return;
        }
        let path = eviction_path(&call.id);
        let message = eviction::eviction_message(&call.id, &path, &text);
        match self.backend.write(ctx, &path, text).await {
            Ok(changes) => {
                execution.message.content = match &execution.message.content {
                    Content::Parts(parts) => {
                        let mut kept = vec![ContentPart::text(message)];
                        kept.extend(
                            parts
                                .iter()
                                .filter(|p| !matches!(p, ContentPart::Text { .. }))
                                .cloned(),
                        );
                        Content::Parts(kept)
                    }
                    Content::Text(_) => Content::Text(message),
                };
                add_file_changes(&mut execution.update, changes);
            }
            Err(e) => {
                tracing::warn!(
                    tool = %call.name,
                    call_id = %call.id,
                    error = %e,
                    "could not evict a large tool result to {path}; keeping it in the conversation"
                );
            }
        }
    }
}

/// Adds file changes to a tool's state update.
fn add_file_changes(update: &mut Option<AgentStateUpdate>, changes: FileChanges) {
    if changes.is_empty() {
        return;
    }
    let update = update.get_or_insert_with(AgentStateUpdate::new);
    update.files = Some(match update.files.take() {
        None => Write::Value(changes),
        Some(Write::Value(mut existing)) => {
            existing.extend(changes);
            Write::Value(existing)
        }
        Some(Write::Overwrite(mut existing)) => {
            existing.extend(changes);
            Write::Overwrite(existing)
        }
    });
}

#[crate::async_trait]
impl Middleware for FilesystemMiddleware {
    fn placement(&self) -> Placement {
        Placement::FILESYSTEM
    }

    fn name(&self) -> &str {
        "FilesystemMiddleware"
    }

    fn hooks(&self) -> &[Hook] {
        if self.enabled.iter().any(|t| t.is_mutation()) {
            &[Hook::AfterModel]
        } else {
            &[]
        }
    }

    fn tools(&self) -> Vec<Tool> {
        let shared = Arc::new(tools::Shared {
            backend: self.backend.clone(),
            max_output_chars: self.max_output_chars,
        });
        self.enabled
            .iter()
            .map(|&t| {
                tools::build_with_limits(
                    t,
                    shared.clone(),
                    self.descriptions.get(&t).map(String::as_str),
                    self.limits,
                )
            })
            .collect()
    }

    fn system_prompt(&self) -> Option<String> {
        Some(
            self.system_prompt
                .clone()
                .unwrap_or_else(|| self.default_system_prompt()),
        )
    }

    async fn after_model(&self, state: &AgentState, _rt: &Runtime) -> HookResult {
        let refused = self.refuse_parallel_mutations(state);
        if refused.is_empty() {
            return Ok(None);
        }
        Ok(Some(HookUpdate::messages(refused)))
    }

    async fn wrap_tool_call(
        &self,
        call: ToolCall,
        ctx: ToolContext,
        _rt: &Runtime,
        next: ToolNext<'_>,
    ) -> Result<ToolExecution, Pause> {
        if self.threshold_of(&call.name).is_none() {
            return next.call(call, ctx).await;
        }
        let mut execution = next.call(call.clone(), ctx.clone()).await?;
        if execution.message.role == Role::Tool {
            self.evict(&call, &ctx, &mut execution).await;
        }
        Ok(execution)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
