//! trybuild cases for kit's macros: every misuse the macros reject, with the expected compiler
//! output in a `.stderr` file next to it. Run with `cargo test -p kit-ui-tests`; after a
//! deliberate change of a message, review and refresh with `TRYBUILD=overwrite`.
