//! Agents declared with `#[agent]`: the trait their structs implement, so one declared agent
//! can name another (`subagents< writer(description = "..", agent = Writer) >`) and generic
//! code can take any of them.

use super::{Agent, AgentBuilder, AgentError};

/// An agent declared with [`#[agent]`](crate::dsl::agent): a unit struct whose attribute holds the
/// definition. The macro implements this trait; write `#[agent(..)]` rather than an impl.
///
/// ```
/// use kit::agent::{DeclaredAgent, agent};
///
/// /// Answers in one word.
/// #[agent(model = kit::testing::ScriptedModel::new([kit::Message::assistant("Yes.")]))]
/// struct Oracle;
///
/// fn names<A: DeclaredAgent>() -> &'static str {
///     A::NAME
/// }
/// assert_eq!(names::<Oracle>(), "oracle");
/// assert_eq!(Oracle::build().unwrap().name(), "oracle");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a declared agent",
    label = "not declared with `#[agent]`",
    note = "`agent = ..` names a unit struct declared with `#[agent(model = .., ..)]`"
)]
pub trait DeclaredAgent {
    /// The agent's name (`name = ".."`, else the struct's name in snake_case).
    const NAME: &'static str;

    /// The builder the declaration expands to, to extend at run time or to give as a subagent
    /// (which adds the parent's guardrails before building it).
    fn builder() -> Result<AgentBuilder, AgentError>;

    /// Builds a new instance of the agent from its declaration.
    fn build() -> Result<Agent, AgentError> {
        Self::builder()?.build()
    }
}
