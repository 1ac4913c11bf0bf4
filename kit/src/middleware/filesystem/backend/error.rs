//! A filesystem operation failed: what was wrong and what to do.

use crate::middleware::filesystem::path::PathError;

/// A filesystem operation failed. The message says what was wrong and what to do; the tools
/// show it to the model after `Error: `.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// No file (or directory) at this path.
    #[error("File '{path}' not found")]
    NotFound {
        /// The path.
        path: String,
    },
    /// The path is invalid.
    #[error(transparent)]
    Path(#[from] PathError),
    /// A file was expected, the path is a directory.
    #[error(
        "'{path}' is a directory, not a file; use ls to list it, or give the path of a file \
         inside it"
    )]
    IsDirectory {
        /// The path.
        path: String,
    },
    /// A parent of the path is a file, so the path cannot exist.
    #[error(
        "'{path}' cannot be a file because '{parent}' is a file, not a directory; choose a path \
         whose parent is a directory"
    )]
    ParentIsFile {
        /// The path.
        path: String,
        /// The parent that is a file.
        parent: String,
    },
    /// Deleting the root is refused.
    #[error(
        "refusing to delete the root directory '/'; delete the files and directories inside it \
         instead"
    )]
    DeleteRoot,
    /// A symbolic link leads outside the backend's root.
    #[error(
        "'{path}' leads outside the root directory through a symbolic link, which is not \
         allowed; use a path whose files are inside the root"
    )]
    OutsideRoot {
        /// The path.
        path: String,
    },
    /// A symbolic link points to nothing.
    #[error("'{path}' is a symbolic link whose target does not exist; use another path")]
    BrokenLink {
        /// The path.
        path: String,
    },
    /// The root directory of a [`DirectoryBackend`](super::DirectoryBackend) is unusable.
    #[error(
        "the root directory '{root}' cannot be used: {reason}; pass an existing directory (or \
         create it with DirectoryBackend::create)"
    )]
    InvalidRoot {
        /// The root as given.
        root: String,
        /// Why.
        reason: String,
    },
    /// An I/O error.
    #[error("could not {op} '{path}': {source}; check that it exists and is accessible")]
    Io {
        /// What was being done (`read`, `write`, ...).
        op: &'static str,
        /// The virtual path.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The path is not a regular file (a FIFO, a socket, a device): reading it could block
    /// or never end, so it is refused.
    #[error(
        "'{path}' is not a regular file (it is a {kind}); the filesystem tools read regular \
         files only, choose another path"
    )]
    NotRegularFile {
        /// The path.
        path: String,
        /// What it is (`FIFO`, `socket`, `device`, ...).
        kind: &'static str,
    },
    /// The file is larger than a tool reads whole
    /// ([`FsLimits::max_file_bytes`](crate::middleware::filesystem::FsLimits::max_file_bytes)).
    #[error(
        "'{path}' has {size} bytes, more than the {limit} bytes this tool reads at once \
         (FsLimits::max_file_bytes); page through it with read_file (offset and limit), or \
         raise the limit"
    )]
    TooLarge {
        /// The path.
        path: String,
        /// Its size in bytes (at least this).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Any other failure (for custom backends); the text is shown as is.
    #[error("{0}")]
    Other(String),
}

impl FsError {
    /// A failure with a message for the model (for custom backends).
    pub fn other(message: impl std::fmt::Display) -> Self {
        FsError::Other(message.to_string())
    }
}
