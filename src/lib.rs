//! Shared support code for the examples, integration tests and the benchmark program.

pub mod mock;
