//! Stream modes: which kinds of events a stream carries (LangGraph's `stream_mode`).

use super::EventKind;

/// A kind of stream, named after LangGraph's `stream_mode`; pass one or more to
/// [`RunOptions::stream_mode`](crate::RunOptions::stream_mode) and the stream carries only
/// their events. A run builds no event that nobody asked for, so a narrow mode is also a
/// faster one: an agent asked for [`Updates`](StreamMode::Updates) only calls its model
/// without streaming tokens.
///
/// Every stream also carries the run's lifecycle, whatever the modes: `run_start`,
/// `interrupt`, `error`, `cancelled` and `run_end`, so a consumer always learns how the run
/// ended. Without a mode, a stream carries every kind but `values`.
///
/// | mode | events |
/// |---|---|
/// | `Values` | `values` |
/// | `Updates` | `node_end` |
/// | `Custom` | `custom`, `middleware` |
/// | `Messages` | `model_start`, `model_delta`, `model_end`, `tool_start`, `tool_end` |
/// | `Tasks` | `node_start`, `node_end`, `node_retry` |
/// | `Checkpoints` | `checkpoint` |
/// | `Debug` | all of them |
///
/// ```
/// use kit::event::{EventKind, StreamMode};
///
/// assert_eq!(StreamMode::Updates.kinds(), &[EventKind::NodeEnd]);
/// assert!(StreamMode::Debug.kinds().contains(&EventKind::Values));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamMode {
    /// The whole state after each superstep.
    Values,
    /// What each node wrote, as it finishes.
    Updates,
    /// What nodes emit themselves, and middleware reports.
    Custom,
    /// Model calls, their tokens, and tool calls.
    Messages,
    /// Node tasks starting, finishing and retrying.
    Tasks,
    /// Checkpoints as they become durable.
    Checkpoints,
    /// Everything.
    Debug,
}

impl StreamMode {
    /// The kinds of event this mode carries, besides the lifecycle every stream carries.
    pub fn kinds(self) -> &'static [EventKind] {
        use EventKind::*;
        match self {
            StreamMode::Values => &[Values],
            StreamMode::Updates => &[NodeEnd],
            StreamMode::Custom => &[Custom, Middleware],
            StreamMode::Messages => &[ModelStart, ModelDelta, ModelEnd, ToolStart, ToolEnd],
            StreamMode::Tasks => &[NodeStart, NodeEnd, NodeRetry],
            StreamMode::Checkpoints => &[Checkpoint],
            StreamMode::Debug => ALL,
        }
    }
}

/// Every kind, in catalog order.
const ALL: &[EventKind] = &[
    EventKind::RunStart,
    EventKind::NodeStart,
    EventKind::NodeEnd,
    EventKind::NodeRetry,
    EventKind::Values,
    EventKind::Custom,
    EventKind::Checkpoint,
    EventKind::ModelStart,
    EventKind::ModelDelta,
    EventKind::ModelEnd,
    EventKind::ToolStart,
    EventKind::ToolEnd,
    EventKind::Middleware,
    EventKind::Interrupt,
    EventKind::Error,
    EventKind::Cancelled,
    EventKind::RunEnd,
];

/// The kinds every stream carries: how a run began and how it ended.
const LIFECYCLE: &[EventKind] = &[
    EventKind::RunStart,
    EventKind::Interrupt,
    EventKind::Error,
    EventKind::Cancelled,
    EventKind::RunEnd,
];

/// A set of event kinds, one bit each: checked before an event is built, so it must cost
/// nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventKinds(u32);

impl EventKinds {
    /// What a stream carries when no mode is given: everything but `values` (the whole state
    /// per step is asked for explicitly).
    pub(crate) fn default_stream() -> Self {
        Self::of(ALL).without(EventKind::Values)
    }

    /// Every kind (a sink nobody narrowed).
    pub(crate) fn all() -> Self {
        Self::of(ALL)
    }

    /// The lifecycle plus the kinds of `modes`.
    pub(crate) fn of_modes(modes: impl IntoIterator<Item = StreamMode>) -> Self {
        modes.into_iter().fold(Self::of(LIFECYCLE), |set, mode| {
            set.union(Self::of(mode.kinds()))
        })
    }

    fn of(kinds: &[EventKind]) -> Self {
        EventKinds(kinds.iter().fold(0, |bits, &kind| bits | bit(kind)))
    }

    fn union(self, other: Self) -> Self {
        EventKinds(self.0 | other.0)
    }

    pub(crate) fn with(self, kind: EventKind) -> Self {
        EventKinds(self.0 | bit(kind))
    }

    pub(crate) fn without(self, kind: EventKind) -> Self {
        EventKinds(self.0 & !bit(kind))
    }

    pub(crate) fn contains(self, kind: EventKind) -> bool {
        self.0 & bit(kind) != 0
    }
}

impl Default for EventKinds {
    fn default() -> Self {
        Self::default_stream()
    }
}

fn bit(kind: EventKind) -> u32 {
    1 << kind as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_bit_and_debug_has_them_all() {
        let all = EventKinds::of_modes([StreamMode::Debug]);
        for (i, &kind) in ALL.iter().enumerate() {
            assert!(all.contains(kind));
            for &other in &ALL[i + 1..] {
                assert_ne!(bit(kind), bit(other), "{kind} and {other}");
            }
        }
    }

    #[test]
    fn a_mode_carries_its_kinds_and_the_lifecycle_only() {
        let updates = EventKinds::of_modes([StreamMode::Updates]);
        for kind in ALL {
            let expected = *kind == EventKind::NodeEnd || LIFECYCLE.contains(kind);
            assert_eq!(updates.contains(*kind), expected, "{kind}");
        }
        let two = EventKinds::of_modes([StreamMode::Values, StreamMode::Checkpoints]);
        assert!(two.contains(EventKind::Values) && two.contains(EventKind::Checkpoint));
        assert!(!two.contains(EventKind::NodeEnd) && !two.contains(EventKind::ModelDelta));
    }

    #[test]
    fn the_default_stream_is_everything_but_values() {
        let default = EventKinds::default();
        assert!(!default.contains(EventKind::Values));
        assert!(default.with(EventKind::Values).contains(EventKind::Values));
        assert!(
            ALL.iter()
                .filter(|k| **k != EventKind::Values)
                .all(|k| default.contains(*k))
        );
    }
}
