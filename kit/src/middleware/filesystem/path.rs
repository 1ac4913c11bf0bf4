//! Virtual paths: every path the tools accept is normalised to an absolute, `/`-separated path
//! with no `.`, `..` or repeated slashes, and may never go above the root.

/// A path given to a filesystem tool is not acceptable.
///
/// The message says what is wrong and what to send instead; the tools show it to the model
/// after `Error: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path is empty (or only whitespace).
    #[error("the path is empty; give an absolute path such as '/notes.txt'")]
    Empty,
    /// `..` would leave the root.
    #[error(
        "path '{path}' goes above the root '/' with '..'; paths must stay inside the \
         filesystem, e.g. '/notes.txt'"
    )]
    EscapesRoot {
        /// The path as given.
        path: String,
    },
    /// The path starts with `~` (home directories do not exist here).
    #[error(
        "path '{path}' starts with '~', which is not supported; use an absolute path starting \
         with '/'"
    )]
    HomeDir {
        /// The path as given.
        path: String,
    },
    /// A Windows drive path such as `C:\x`.
    #[error(
        "Windows drive paths such as '{path}' are not supported; use a path starting with '/', \
         e.g. '/workspace/file.txt'"
    )]
    WindowsDrive {
        /// The path as given.
        path: String,
    },
    /// The path is longer than [`MAX_PATH_BYTES`].
    #[error(
        "the path has {bytes} bytes; paths may have at most {max} (as on Linux), so use \
         shorter directory and file names"
    )]
    TooLong {
        /// The length of the path as given, in bytes.
        bytes: usize,
        /// The most a path may have.
        max: usize,
    },
    /// The path contains a NUL character.
    #[error("path {path:?} contains a NUL character; remove it")]
    Nul {
        /// The path as given.
        path: String,
    },
}

/// The longest path the tools accept, in bytes (Linux's `PATH_MAX`). A longer one is refused
/// before it is read, so a hostile path costs nothing to look up and is never echoed back.
pub const MAX_PATH_BYTES: usize = 4096;

/// Normalises a path given by a model or a user.
///
/// * a relative path is taken from the root: `rel.txt` is `/rel.txt`;
/// * `.` segments and repeated or trailing slashes are dropped; `\` counts as `/`;
/// * `..` goes up one directory, and is refused when it would leave the root;
/// * `~`, Windows drive paths, empty paths, NUL characters and paths of more than
///   [`MAX_PATH_BYTES`] are refused;
/// * surrounding whitespace is trimmed.
///
/// ```
/// use kit::middleware::filesystem::{normalize_path, PathError};
///
/// assert_eq!(normalize_path("rel.txt").unwrap(), "/rel.txt");
/// assert_eq!(normalize_path("//a/./b//c.txt").unwrap(), "/a/b/c.txt");
/// assert_eq!(normalize_path("/a/../b.txt").unwrap(), "/b.txt");
/// assert!(matches!(normalize_path("/../etc/passwd"), Err(PathError::EscapesRoot { .. })));
/// ```
pub fn normalize_path(path: &str) -> Result<String, PathError> {
    if path.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong {
            bytes: path.len(),
            max: MAX_PATH_BYTES,
        });
    }
    let trimmed = path.trim();
    if trimmed.is_empty() {
        return Err(PathError::Empty);
    }
    if trimmed.contains('\0') {
        return Err(PathError::Nul {
            path: path.to_string(),
        });
    }
    if trimmed.starts_with('~') {
        return Err(PathError::HomeDir {
            path: path.to_string(),
        });
    }
    let bytes = trimmed.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(PathError::WindowsDrive {
            path: path.to_string(),
        });
    }
    let mut segments: Vec<&str> = Vec::new();
    for segment in trimmed.split(['/', '\\']) {
        match segment {
            "" | "." => {}
            ".." => {
                if segments.pop().is_none() {
                    return Err(PathError::EscapesRoot {
                        path: path.to_string(),
                    });
                }
            }
            other => segments.push(other),
        }
    }
    Ok(format!("/{}", segments.join("/")))
}

/// True when `path` is `dir` or inside it (both normalised).
pub(crate) fn is_within(path: &str, dir: &str) -> bool {
    if dir == "/" {
        return path.starts_with('/');
    }
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// `path` relative to `dir` (both normalised, `path` within `dir`), without a leading slash.
pub(crate) fn relative_to<'a>(path: &'a str, dir: &str) -> &'a str {
    let rest = if dir == "/" {
        path
    } else {
        path.strip_prefix(dir).unwrap_or(path)
    };
    rest.trim_start_matches('/')
}

/// Joins a normalised directory and a single name.
pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// The last segment of a normalised path (`""` for the root).
pub(crate) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or("")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn normalises_relative_dotted_and_repeated_segments() {
        assert_eq!(normalize_path("rel.txt").unwrap(), "/rel.txt");
        assert_eq!(normalize_path("  /a.txt ").unwrap(), "/a.txt");
        assert_eq!(normalize_path("/").unwrap(), "/");
        assert_eq!(normalize_path(".").unwrap(), "/");
        assert_eq!(normalize_path("///a//b/").unwrap(), "/a/b");
        assert_eq!(normalize_path("./a/./b").unwrap(), "/a/b");
        assert_eq!(normalize_path("a\\b\\c.txt").unwrap(), "/a/b/c.txt");
        assert_eq!(normalize_path("/a/b/../c").unwrap(), "/a/c");
        assert_eq!(normalize_path("/a/..").unwrap(), "/");
        assert_eq!(normalize_path("/a..b/c").unwrap(), "/a..b/c");
    }

    #[test]
    fn refuses_escapes_and_unsupported_forms() {
        for p in ["..", "../x", "/..", "/a/../../x", "a/b/../../../etc/passwd"] {
            let e = normalize_path(p).unwrap_err();
            assert_eq!(e, PathError::EscapesRoot { path: p.into() }, "{p}");
            assert!(e.to_string().contains("goes above the root"), "{e}");
        }
        assert_eq!(normalize_path("").unwrap_err(), PathError::Empty);
        assert_eq!(normalize_path("   ").unwrap_err(), PathError::Empty);
        assert!(matches!(
            normalize_path("~/x"),
            Err(PathError::HomeDir { .. })
        ));
        assert!(matches!(
            normalize_path("C:\\Users\\x"),
            Err(PathError::WindowsDrive { .. })
        ));
        assert!(matches!(
            normalize_path("/a\0b"),
            Err(PathError::Nul { .. })
        ));
    }

    /// A path of `MAX_PATH_BYTES` is read; one byte more, or a megabyte, is refused by its
    /// length alone, with a message that does not repeat it. Dotted segments count as given.
    #[test]
    fn a_path_longer_than_linux_allows_is_refused_without_being_echoed() {
        let kib = format!("/{}", "a/".repeat(511)); // 1 KiB
        assert_eq!(normalize_path(&kib).unwrap(), kib.trim_end_matches('/'));
        let at_most = format!("/{}", "b".repeat(MAX_PATH_BYTES - 1));
        assert_eq!(normalize_path(&at_most).unwrap().len(), MAX_PATH_BYTES);
        for long in [
            format!("{at_most}c"),
            "./".repeat(2049),
            format!("/{}", "x/".repeat(1 << 19)), // 1 MiB
        ] {
            let e = normalize_path(&long).unwrap_err();
            assert_eq!(
                e,
                PathError::TooLong {
                    bytes: long.len(),
                    max: MAX_PATH_BYTES
                }
            );
            assert!(e.to_string().len() < 200, "{e}");
            assert!(e.to_string().contains("at most 4096"), "{e}");
        }
    }

    #[test]
    fn helpers() {
        assert!(is_within("/a/b", "/a"));
        assert!(is_within("/a", "/a"));
        assert!(!is_within("/ab", "/a"));
        assert!(is_within("/x", "/"));
        assert_eq!(relative_to("/a/b/c", "/a"), "b/c");
        assert_eq!(relative_to("/a/b", "/"), "a/b");
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/d", "a"), "/d/a");
        assert_eq!(file_name("/d/a.txt"), "a.txt");
    }
}
