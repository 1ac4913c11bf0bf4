//! ui tests
