//! The worker's settings and their defaults, and the follow-up and recovery policies.

use std::time::Duration;

/// What happens to a follow-up on a thread whose run is still in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FollowUp {
    /// Queue it behind the running run (the default).
    #[default]
    Enqueue,
    /// Cancel the running run, then run the follow-up.
    Interrupt,
}

/// What a starting worker does with runs a dead worker left `running`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Recovery {
    /// Queue them again; they continue from the thread's last checkpoint (the default).
    #[default]
    Resume,
    /// End them with status `error`, saying their worker stopped.
    Fail,
}

/// The worker's settings (see [`WorkerBuilder`](super::WorkerBuilder) for each).
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Runs executing at once.
    pub capacity: usize,
    /// Longest a run may execute.
    pub run_timeout: Duration,
    /// Follow-up handling.
    pub follow_up: FollowUp,
    /// Crash recovery.
    pub recovery: Recovery,
    /// Executions of one run before recovery gives up.
    pub max_attempts: u32,
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// Lease on executing runs.
    pub lease: Duration,
    /// How often the queue is polled for runs submitted elsewhere.
    pub poll_interval: Duration,
    /// Longest `POST /runs/{id}/cancel` waits for a running run to stop.
    pub cancel_wait: Duration,
    /// Longest a shutdown waits for executing runs to be put back in the queue.
    pub shutdown_grace: Duration,
    /// Connections served at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// Longest a request's head may take to arrive (also the idle time allowed between two
    /// requests on a kept-alive connection).
    pub header_read_timeout: Duration,
    /// Longest a request's body may take to arrive.
    pub body_read_timeout: Duration,
    /// Longest a connection may move no byte before it is shut down.
    pub idle_timeout: Duration,
    /// How long a thread's events stay in its log (the window a stream can be resumed in).
    pub event_retention: Duration,
    /// How long a run's events may wait to share one write to its thread's log.
    pub event_linger: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            capacity: 16,
            run_timeout: Duration::from_secs(30 * 60),
            follow_up: FollowUp::Enqueue,
            recovery: Recovery::Resume,
            max_attempts: 3,
            body_limit: 1024 * 1024,
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_millis(500),
            cancel_wait: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
            max_connections: 512,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            event_retention: Duration::from_secs(60 * 60),
            event_linger: super::event_log::LINGER,
        }
    }
}
