//! Where the files live: the [`FsBackend`] trait, the agent state ([`StateBackend`], the
//! default) and a real directory ([`DirectoryBackend`]). The module documentation of
//! [`filesystem`](super) compares the two.
//!
//! Every path reaching a backend is already normalised (see
//! [`normalize_path`](super::normalize_path)): absolute, no `.`/`..`, no repeated slashes.

mod composite;
mod disk;
mod error;
mod read;
mod state;
mod store;
pub use composite::CompositeBackend;
pub use disk::DirectoryBackend;
pub use error::FsError;
pub use state::StateBackend;
pub use store::StoreBackend;

use std::collections::BTreeMap;

use super::page::{FilePage, LinePager};
use crate::agent::FileData;
use crate::tool::ToolContext;

/// File changes for the `files` channel: `Some` writes a file, `None` deletes it.
pub type FileChanges = BTreeMap<String, Option<FileData>>;

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirEntry {
    /// The absolute path.
    pub path: String,
    /// True for a directory.
    pub is_dir: bool,
}

impl DirEntry {
    /// The path as listings show it: directories end with `/`.
    pub fn display(&self) -> String {
        if self.is_dir && self.path != "/" {
            format!("{}/", self.path)
        } else {
            self.path.clone()
        }
    }
}

/// Storage for the filesystem tools. Object-safe: the middleware holds an
/// `Arc<dyn FsBackend>`.
///
/// Paths are normalised absolute paths. Writes return the [`FileChanges`] to apply to the
/// agent state's `files` channel (empty for backends that store files elsewhere).
///
/// A custom backend, e.g. a read-only view over a fixed set of files:
///
/// ```
/// use kit::agent::FileData;
/// use kit::middleware::filesystem::{DirEntry, FileChanges, FsBackend, FsError};
/// use kit::tool::ToolContext;
///
/// struct Fixed;
///
/// #[kit::async_trait]
/// impl FsBackend for Fixed {
///     async fn ls(&self, _ctx: &ToolContext, _dir: &str) -> Result<Vec<DirEntry>, FsError> {
///         Ok(vec![DirEntry { path: "/motd.txt".into(), is_dir: false }])
///     }
///     async fn read(&self, _ctx: &ToolContext, path: &str) -> Result<FileData, FsError> {
///         match path {
///             "/motd.txt" => Ok(FileData::text("hello")),
///             _ => Err(FsError::NotFound { path: path.into() }),
///         }
///     }
///     async fn write(&self, _ctx: &ToolContext, _path: &str, _content: String)
///         -> Result<FileChanges, FsError> {
///         Err(FsError::other("this filesystem is read-only"))
///     }
///     async fn delete(&self, _ctx: &ToolContext, _path: &str) -> Result<FileChanges, FsError> {
///         Err(FsError::other("this filesystem is read-only"))
///     }
///     async fn files(&self, _ctx: &ToolContext, _dir: &str) -> Result<Vec<String>, FsError> {
///         Ok(vec!["/motd.txt".into()])
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait FsBackend: Send + Sync + 'static {
    /// The entries directly inside `dir`, or the file itself when `dir` is a file. A missing
    /// directory lists as empty.
    async fn ls(&self, ctx: &ToolContext, dir: &str) -> Result<Vec<DirEntry>, FsError>;

    /// The file at `path`.
    async fn read(&self, ctx: &ToolContext, path: &str) -> Result<FileData, FsError>;

    /// Creates or replaces the file at `path` (a replaced file keeps its `created_at`).
    async fn write(
        &self,
        ctx: &ToolContext,
        path: &str,
        content: String,
    ) -> Result<FileChanges, FsError>;

    /// Deletes the file at `path`, or the directory and everything in it.
    async fn delete(&self, ctx: &ToolContext, path: &str) -> Result<FileChanges, FsError>;

    /// Every file under `dir` at any depth (or `dir` itself when it is a file), for `glob` and
    /// `grep`. A missing directory has no files.
    async fn files(&self, ctx: &ToolContext, dir: &str) -> Result<Vec<String>, FsError>;

    /// One page of the text file at `path` for `read_file`: lines `start..start + limit`
    /// within `budget` characters, and the file's line count (see [`FilePage`]).
    ///
    /// The default reads the whole file with [`read`](Self::read); a backend over large files
    /// overrides it to stream them, holding one page ([`DirectoryBackend`] does).
    async fn read_page(
        &self,
        ctx: &ToolContext,
        path: &str,
        start: usize,
        limit: usize,
        budget: usize,
    ) -> Result<FilePage, FsError> {
        let file = self.read(ctx, path).await?;
        if file.encoding == "base64" {
            return Ok(FilePage {
                binary_bytes: Some((file.content.len() / 4 * 3) as u64),
                ..FilePage::default()
            });
        }
        let mut pager = LinePager::new(start, limit, budget);
        pager.feed(&file.content);
        Ok(pager.finish())
    }

    /// The file at `path`, unless it holds more than `max_bytes` bytes
    /// ([`FsError::TooLarge`]), for the tools that need a file whole (`edit_file`, `grep`).
    ///
    /// The default reads the file and then checks; a backend over large files overrides it
    /// to check first ([`DirectoryBackend`] does).
    async fn read_limited(
        &self,
        ctx: &ToolContext,
        path: &str,
        max_bytes: u64,
    ) -> Result<FileData, FsError> {
        let file = self.read(ctx, path).await?;
        let size = if file.encoding == "base64" {
            file.content.len() / 4 * 3
        } else {
            file.content.len()
        };
        let size = u64::try_from(size).unwrap_or(u64::MAX);
        if size > max_bytes {
            return Err(FsError::TooLarge {
                path: path.to_string(),
                size,
                limit: max_bytes,
            });
        }
        Ok(file)
    }
}
