//! Transitional: the test doubles moved to the `kit-testing` crate.

pub use kit_testing::{load, mock, researcher};
