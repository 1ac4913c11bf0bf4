//! kit's adversarial suite: each case tries what an attacker — a model, a network peer, a
//! damaged file, a user — would try, and checks that kit neither panics nor runs away in time
//! or memory nor leaks a secret. Cases are named by what they try.
//!
//! * `panics` — brace bombs, absurd `Retry-After` values, token counts near `u64::MAX`,
//!   exponential schema validation, delta chains that loop;
//! * `memory` — a 512 MiB body, an endless event-stream line, an event never dispatched, an
//!   endless valid stream, keep-alive pings forever, a 64 MiB file read one line at a time, a
//!   FIFO in the root;
//! * `secrets` — every planted secret through every exit (errors, `Debug`, logs, JSON-lines
//!   traces, OTLP, a cross-origin redirect), and task ids that try to leave the worker's path;
//! * `server` — idle, slow and oversize connections against the worker;
//! * `fuzz` — seeded hostile inputs for every parser, and each parser at 1 KiB and 1 MiB.
//!
//! Inputs that could kill the process run in a child process (this binary again, see
//! `support::run_child`) under a memory cap, so the suite reports them instead of dying.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod child;
mod fuzz;
mod memory;
mod panics;
mod secrets;
mod server;
mod support;

/// The entry of a child process: runs the case named by `KIT_ADVERSARIAL_CHILD` (nothing
/// when it is unset, as in a normal run of the suite).
#[test]
fn child() {
    if let Ok(case) = std::env::var("KIT_ADVERSARIAL_CHILD") {
        child::run(&case);
    }
}
