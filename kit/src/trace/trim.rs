//! Trimming a run too large to export: its longest strings are cut first (a tool that read a
//! big file, a model given a long document), and only if that is not enough are its inputs,
//! outputs and largest metadata values replaced by a note saying how much was left out. A span
//! with shortened values is worth more than no span at all.
//!
//! Linear in the run's size: one pass to measure the strings, a search for the longest length
//! they may keep over those measurements (a few dozen passes over a list of numbers), one
//! pass to cut. The values are walked with a stack, not recursion, so nesting cannot overflow.

use serde_json::Value;

use super::record::RunRecord;

/// What a cut string ends with.
const MARK: &str = "…[truncated]";

/// The metadata key a trimmed run carries: its size (see [`RunRecord::approx_bytes`]) before it
/// was trimmed.
const TRIMMED_FROM: &str = "kit.truncated_from_bytes";

impl RunRecord {
    /// Shrinks the run to at most about `max` bytes (as [`approx_bytes`](Self::approx_bytes)
    /// counts them) if it is larger, and says whether it changed it. Ids, names, timings, the
    /// error and the tags are kept; a run whose fixed part alone is over `max` stays over it.
    pub(crate) fn trim_to(&mut self, max: usize) -> bool {
        let before = self.approx_bytes();
        if before <= max {
            return false;
        }
        // Room for the key saying it was trimmed.
        let max = max.saturating_sub(TRIMMED_FROM.len() + 32);
        let lengths = string_lengths(self.values_mut());
        if let Some(keep) = longest_kept(&lengths, before.saturating_sub(max)) {
            cut_strings(self.values_mut(), keep);
        }
        if self.approx_bytes() > max {
            // Bulk that is not long strings (a huge array of numbers, many short strings).
            let left_out = |what: &str, value: &Value| {
                Value::String(format!(
                    "[{} bytes of {what} left out: the run was too large to export]",
                    crate::json::approx_len(value)
                ))
            };
            self.inputs = left_out("inputs", &self.inputs);
            self.outputs = left_out("outputs", &self.outputs);
            let budget = max / 8;
            for value in self.metadata.values_mut() {
                if crate::json::approx_len(value) > budget {
                    *value = left_out("metadata", value);
                }
            }
        }
        self.metadata
            .insert(TRIMMED_FROM.to_string(), Value::from(before as u64));
        true
    }

    /// The values trimming may shorten: inputs, outputs and metadata.
    fn values_mut(&mut self) -> Vec<&mut Value> {
        let mut values = vec![&mut self.inputs, &mut self.outputs];
        values.extend(self.metadata.values_mut());
        values
    }
}

/// The length in bytes of every string in `values`.
fn string_lengths(mut stack: Vec<&mut Value>) -> Vec<usize> {
    let mut lengths = Vec::new();
    while let Some(value) = stack.pop() {
        match value {
            Value::String(s) => lengths.push(s.len()),
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(map) => stack.extend(map.values_mut()),
            _ => {}
        }
    }
    lengths
}

/// Bytes saved by cutting every string longer than `keep` bytes to `keep` bytes and the mark.
fn saved(lengths: &[usize], keep: usize) -> usize {
    lengths
        .iter()
        .map(|&len| len.saturating_sub(keep + MARK.len()))
        .sum()
}

/// The longest length strings may keep so that cutting them saves at least `excess` bytes: 0
/// when even cutting every string to nothing does not (the rest is then left out), `None`
/// when there is no string.
fn longest_kept(lengths: &[usize], excess: usize) -> Option<usize> {
    let longest = lengths.iter().copied().max()?;
    if saved(lengths, 0) < excess {
        // Cut all the same: it gets closest, and the rest is left out after.
        return Some(0);
    }
    // `saved` falls as `keep` grows: the largest `keep` that still saves enough.
    let (mut fits, mut too_long) = (0, longest + 1);
    while too_long - fits > 1 {
        let mid = fits + (too_long - fits) / 2;
        if saved(lengths, mid) >= excess {
            fits = mid;
        } else {
            too_long = mid;
        }
    }
    Some(fits)
}

/// Cuts `s` to at most `max` bytes, at a character boundary, followed by the mark; a string
/// of `max` bytes or fewer is left as it is.
pub(super) fn cut(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    // Back to a character boundary (at most three bytes back).
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push_str(MARK);
}

/// Cuts every string of `values` longer than `keep` bytes (and the mark) to at most `keep`
/// bytes, at a character boundary, followed by the mark.
fn cut_strings(mut stack: Vec<&mut Value>, keep: usize) {
    while let Some(value) = stack.pop() {
        match value {
            Value::String(s) if s.len() > keep + MARK.len() => {
                cut(s, keep);
                s.shrink_to_fit();
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(map) => stack.extend(map.values_mut()),
            _ => {}
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::trace::RunKind;

    fn run(inputs: Value, outputs: Value) -> RunRecord {
        let mut run = RunRecord::for_test(
            "0195a1b2-0000-7000-8000-000000000001",
            "read_file",
            RunKind::Tool,
        );
        run.inputs = inputs;
        run.outputs = outputs;
        run
    }

    /// A run within the limit is left as it is, and carries no mark.
    #[test]
    fn a_run_within_the_limit_is_untouched() {
        let mut r = run(json!({"path": "a.txt"}), json!("short"));
        let before = r.clone();
        assert!(!r.trim_to(10_000));
        assert_eq!(r, before);
        assert!(!r.metadata.contains_key(TRIMMED_FROM));
    }

    /// One huge string is cut to fit; the small ones beside it are kept whole, and the run
    /// says how large it was.
    #[test]
    fn the_longest_strings_are_cut_first() {
        for size in [1024 * 1024, 8 * 1024 * 1024] {
            let big = "é".repeat(size / 2);
            let mut r = run(
                json!({"path": "notes.txt", "mode": "read"}),
                json!({"content": big, "lines": 12}),
            );
            let before = r.approx_bytes();
            assert!(r.trim_to(64 * 1024));
            assert!(r.approx_bytes() <= 64 * 1024, "{}", r.approx_bytes());
            assert_eq!(r.inputs, json!({"path": "notes.txt", "mode": "read"}));
            assert_eq!(r.outputs["lines"], 12);
            let content = r.outputs["content"].as_str().unwrap();
            assert!(content.ends_with(MARK));
            assert!(content.starts_with("éé"));
            // Most of the room goes to what was cut, not to nothing.
            assert!(content.len() > 32 * 1024, "{}", content.len());
            assert_eq!(r.metadata[TRIMMED_FROM], before as u64);
        }
    }

    /// Bulk that is not long strings (a large array of numbers) is left out with a note.
    #[test]
    fn bulk_that_is_not_strings_is_left_out_with_a_note() {
        let numbers: Vec<u32> = (0..200_000).collect();
        let mut r = run(json!({"q": "x"}), json!(numbers));
        assert!(r.trim_to(16 * 1024));
        assert!(r.approx_bytes() <= 16 * 1024, "{}", r.approx_bytes());
        let note = r.outputs.as_str().unwrap();
        assert!(note.contains("bytes of outputs left out"), "{note}");
        assert!(r.metadata.contains_key(TRIMMED_FROM));
    }

    /// Nesting is walked with a stack, not recursion: a long string at the bottom of 2,000
    /// nested arrays is found and cut, and the nesting kept.
    #[test]
    fn a_string_deep_in_nested_values_is_cut() {
        let mut deep = json!("x".repeat(100_000));
        for _ in 0..2_000 {
            deep = Value::Array(vec![deep]);
        }
        let mut r = run(Value::Null, deep);
        assert!(r.trim_to(16 * 1024));
        assert!(r.approx_bytes() <= 16 * 1024, "{}", r.approx_bytes());
        let mut bottom = &r.outputs;
        while let Value::Array(items) = bottom {
            bottom = &items[0];
        }
        assert!(bottom.as_str().unwrap().ends_with(MARK));
    }

    /// The search for the length to keep is exact: cutting to one byte more would not save
    /// enough.
    #[test]
    fn the_kept_length_is_the_longest_that_saves_enough() {
        let lengths = [10, 5_000, 20_000, 300];
        for excess in [1, 100, 4_000, 15_000, 24_000] {
            let keep = longest_kept(&lengths, excess).unwrap();
            assert!(saved(&lengths, keep) >= excess, "{excess}");
            assert!(saved(&lengths, keep + 1) < excess, "{excess}");
        }
        assert_eq!(longest_kept(&[], 10), None);
        assert_eq!(longest_kept(&[5, 5], 1_000), Some(0));
    }
}
