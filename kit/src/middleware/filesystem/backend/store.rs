//! The store backend: files kept in the long-term [`Store`], so they outlive the thread
//! (deepagents' `StoreBackend`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};

use super::{DirEntry, FileChanges, FsBackend, FsError};
use crate::agent::FileData;
use crate::middleware::filesystem::path::{is_within, join, relative_to};
use crate::store::{GetOptions, IntoStore, Namespace, Store, StoreError};
use crate::tool::ToolContext;

type NamespaceFn = dyn Fn(&ToolContext) -> Result<Namespace, StoreError> + Send + Sync;

/// Files kept in a long-term [`Store`]: one item per file under a namespace (default
/// `("filesystem",)`), keyed by its path, valued `{"content", "encoding", "created_at",
/// "modified_at"}` as deepagents stores them. They are shared by every thread and run that
/// uses the same store and namespace, and survive restarts with a durable store.
///
/// The store is the run's ([`ToolContext::store`]: the agent's, or a run's own) unless one is
/// given here. Usually only part of the filesystem lives here: route a prefix to it with a
/// [`CompositeBackend`](super::CompositeBackend) and keep the rest in the thread's state.
///
/// Writes land in the store at once (they return no state changes). Listing, `glob` and `grep`
/// read the namespace's items a page at a time, so they cost a pass over its files: fine for
/// memories and notes, not for a large corpus.
///
/// ```
/// use kit::middleware::filesystem::{CompositeBackend, FilesystemMiddleware, StateBackend, StoreBackend};
/// use kit::store::Namespace;
///
/// // `/memories/` outlives the thread (one namespace per user); everything else is per thread.
/// let fs = FilesystemMiddleware::new().backend(
///     CompositeBackend::new(StateBackend::new()).route(
///         "/memories/",
///         StoreBackend::new().namespace_fn(|ctx| {
///             let user = ctx
///                 .node()
///                 .and_then(|n| n.run_options().get_metadata().get("user_id"))
///                 .and_then(|v| v.as_str())
///                 .unwrap_or("anonymous")
///                 .to_string();
///             Namespace::new(["users", &user, "memories"])
///         }),
///     )?,
/// );
/// # let _ = fs;
/// # Ok::<(), kit::middleware::filesystem::FsError>(())
/// ```
#[derive(Clone)]
pub struct StoreBackend {
    store: Option<Arc<dyn Store>>,
    namespace: Arc<NamespaceFn>,
}

impl std::fmt::Debug for StoreBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreBackend")
            .field("own_store", &self.store.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for StoreBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl StoreBackend {
    /// Files in the run's store, under the namespace `("filesystem",)`.
    pub fn new() -> Self {
        StoreBackend {
            store: None,
            namespace: Arc::new(|_| Namespace::new(["filesystem"])),
        }
    }

    /// Uses this store instead of the run's.
    #[must_use]
    pub fn store(mut self, store: impl IntoStore) -> Self {
        self.store = Some(store.into_store());
        self
    }

    /// Keeps the files under this namespace.
    #[must_use]
    pub fn namespace(mut self, namespace: Namespace) -> Self {
        self.namespace = Arc::new(move |_| Ok(namespace.clone()));
        self
    }

    /// Chooses the namespace per call, e.g. one per user from the run's metadata.
    #[must_use]
    pub fn namespace_fn(
        mut self,
        f: impl Fn(&ToolContext) -> Result<Namespace, StoreError> + Send + Sync + 'static,
    ) -> Self {
        self.namespace = Arc::new(f);
        self
    }

    /// The store and namespace for this call.
    fn target<'a>(&'a self, ctx: &'a ToolContext) -> Result<(&'a dyn Store, Namespace), FsError> {
        let store = match (&self.store, ctx.store()) {
            (Some(own), _) => own.as_ref(),
            (None, Some(run)) => run.as_ref(),
            (None, None) => {
                return Err(FsError::other(
                    "these files are kept in the agent's long-term store, but this run has none; \
                     give the agent a store (`.store(..)` or `#[agent(store = ..)]`), or the \
                     StoreBackend one of its own",
                ));
            }
        };
        let namespace = (self.namespace)(ctx).map_err(store_error)?;
        Ok((store, namespace))
    }

    /// Every file path under the namespace (its keys, without reading the files).
    async fn paths(&self, ctx: &ToolContext) -> Result<BTreeSet<String>, FsError> {
        let (store, ns) = self.target(ctx)?;
        let keys = store.keys(&ns).await.map_err(store_error)?;
        Ok(keys.into_iter().collect())
    }

    async fn get(&self, ctx: &ToolContext, path: &str) -> Result<Option<FileData>, FsError> {
        let (store, ns) = self.target(ctx)?;
        let Some(item) = store
            .get_opts(&ns, path, GetOptions::new())
            .await
            .map_err(store_error)?
        else {
            return Ok(None);
        };
        file_data(path, item.value).map(Some)
    }
}

/// A store failure, as the model sees it.
fn store_error(e: StoreError) -> FsError {
    FsError::other(format!("the long-term store failed: {e}"))
}

/// A stored item as a file; an item that is not one says so.
fn file_data(path: &str, mut value: serde_json::Map<String, Value>) -> Result<FileData, FsError> {
    let content = match value.remove("content") {
        Some(Value::String(s)) => s,
        // Early deepagents stored a list of lines.
        Some(Value::Array(lines)) if lines.iter().all(Value::is_string) => lines
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("\n"),
        _ => {
            return Err(FsError::other(format!(
                "the store item for '{path}' is not a file (it has no text `content`); write \
                 the file again to replace it"
            )));
        }
    };
    let text = |v: Option<Value>| match v {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    Ok(FileData {
        content,
        encoding: text(value.remove("encoding")).unwrap_or_else(|| "utf-8".to_string()),
        created_at: text(value.remove("created_at")),
        modified_at: text(value.remove("modified_at")),
    })
}

fn has_inside(paths: &BTreeSet<String>, dir: &str) -> bool {
    paths.iter().any(|p| p != dir && is_within(p, dir))
}

#[async_trait::async_trait]
impl FsBackend for StoreBackend {
    async fn ls(&self, ctx: &ToolContext, dir: &str) -> Result<Vec<DirEntry>, FsError> {
        let paths = self.paths(ctx).await?;
        if paths.contains(dir) {
            return Ok(vec![DirEntry {
                path: dir.to_string(),
                is_dir: false,
            }]);
        }
        let mut entries = BTreeSet::new();
        for path in paths.iter().filter(|p| *p != dir && is_within(p, dir)) {
            let rest = relative_to(path, dir);
            entries.insert(match rest.split_once('/') {
                Some((first, _)) => DirEntry {
                    path: join(dir, first),
                    is_dir: true,
                },
                None => DirEntry {
                    path: path.clone(),
                    is_dir: false,
                },
            });
        }
        Ok(entries.into_iter().collect())
    }

    async fn read(&self, ctx: &ToolContext, path: &str) -> Result<FileData, FsError> {
        if let Some(file) = self.get(ctx, path).await? {
            return Ok(file);
        }
        if path == "/" || has_inside(&self.paths(ctx).await?, path) {
            return Err(FsError::IsDirectory {
                path: path.to_string(),
            });
        }
        Err(FsError::NotFound {
            path: path.to_string(),
        })
    }

    async fn write(
        &self,
        ctx: &ToolContext,
        path: &str,
        content: String,
    ) -> Result<FileChanges, FsError> {
        let paths = self.paths(ctx).await?;
        if path == "/" || has_inside(&paths, path) {
            return Err(FsError::IsDirectory {
                path: path.to_string(),
            });
        }
        let mut ancestor = String::new();
        for segment in path.split('/').filter(|s| !s.is_empty()) {
            ancestor.push('/');
            ancestor.push_str(segment);
            if ancestor != path && paths.contains(&ancestor) {
                return Err(FsError::ParentIsFile {
                    path: path.to_string(),
                    parent: ancestor,
                });
            }
        }
        let now = crate::ids::now_rfc3339();
        let created = match paths.contains(path) {
            true => self.get(ctx, path).await?.and_then(|f| f.created_at),
            false => None,
        };
        let value = json!({
            "content": content,
            "encoding": "utf-8",
            "created_at": created.unwrap_or_else(|| now.clone()),
            "modified_at": now,
        });
        let (store, ns) = self.target(ctx)?;
        store.put(&ns, path, value).await.map_err(store_error)?;
        Ok(BTreeMap::new())
    }

    async fn delete(&self, ctx: &ToolContext, path: &str) -> Result<FileChanges, FsError> {
        if path == "/" {
            return Err(FsError::DeleteRoot);
        }
        let doomed: Vec<String> = self
            .paths(ctx)
            .await?
            .into_iter()
            .filter(|p| is_within(p, path))
            .collect();
        if doomed.is_empty() {
            return Err(FsError::NotFound {
                path: path.to_string(),
            });
        }
        let (store, ns) = self.target(ctx)?;
        for p in &doomed {
            store.delete(&ns, p).await.map_err(store_error)?;
        }
        Ok(BTreeMap::new())
    }

    async fn files(&self, ctx: &ToolContext, dir: &str) -> Result<Vec<String>, FsError> {
        Ok(self
            .paths(ctx)
            .await?
            .into_iter()
            .filter(|p| is_within(p, dir))
            .collect())
    }
}
