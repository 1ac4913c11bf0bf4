//! # kit-testing — test doubles for kit agents
//!
//! What kit's own test suite uses, for testing your agents the same way: against real HTTP
//! servers on 127.0.0.1 that speak the providers' wire formats, with scripted models where a
//! real one would cost money, and with a real worker for async subagents. In the spirit of
//! `tower-test` and `tokio-test`.
//!
//! | module | what |
//! |---|---|
//! | [`mock`] | [`MockOpenAi`](mock::MockOpenAi), [`MockAnthropic`](mock::MockAnthropic): mock provider servers (JSON, SSE, the providers' real error bodies and headers, dropped and hanging connections), recording every request |
//! | [`embeddings`] | [`MockEmbeddings`](embeddings::MockEmbeddings): a mock OpenAI embeddings server (`POST /v1/embeddings`) with deterministic vectors, the API's error bodies, injected failures |
//! | [`ScriptedModel`] | a chat model that answers from a script (re-exported from `kit::testing`) |
//! | [`supervisor`] | [`Supervisor`]: an agent with async subagents whose model is scripted one tool call at a time |
//! | [`researcher`] | a scripted "researcher" agent whose tool waits on a [`Gate`](researcher::Gate) |
//! | `worker` | [`spawn_worker`](worker::spawn_worker) and [`wait_for_status`](worker::wait_for_status) (feature `server`) |
//! | `load` | [`Counting`](load::Counting): a hosted graph wrapper counting executions; [`Recording`](load::Recording): a run store wrapper counting recorded run ends (feature `server`) |
//!
//! ```
//! use kit::{Agent, Message};
//! use kit_testing::mock::{MockOpenAi, openai};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = MockOpenAi::start().await?;
//! server.enqueue(openai::json(openai::completion("Hello!")));
//! let agent = Agent::builder().model(server.model("gpt-4o-mini")).build()?;
//! let out = agent.invoke("Hi").options(&kit::RunOptions::new()).await?;
//! assert_eq!(out.state().final_text(), "Hello!");
//! assert_eq!(server.requests()[0].body["messages"][0]["content"], "Hi");
//! # Ok(()) }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod embeddings;
pub mod hostile;
#[cfg(feature = "server")]
pub mod load;
pub mod mock;
pub mod researcher;
pub mod supervisor;
#[cfg(feature = "server")]
pub mod worker;

pub use kit::testing::{ScriptStep, ScriptedModel};
pub use supervisor::Supervisor;

/// What the helpers return when something does not go as the test expects: a message saying
/// what happened.
pub type Error = Box<dyn std::error::Error + Send + Sync>;
