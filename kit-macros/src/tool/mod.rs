//! The tool macros: `#[derive(Tool)]` on an argument struct and `#[tool]` on an async function.
//! Both read their options with darling (`attrs`), check them, then expand.

mod attrs;
mod derive;
mod func;

pub use derive::derive;
pub use func::attribute;
