//! The directory backend: a real directory, confined to its root.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::{DirEntry, FileChanges, FsBackend, FsError};
use crate::agent::FileData;
use crate::middleware::filesystem::page::FilePage;
use crate::middleware::filesystem::path::{join, normalize_path, relative_to};
use crate::tool::ToolContext;

/// Most files [`DirectoryBackend`] lists for one `glob` or `grep`.
pub(super) const MAX_WALK_FILES: usize = 100_000;

/// A real directory, confined to its root.
///
/// Virtual paths map below the root (`/src/a.rs` is `<root>/src/a.rs`). Every path is
/// checked: `..` cannot leave the root (paths are normalised first), and a symbolic link is
/// followed only when its target is inside the root — a link pointing outside is refused for
/// reads and writes, hidden from `ls`, and skipped by `glob` and `grep` (links to directories
/// are never followed by `glob` and `grep`, so loops are impossible). Deleting a link removes
/// the link, never its target. Missing parent directories are created on write.
///
/// Writes go to disk at once and return no state changes: the files are shared by every
/// thread and run of the agent, are not part of checkpoints, and are not rewound by time
/// travel. The checks guard against a model's paths, not against another local process
/// swapping directories for links while a call runs (a time-of-check/time-of-use race); run
/// the agent in a container or sandbox when that matters. Non-UTF-8 files read as base64
/// ([`FileData::encoding`] `base64`), which the text tools decline. Only regular files are
/// read: a FIFO, socket or device inside the root is refused ([`FsError::NotRegularFile`])
/// before it is opened. `read_file` streams a file a page at a time, so its memory does not
/// grow with the file; `edit_file` and `grep` read files whole up to
/// [`FsLimits::max_file_bytes`](crate::middleware::filesystem::FsLimits::max_file_bytes).
///
/// ```
/// use kit::middleware::filesystem::{DirectoryBackend, FilesystemMiddleware};
///
/// let dir = tempfile::tempdir().unwrap();
/// let fs = FilesystemMiddleware::new().backend(DirectoryBackend::new(dir.path()).unwrap());
/// ```
#[derive(Debug, Clone)]
pub struct DirectoryBackend {
    pub(super) root: PathBuf,
}

impl DirectoryBackend {
    /// A backend over the existing directory `root`.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, FsError> {
        let given = root.as_ref();
        let invalid = |reason: String| FsError::InvalidRoot {
            root: given.display().to_string(),
            reason,
        };
        let root = std::fs::canonicalize(given).map_err(|e| invalid(e.to_string()))?;
        if !root.is_dir() {
            return Err(invalid("it is not a directory".into()));
        }
        Ok(DirectoryBackend { root })
    }

    /// Creates `root` (and its parents) when missing, then [`DirectoryBackend::new`].
    pub fn create(root: impl AsRef<Path>) -> Result<Self, FsError> {
        let given = root.as_ref();
        std::fs::create_dir_all(given).map_err(|e| FsError::InvalidRoot {
            root: given.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::new(given)
    }

    /// The root directory (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub(super) async fn blocking<T, F>(&self, f: F) -> Result<T, FsError>
    where
        T: Send + 'static,
        F: FnOnce(&DirectoryBackend) -> Result<T, FsError> + Send + 'static,
    {
        let this = self.clone();
        tokio::task::spawn_blocking(move || f(&this))
            .await
            .map_err(|e| FsError::other(format!("the filesystem task failed: {e}")))?
    }

    /// The canonical target of `host` (a link), when inside the root.
    pub(super) fn confine(&self, host: &Path, vpath: &str) -> Result<PathBuf, FsError> {
        match std::fs::canonicalize(host) {
            Ok(real) if real.starts_with(&self.root) => Ok(real),
            Ok(_) => Err(FsError::OutsideRoot {
                path: vpath.to_string(),
            }),
            Err(e) if e.kind() == ErrorKind::NotFound => Err(FsError::BrokenLink {
                path: vpath.to_string(),
            }),
            Err(e) => Err(io("resolve", vpath, e)),
        }
    }

    /// The real path of an existing entry, inside the root.
    pub(super) fn existing(&self, vpath: &str) -> Result<PathBuf, FsError> {
        let vpath = normalize_path(vpath)?;
        let host = self.root.join(relative_to(&vpath, "/"));
        match std::fs::canonicalize(&host) {
            Ok(real) if real.starts_with(&self.root) => Ok(real),
            Ok(_) => Err(FsError::OutsideRoot { path: vpath }),
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                Err(FsError::NotFound { path: vpath })
            }
            Err(e) => Err(io("resolve", &vpath, e)),
        }
    }

    /// The real directory that holds `vpath`, checked segment by segment (links must stay
    /// inside the root), creating missing directories when `create`; and the last segment.
    pub(super) fn parent_dir(
        &self,
        vpath: &str,
        create: bool,
    ) -> Result<(PathBuf, String), FsError> {
        let segments: Vec<&str> = vpath.split('/').filter(|s| !s.is_empty()).collect();
        let Some((last, parents)) = segments.split_last() else {
            return Err(FsError::IsDirectory {
                path: "/".to_string(),
            });
        };
        let mut real = self.root.clone();
        let mut virtual_dir = String::new();
        for segment in parents {
            virtual_dir.push('/');
            virtual_dir.push_str(segment);
            let candidate = real.join(segment);
            match std::fs::symlink_metadata(&candidate) {
                Ok(meta) => {
                    let resolved = if meta.file_type().is_symlink() {
                        self.confine(&candidate, &virtual_dir)?
                    } else {
                        candidate
                    };
                    if !resolved.is_dir() {
                        return Err(FsError::ParentIsFile {
                            path: vpath.to_string(),
                            parent: virtual_dir,
                        });
                    }
                    real = resolved;
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    if !create {
                        return Err(FsError::NotFound {
                            path: vpath.to_string(),
                        });
                    }
                    match std::fs::create_dir(&candidate) {
                        Ok(()) => real = candidate,
                        // Created concurrently: check it like an existing entry.
                        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                            real = self.confine(&candidate, &virtual_dir)?;
                        }
                        Err(e) => return Err(io("create the directory", &virtual_dir, e)),
                    }
                }
                Err(e) => return Err(io("inspect", &virtual_dir, e)),
            }
        }
        Ok((real, (*last).to_string()))
    }

    pub(super) fn ls_sync(&self, dir: &str) -> Result<Vec<DirEntry>, FsError> {
        let real = match self.existing(dir) {
            Ok(real) => real,
            Err(FsError::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        if !real.is_dir() {
            return Ok(vec![DirEntry {
                path: dir.to_string(),
                is_dir: false,
            }]);
        }
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&real).map_err(|e| io("list", dir, e))? {
            let entry = entry.map_err(|e| io("list", dir, e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue; // not UTF-8: no virtual path can name it
            };
            let path = join(dir, &name);
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            let is_dir = if file_type.is_symlink() {
                match self.confine(&entry.path(), &path) {
                    Ok(target) => target.is_dir(),
                    Err(_) => continue, // leads outside the root, or broken: hidden
                }
            } else {
                file_type.is_dir()
            };
            entries.push(DirEntry { path, is_dir });
        }
        entries.sort();
        Ok(entries)
    }

    pub(super) fn write_sync(&self, path: &str, content: &str) -> Result<(), FsError> {
        let path = normalize_path(path)?;
        let (dir, name) = self.parent_dir(&path, true)?;
        let mut target = dir.join(&name);
        match std::fs::symlink_metadata(&target) {
            Ok(meta) if meta.file_type().is_symlink() => {
                target = self.confine(&target, &path)?;
                if target.is_dir() {
                    return Err(FsError::IsDirectory { path });
                }
            }
            Ok(meta) if meta.is_dir() => return Err(FsError::IsDirectory { path }),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io("inspect", &path, e)),
        }
        std::fs::write(&target, content).map_err(|e| io("write", &path, e))
    }

    pub(super) fn delete_sync(&self, path: &str) -> Result<(), FsError> {
        let path = normalize_path(path)?;
        if path == "/" {
            return Err(FsError::DeleteRoot);
        }
        let (dir, name) = self.parent_dir(&path, false)?;
        let target = dir.join(&name);
        let meta = match std::fs::symlink_metadata(&target) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => return Err(FsError::NotFound { path }),
            Err(e) => return Err(io("inspect", &path, e)),
        };
        let result = if meta.is_dir() {
            // Does not follow links inside the directory.
            std::fs::remove_dir_all(&target)
        } else {
            // A link is removed itself, never its target.
            std::fs::remove_file(&target)
        };
        result.map_err(|e| io("delete", &path, e))
    }

    pub(super) fn files_sync(&self, dir: &str) -> Result<Vec<String>, FsError> {
        let real = match self.existing(dir) {
            Ok(real) => real,
            Err(FsError::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        if !real.is_dir() {
            return Ok(vec![dir.to_string()]);
        }
        let mut out = Vec::new();
        let mut stack = vec![(real, dir.to_string())];
        while let Some((host, vdir)) = stack.pop() {
            let Ok(read) = std::fs::read_dir(&host) else {
                continue; // unreadable: skipped
            };
            for entry in read.flatten() {
                let Ok(name) = entry.file_name().into_string() else {
                    continue;
                };
                let vpath = join(&vdir, &name);
                let Ok(file_type) = entry.file_type() else {
                    continue;
                };
                if file_type.is_dir() {
                    stack.push((entry.path(), vpath));
                } else if file_type.is_symlink() {
                    match self.confine(&entry.path(), &vpath) {
                        Ok(target) if target.is_file() => out.push(vpath),
                        _ => {} // outside, broken, or a directory: not followed
                    }
                } else if file_type.is_file() {
                    out.push(vpath);
                }
                if out.len() > MAX_WALK_FILES {
                    return Err(FsError::other(format!(
                        "more than {MAX_WALK_FILES} files under '{dir}'; search a narrower path"
                    )));
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

pub(super) fn io(op: &'static str, path: &str, source: std::io::Error) -> FsError {
    FsError::Io {
        op,
        path: path.to_string(),
        source,
    }
}

#[async_trait::async_trait]
impl FsBackend for DirectoryBackend {
    async fn ls(&self, _ctx: &ToolContext, dir: &str) -> Result<Vec<DirEntry>, FsError> {
        let dir = dir.to_string();
        self.blocking(move |b| b.ls_sync(&dir)).await
    }

    async fn read(&self, _ctx: &ToolContext, path: &str) -> Result<FileData, FsError> {
        let path = path.to_string();
        self.blocking(move |b| b.read_sync(&path)).await
    }

    async fn write(
        &self,
        _ctx: &ToolContext,
        path: &str,
        content: String,
    ) -> Result<FileChanges, FsError> {
        let path = path.to_string();
        self.blocking(move |b| b.write_sync(&path, &content))
            .await
            .map(|()| FileChanges::new())
    }

    async fn delete(&self, _ctx: &ToolContext, path: &str) -> Result<FileChanges, FsError> {
        let path = path.to_string();
        self.blocking(move |b| b.delete_sync(&path))
            .await
            .map(|()| FileChanges::new())
    }

    async fn files(&self, _ctx: &ToolContext, dir: &str) -> Result<Vec<String>, FsError> {
        let dir = dir.to_string();
        self.blocking(move |b| b.files_sync(&dir)).await
    }

    async fn read_page(
        &self,
        _ctx: &ToolContext,
        path: &str,
        start: usize,
        limit: usize,
        budget: usize,
    ) -> Result<FilePage, FsError> {
        let path = path.to_string();
        self.blocking(move |b| b.read_page_sync(&path, start, limit, budget))
            .await
    }

    async fn read_limited(
        &self,
        _ctx: &ToolContext,
        path: &str,
        max_bytes: u64,
    ) -> Result<FileData, FsError> {
        let path = path.to_string();
        self.blocking(move |b| b.read_limited_sync(&path, max_bytes))
            .await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::middleware::filesystem::StateBackend;
    use std::sync::Arc;

    use crate::agent::AgentState;

    fn ctx_with(files: &[(&str, &str)]) -> ToolContext {
        let mut state = AgentState::default();
        for (p, c) in files {
            state.files.insert(p.to_string(), FileData::text(*c));
        }
        ToolContext::new("c1", Arc::new(state), None)
    }

    #[tokio::test]
    async fn state_backend_lists_reads_writes_and_deletes() {
        let ctx = ctx_with(&[
            ("/a.txt", "a"),
            ("/dir/b.txt", "b"),
            ("/dir/sub/c.txt", "c"),
        ]);
        let b = StateBackend;
        let root: Vec<String> = b
            .ls(&ctx, "/")
            .await
            .unwrap()
            .iter()
            .map(DirEntry::display)
            .collect();
        assert_eq!(root, ["/a.txt", "/dir/"]);
        let dir: Vec<String> = b
            .ls(&ctx, "/dir")
            .await
            .unwrap()
            .iter()
            .map(DirEntry::display)
            .collect();
        assert_eq!(dir, ["/dir/b.txt", "/dir/sub/"]);
        assert_eq!(b.read(&ctx, "/a.txt").await.unwrap().content, "a");
        assert!(matches!(
            b.read(&ctx, "/dir").await,
            Err(FsError::IsDirectory { .. })
        ));
        assert!(matches!(
            b.read(&ctx, "/nope").await,
            Err(FsError::NotFound { .. })
        ));
        assert!(matches!(
            b.write(&ctx, "/dir", "x".into()).await,
            Err(FsError::IsDirectory { .. })
        ));
        let err = b.write(&ctx, "/a.txt/x", "x".into()).await.unwrap_err();
        assert!(
            err.to_string().contains("because '/a.txt' is a file"),
            "{err}"
        );
        let deleted = b.delete(&ctx, "/dir").await.unwrap();
        assert_eq!(
            deleted.keys().collect::<Vec<_>>(),
            ["/dir/b.txt", "/dir/sub/c.txt"]
        );
        assert!(deleted.values().all(Option::is_none));
        assert!(matches!(
            b.delete(&ctx, "/").await,
            Err(FsError::DeleteRoot)
        ));
        assert_eq!(
            b.files(&ctx, "/dir").await.unwrap(),
            ["/dir/b.txt", "/dir/sub/c.txt"]
        );
        assert_eq!(b.files(&ctx, "/a.txt").await.unwrap(), ["/a.txt"]);
    }

    #[tokio::test]
    async fn overwrite_keeps_created_at() {
        let mut state = AgentState::default();
        let mut old = FileData::text("old");
        old.created_at = Some("2020-01-01T00:00:00Z".into());
        old.modified_at = Some("2020-01-01T00:00:00Z".into());
        state.files.insert("/a.txt".into(), old);
        let ctx = ToolContext::new("c", Arc::new(state), None);
        let changes = StateBackend
            .write(&ctx, "/a.txt", "new".into())
            .await
            .unwrap();
        let file = changes["/a.txt"].clone().unwrap();
        assert_eq!(file.content, "new");
        assert_eq!(file.created_at.as_deref(), Some("2020-01-01T00:00:00Z"));
        assert_ne!(file.modified_at.as_deref(), Some("2020-01-01T00:00:00Z"));
    }

    #[tokio::test]
    async fn directory_backend_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let b = DirectoryBackend::new(tmp.path()).unwrap();
        let ctx = ToolContext::detached();
        assert!(
            b.write(&ctx, "/deep/er/a.txt", "hi".into())
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("deep/er/a.txt")).unwrap(),
            "hi"
        );
        assert_eq!(b.read(&ctx, "/deep/er/a.txt").await.unwrap().content, "hi");
        let listed: Vec<String> = b
            .ls(&ctx, "/deep")
            .await
            .unwrap()
            .iter()
            .map(DirEntry::display)
            .collect();
        assert_eq!(listed, ["/deep/er/"]);
        assert_eq!(b.files(&ctx, "/").await.unwrap(), ["/deep/er/a.txt"]);
        assert!(b.ls(&ctx, "/missing").await.unwrap().is_empty());
        assert!(matches!(
            b.read(&ctx, "/deep").await,
            Err(FsError::IsDirectory { .. })
        ));
        assert!(matches!(
            b.write(&ctx, "/deep/er/a.txt/x", "x".into()).await,
            Err(FsError::ParentIsFile { .. })
        ));
        std::fs::write(tmp.path().join("bin"), [0xff, 0xfe, 0x00]).unwrap();
        let bin = b.read(&ctx, "/bin").await.unwrap();
        assert_eq!(bin.encoding, "base64");
        b.delete(&ctx, "/deep").await.unwrap();
        assert!(!tmp.path().join("deep").exists());
        assert!(matches!(
            b.delete(&ctx, "/deep").await,
            Err(FsError::NotFound { .. })
        ));
        assert!(matches!(
            b.delete(&ctx, "/").await,
            Err(FsError::DeleteRoot)
        ));
        let err = DirectoryBackend::new(tmp.path().join("nope")).unwrap_err();
        assert!(err.to_string().contains("cannot be used"), "{err}");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn directory_backend_refuses_links_leading_outside() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
        let tmp = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("out")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.txt"),
            tmp.path().join("secret-link.txt"),
        )
        .unwrap();
        std::fs::write(tmp.path().join("inside.txt"), "in").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("inside.txt"), tmp.path().join("alias.txt"))
            .unwrap();
        let b = DirectoryBackend::new(tmp.path()).unwrap();
        let ctx = ToolContext::detached();
        for p in ["/out/secret.txt", "/secret-link.txt"] {
            let err = b.read(&ctx, p).await.unwrap_err();
            assert!(matches!(err, FsError::OutsideRoot { .. }), "{p}: {err}");
        }
        for p in ["/out/new.txt", "/secret-link.txt", "/out/x/y.txt"] {
            let err = b.write(&ctx, p, "pwned".into()).await.unwrap_err();
            assert!(matches!(err, FsError::OutsideRoot { .. }), "{p}: {err}");
        }
        assert_eq!(
            std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
            "secret"
        );
        assert!(!outside.path().join("new.txt").exists());
        assert!(!outside.path().join("x").exists());
        // Links inside the root work; links outside are hidden from listings and walks.
        assert_eq!(b.read(&ctx, "/alias.txt").await.unwrap().content, "in");
        let listed: Vec<String> = b
            .ls(&ctx, "/")
            .await
            .unwrap()
            .iter()
            .map(DirEntry::display)
            .collect();
        assert_eq!(listed, ["/alias.txt", "/inside.txt"]);
        assert_eq!(
            b.files(&ctx, "/").await.unwrap(),
            ["/alias.txt", "/inside.txt"]
        );
        // Deleting a link removes the link only.
        b.delete(&ctx, "/secret-link.txt").await.unwrap();
        assert!(outside.path().join("secret.txt").exists());
        let err = b.delete(&ctx, "/out/secret.txt").await.unwrap_err();
        assert!(matches!(err, FsError::OutsideRoot { .. }), "{err}");
        assert!(outside.path().join("secret.txt").exists());
        // Writing through a link to nothing says so, and creates nothing.
        std::os::unix::fs::symlink(tmp.path().join("gone.txt"), tmp.path().join("dangling.txt"))
            .unwrap();
        let err = b
            .write(&ctx, "/dangling.txt", "x".into())
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "'/dangling.txt' is a symbolic link whose target does not exist; use another path"
        );
        assert!(!tmp.path().join("gone.txt").exists());
    }
}
