//! The seven filesystem tools: schemas, descriptions, output formats and error texts.

mod descriptions;
use descriptions::{default_description, schema};

use std::sync::Arc;

use serde_json::Value;

use super::FsTool;
use super::backend::{FileChanges, FsBackend, FsError};
use super::glob::{Glob, Spent, Steps, spent_error};
use super::limits::FsLimits;
use super::path::normalize_path;
use crate::agent::AgentStateUpdate;
use crate::middleware::python::py_str;
use crate::middleware::support::offload;
use crate::tool::{DynTool, Tool, ToolContext, ToolError, ToolOutput};

/// `read_file`'s default `limit`.
pub(crate) const DEFAULT_READ_LIMIT: i64 = 100;
/// `grep`'s default `max_count`.
pub(crate) const DEFAULT_GREP_MAX_COUNT: i64 = 1000;

pub(crate) const EMPTY_CONTENT_WARNING: &str =
    "System reminder: File exists but has empty contents";
pub(crate) const PARALLEL_MUTATION_ERROR: &str =
    "Error: parallel file mutations to the same path are not allowed.";
pub(crate) const EMPTY_OLD_STRING_ERROR: &str =
    "Error: old_string cannot be empty. Provide the exact text to replace.";
pub(crate) const NO_MATCHES: &str = "No matches found";
pub(crate) const NO_FILES: &str = "No files found";
pub(crate) const LITERAL_GREP_NOTE: &str = "Note: grep matches literal text, not regex, so \
    characters like `|`, `.*`, and `\\.` are searched verbatim. Search for the literal text you \
    need instead; for `|` alternation, run a separate search per alternative. To search with a \
    regular expression, call grep again with `regex` set to true.";
const TRUNCATION_GUIDANCE: &str =
    "... [results truncated, try being more specific with your parameters]";

/// What every tool shares.
pub(crate) struct Shared {
    pub(crate) backend: Arc<dyn FsBackend>,
    /// Largest `read_file` page and `ls`/`glob`/`grep` output, in characters.
    pub(crate) max_output_chars: usize,
}

/// Builds one tool within the default [`FsLimits`].
#[cfg(test)]
pub(crate) fn build(kind: FsTool, shared: Arc<Shared>, description: Option<&str>) -> Tool {
    build_with_limits(kind, shared, description, FsLimits::default())
}

/// Builds one tool.
pub(crate) fn build_with_limits(
    kind: FsTool,
    shared: Arc<Shared>,
    description: Option<&str>,
    limits: FsLimits,
) -> Tool {
    let description = description.unwrap_or(default_description(kind));
    Tool::new(
        kind.name(),
        description,
        schema(kind),
        FsToolImpl {
            kind,
            shared,
            limits,
        },
    )
}

struct FsToolImpl {
    kind: FsTool,
    shared: Arc<Shared>,
    /// What one call may read or expand.
    limits: FsLimits,
}

#[async_trait::async_trait]
impl DynTool for FsToolImpl {
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let s = &self.shared;
        let l = &self.limits;
        let out = match self.kind {
            FsTool::Ls => ls(s, &args, &ctx).await,
            FsTool::ReadFile => read_file(s, &args, &ctx).await,
            FsTool::WriteFile => write_file(s, &args, &ctx).await,
            FsTool::EditFile => edit_file(s, l, &args, &ctx).await,
            FsTool::Delete => delete(s, &args, &ctx).await,
            FsTool::Glob => glob(s, l, &args, &ctx).await,
            FsTool::Grep => grep(s, l, &args, &ctx).await,
        };
        Ok(out.unwrap_or_else(ToolOutput::error))
    }
}

/// A tool's result: the output, or the text of an error result.
type Outcome = Result<ToolOutput, String>;

fn fs_error(e: FsError) -> String {
    format!("Error: {e}")
}

fn string_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, String> {
    args.get(name).and_then(Value::as_str).ok_or_else(|| {
        format!("Error: the `{name}` argument is missing or not a string; pass it as text")
    })
}

fn optional_string<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

fn int_arg(args: &Value, name: &str, default: i64) -> i64 {
    match args.get(name) {
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_f64().map(|f| f as i64))
            .unwrap_or(default),
        None => default,
    }
}

fn bool_arg(args: &Value, name: &str, default: bool) -> bool {
    args.get(name).and_then(Value::as_bool).unwrap_or(default)
}

fn path_arg(args: &Value, name: &str) -> Result<String, String> {
    normalize_path(string_arg(args, name)?).map_err(|e| format!("Error: {e}"))
}

fn optional_path(args: &Value, name: &str) -> Result<String, String> {
    match optional_string(args, name) {
        Some(p) if !p.trim().is_empty() => normalize_path(p).map_err(|e| format!("Error: {e}")),
        _ => Ok("/".to_string()),
    }
}

fn with_changes(output: ToolOutput, changes: FileChanges) -> ToolOutput {
    if changes.is_empty() {
        output
    } else {
        output.with_update(AgentStateUpdate::new().files(changes))
    }
}

/// `['/a', '/b/']`, cut (with a guidance item) when longer than `max` characters;
/// `No files found` when empty.
fn path_list(paths: &[String], max: usize) -> String {
    if paths.is_empty() {
        return NO_FILES.to_string();
    }
    let total: usize = paths.iter().map(|p| p.chars().count()).sum();
    let mut items: Vec<String> = if total > max {
        let keep = paths.len() * max / total;
        paths[..keep].iter().map(|p| py_str(p)).collect()
    } else {
        paths.iter().map(|p| py_str(p)).collect()
    };
    if total > max {
        items.push(py_str(TRUNCATION_GUIDANCE));
    }
    format!("[{}]", items.join(", "))
}

/// Cuts `text` after `max` characters with the guidance line.
fn cap_text(text: String, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}\n{TRUNCATION_GUIDANCE}", &text[..at]),
        None => text,
    }
}

async fn ls(s: &Shared, args: &Value, ctx: &ToolContext) -> Outcome {
    let dir = optional_path(args, "path")?;
    let entries = s.backend.ls(ctx, &dir).await.map_err(fs_error)?;
    let shown: Vec<String> = entries.iter().map(|e| e.display()).collect();
    Ok(ToolOutput::text(path_list(&shown, s.max_output_chars)))
}

async fn read_file(s: &Shared, args: &Value, ctx: &ToolContext) -> Outcome {
    let path = path_arg(args, "file_path")?;
    let offset = int_arg(args, "offset", 0);
    let limit = int_arg(args, "limit", DEFAULT_READ_LIMIT);
    if limit == 0 {
        return Ok(ToolOutput::text(
            "System reminder: no lines were read because `limit` was 0. The file was not \
             inspected and may have contents; retry with `limit` >= 1 to read it.",
        ));
    }
    if limit < 0 {
        return Err(format!(
            "Error: `limit` was {limit}, but it must be at least 1; retry with `limit` >= 1 \
             (default {DEFAULT_READ_LIMIT}) to read that many lines"
        ));
    }
    let mut notices = Vec::new();
    let start = if offset < 0 {
        notices.push(format!(
            "[Requested offset {offset} is before the start of the file; read from line 1 \
             instead.]"
        ));
        0
    } else {
        usize::try_from(offset).unwrap_or(usize::MAX)
    };
    let limit_lines = usize::try_from(limit).unwrap_or(usize::MAX);
    let budget = s.max_output_chars.max(1);
    // Only the page is read into memory, however large the file.
    let page = s
        .backend
        .read_page(ctx, &path, start, limit_lines, budget)
        .await
        .map_err(fs_error)?;
    if page.blank {
        return Ok(ToolOutput::text(EMPTY_CONTENT_WARNING));
    }
    if let Some(bytes) = page.binary_bytes {
        return Err(binary_error(&path, bytes));
    }
    let total = page.total_lines;
    if start >= total {
        return Err(format!(
            "Error: Line offset {offset} exceeds file length ({total} lines)"
        ));
    }
    let end = start.saturating_add(limit_lines).min(total);
    let shown_end = start.saturating_add(page.lines.len());

    let mut fields = Vec::new();
    let body;
    if let Some(line_chars) = page.cut_line_chars {
        // The first line alone is over the budget: show its beginning.
        body = page.lines.into_iter().next().unwrap_or_default();
        fields.push(format!("lines {}-{} of {total}", start + 1, start + 1));
        if start + 1 < total {
            fields.push(format!("next offset {}", start + 1));
        }
        fields.push(format!(
            "truncated mid-line | {budget} of {line_chars} chars"
        ));
        notices.push(format!(
            "[Output was truncated due to size limits: line {} has {line_chars} characters and \
             only the first {budget} are shown. Use grep to find text in the rest of the line.]",
            start + 1
        ));
    } else {
        body = page.lines.join("\n");
        fields.push(format!("lines {}-{shown_end} of {total}", start + 1));
        if shown_end < total {
            fields.push(format!("next offset {shown_end}"));
        }
        if shown_end < end {
            fields.push("truncated due to size".to_string());
            notices.push(format!(
                "[Output was truncated due to size limits: only lines {}-{shown_end} fit. Read \
                 on with offset={shown_end}, or use a smaller limit.]",
                start + 1
            ));
        }
    }
    let mut out = notices.join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&format!("@@ {} @@\n", fields.join(" | ")));
    out.push_str(&body);
    Ok(ToolOutput::text(out))
}

fn binary_error(path: &str, bytes: u64) -> String {
    format!(
        "Error: '{path}' is a binary file (about {bytes} bytes, not UTF-8 text); the filesystem \
         tools read and edit text files only"
    )
}

async fn write_file(s: &Shared, args: &Value, ctx: &ToolContext) -> Outcome {
    let path = path_arg(args, "file_path")?;
    let content = string_arg(args, "content")?.to_string();
    let changes = s
        .backend
        .write(ctx, &path, content)
        .await
        .map_err(fs_error)?;
    Ok(with_changes(
        ToolOutput::text(format!("Updated file {path}")),
        changes,
    ))
}

async fn edit_file(s: &Shared, limits: &FsLimits, args: &Value, ctx: &ToolContext) -> Outcome {
    let path = path_arg(args, "file_path")?;
    let old = string_arg(args, "old_string")?;
    let new = string_arg(args, "new_string")?;
    let replace_all = bool_arg(args, "replace_all", false);
    if old.is_empty() {
        return Err(EMPTY_OLD_STRING_ERROR.to_string());
    }
    if old == new {
        return Err(
            "Error: old_string and new_string are identical, so the edit would change nothing; \
             put the replacement text in new_string."
                .to_string(),
        );
    }
    let file = s
        .backend
        .read_limited(ctx, &path, limits.max_file_bytes)
        .await
        .map_err(fs_error)?;
    if file.encoding == "base64" {
        return Err(binary_error(&path, (file.content.len() / 4 * 3) as u64));
    }
    let occurrences = file.content.matches(old).count();
    if occurrences == 0 {
        return Err(format!("Error: String not found in file: '{old}'"));
    }
    if occurrences > 1 && !replace_all {
        return Err(format!(
            "Error: String '{old}' appears {occurrences} times in file. Use replace_all=true to \
             replace all instances, or provide a more specific string with surrounding context."
        ));
    }
    // What the edit would make, worked out before it is made: a short `old_string` found many
    // times and a long `new_string` would otherwise build a file many times the limit.
    let size = (file.content.len() as u128)
        .saturating_sub((occurrences * old.len()) as u128)
        .saturating_add(occurrences as u128 * new.len() as u128);
    if size > u128::from(limits.max_file_bytes) {
        return Err(format!(
            "Error: replacing {occurrences} instance(s) in '{path}' would make it {size} bytes, \
             more than the {} bytes an edit may produce; replace fewer instances at a time, or \
             with shorter text.",
            limits.max_file_bytes
        ));
    }
    let content = file.content.replace(old, new);
    let changes = s
        .backend
        .write(ctx, &path, content)
        .await
        .map_err(fs_error)?;
    Ok(with_changes(
        ToolOutput::text(format!(
            "Successfully replaced {occurrences} instance(s) of the string in '{path}'"
        )),
        changes,
    ))
}

async fn delete(s: &Shared, args: &Value, ctx: &ToolContext) -> Outcome {
    let path = path_arg(args, "file_path")?;
    let changes = s.backend.delete(ctx, &path).await.map_err(fs_error)?;
    Ok(with_changes(
        ToolOutput::text(format!("Deleted {path}")),
        changes,
    ))
}

async fn glob(s: &Shared, limits: &FsLimits, args: &Value, ctx: &ToolContext) -> Outcome {
    let pattern = string_arg(args, "pattern")?;
    let base = optional_path(args, "path")?;
    let glob = Glob::with_limits(pattern, limits).map_err(|e| format!("Error: {e}"))?;
    let files = s.backend.files(ctx, &base).await.map_err(fs_error)?;
    let mut found = matching(glob, files, &base, limits)
        .await
        .map_err(|Spent| format!("Error: {}", spent_error(limits.max_glob_steps)))?;
    found.sort();
    Ok(ToolOutput::text(path_list(&found, s.max_output_chars)))
}

/// The files `glob` matches, in their order. Matching a costly pattern may take up to
/// [`FsLimits::max_glob_steps`] steps (tenths of a second), so unless the pattern and the
/// paths are small together, they are matched on the blocking pool, keeping the runtime's
/// workers free.
async fn matching(
    glob: Glob,
    files: Vec<String>,
    base: &str,
    limits: &FsLimits,
) -> Result<Vec<String>, Spent> {
    let max_steps = limits.max_glob_steps;
    let path_bytes: usize = files.iter().map(String::len).sum();
    let inline = path_bytes.saturating_mul(glob.size()) <= MATCHED_INLINE;
    let keep = move |files: &[String], base: &str| {
        let mut steps = Steps::new(max_steps);
        let mut found = Vec::new();
        for path in files {
            if glob.matches(path, base, &mut steps)? {
                found.push(path.clone());
            }
        }
        Ok(found)
    };
    if inline {
        return keep(&files, base);
    }
    let base = base.to_string();
    offload(move || keep(&files, &base)).await
}

/// Paths and patterns whose sizes multiply to at most this are matched on the calling task
/// (about a millisecond at worst).
const MATCHED_INLINE: usize = 1 << 20;

/// How many lines of `text` a `grep` call with this pattern matches (for [`crate::fuzz`]).
pub(crate) fn grep_lines(pattern: &str, use_regex: bool, text: &str) -> Result<usize, String> {
    let matcher = Matcher::new(pattern, use_regex)?;
    Ok(text.lines().filter(|l| matcher.is_match(l)).count())
}

/// True when a literal pattern looks like it was meant as a regular expression.
fn looks_like_regex(pattern: &str) -> bool {
    pattern.contains('|')
        || pattern.contains(".*")
        || pattern.contains(".+")
        || pattern
            .as_bytes()
            .windows(2)
            .any(|w| w[0] == b'\\' && b".wWdDsSbB(){}[]|+*?^$".contains(&w[1]))
}

/// The largest compiled `grep` expression, in bytes: a tenth of the `regex` crate's default.
/// Unicode classes are large (`\w{20}` compiles to most of it); `\w{200}`, which the
/// default takes, costs seconds per MiB searched once the lazy DFA gives up.
const MAX_REGEX_BYTES: usize = 1024 * 1024;

enum Matcher {
    Literal(String),
    Regex(regex::Regex),
}

impl Matcher {
    /// The matcher of a `grep` call: the literal text, or a regular expression (the `regex`
    /// crate: time linear in the text for a given expression, times the expression's compiled
    /// size once its lazy DFA gives up, so that size is bounded by [`MAX_REGEX_BYTES`]).
    fn new(pattern: &str, use_regex: bool) -> Result<Matcher, String> {
        if !use_regex {
            return Ok(Matcher::Literal(pattern.to_string()));
        }
        let regex = regex::RegexBuilder::new(pattern)
            .size_limit(MAX_REGEX_BYTES)
            .dfa_size_limit(2 * MAX_REGEX_BYTES)
            .build()
            .map_err(|e| {
            format!(
                "Error: invalid regular expression '{pattern}': {e}\nFix the expression, or set \
                 `regex` to false to search for the literal text."
            )
        })?;
        Ok(Matcher::Regex(regex))
    }

    fn is_match(&self, line: &str) -> bool {
        match self {
            Matcher::Literal(p) => line.contains(p.as_str()),
            Matcher::Regex(r) => r.is_match(line),
        }
    }
}

async fn grep(s: &Shared, limits: &FsLimits, args: &Value, ctx: &ToolContext) -> Outcome {
    let pattern = string_arg(args, "pattern")?;
    if pattern.is_empty() {
        return Err("Error: `pattern` is empty; pass the text to search for".to_string());
    }
    let base = optional_path(args, "path")?;
    let file_filter = match optional_string(args, "glob") {
        Some(g) if !g.trim().is_empty() => Some(
            Glob::with_limits(g, limits)
                .map_err(|e| format!("Error: invalid `glob` filter: {e}"))?,
        ),
        _ => None,
    };
    let mode = optional_string(args, "output_mode").unwrap_or("files_with_matches");
    if !matches!(mode, "files_with_matches" | "content" | "count") {
        return Err(format!(
            "Error: unknown output_mode '{mode}'; use 'files_with_matches', 'content' or 'count'"
        ));
    }
    let max_count = int_arg(args, "max_count", DEFAULT_GREP_MAX_COUNT);
    if max_count < 1 {
        return Err(format!(
            "Error: `max_count` was {max_count}, but it must be at least 1 (default \
             {DEFAULT_GREP_MAX_COUNT})"
        ));
    }
    let max_count = usize::try_from(max_count).unwrap_or(usize::MAX);
    let use_regex = bool_arg(args, "regex", false);
    let matcher = Matcher::new(pattern, use_regex)?;

    let mut files = s.backend.files(ctx, &base).await.map_err(fs_error)?;
    if let Some(filter) = file_filter {
        files = matching(filter, files, &base, limits)
            .await
            .map_err(|Spent| {
                format!(
                    "Error: the `glob` filter: {}",
                    spent_error(limits.max_glob_steps)
                )
            })?;
    }
    files.sort();
    // Per file: its path, how many lines matched, and (for `content`) the lines shown. Line
    // text is kept only while it can still be shown: once more than the output budget is
    // kept, the rest would be cut anyway, so a search of huge lines holds one budget of them.
    let mut results: Vec<FileHits> = Vec::new();
    let mut shown = ShownLines::new(mode == "content", s.max_output_chars);
    let mut total = 0usize;
    let mut truncated = false;
    let mut too_large: Vec<String> = Vec::new();
    'files: for path in files {
        // A search over many large files gives other tasks (and a timeout) a turn per file.
        tokio::task::yield_now().await;
        let file = match s
            .backend
            .read_limited(ctx, &path, limits.max_file_bytes)
            .await
        {
            Ok(file) => file,
            Err(FsError::TooLarge { .. }) => {
                too_large.push(path);
                continue;
            }
            Err(_) => continue, // vanished, unreadable or not a regular file: skipped
        };
        if file.encoding == "base64" {
            continue;
        }
        let (mut count, mut lines) = (0, Vec::new());
        for (i, line) in file.content.lines().enumerate() {
            if matcher.is_match(line) {
                if total >= max_count {
                    truncated = true;
                    if count > 0 {
                        results.push(FileHits { path, count, lines });
                    }
                    break 'files;
                }
                total += 1;
                count += 1;
                if let Some(text) = shown.keep(line) {
                    lines.push((i + 1, text));
                }
            }
        }
        if count > 0 {
            results.push(FileHits { path, count, lines });
        }
    }

    let skipped = skipped_note(&too_large, limits.max_file_bytes);
    if results.is_empty() {
        let mut text = NO_MATCHES.to_string();
        if !use_regex && looks_like_regex(pattern) {
            text.push_str("\n\n");
            text.push_str(LITERAL_GREP_NOTE);
        }
        text.push_str(&skipped);
        return Ok(ToolOutput::text(text));
    }
    let mut text = match mode {
        "content" => {
            let mut lines = Vec::new();
            for FileHits {
                path, lines: hits, ..
            } in &results
            {
                lines.push(format!("{path}:"));
                for (n, line) in hits {
                    lines.push(format!("  {n}: {line}"));
                }
            }
            lines.join("\n")
        }
        "count" => results
            .iter()
            .map(|hits| format!("{}: {}", hits.path, hits.count))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => results
            .iter()
            .map(|hits| hits.path.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    };
    text = cap_text(text, s.max_output_chars);
    if truncated {
        text.push_str(&format!(
            "\n\nNote: the search stopped after {max_count} matching lines (`max_count`). The \
             matches above are valid but incomplete; narrow the pattern, path or glob, or raise \
             max_count, to see the rest."
        ));
    }
    text.push_str(&skipped);
    Ok(ToolOutput::text(text))
}

/// How much matching-line text `grep` keeps: none outside `content` mode, and in it only
/// while the output could still show it (one character past the budget, so the output is
/// cut exactly as it would be with every line whole).
struct ShownLines {
    keep: bool,
    budget: usize,
    kept: usize,
}

impl ShownLines {
    fn new(keep: bool, budget: usize) -> ShownLines {
        ShownLines {
            keep,
            budget,
            kept: 0,
        }
    }

    /// The part of `line` to keep, if any.
    fn keep(&mut self, line: &str) -> Option<String> {
        if !self.keep || self.kept > self.budget {
            return None;
        }
        let text: String = line.chars().take(self.budget - self.kept + 1).collect();
        self.kept += text.chars().count();
        Some(text)
    }
}

/// One file's matches in a `grep`.
struct FileHits {
    path: String,
    /// Lines that matched.
    count: usize,
    /// (line number, text) of those kept for the output (`content` mode, within its budget).
    lines: Vec<(usize, String)>,
}

/// The note naming the files `grep` did not search because of their size (empty when none).
fn skipped_note(paths: &[String], limit: u64) -> String {
    if paths.is_empty() {
        return String::new();
    }
    const SHOWN: usize = 5;
    let mut names = paths
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > SHOWN {
        names.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    format!(
        "\n\nNote: {} file(s) larger than {limit} bytes were not searched: {names}. Page \
         through them with read_file (offset and limit).",
        paths.len()
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
