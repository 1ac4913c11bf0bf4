//! The official MCP reference server (`@modelcontextprotocol/server-everything`), run as a child
//! process: its command comes from `KIT_TEST_MCP_EVERYTHING` (`.ci/mcp.sh` installs it and sets
//! it, e.g. `node /var/tmp/kit-ci-mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js`).
//!
//! Without it the tests fail when `CI` is set, and otherwise print a loud `SKIPPED` line and
//! pass.

// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

/// The command that starts the reference server (program and arguments; the transport,
/// `stdio` or `streamableHttp`, goes after them), or `None` (after a loud message) outside CI.
pub fn everything() -> Option<(String, Vec<String>)> {
    let words: Vec<String> = std::env::var("KIT_TEST_MCP_EVERYTHING")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    match words.split_first() {
        Some((program, args)) => Some((program.clone(), args.to_vec())),
        None => {
            if std::env::var_os("CI").is_some() {
                panic!(
                    "KIT_TEST_MCP_EVERYTHING is not set, but CI is: the tests against the MCP \
                     reference server must run in CI. Run .ci/run (it installs the server), or \
                     `source .ci/mcp.sh`, or export KIT_TEST_MCP_EVERYTHING='node \
                     <path>/@modelcontextprotocol/server-everything/dist/index.js'"
                );
            }
            eprintln!(
                "\n*** SKIPPED MCP reference-server test: KIT_TEST_MCP_EVERYTHING is not set. Run \
                 `source .ci/mcp.sh` (installs @modelcontextprotocol/server-everything with npm) \
                 or point it at the server's command. ***\n"
            );
            None
        }
    }
}
