//! Every tool, every output format, every error text.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Shared, build};
use crate::agent::{AgentState, FileData};
use crate::message::ToolCall;
use crate::middleware::filesystem::{FsTool, StateBackend};
use crate::tool::{ToolContext, ToolExecution};

fn state(files: &[(&str, &str)]) -> AgentState {
    let mut s = AgentState::default();
    for (path, content) in files {
        s.files.insert(path.to_string(), FileData::text(*content));
    }
    s
}

async fn run_with(max: usize, kind: FsTool, s: &AgentState, args: Value) -> ToolExecution {
    let shared = Arc::new(Shared {
        backend: Arc::new(StateBackend),
        max_output_chars: max,
    });
    build(kind, shared, None)
        .execute(
            &ToolCall::with_id("c1", kind.name(), args),
            ToolContext::new("c1", Arc::new(s.clone()), None),
        )
        .await
        .expect("filesystem tools never pause")
}

async fn run(kind: FsTool, s: &AgentState, args: Value) -> ToolExecution {
    run_with(80_000, kind, s, args).await
}

/// The text, asserting success.
fn ok(e: &ToolExecution) -> String {
    assert!(
        !e.message.is_error(),
        "expected success: {}",
        e.message.text()
    );
    e.message.text()
}

/// The text, asserting an error result.
fn err(e: &ToolExecution) -> String {
    assert!(
        e.message.is_error(),
        "expected an error: {}",
        e.message.text()
    );
    assert!(e.update.is_none(), "an error writes nothing");
    e.message.text()
}

/// Applies the tool's state update.
fn apply(s: &mut AgentState, e: ToolExecution) {
    if let Some(update) = e.update {
        crate::state::apply_one(s, update).unwrap();
    }
}

fn numbered_lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

#[tokio::test]
async fn ls_lists_children_as_a_python_list() {
    let s = state(&[
        ("/a.txt", "a"),
        ("/dir/b.txt", "b"),
        ("/dir/sub/c.txt", "c"),
        ("/empty.txt", ""),
    ]);
    let out = run(FsTool::Ls, &s, json!({"path": "/"})).await;
    assert_eq!(ok(&out), "['/a.txt', '/dir/', '/empty.txt']");
    let out = run(FsTool::Ls, &s, json!({})).await;
    assert_eq!(
        ok(&out),
        "['/a.txt', '/dir/', '/empty.txt']",
        "path defaults to /"
    );
    let out = run(FsTool::Ls, &s, json!({"path": "dir/"})).await;
    assert_eq!(ok(&out), "['/dir/b.txt', '/dir/sub/']");
    let out = run(FsTool::Ls, &s, json!({"path": "/a.txt"})).await;
    assert_eq!(ok(&out), "['/a.txt']");
    let out = run(FsTool::Ls, &s, json!({"path": "/nothing"})).await;
    assert_eq!(ok(&out), "No files found");
    let out = run(FsTool::Ls, &AgentState::default(), json!({"path": "/"})).await;
    assert_eq!(ok(&out), "No files found");
    let out = run(FsTool::Ls, &s, json!({"path": "/../etc"})).await;
    assert!(
        err(&out).starts_with("Error: path '/../etc' goes above the root '/'"),
        "{}",
        out.message.text()
    );
    // Quotes follow Python's repr.
    let s = state(&[("/it's.txt", ""), ("/a\\b", "")]);
    let out = run(FsTool::Ls, &s, json!({"path": "/"})).await;
    assert_eq!(ok(&out), r#"['/a\\b', "/it's.txt"]"#);
}

#[tokio::test]
async fn ls_output_is_capped_with_guidance() {
    let files: Vec<(String, String)> = (0..50)
        .map(|i| (format!("/file-{i:02}.txt"), String::new()))
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let s = state(&refs);
    let out = run_with(130, FsTool::Ls, &s, json!({"path": "/"})).await;
    let text = ok(&out);
    assert!(text.starts_with("['/file-00.txt', "), "{text}");
    assert!(
        text.ends_with("'... [results truncated, try being more specific with your parameters]']"),
        "{text}"
    );
}

#[tokio::test]
async fn read_file_pages_with_a_header() {
    let s = state(&[("/big.txt", &numbered_lines(150))]);
    let out = run(FsTool::ReadFile, &s, json!({"file_path": "/big.txt"})).await;
    let text = ok(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "@@ lines 1-100 of 150 | next offset 100 @@");
    assert_eq!(lines[1], "line 1", "verbatim lines, no line numbers");
    assert_eq!(lines[100], "line 100");
    assert_eq!(lines.len(), 101);

    let out = run(
        FsTool::ReadFile,
        &s,
        json!({"file_path": "/big.txt", "offset": 140, "limit": 5}),
    )
    .await;
    assert_eq!(
        ok(&out),
        "@@ lines 141-145 of 150 | next offset 145 @@\nline 141\nline 142\nline 143\nline \
         144\nline 145"
    );

    let out = run(
        FsTool::ReadFile,
        &s,
        json!({"file_path": "/big.txt", "offset": 100}),
    )
    .await;
    let text = ok(&out);
    assert!(
        text.starts_with("@@ lines 101-150 of 150 @@\nline 101\n"),
        "the last page has no next offset: {text}"
    );
    assert!(text.ends_with("line 150"));

    // A relative path reads the file at the root.
    let s = state(&[("/rel.txt", "x\ny")]);
    let out = run(FsTool::ReadFile, &s, json!({"file_path": "rel.txt"})).await;
    assert_eq!(ok(&out), "@@ lines 1-2 of 2 @@\nx\ny");
}

#[tokio::test]
async fn read_file_error_texts_and_reminders() {
    let s = state(&[
        ("/big.txt", &numbered_lines(150)),
        ("/empty.txt", ""),
        ("/blank.txt", "  \n\n"),
        ("/dir/x.txt", "x"),
    ]);
    let out = run(FsTool::ReadFile, &s, json!({"file_path": "/missing.txt"})).await;
    assert_eq!(err(&out), "Error: File '/missing.txt' not found");

    let out = run(
        FsTool::ReadFile,
        &s,
        json!({"file_path": "/big.txt", "offset": 500}),
    )
    .await;
    assert_eq!(
        err(&out),
        "Error: Line offset 500 exceeds file length (150 lines)"
    );

    for empty in ["/empty.txt", "/blank.txt"] {
        let out = run(FsTool::ReadFile, &s, json!({"file_path": empty})).await;
        assert_eq!(
            ok(&out),
            "System reminder: File exists but has empty contents"
        );
    }

    let out = run(
        FsTool::ReadFile,
        &s,
        json!({"file_path": "/big.txt", "limit": 0}),
    )
    .await;
    assert_eq!(
        ok(&out),
        "System reminder: no lines were read because `limit` was 0. The file was not inspected \
         and may have contents; retry with `limit` >= 1 to read it."
    );

    let out = run(
        FsTool::ReadFile,
        &s,
        json!({"file_path": "/big.txt", "limit": -2}),
    )
    .await;
    assert!(
        err(&out).starts_with("Error: `limit` was -2, but it must be at least 1"),
        "{}",
        out.message.text()
    );

    let out = run(
        FsTool::ReadFile,
        &s,
        json!({"file_path": "/big.txt", "offset": -3, "limit": 2}),
    )
    .await;
    assert_eq!(
        ok(&out),
        "[Requested offset -3 is before the start of the file; read from line 1 instead.]\n\
         @@ lines 1-2 of 150 | next offset 2 @@\nline 1\nline 2"
    );

    let out = run(FsTool::ReadFile, &s, json!({"file_path": "/dir"})).await;
    assert_eq!(
        err(&out),
        "Error: '/dir' is a directory, not a file; use ls to list it, or give the path of a \
         file inside it"
    );

    let out = run(FsTool::ReadFile, &s, json!({"file_path": "../secret"})).await;
    assert_eq!(
        err(&out),
        "Error: path '../secret' goes above the root '/' with '..'; paths must stay inside the \
         filesystem, e.g. '/notes.txt'"
    );

    let out = run(FsTool::ReadFile, &s, json!({"offset": 1})).await;
    assert!(
        err(&out).contains("`file_path` is required"),
        "{}",
        out.message.text()
    );

    let mut binary = FileData::text("AAEC");
    binary.encoding = "base64".into();
    let mut s = AgentState::default();
    s.files.insert("/img.png".into(), binary);
    let out = run(FsTool::ReadFile, &s, json!({"file_path": "/img.png"})).await;
    assert!(
        err(&out).starts_with("Error: '/img.png' is a binary file"),
        "{}",
        out.message.text()
    );
}

#[tokio::test]
async fn read_file_cuts_pages_over_the_size_budget() {
    // Ten-character lines, a 25-character budget: two lines fit (10 + 1 + 10).
    let content: String = (0..6).map(|i| format!("{i}{}\n", "x".repeat(9))).collect();
    let s = state(&[("/wide.txt", &content), ("/one.txt", &"y".repeat(100))]);
    let out = run_with(25, FsTool::ReadFile, &s, json!({"file_path": "/wide.txt"})).await;
    assert_eq!(
        ok(&out),
        "[Output was truncated due to size limits: only lines 1-2 fit. Read on with offset=2, \
         or use a smaller limit.]\n@@ lines 1-2 of 6 | next offset 2 | truncated due to size \
         @@\n0xxxxxxxxx\n1xxxxxxxxx"
    );
    let out = run_with(25, FsTool::ReadFile, &s, json!({"file_path": "/one.txt"})).await;
    assert_eq!(
        ok(&out),
        format!(
            "[Output was truncated due to size limits: line 1 has 100 characters and only the \
             first 25 are shown. Use grep to find text in the rest of the line.]\n@@ lines 1-1 \
             of 1 | truncated mid-line | 25 of 100 chars @@\n{}",
            "y".repeat(25)
        )
    );
}

#[tokio::test]
async fn write_file_creates_and_overwrites() {
    let mut s = AgentState::default();
    let out = run(
        FsTool::WriteFile,
        &s,
        json!({"file_path": "/a.txt", "content": "one"}),
    )
    .await;
    assert_eq!(ok(&out), "Updated file /a.txt");
    apply(&mut s, out);
    assert_eq!(s.files["/a.txt"].content, "one");
    let created = s.files["/a.txt"].created_at.clone();

    let out = run(
        FsTool::WriteFile,
        &s,
        json!({"file_path": "/a.txt", "content": "two"}),
    )
    .await;
    assert_eq!(ok(&out), "Updated file /a.txt", "overwriting is allowed");
    apply(&mut s, out);
    assert_eq!(s.files["/a.txt"].content, "two");
    assert_eq!(s.files["/a.txt"].created_at, created);

    for (given, stored) in [("rel.txt", "/rel.txt"), ("//d/./e//f.txt", "/d/e/f.txt")] {
        let out = run(
            FsTool::WriteFile,
            &s,
            json!({"file_path": given, "content": "x"}),
        )
        .await;
        assert_eq!(ok(&out), format!("Updated file {stored}"));
        apply(&mut s, out);
        assert!(s.files.contains_key(stored), "{stored}");
    }

    for escape in ["../x.txt", "/a/../../x.txt", "~/x.txt"] {
        let out = run(
            FsTool::WriteFile,
            &s,
            json!({"file_path": escape, "content": "x"}),
        )
        .await;
        assert!(
            err(&out).starts_with("Error: path"),
            "{}",
            out.message.text()
        );
    }
    let out = run(
        FsTool::WriteFile,
        &s,
        json!({"file_path": "/d", "content": "x"}),
    )
    .await;
    assert!(
        err(&out).contains("is a directory"),
        "{}",
        out.message.text()
    );
    let out = run(FsTool::WriteFile, &s, json!({"file_path": "/x.txt"})).await;
    assert!(
        err(&out).contains("`content` is required"),
        "{}",
        out.message.text()
    );
}

#[tokio::test]
async fn edit_file_replaces_exact_strings() {
    let mut s = state(&[
        ("/b.txt", "hello world\nhello again\n"),
        ("/c.txt", "one two"),
    ]);
    let out = run(
        FsTool::EditFile,
        &s,
        json!({"file_path": "/c.txt", "old_string": "two", "new_string": "2"}),
    )
    .await;
    assert_eq!(
        ok(&out),
        "Successfully replaced 1 instance(s) of the string in '/c.txt'"
    );
    apply(&mut s, out);
    assert_eq!(s.files["/c.txt"].content, "one 2");

    let out = run(
        FsTool::EditFile,
        &s,
        json!({"file_path": "/b.txt", "old_string": "hello", "new_string": "bye"}),
    )
    .await;
    assert_eq!(
        err(&out),
        "Error: String 'hello' appears 2 times in file. Use replace_all=true to replace all \
         instances, or provide a more specific string with surrounding context."
    );

    let out = run(
        FsTool::EditFile,
        &s,
        json!({"file_path": "/b.txt", "old_string": "hello", "new_string": "bye", "replace_all": true}),
    )
    .await;
    assert_eq!(
        ok(&out),
        "Successfully replaced 2 instance(s) of the string in '/b.txt'"
    );
    apply(&mut s, out);
    assert_eq!(s.files["/b.txt"].content, "bye world\nbye again\n");

    let out = run(
        FsTool::EditFile,
        &s,
        json!({"file_path": "/b.txt", "old_string": "nope", "new_string": "x"}),
    )
    .await;
    assert_eq!(err(&out), "Error: String not found in file: 'nope'");

    let out = run(
        FsTool::EditFile,
        &s,
        json!({"file_path": "/b.txt", "old_string": "", "new_string": "x"}),
    )
    .await;
    assert_eq!(
        err(&out),
        "Error: old_string cannot be empty. Provide the exact text to replace."
    );

    let out = run(
        FsTool::EditFile,
        &s,
        json!({"file_path": "/b.txt", "old_string": "bye", "new_string": "bye"}),
    )
    .await;
    assert!(err(&out).contains("identical"), "{}", out.message.text());

    let out = run(
        FsTool::EditFile,
        &s,
        json!({"file_path": "/missing.txt", "old_string": "a", "new_string": "b"}),
    )
    .await;
    assert_eq!(err(&out), "Error: File '/missing.txt' not found");
}

/// An edit that would grow a file past `max_file_bytes` is refused before its text is built:
/// a one-character `old_string` found 100,000 times and a 200-byte `new_string` would make
/// 20 MB from a 100 KB file. The same edit at a size within the limit goes through.
#[tokio::test]
async fn edit_file_refuses_to_build_a_file_past_the_limit() {
    let lines = "x\n".repeat(50_000);
    let mut s = state(&[("/big.txt", &lines)]);
    let replace = |new: String| json!({"file_path": "/big.txt", "old_string": "\n", "new_string": new, "replace_all": true});
    let out = run(FsTool::EditFile, &s, replace("y".repeat(400))).await;
    assert_eq!(
        err(&out),
        "Error: replacing 50000 instance(s) in '/big.txt' would make it 20050000 bytes, more \
         than the 16777216 bytes an edit may produce; replace fewer instances at a time, or \
         with shorter text."
    );
    assert_eq!(s.files["/big.txt"].content, lines, "nothing was written");
    let out = run(FsTool::EditFile, &s, replace("y".repeat(10))).await;
    assert_eq!(
        ok(&out),
        "Successfully replaced 50000 instance(s) of the string in '/big.txt'"
    );
    apply(&mut s, out);
    assert_eq!(s.files["/big.txt"].content.len(), 550_000);
}

#[tokio::test]
async fn delete_removes_files_and_directories() {
    let mut s = state(&[("/x", "x"), ("/d/a", "a"), ("/d/e/b", "b"), ("/keep", "k")]);
    let out = run(FsTool::Delete, &s, json!({"file_path": "/x"})).await;
    assert_eq!(ok(&out), "Deleted /x");
    apply(&mut s, out);
    let out = run(FsTool::Delete, &s, json!({"file_path": "d"})).await;
    assert_eq!(ok(&out), "Deleted /d");
    apply(&mut s, out);
    assert_eq!(s.files.keys().collect::<Vec<_>>(), ["/keep"]);
    let out = run(FsTool::Delete, &s, json!({"file_path": "/x"})).await;
    assert_eq!(err(&out), "Error: File '/x' not found");
    let out = run(FsTool::Delete, &s, json!({"file_path": "/"})).await;
    assert!(
        err(&out).starts_with("Error: refusing to delete the root directory '/'"),
        "{}",
        out.message.text()
    );
    let out = run(FsTool::Delete, &s, json!({"file_path": "/.."})).await;
    assert!(err(&out).contains("goes above the root"));
}

#[tokio::test]
async fn glob_lists_matching_files() {
    let s = state(&[
        ("/a.py", ""),
        ("/src/b.py", ""),
        ("/src/c.rs", ""),
        ("/.git/d.py", ""),
        ("/docs/e.md", ""),
    ]);
    let out = run(FsTool::Glob, &s, json!({"pattern": "*.py"})).await;
    assert_eq!(ok(&out), "['/a.py', '/src/b.py']");
    let out = run(
        FsTool::Glob,
        &s,
        json!({"pattern": "**/*.{py,rs}", "path": "/src"}),
    )
    .await;
    assert_eq!(ok(&out), "['/src/b.py', '/src/c.rs']");
    let out = run(FsTool::Glob, &s, json!({"pattern": "/*.py", "path": null})).await;
    assert_eq!(ok(&out), "['/a.py']");
    let out = run(FsTool::Glob, &s, json!({"pattern": "*.java"})).await;
    assert_eq!(ok(&out), "No files found");
    let out = run(FsTool::Glob, &s, json!({"pattern": "*", "path": "../"})).await;
    assert!(err(&out).contains("goes above the root"));
    let out = run(FsTool::Glob, &s, json!({"pattern": " "})).await;
    assert!(err(&out).starts_with("Error: the glob pattern is empty"));
}

/// A pattern whose matching cost multiplies (30 alternatives of `*aaa…ab` against long names) ends with an error
/// naming the limit, from `glob` and from `grep`'s `glob` filter, instead of holding the
/// thread; a plain pattern over the same files is answered.
#[tokio::test]
async fn a_glob_too_costly_to_match_is_refused_with_the_limit_named() {
    let names: Vec<(String, &str)> = (0..300)
        .map(|i| (format!("/d/{i}{}", "a".repeat(250)), "text"))
        .collect();
    let files: Vec<(&str, &str)> = names.iter().map(|(p, c)| (p.as_str(), *c)).collect();
    let s = state(&files);
    let costly = (0..30)
        .map(|i| format!("*{}b{i}", "a".repeat(120)))
        .collect::<Vec<_>>()
        .join(",");
    let costly = format!("{{{costly}}}");
    let out = run(FsTool::Glob, &s, json!({"pattern": costly})).await;
    let text = err(&out);
    assert!(text.contains("FsLimits::max_glob_steps"), "{text}");
    assert!(text.contains("narrower `path`"), "{text}");
    let out = run(FsTool::Grep, &s, json!({"pattern": "text", "glob": costly})).await;
    let text = err(&out);
    assert!(
        text.starts_with("Error: the `glob` filter: matching"),
        "{text}"
    );
    // The same files with a plain pattern.
    let out = run(FsTool::Glob, &s, json!({"pattern": "*a"})).await;
    assert_eq!(ok(&out).matches("/d/").count(), 300);
    let out = run(
        FsTool::Grep,
        &s,
        json!({"pattern": "text", "glob": "1*", "output_mode": "count"}),
    )
    .await;
    assert_eq!(ok(&out).lines().count(), 111, "1, 10–19 and 100–199");
}

/// Matching lines far longer than the output are cut as before, but only about one output's
/// worth of their text is kept while searching; `count` and the `max_count` note still see
/// every match.
#[tokio::test]
async fn grep_keeps_no_more_line_text_than_it_can_show() {
    let line = format!("needle {}", "x".repeat(50_000));
    let file = format!("{line}\n{line}\nno\n{line}\n");
    let s = state(&[("/a.txt", &file), ("/b.txt", &file), ("/c.txt", &file)]);
    let out = run(
        FsTool::Grep,
        &s,
        json!({"pattern": "needle", "output_mode": "content"}),
    )
    .await;
    let mut full = Vec::new();
    for path in ["/a.txt", "/b.txt", "/c.txt"] {
        full.push(format!("{path}:"));
        for n in [1, 2, 4] {
            full.push(format!("  {n}: {line}"));
        }
    }
    assert_eq!(ok(&out), super::cap_text(full.join("\n"), 80_000));
    let out = run(
        FsTool::Grep,
        &s,
        json!({"pattern": "needle", "output_mode": "count", "max_count": 7}),
    )
    .await;
    let text = ok(&out);
    assert!(
        text.starts_with("/a.txt: 3\n/b.txt: 3\n/c.txt: 1\n\nNote: the search stopped after 7"),
        "{text}"
    );
}

/// The text kept for `grep`'s output stops one character past the budget, whatever the lines,
/// and none is kept outside `content` mode.
#[test]
fn grep_keeps_one_budget_of_line_text() {
    let line = "é".repeat(50_000);
    let mut shown = super::ShownLines::new(true, 80_000);
    let kept: Vec<String> = (0..10).filter_map(|_| shown.keep(&line)).collect();
    assert_eq!(kept.len(), 2);
    assert_eq!(kept[0].chars().count(), 50_000);
    assert_eq!(kept[1].chars().count(), 30_001);
    let mut counting = super::ShownLines::new(false, 80_000);
    assert_eq!(counting.keep(&line), None);
}

#[tokio::test]
async fn grep_output_modes() {
    let big: String = (1..=100)
        .map(|i| {
            if i == 1 || i % 10 == 0 {
                format!("line {i} TODO\n")
            } else {
                format!("line {i}\n")
            }
        })
        .collect();
    let s = state(&[
        ("/dir/big.txt", &big),
        ("/a.txt", "a TODO here\n"),
        ("/b.py", "no match\n"),
    ]);
    let out = run(FsTool::Grep, &s, json!({"pattern": "TODO"})).await;
    assert_eq!(ok(&out), "/a.txt\n/dir/big.txt");
    // Braces that expand past the limit: the filter is refused, not silently ignored.
    let huge = "{a,b,c,d,e,f,g,h,i,j}".repeat(4);
    let out = run(FsTool::Grep, &s, json!({"pattern": "TODO", "glob": huge})).await;
    let text = err(&out);
    assert!(
        text.starts_with("Error: invalid `glob` filter: ") && text.contains("alternatives"),
        "{text}"
    );
    let out = run(
        FsTool::Grep,
        &s,
        json!({"pattern": "TODO", "output_mode": "count"}),
    )
    .await;
    assert_eq!(ok(&out), "/a.txt: 1\n/dir/big.txt: 11");
    let out = run(
        FsTool::Grep,
        &s,
        json!({"pattern": "TODO", "output_mode": "content", "path": "/dir", "max_count": null}),
    )
    .await;
    let text = ok(&out);
    assert!(
        text.starts_with("/dir/big.txt:\n  1: line 1 TODO\n  10: line 10 TODO\n  20: line 20"),
        "{text}"
    );
    let out = run(
        FsTool::Grep,
        &s,
        json!({"pattern": "TODO", "glob": "*.txt", "path": "/dir"}),
    )
    .await;
    assert_eq!(ok(&out), "/dir/big.txt");
    let out = run(
        FsTool::Grep,
        &s,
        json!({"pattern": "TODO", "path": "/a.txt"}),
    )
    .await;
    assert_eq!(ok(&out), "/a.txt", "a file as the path searches that file");
    let out = run(FsTool::Grep, &s, json!({"pattern": "absent"})).await;
    assert_eq!(ok(&out), "No matches found");
    let out = run(
        FsTool::Grep,
        &s,
        json!({"pattern": "TODO", "output_mode": "content", "max_count": 2}),
    )
    .await;
    assert_eq!(
        ok(&out),
        "/a.txt:\n  1: a TODO here\n/dir/big.txt:\n  1: line 1 TODO\n\nNote: the search stopped \
         after 2 matching lines (`max_count`). The matches above are valid but incomplete; \
         narrow the pattern, path or glob, or raise max_count, to see the rest."
    );
}

#[tokio::test]
async fn grep_is_literal_by_default_with_opt_in_regex() {
    let s = state(&[
        ("/regex.txt", "log.*Error\na|b\nfn f(x) {}\n"),
        ("/log.txt", "logError\nerror 42\n"),
    ]);
    // Regex characters are searched verbatim.
    let out = run(FsTool::Grep, &s, json!({"pattern": "log.*Error"})).await;
    assert_eq!(ok(&out), "/regex.txt");
    let out = run(FsTool::Grep, &s, json!({"pattern": "fn f(x)"})).await;
    assert_eq!(ok(&out), "/regex.txt");
    // A regex-looking pattern that finds nothing gets the note.
    let out = run(FsTool::Grep, &s, json!({"pattern": "error|warning"})).await;
    assert_eq!(
        ok(&out),
        "No matches found\n\nNote: grep matches literal text, not regex, so characters like \
         `|`, `.*`, and `\\.` are searched verbatim. Search for the literal text you need \
         instead; for `|` alternation, run a separate search per alternative. To search with a \
         regular expression, call grep again with `regex` set to true."
    );
    // Regex mode, opt-in.
    let out = run(
        FsTool::Grep,
        &s,
        json!({"pattern": "error \\d+|logE", "regex": true, "output_mode": "content"}),
    )
    .await;
    assert_eq!(ok(&out), "/log.txt:\n  1: logError\n  2: error 42");
    let out = run(
        FsTool::Grep,
        &s,
        json!({"pattern": "nothing|here", "regex": true}),
    )
    .await;
    assert_eq!(
        ok(&out),
        "No matches found",
        "no literal note in regex mode"
    );
    let out = run(
        FsTool::Grep,
        &s,
        json!({"pattern": "(unclosed", "regex": true}),
    )
    .await;
    assert!(
        err(&out).starts_with("Error: invalid regular expression '(unclosed'"),
        "{}",
        out.message.text()
    );
    assert!(out.message.text().contains("set `regex` to false"));
    let out = run(FsTool::Grep, &s, json!({"pattern": ""})).await;
    assert_eq!(
        err(&out),
        "Error: `pattern` is empty; pass the text to search for"
    );
    let out = run(
        FsTool::Grep,
        &s,
        json!({"pattern": "x", "output_mode": "lines"}),
    )
    .await;
    assert!(
        err(&out).contains("must be one of"),
        "{}",
        out.message.text()
    );
    let out = run(FsTool::Grep, &s, json!({"pattern": "x", "max_count": 0})).await;
    assert!(err(&out).contains("max_count"), "{}", out.message.text());
}

#[tokio::test]
async fn schemas_use_the_anchor_argument_names() {
    let shared = Arc::new(Shared {
        backend: Arc::new(StateBackend),
        max_output_chars: 10,
    });
    let expect: [(FsTool, &[&str], &[&str]); 7] = [
        (FsTool::Ls, &["path"], &[]),
        (
            FsTool::ReadFile,
            &["file_path", "offset", "limit"],
            &["file_path"],
        ),
        (
            FsTool::WriteFile,
            &["file_path", "content"],
            &["file_path", "content"],
        ),
        (
            FsTool::EditFile,
            &["file_path", "old_string", "new_string", "replace_all"],
            &["file_path", "old_string", "new_string"],
        ),
        (FsTool::Delete, &["file_path"], &["file_path"]),
        (FsTool::Glob, &["pattern", "path"], &["pattern"]),
        (
            FsTool::Grep,
            &[
                "pattern",
                "path",
                "glob",
                "output_mode",
                "max_count",
                "regex",
            ],
            &["pattern"],
        ),
    ];
    for (kind, props, required) in expect {
        let tool = build(kind, shared.clone(), None);
        assert_eq!(tool.name(), kind.name());
        let schema = tool.parameters();
        let mut names: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        let mut want = props.to_vec();
        want.sort_unstable();
        assert_eq!(names, want, "{}", kind.name());
        let req: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        assert_eq!(req, required, "{}", kind.name());
    }
    let read = build(FsTool::ReadFile, shared.clone(), None);
    assert_eq!(read.parameters()["properties"]["offset"]["default"], 0);
    assert_eq!(read.parameters()["properties"]["limit"]["default"], 100);
    let custom = build(FsTool::Ls, shared, Some("List it."));
    assert_eq!(custom.description(), "List it.");
}

/// An expression whose compiled form is large is refused with the reason (its matching could
/// cost that size per byte searched); everyday expressions compile.
#[test]
fn a_huge_regular_expression_is_refused_and_everyday_ones_compile() {
    for everyday in [
        r"fn\s+\w+\(",
        r"\w{20}",
        r"(?i)todo|fixme",
        r"^\s*#\[derive\(",
    ] {
        assert!(super::Matcher::new(everyday, true).is_ok(), "{everyday}");
    }
    // `regex`'s default limit takes this one, and it costs seconds per MiB searched.
    let Err(e) = super::Matcher::new(r"\w{200}z", true) else {
        panic!("a huge expression was accepted");
    };
    assert!(e.contains("size limit"), "{e}");
    assert!(e.contains("set `regex` to false"), "{e}");
    // As a literal, the same text is fine.
    assert!(super::Matcher::new(r"\w{200}z", false).is_ok());
}
