//! Evicting large tool results to a file, leaving the model a preview and the path.

/// Where evicted results go: `{LARGE_TOOL_RESULTS_DIR}/{sanitised call id}`.
pub const LARGE_TOOL_RESULTS_DIR: &str = "/large_tool_results";

/// Lines shown from the start and from the end of an evicted result.
const PREVIEW_HEAD: usize = 5;
const PREVIEW_TAIL: usize = 5;
/// Longest preview line, in characters.
const PREVIEW_LINE_CHARS: usize = 1000;

/// The longest call id kept as it is in a file name.
const MAX_ID_CHARS: usize = 64;

/// A call id made safe as a file name: anything but ASCII letters, digits, `-` and `_`
/// becomes `_` (so `.`, `/` and `\` can never form a path), as deepagents does. An id that
/// had to change, or is longer than 64 characters, also gets a hash of the id as it was
/// (`call_1-<16 hex>`), so `call.1` and `call:1` do not share a file and a megabyte id makes a
/// short name.
pub fn sanitize_call_id(call_id: &str) -> String {
    let mut sanitized = String::with_capacity(call_id.len().min(MAX_ID_CHARS));
    let mut changed = false;
    for c in call_id.chars().take(MAX_ID_CHARS) {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            sanitized.push(c);
        } else {
            sanitized.push('_');
            changed = true;
        }
    }
    if changed || call_id.chars().nth(MAX_ID_CHARS).is_some() {
        sanitized.push_str(&format!("-{:016x}", crate::ids::fnv1a(call_id.as_bytes())));
    }
    if sanitized.is_empty() {
        "unknown".to_string()
    } else {
        sanitized
    }
}

/// The file an evicted result of `call_id` is written to.
pub fn eviction_path(call_id: &str) -> String {
    format!("{LARGE_TOOL_RESULTS_DIR}/{}", sanitize_call_id(call_id))
}

/// Numbers a line the way previews show it (`cat -n`).
fn numbered(number: usize, line: &str) -> (String, bool) {
    let clipped = line.chars().count() > PREVIEW_LINE_CHARS;
    let shown: String = if clipped {
        line.chars().take(PREVIEW_LINE_CHARS).collect()
    } else {
        line.to_string()
    };
    (format!("{number:>6}\t{shown}"), clipped)
}

/// The head and tail of `content`, line-numbered: the preview text, whether lines were
/// omitted in the middle, and whether a shown line was clipped.
pub(crate) fn preview(content: &str) -> (String, bool, bool) {
    let lines: Vec<&str> = content.lines().collect();
    let mut clipped_any = false;
    let mut render = |range: std::ops::Range<usize>| -> Vec<String> {
        range
            .map(|i| {
                let (text, clipped) = numbered(i + 1, lines[i]);
                clipped_any |= clipped;
                text
            })
            .collect()
    };
    if lines.len() <= PREVIEW_HEAD + PREVIEW_TAIL {
        let text = render(0..lines.len()).join("\n");
        return (text, false, clipped_any);
    }
    let omitted = lines.len() - PREVIEW_HEAD - PREVIEW_TAIL;
    let mut shown = render(0..PREVIEW_HEAD);
    shown.push(format!("... [{omitted} lines truncated] ..."));
    shown.extend(render(lines.len() - PREVIEW_TAIL..lines.len()));
    (shown.join("\n"), true, clipped_any)
}

/// The message that replaces an evicted result.
pub(crate) fn eviction_message(call_id: &str, path: &str, content: &str) -> String {
    let (sample, omitted, clipped) = preview(content);
    let total_lines = content.lines().count();
    let total_chars = content.chars().count();
    let mut note = if omitted {
        "Here is a preview showing the head and tail of the result".to_string()
    } else {
        "Here is a preview of the result".to_string()
    };
    let mut caveats = Vec::new();
    if omitted {
        caveats.push(
            "a line of the form `... [N lines truncated] ...` marks lines left out in the middle",
        );
    }
    if clipped {
        caveats.push("lines longer than 1000 characters are cut after their first 1000");
    }
    if !caveats.is_empty() {
        note.push_str(&format!(" ({})", caveats.join("; ")));
    }
    format!(
        "Tool result too large, the result of this tool call {call_id} was saved in the \
         filesystem at this path: {path}\n\n\
         It has {total_lines} lines ({total_chars} characters). Read it a part at a time with \
         the read_file tool, giving an offset and a limit: for example offset=0 and limit=100 \
         reads the first 100 lines, then offset=100 the next ones. grep can search it too.\n\n\
         {note}:\n\n{sample}\n"
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn call_ids_cannot_form_paths() {
        assert_eq!(sanitize_call_id("call_1-a"), "call_1-a");
        for (id, start) in [
            ("../../etc/passwd", "______etc_passwd-"),
            ("a\\b.c", "a_b_c-"),
        ] {
            let name = sanitize_call_id(id);
            assert!(name.starts_with(start), "{name}");
            assert_eq!(name.len(), start.len() + 16);
            assert!(!name.contains(['.', '/', '\\']), "{name}");
        }
        assert_eq!(sanitize_call_id(""), "unknown");
        assert!(eviction_path("x/y").starts_with("/large_tool_results/x_y-"));
    }

    #[test]
    fn preview_shows_head_and_tail_with_line_numbers() {
        let content: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let (text, omitted, clipped) = preview(&content);
        assert!(omitted);
        assert!(!clipped);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 11);
        assert_eq!(lines[0], "     1\tline 1");
        assert_eq!(lines[4], "     5\tline 5");
        assert_eq!(lines[5], "... [10 lines truncated] ...");
        assert_eq!(lines[6], "    16\tline 16");
        assert_eq!(lines[10], "    20\tline 20");

        let (short, omitted, _) = preview("a\nb");
        assert!(!omitted);
        assert_eq!(short, "     1\ta\n     2\tb");

        let long = "x".repeat(1500);
        let (text, _, clipped) = preview(&long);
        assert!(clipped);
        assert_eq!(text.len(), 7 + 1000);
    }

    #[test]
    fn message_names_the_call_the_path_and_how_to_read_it() {
        let content: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let m = eviction_message("call.1", "/large_tool_results/call_1", &content);
        assert!(m.starts_with(
            "Tool result too large, the result of this tool call call.1 was saved in the \
             filesystem at this path: /large_tool_results/call_1\n\n"
        ));
        assert!(m.contains("offset=0 and limit=100"), "{m}");
        assert!(m.contains("It has 20 lines"), "{m}");
        assert!(
            m.contains("Here is a preview showing the head and tail of the result (a line of"),
            "{m}"
        );
        assert!(m.contains("... [10 lines truncated] ..."));
    }
}
