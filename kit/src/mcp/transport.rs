//! Where an MCP server is: a child process spoken to over stdio, or a Streamable HTTP URL.
//!
//! A child process is started with its stdin and stdout piped to the client, and its stderr
//! drained into a small ring (the last few kilobytes), so a crash can be explained without the
//! server's chatter filling memory. It is killed when the client is dropped.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

use super::McpError;
use super::error::StderrTail;

/// The most stderr kept from a child-process server (the end of it), in bytes.
const STDERR_TAIL_BYTES: usize = 2048;

/// How to reach a server.
#[derive(Debug, Clone)]
pub(crate) enum Endpoint {
    /// A program spoken to over its stdin and stdout.
    Stdio {
        program: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        url: String,
        headers: HashMap<String, String>,
        bearer: Option<String>,
    },
    /// None yet: the transport comes with `connect_with`.
    Given,
}

/// A running child-process server: killed when dropped.
pub(crate) struct ChildServer {
    child: Mutex<Child>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl ChildServer {
    /// Starts `program` with piped stdio; returns the child and its stdout and stdin.
    pub(crate) fn spawn(
        server: &str,
        program: &str,
        args: &[String],
        env: &[(String, String)],
        cwd: Option<&PathBuf>,
    ) -> Result<
        (
            ChildServer,
            tokio::process::ChildStdout,
            tokio::process::ChildStdin,
        ),
        McpError,
    > {
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        let spawn_error = |source| McpError::Spawn {
            server: server.to_string(),
            program: program.to_string(),
            source,
        };
        let mut child = command.spawn().map_err(spawn_error)?;
        let missing = || {
            spawn_error(std::io::Error::other(
                "the child's stdio pipes were not available",
            ))
        };
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let ring = stderr.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut ring) = ring.lock() {
                        ring.extend_from_slice(&buf[..n]);
                        if ring.len() > STDERR_TAIL_BYTES {
                            let cut = ring.len() - STDERR_TAIL_BYTES;
                            ring.drain(..cut);
                        }
                    }
                }
            });
        }
        Ok((
            ChildServer {
                child: Mutex::new(child),
                stderr,
            },
            stdout,
            stdin,
        ))
    }

    /// The end of what the server wrote to stderr, and how it exited if it did.
    pub(crate) fn tail(&self) -> StderrTail {
        let mut out = String::new();
        if let Ok(mut child) = self.child.lock()
            && let Ok(Some(status)) = child.try_wait()
        {
            out.push_str(&format!("[the process exited: {status}] "));
        }
        if let Ok(ring) = self.stderr.lock() {
            out.push_str(&String::from_utf8_lossy(&ring));
        }
        StderrTail(out)
    }

    /// The process id, while it runs.
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.lock().ok().and_then(|c| c.id())
    }

    /// Whether the process has exited.
    pub(crate) fn exited(&self) -> bool {
        self.child
            .lock()
            .map(|mut c| matches!(c.try_wait(), Ok(Some(_))))
            .unwrap_or(false)
    }

    /// Kills the process (it is also killed when dropped).
    pub(crate) fn kill(&self) {
        if let Ok(mut child) = self.child.lock() {
            let _ = child.start_kill();
        }
    }
}
