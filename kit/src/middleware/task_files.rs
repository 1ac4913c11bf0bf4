//! Which `task` call of an answer changed a file first. The subagents of one answer start from
//! the same files and run at once: when two change one path, the first to finish keeps it, and
//! a later one's version is saved beside it (`<path>.conflict-<call id>`) with the model told,
//! where a plain merge would let one silently replace the other.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::agent::FileData;
use crate::bounded::BoundedMap;
use crate::middleware::filesystem::sanitize_call_id;

/// Answers whose claims are kept; the oldest are forgotten (their tasks ended long ago).
const ANSWERS: usize = 4096;

/// The paths each recent answer's tasks changed, and by which call.
#[derive(Default)]
pub(crate) struct FileClaims {
    /// By answer: the call that changed each path first.
    by_answer: Mutex<BoundedMap<HashMap<String, String>, ANSWERS>>,
}

/// What a task's changes became once the answer's earlier tasks were accounted for.
pub(crate) struct Settled {
    /// The changes to apply.
    pub changes: BTreeMap<String, Option<FileData>>,
    /// Paths another task changed first: where this task's version went (`None`: this task
    /// deleted it, and the deletion was dropped).
    pub moved: Vec<(String, Option<String>)>,
}

impl FileClaims {
    /// Claims the paths `changes` touches for `call_id` among the tasks of `answer`.
    pub(crate) fn settle(
        &self,
        answer: &str,
        call_id: &str,
        changes: BTreeMap<String, Option<FileData>>,
    ) -> Settled {
        let mut by_answer = match self.by_answer.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let paths = by_answer.get_or_default(answer);
        let mut settled = Settled {
            changes: BTreeMap::new(),
            moved: Vec::new(),
        };
        for (path, change) in changes {
            match paths.get(&path) {
                Some(first) if first != call_id => match change {
                    Some(file) => {
                        let aside = format!("{path}.conflict-{}", sanitize_call_id(call_id));
                        settled.moved.push((path, Some(aside.clone())));
                        settled.changes.insert(aside, Some(file));
                    }
                    None => settled.moved.push((path, None)),
                },
                _ => {
                    paths.insert(path.clone(), call_id.to_string());
                    settled.changes.insert(path, change);
                }
            }
        }
        settled
    }
}

impl Settled {
    /// What the model is told about the paths moved aside, or `None`.
    pub(crate) fn note(&self) -> Option<String> {
        if self.moved.is_empty() {
            return None;
        }
        let listed = crate::text::listing(
            self.moved.iter().map(|(path, aside)| match aside {
                Some(aside) => format!("{path} (this task's version is {aside})"),
                None => format!("{path} (this task's deletion was not applied)"),
            }),
            self.moved.len(),
            "; ",
        );
        Some(format!(
            "Another task of this turn changed these files first, so they keep its version: \
             {listed}. Compare and merge them if both matter."
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn change(text: &str) -> Option<FileData> {
        Some(FileData::text(text))
    }

    /// The first task to finish keeps a path; a later one's write goes beside it and its
    /// deletion is dropped; a task's own paths and other answers are not affected.
    #[test]
    fn the_first_task_keeps_a_path() {
        let claims = FileClaims::default();
        let first = claims.settle(
            "a1",
            "c1",
            BTreeMap::from([("/r.md".into(), change("one")), ("/x".into(), None)]),
        );
        assert!(first.note().is_none());
        assert_eq!(first.changes.len(), 2);
        let second = claims.settle(
            "a1",
            "c2",
            BTreeMap::from([
                ("/r.md".into(), change("two")),
                ("/x".into(), None),
                ("/own.md".into(), change("mine")),
            ]),
        );
        assert_eq!(
            second.changes.keys().collect::<Vec<_>>(),
            ["/own.md", "/r.md.conflict-c2"]
        );
        let note = second.note().unwrap();
        assert!(
            note.contains("/r.md (this task's version is /r.md.conflict-c2)"),
            "{note}"
        );
        assert!(
            note.contains("/x (this task's deletion was not applied)"),
            "{note}"
        );
        // The first task again (a re-run) and another answer are not in conflict.
        assert!(
            claims
                .settle("a1", "c1", BTreeMap::from([("/r.md".into(), change("1"))]))
                .note()
                .is_none()
        );
        assert!(
            claims
                .settle("a2", "c2", BTreeMap::from([("/r.md".into(), change("2"))]))
                .note()
                .is_none()
        );
    }

    /// Many answers: only the newest are remembered.
    #[test]
    fn claims_are_bounded() {
        let claims = FileClaims::default();
        for i in 0..ANSWERS + 100 {
            claims.settle(&format!("a{i}"), "c", BTreeMap::from([("/p".into(), None)]));
        }
        let by_answer = claims.by_answer.lock().unwrap();
        assert_eq!(by_answer.len(), ANSWERS);
        assert!(by_answer.get("a0").is_none());
    }
}
