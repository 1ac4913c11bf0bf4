//! How much one filesystem tool call may read or expand: the limits of the tools.

/// Limits on what one tool call may make kit read or expand, whatever the model asks for.
///
/// | limit | default | what it bounds |
/// |---|---|---|
/// | `max_file_bytes` | 16 MiB | a file `edit_file` or `grep` reads whole, and a file `edit_file` makes; larger files are refused by `edit_file` (before it reads them, or before it builds the edited text) and skipped (and named) by `grep`. `read_file` pages through files of any size, holding one page |
/// | `max_pattern_chars` | 4,096 | a `glob` pattern (also `grep`'s `glob` filter) |
/// | `max_pattern_alternatives` | 1,000 | what a pattern's `{a,b}` groups expand to (together they may hold at most 64 Ki characters) |
/// | `max_glob_steps` | 100,000,000 | the character comparisons one `glob` call (or `grep`'s `glob` filter) may spend matching the paths it lists (at most about a third of a second on a small machine; long listings are matched on the blocking pool): a pattern such as `*aaa…ab` costs its length times each name's, for every file and every alternative. More is refused with an error naming this limit; `**/*.rs` over 100,000 files spends about 7 million |
///
/// ```
/// use kit::middleware::filesystem::{FilesystemMiddleware, FsLimits};
///
/// let fs = FilesystemMiddleware::new().limits(FsLimits {
///     max_file_bytes: 64 * 1024 * 1024,
///     ..FsLimits::default()
/// });
/// # let _ = fs;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsLimits {
    /// Largest file read whole (by `edit_file` and `grep`), or made by `edit_file`, in bytes.
    pub max_file_bytes: u64,
    /// Longest glob pattern, in characters.
    pub max_pattern_chars: usize,
    /// Most alternatives a glob pattern's braces may expand to.
    pub max_pattern_alternatives: usize,
    /// Most character comparisons one `glob` call (or `grep`'s `glob` filter) may spend
    /// matching paths against its pattern.
    pub max_glob_steps: u64,
}

impl Default for FsLimits {
    fn default() -> Self {
        FsLimits {
            max_file_bytes: 16 * 1024 * 1024,
            max_pattern_chars: 4096,
            max_pattern_alternatives: 1000,
            max_glob_steps: 100_000_000,
        }
    }
}
