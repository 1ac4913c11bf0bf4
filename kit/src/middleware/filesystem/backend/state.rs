//! The state backend: files in the agent state's `files` channel, checkpointed with the thread.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use super::{DirEntry, FileChanges, FsBackend, FsError};
use crate::agent::FileData;
use crate::middleware::filesystem::path::{join, relative_to};
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

fn has_files_inside(files: &BTreeMap<String, FileData>, dir: &str) -> bool {
    files_inside(files, dir).next().is_some()
}

/// The paths of the files inside `dir` (not `dir` itself), in order. They are one range of the
/// map, so finding them costs the same however many other files there are.
fn files_inside<'a>(
    files: &'a BTreeMap<String, FileData>,
    dir: &str,
) -> impl Iterator<Item = &'a String> + 'a {
    let prefix = if dir == "/" {
        String::from("/")
    } else {
        format!("{dir}/")
    };
    files
        .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
        .map(|(path, _)| path)
        .take_while(move |path| path.starts_with(&prefix))
}

/// `dir` itself when it is a file, then the files inside it.
fn files_within<'a>(
    files: &'a BTreeMap<String, FileData>,
    dir: &str,
) -> impl Iterator<Item = &'a String> + 'a {
    files
        .get_key_value(dir)
        .map(|(path, _)| path)
        .into_iter()
        .chain(files_inside(files, dir))
}

/// The first ancestor of `path` (excluding the root) that is a file in `files`.
fn file_ancestor(files: &BTreeMap<String, FileData>, path: &str) -> Option<String> {
    path.match_indices('/')
        .map(|(at, _)| &path[..at])
        .filter(|ancestor| !ancestor.is_empty())
        .find(|ancestor| files.contains_key(*ancestor))
        .map(String::from)
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
        for key in files_inside(files, dir) {
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
        let changes: FileChanges = files_within(&ctx.state().files, path)
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
        Ok(files_within(&ctx.state().files, dir).cloned().collect())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::middleware::filesystem::path::is_within;

    /// The range lookups find what a scan of every path with `is_within` finds, with
    /// neighbours that sort inside a directory's range or right next to it (`/a!b` sorts
    /// between `/a` and `/a/…`, `/a.txt` after them).
    #[test]
    fn range_lookups_find_what_a_scan_finds() {
        let mut rng = fastrand::Rng::with_seed(20);
        let names = ["a", "a!b", "a.txt", "a0", "b", "ab", "a b"];
        for _ in 0..500 {
            let mut files = BTreeMap::new();
            for _ in 0..rng.usize(0..12) {
                let depth = rng.usize(1..4);
                let path: String = (0..depth)
                    .map(|_| format!("/{}", names[rng.usize(..names.len())]))
                    .collect();
                files.insert(path, FileData::text(""));
            }
            let mut dirs: Vec<String> = files.keys().cloned().collect();
            dirs.extend(["/", "/a", "/a/a", "/zz"].map(String::from));
            for dir in &dirs {
                let scanned: Vec<&String> = files.keys().filter(|k| is_within(k, dir)).collect();
                let within: Vec<&String> = files_within(&files, dir).collect();
                assert_eq!(within, scanned, "{dir} in {files:?}");
                let inside: Vec<&String> = scanned.into_iter().filter(|k| *k != dir).collect();
                assert_eq!(files_inside(&files, dir).collect::<Vec<_>>(), inside);
                let ancestor = files
                    .keys()
                    .filter(|k| dir.starts_with(&format!("{k}/")))
                    .min_by_key(|k| k.len())
                    .cloned();
                assert_eq!(file_ancestor(&files, dir), ancestor, "{dir} in {files:?}");
            }
        }
    }

    /// The longest path there is, with 2,048 segments, next to 100,000 files sharing most of
    /// its ancestors: each lookup is a few comparisons of the map, not a scan of it.
    #[test]
    fn lookups_under_a_long_path_among_many_files() {
        let deep = "/d".repeat(2047);
        let mut files: BTreeMap<String, FileData> = (0..100_000)
            .map(|i| (format!("{deep}/f{i}"), FileData::text("")))
            .collect();
        files.insert("/e".into(), FileData::text(""));
        assert_eq!(
            file_ancestor(&files, &format!("{deep}/f1/x")),
            Some(format!("{deep}/f1"))
        );
        assert_eq!(file_ancestor(&files, &format!("{deep}/g")), None);
        assert!(has_files_inside(&files, &deep));
        assert!(has_files_inside(&files, "/d"));
        assert!(!has_files_inside(&files, "/e"));
        assert_eq!(files_within(&files, &format!("{deep}/f7")).count(), 1);
        assert_eq!(files_within(&files, "/").count(), 100_001);
    }
}
