//! The composite backend: paths under a prefix go to another backend (deepagents'
//! `CompositeBackend`), e.g. `/memories/` to the long-term store while the rest stays in the
//! thread's state.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{DirEntry, FileChanges, FsBackend, FsError};
use crate::agent::FileData;
use crate::middleware::filesystem::IntoFsBackend;
use crate::middleware::filesystem::page::FilePage;
use crate::middleware::filesystem::path::{is_within, normalize_path, relative_to};
use crate::tool::ToolContext;

/// Routes paths by prefix: a path under a route's prefix goes to that route's backend, which
/// sees it relative to the prefix (`/memories/notes.txt` is `/notes.txt` there); every other
/// path goes to the default backend. The longest matching prefix wins.
///
/// Listings merge: `ls /` shows the default backend's entries and each route as a directory,
/// and `glob` and `grep` over a directory search every route inside it. Deleting a directory
/// that contains a route's prefix deletes only the default backend's files there: a route's
/// files are deleted through paths inside the route.
///
/// ```
/// use kit::middleware::filesystem::{CompositeBackend, FilesystemMiddleware, StateBackend, StoreBackend};
///
/// let fs = FilesystemMiddleware::new()
///     .backend(CompositeBackend::new(StateBackend::new()).route("/memories/", StoreBackend::new())?);
/// # let _ = fs;
/// # Ok::<(), kit::middleware::filesystem::FsError>(())
/// ```
#[derive(Clone)]
pub struct CompositeBackend {
    default: Arc<dyn FsBackend>,
    /// Normalised prefixes (`/memories`), longest first.
    routes: Vec<(String, Arc<dyn FsBackend>)>,
}

impl std::fmt::Debug for CompositeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompositeBackend")
            .field(
                "routes",
                &self.routes.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl CompositeBackend {
    /// Every path goes to `default` until routes are added.
    pub fn new(default: impl IntoFsBackend) -> Self {
        CompositeBackend {
            default: default.into_fs_backend(),
            routes: Vec::new(),
        }
    }

    /// Sends the paths under `prefix` (`/memories/`; the trailing slash is optional) to
    /// `backend`. The error says why a prefix is refused (the root, `..` above it, a prefix
    /// given twice).
    pub fn route(mut self, prefix: &str, backend: impl IntoFsBackend) -> Result<Self, FsError> {
        let prefix = normalize_path(prefix)?;
        if prefix == "/" {
            return Err(FsError::other(
                "a route's prefix cannot be the root '/': that is the default backend; give a \
                 directory such as '/memories/'",
            ));
        }
        if self.routes.iter().any(|(p, _)| *p == prefix) {
            return Err(FsError::other(format!(
                "the prefix '{prefix}/' is routed twice; give each prefix one backend"
            )));
        }
        self.routes.push((prefix, backend.into_fs_backend()));
        self.routes.sort_by_key(|r| std::cmp::Reverse(r.0.len()));
        Ok(self)
    }

    /// The backend for `path`, the path as it sees it, and the route's prefix (`None` for the
    /// default backend).
    fn resolve<'a>(&'a self, path: &'a str) -> (&'a dyn FsBackend, String, Option<&'a str>) {
        for (prefix, backend) in &self.routes {
            if is_within(path, prefix) {
                let inner = format!("/{}", relative_to(path, prefix));
                return (backend.as_ref(), inner, Some(prefix));
            }
        }
        (self.default.as_ref(), path.to_string(), None)
    }
}

/// A routed backend's path as the model sees it.
fn outer(prefix: &str, inner: &str) -> String {
    if inner == "/" {
        prefix.to_string()
    } else {
        format!("{prefix}{inner}")
    }
}

/// A routed backend's state changes, keyed by the model's paths.
fn outer_changes(prefix: Option<&str>, changes: FileChanges) -> FileChanges {
    match prefix {
        None => changes,
        Some(prefix) => changes
            .into_iter()
            .map(|(path, file)| (outer(prefix, &path), file))
            .collect(),
    }
}

#[async_trait::async_trait]
impl FsBackend for CompositeBackend {
    async fn ls(&self, ctx: &ToolContext, dir: &str) -> Result<Vec<DirEntry>, FsError> {
        let (backend, inner, prefix) = self.resolve(dir);
        if let Some(prefix) = prefix {
            return Ok(backend
                .ls(ctx, &inner)
                .await?
                .into_iter()
                .map(|e| DirEntry {
                    path: outer(prefix, &e.path),
                    is_dir: e.is_dir,
                })
                .collect());
        }
        let mut entries: BTreeSet<DirEntry> =
            self.default.ls(ctx, dir).await?.into_iter().collect();
        // Each route inside `dir` shows as the directory it starts in.
        for (prefix, _) in &self.routes {
            if prefix != dir && is_within(prefix, dir) {
                let first = relative_to(prefix, dir)
                    .split('/')
                    .next()
                    .unwrap_or_default();
                let path = if dir == "/" {
                    format!("/{first}")
                } else {
                    format!("{dir}/{first}")
                };
                entries.retain(|e| e.path != path);
                entries.insert(DirEntry { path, is_dir: true });
            }
        }
        Ok(entries.into_iter().collect())
    }

    async fn read(&self, ctx: &ToolContext, path: &str) -> Result<FileData, FsError> {
        let (backend, inner, prefix) = self.resolve(path);
        backend
            .read(ctx, &inner)
            .await
            .map_err(|e| outer_error(prefix, e))
    }

    async fn write(
        &self,
        ctx: &ToolContext,
        path: &str,
        content: String,
    ) -> Result<FileChanges, FsError> {
        let (backend, inner, prefix) = self.resolve(path);
        let changes = backend
            .write(ctx, &inner, content)
            .await
            .map_err(|e| outer_error(prefix, e))?;
        Ok(outer_changes(prefix, changes))
    }

    async fn delete(&self, ctx: &ToolContext, path: &str) -> Result<FileChanges, FsError> {
        let (backend, inner, prefix) = self.resolve(path);
        if prefix.is_some() && inner == "/" {
            return Err(FsError::other(format!(
                "'{path}' is where a backend of its own is mounted; delete the files inside it \
                 instead"
            )));
        }
        let changes = backend
            .delete(ctx, &inner)
            .await
            .map_err(|e| outer_error(prefix, e))?;
        Ok(outer_changes(prefix, changes))
    }

    async fn files(&self, ctx: &ToolContext, dir: &str) -> Result<Vec<String>, FsError> {
        let (backend, inner, prefix) = self.resolve(dir);
        if let Some(prefix) = prefix {
            return Ok(backend
                .files(ctx, &inner)
                .await?
                .into_iter()
                .map(|p| outer(prefix, &p))
                .collect());
        }
        let mut all: BTreeSet<String> = self.default.files(ctx, dir).await?.into_iter().collect();
        for (prefix, backend) in &self.routes {
            if is_within(prefix, dir) {
                all.extend(
                    backend
                        .files(ctx, "/")
                        .await?
                        .into_iter()
                        .map(|p| outer(prefix, &p)),
                );
            }
        }
        Ok(all.into_iter().collect())
    }

    async fn read_page(
        &self,
        ctx: &ToolContext,
        path: &str,
        start: usize,
        limit: usize,
        budget: usize,
    ) -> Result<FilePage, FsError> {
        let (backend, inner, prefix) = self.resolve(path);
        backend
            .read_page(ctx, &inner, start, limit, budget)
            .await
            .map_err(|e| outer_error(prefix, e))
    }

    async fn read_limited(
        &self,
        ctx: &ToolContext,
        path: &str,
        max_bytes: u64,
    ) -> Result<FileData, FsError> {
        let (backend, inner, prefix) = self.resolve(path);
        backend
            .read_limited(ctx, &inner, max_bytes)
            .await
            .map_err(|e| outer_error(prefix, e))
    }
}

/// A routed backend's error, naming the model's paths.
fn outer_error(prefix: Option<&str>, e: FsError) -> FsError {
    let Some(prefix) = prefix else {
        return e;
    };
    match e {
        FsError::NotFound { path } => FsError::NotFound {
            path: outer(prefix, &path),
        },
        FsError::IsDirectory { path } => FsError::IsDirectory {
            path: outer(prefix, &path),
        },
        FsError::ParentIsFile { path, parent } => FsError::ParentIsFile {
            path: outer(prefix, &path),
            parent: outer(prefix, &parent),
        },
        FsError::TooLarge { path, size, limit } => FsError::TooLarge {
            path: outer(prefix, &path),
            size,
            limit,
        },
        FsError::NotRegularFile { path, kind } => FsError::NotRegularFile {
            path: outer(prefix, &path),
            kind,
        },
        FsError::OutsideRoot { path } => FsError::OutsideRoot {
            path: outer(prefix, &path),
        },
        FsError::BrokenLink { path } => FsError::BrokenLink {
            path: outer(prefix, &path),
        },
        FsError::Io { op, path, source } => FsError::Io {
            op,
            path: outer(prefix, &path),
            source,
        },
        other => other,
    }
}
