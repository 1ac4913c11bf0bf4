//! Deadlines from durations a user configures or a peer asks for: a wait too long to add to
//! the clock (`Duration::MAX` for "no limit") means a deadline decades away, not a panic.

use std::time::{Duration, Instant};

/// Farther than any wait: what a deadline that does not fit in an `Instant` becomes.
const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The instant `wait` after `start`, or far in the future when that does not fit.
pub(crate) fn after(start: Instant, wait: Duration) -> Instant {
    start
        .checked_add(wait)
        .or_else(|| start.checked_add(FAR))
        .unwrap_or(start)
}

/// The instant `wait` from now (see [`after`]).
pub(crate) fn from_now(wait: Duration) -> Instant {
    after(Instant::now(), wait)
}

/// [`from_now`] on tokio's clock, for `sleep_until` and `timeout_at`.
#[cfg(feature = "server")]
pub(crate) fn tokio_from_now(wait: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    tokio::time::Instant::from_std(after(now.into_std(), wait))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_too_long_for_the_clock_is_far_away_not_a_panic() {
        let start = Instant::now();
        assert_eq!(
            after(start, Duration::from_secs(5)),
            start + Duration::from_secs(5)
        );
        assert!(after(start, Duration::MAX) >= start + FAR);
        #[cfg(feature = "server")]
        assert!(tokio_from_now(Duration::MAX) > tokio::time::Instant::now() + FAR / 2);
    }
}
