//! The remote run protocol that async subagents speak to workers.
//!
//! | operation | request | response |
//! |---|---|---|
//! | start | `POST {url}/runs` with `{"assistant_id": graph_id, "input": {"messages": [{"role": "user", "content": description}]}}` | the run (fields below) |
//! | check | `GET {url}/runs/{task_id}` | the run |
//! | update | `POST {url}/runs/{task_id}/input` with `{"message": text}` | the run |
//! | cancel | `POST {url}/runs/{task_id}/cancel` | at least `{"status": ..}` |
//!
//! A run response carries `status`, `result`, `thread_id`, `run_id`, `id` and `values.messages`
//! (read by the supervisor). The [`Endpoint`]'s headers are sent on every request.
//!
//! A worker is a peer like any other: a task id it returns is percent-encoded as one whole path
//! segment ([`task_path_segment`]), so it can never reach another path of the worker with the
//! endpoint's credentials; errors show the URL without its password and scrub every
//! credential the worker echoes back ([`Endpoint::secrets`]).
//!
//! # Streams
//!
//! A kit worker also serves each thread's events (Agent Protocol streaming v2, SSE):
//! [`HttpRunClient::stream_thread`] reads them from a cursor, and
//! [`HttpRunClient::wait_for_run`] follows a run until it ends or pauses for a human, with one
//! request instead of polling. A broken stream is reopened from the last event it delivered,
//! so each event arrives once.
//!
//! [`RunClient`] is the client side as a trait (implement it to reach workers another way);
//! [`HttpRunClient`] speaks the protocol over HTTP. The worker side is
//! `kit::server` (feature `server`).

mod client;
mod endpoint;
mod stream;

pub use client::{HttpRunClient, RunClient, RunClientError, task_path_segment};
pub use endpoint::Endpoint;
pub use stream::{RunOutcome, StreamItem, StreamRequest, ThreadEvent, ThreadStream};
