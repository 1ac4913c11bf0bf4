//! The state backend: files in the agent state's `files` channel, checkpointed with the thread.

use std::collections::{BTreeMap, BTreeSet};

use super::{DirEntry, FileChanges, FsBackend, FsError};
use crate::agent::FileData;
use crate::middleware::filesystem::path::{is_within, join, relative_to};
use crate::tool::ToolContext;

/// The default backend: files live in the agent state's `files` channel.
///
/// Reads see the state of the model turn that made the call; writes return the changes, which
/// the agent applies at the end of the turn (parallel writes to different paths all land;
/// `None` deletes). The files are checkpointed with the thread, so a later invocation on the
/// same thread — or a resumed run — sees them. Directories are implicit: a directory exists
/// while a file is inside it.
#[derive(Debug, Clone, Copy, Default)]
pub struct StateBackend;

impl StateBackend {
    /// A state backend.
    pub fn new() -> Self {
        StateBackend
    }
}

pub(super) fn has_files_inside(files: &BTreeMap<String, FileData>, dir: &str) -> bool {
    files.keys().any(|k| k != dir && is_within(k, dir))
}

/// The first ancestor of `path` (excluding the root) that is a file in `files`.
pub(super) fn file_ancestor(files: &BTreeMap<String, FileData>, path: &str) -> Option<String> {
    let mut ancestor = String::new();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    for segment in segments.iter().take(segments.len().saturating_sub(1)) {
        ancestor.push('/');
        ancestor.push_str(segment);
        if files.contains_key(&ancestor) {
            return Some(ancestor);
        }
    }
    None
}

#[async_trait::async_trait]
impl FsBackend for StateBackend {
    async fn ls(&self, ctx: &ToolContext, dir: &str) -> Result<Vec<DirEntry>, FsError> {
        let files = &ctx.state().files;
        if files.contains_key(dir) {
            return Ok(vec![DirEntry {
                path: dir.to_string(),
                is_dir: false,
            }]);
        }
        let mut entries = BTreeSet::new();
        for key in files.keys().filter(|k| *k != dir && is_within(k, dir)) {
            let rest = relative_to(key, dir);
            match rest.split_once('/') {
                Some((first, _)) => entries.insert(DirEntry {
                    path: join(dir, first),
                    is_dir: true,
                }),
                None => entries.insert(DirEntry {
                    path: key.clone(),
                    is_dir: false,
                }),
            };
        }
        Ok(entries.into_iter().collect())
    }

    async fn read(&self, ctx: &ToolContext, path: &str) -> Result<FileData, FsError> {
        let files = &ctx.state().files;
        match files.get(path) {
            Some(file) => Ok(file.clone()),
            None if path == "/" || has_files_inside(files, path) => Err(FsError::IsDirectory {
                path: path.to_string(),
            }),
            None => Err(FsError::NotFound {
                path: path.to_string(),
            }),
        }
    }

    async fn write(
        &self,
        ctx: &ToolContext,
        path: &str,
        content: String,
    ) -> Result<FileChanges, FsError> {
        let files = &ctx.state().files;
        if path == "/" || has_files_inside(files, path) {
            return Err(FsError::IsDirectory {
                path: path.to_string(),
            });
        }
        if let Some(parent) = file_ancestor(files, path) {
            return Err(FsError::ParentIsFile {
                path: path.to_string(),
                parent,
            });
        }
        let mut file = FileData::text(content);
        if let Some(created) = files.get(path).and_then(|f| f.created_at.clone()) {
            file.created_at = Some(created);
        }
        Ok(BTreeMap::from([(path.to_string(), Some(file))]))
    }

    async fn delete(&self, ctx: &ToolContext, path: &str) -> Result<FileChanges, FsError> {
        if path == "/" {
            return Err(FsError::DeleteRoot);
        }
        let changes: FileChanges = ctx
            .state()
            .files
            .keys()
            .filter(|k| is_within(k, path))
            .map(|k| (k.clone(), None))
            .collect();
        if changes.is_empty() {
            return Err(FsError::NotFound {
                path: path.to_string(),
            });
        }
        Ok(changes)
    }

    async fn files(&self, ctx: &ToolContext, dir: &str) -> Result<Vec<String>, FsError> {
        Ok(ctx
            .state()
            .files
            .keys()
            .filter(|k| is_within(k, dir))
            .cloned()
            .collect())
    }
}
