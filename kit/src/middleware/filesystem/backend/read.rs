//! Reading a real file: regular files only, whole up to a limit, or streamed a page at a time.

use std::fs::{File, Metadata};
use std::io::{ErrorKind, Read};
use std::time::UNIX_EPOCH;

use base64::Engine;

use super::FsError;
use super::disk::{DirectoryBackend, io};
use crate::agent::FileData;
use crate::middleware::filesystem::page::{FilePage, LinePager};

impl DirectoryBackend {
    /// Opens the regular file at `path`: anything else (a directory, a FIFO, a socket, a
    /// device) is refused before it is opened, so a read can neither block nor run forever.
    pub(super) fn open_regular(&self, path: &str) -> Result<(File, Metadata), FsError> {
        let real = self.existing(path)?;
        let meta = std::fs::metadata(&real).map_err(|e| io("read", path, e))?;
        regular(&meta, path)?;
        let file = File::open(&real).map_err(|e| io("read", path, e))?;
        // Checked again on the open file, in case the path changed in between.
        let meta = file.metadata().map_err(|e| io("read", path, e))?;
        regular(&meta, path)?;
        Ok((file, meta))
    }

    pub(super) fn read_sync(&self, path: &str) -> Result<FileData, FsError> {
        self.read_limited_sync(path, u64::MAX)
    }

    /// The file, unless it is larger than `max` bytes (checked before and while reading).
    pub(super) fn read_limited_sync(&self, path: &str, max: u64) -> Result<FileData, FsError> {
        let (file, meta) = self.open_regular(path)?;
        let too_large = |size: u64| FsError::TooLarge {
            path: path.to_string(),
            size,
            limit: max,
        };
        if meta.len() > max {
            return Err(too_large(meta.len()));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0).min(1 << 20));
        file.take(max.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| io("read", path, e))?;
        let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if read > max {
            return Err(too_large(read));
        }
        let (content, encoding) = match String::from_utf8(bytes) {
            Ok(text) => (text, "utf-8"),
            Err(e) => (
                base64::engine::general_purpose::STANDARD.encode(e.into_bytes()),
                "base64",
            ),
        };
        let stamp = |t: std::io::Result<std::time::SystemTime>| {
            t.ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| crate::ids::rfc3339_from_millis(d.as_millis() as u64, false))
        };
        Ok(FileData {
            content,
            encoding: encoding.to_string(),
            created_at: stamp(meta.created()),
            modified_at: stamp(meta.modified()),
        })
    }

    /// One page of the file, streamed: memory holds one buffer and the page, whatever the
    /// file's size.
    pub(super) fn read_page_sync(
        &self,
        path: &str,
        start: usize,
        limit: usize,
        budget: usize,
    ) -> Result<FilePage, FsError> {
        let (mut file, meta) = self.open_regular(path)?;
        let mut pager = LinePager::new(start, limit, budget);
        let mut buf = vec![0u8; 64 * 1024];
        // Bytes of a character split across two reads.
        let mut carry: Vec<u8> = Vec::new();
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(io("read", path, e)),
            };
            let mut chunk = std::mem::take(&mut carry);
            chunk.extend_from_slice(&buf[..n]);
            match std::str::from_utf8(&chunk) {
                Ok(text) => pager.feed(text),
                Err(e) if e.error_len().is_none() => {
                    let (valid, rest) = chunk.split_at(e.valid_up_to());
                    pager.feed(std::str::from_utf8(valid).unwrap_or_default());
                    carry = rest.to_vec();
                }
                Err(_) => return Ok(binary_page(meta.len())),
            }
        }
        if !carry.is_empty() {
            return Ok(binary_page(meta.len()));
        }
        Ok(pager.finish())
    }
}

/// A page for a file that is not UTF-8: what `read_file` says about it (the size as the
/// base64 form of [`FsBackend::read`] would suggest).
fn binary_page(len: u64) -> FilePage {
    FilePage {
        binary_bytes: Some(len.div_ceil(3).saturating_mul(3)),
        ..FilePage::default()
    }
}

/// Refuses anything but a regular file.
fn regular(meta: &Metadata, path: &str) -> Result<(), FsError> {
    if meta.is_dir() {
        return Err(FsError::IsDirectory {
            path: path.to_string(),
        });
    }
    if meta.is_file() {
        return Ok(());
    }
    #[cfg(unix)]
    let kind = {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            "FIFO"
        } else if t.is_socket() {
            "socket"
        } else if t.is_block_device() || t.is_char_device() {
            "device"
        } else {
            "special file"
        }
    };
    #[cfg(not(unix))]
    let kind = "special file";
    Err(FsError::NotRegularFile {
        path: path.to_string(),
        kind,
    })
}
