//! What the model reads about each filesystem tool: its description and its argument schema.

use serde_json::{Value, json};

use super::DEFAULT_READ_LIMIT;
use crate::middleware::filesystem::FsTool;

pub(super) fn default_description(kind: FsTool) -> &'static str {
    match kind {
        FsTool::Ls => {
            "Lists the files and directories directly inside a directory.\n\nPaths are \
             absolute; directories end with `/`. Use it to explore the filesystem before \
             reading or editing files. `path` defaults to `/`."
        }
        FsTool::ReadFile => {
            "Reads a text file.\n\nUsage:\n- By default it reads up to 100 lines from the \
             start of the file.\n- The result starts with a header such as `@@ lines 1-100 of \
             250 | next offset 100 @@`, followed by the lines exactly as they are in the file \
             (no line numbers). To read on, call read_file again with the offset from the \
             header.\n- `offset` is the 0-based line to start at; `limit` is how many lines to \
             read. Page through large files rather than raising `limit` a lot.\n- A file that \
             exists but is empty gives a system reminder instead of content.\n- You can read \
             several files in one turn by making several calls.\n- Read a file before editing \
             it."
        }
        FsTool::WriteFile => {
            "Writes a text file: creates it, or replaces its whole content when it exists.\n\n\
             Usage:\n- Use it to create a file or to rewrite one completely; to change part of \
             a file, prefer edit_file.\n- Missing parent directories are created."
        }
        FsTool::EditFile => {
            "Replaces an exact string in a file.\n\nUsage:\n- Read the file first and copy \
             `old_string` exactly from it, keeping its indentation (tabs and spaces).\n- \
             `old_string` must appear exactly once unless `replace_all` is true; include \
             surrounding lines to make it unique.\n- Set `replace_all` to true to replace every \
             occurrence (e.g. to rename a variable).\n- Prefer editing existing files to \
             creating new ones."
        }
        FsTool::Delete => {
            "Deletes a file, or a directory with everything inside it.\n\nThis cannot be \
             undone: delete only paths you are sure are no longer needed. Delete a directory \
             with one call rather than one call per file."
        }
        FsTool::Glob => {
            "Finds files whose path matches a glob pattern; returns their absolute paths.\n\n\
             `*` matches within a name, `**` any number of directories, `?` one character, \
             `{a,b}` either alternative. A pattern without `/` matches file names at any depth \
             below `path`; a pattern starting with `/` matches from the root.\n\nExamples:\n- \
             `*.py` - every Python file\n- `src/**/*.rs` - Rust files under /src\n- \
             `/docs/*.md` - Markdown files directly in /docs"
        }
        FsTool::Grep => {
            "Searches files for a text pattern.\n\nThe pattern is LITERAL text, not a regular \
             expression: characters such as `|`, `.`, `*` and `(` match themselves. To find \
             any of several strings, search for each one separately. Set `regex` to true to \
             search with a regular expression instead.\n\n`output_mode`: `files_with_matches` \
             (default) lists the matching files, `content` shows the matching lines with their \
             line numbers, `count` gives the number of matching lines per file. `glob` limits \
             the search to files matching a pattern (e.g. `*.py`).\n\nExamples:\n- \
             `grep(pattern=\"TODO\")`\n- `grep(pattern=\"import\", glob=\"*.py\")`\n- \
             `grep(pattern=\"def __init__(self):\", output_mode=\"content\")`"
        }
    }
}

pub(super) fn schema(kind: FsTool) -> Value {
    let file_path = |what: &str| {
        json!({
            "type": "string",
            "description": format!("Absolute path of the file to {what}, e.g. '/notes.txt'.")
        })
    };
    match kind {
        FsTool::Ls => json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": ["string", "null"],
                    "description": "Absolute path of the directory to list. Defaults to '/'."
                }
            }
        }),
        FsTool::ReadFile => json!({
            "type": "object",
            "properties": {
                "file_path": file_path("read"),
                "offset": {
                    "type": "integer",
                    "default": 0,
                    "description": "The line to start reading at (0-indexed)."
                },
                "limit": {
                    "type": "integer",
                    "default": DEFAULT_READ_LIMIT,
                    "description": "The maximum number of lines to read."
                }
            },
            "required": ["file_path"]
        }),
        FsTool::WriteFile => json!({
            "type": "object",
            "properties": {
                "file_path": file_path("write"),
                "content": {
                    "type": "string",
                    "description": "The full text content of the file."
                }
            },
            "required": ["file_path", "content"]
        }),
        FsTool::EditFile => json!({
            "type": "object",
            "properties": {
                "file_path": file_path("edit"),
                "old_string": {
                    "type": "string",
                    "description": "The exact text to replace. Must be unique in the file \
                                    unless replace_all is true."
                },
                "new_string": {
                    "type": "string",
                    "description": "The text to put instead. Must differ from old_string."
                },
                "replace_all": {
                    "type": "boolean",
                    "default": false,
                    "description": "Replace every occurrence of old_string (default false: \
                                    old_string must be unique)."
                }
            },
            "required": ["file_path", "old_string", "new_string"]
        }),
        FsTool::Delete => json!({
            "type": "object",
            "properties": {
                "file_path": {
                    "type": "string",
                    "description": "Absolute path of the file or directory to delete."
                }
            },
            "required": ["file_path"]
        }),
        FsTool::Glob => json!({
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": "Glob pattern to match files, e.g. '**/*.py', '*.txt', \
                                    '/subdir/**/*.md'."
                },
                "path": {
                    "type": ["string", "null"],
                    "description": "Directory to search from. Defaults to '/'."
                }
            },
            "required": ["pattern"]
        }),
        FsTool::Grep => json!({
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": "Text to search for: literal text, not a regex (unless \
                                    regex is true)."
                },
                "path": {
                    "type": ["string", "null"],
                    "description": "Directory (or file) to search in. Defaults to '/'."
                },
                "glob": {
                    "type": ["string", "null"],
                    "description": "Glob pattern selecting which files to search, e.g. '*.py'."
                },
                "output_mode": {
                    "type": "string",
                    "enum": ["files_with_matches", "content", "count"],
                    "default": "files_with_matches",
                    "description": "'files_with_matches' (file paths only, default), 'content' \
                                    (matching lines with line numbers), 'count' (matching \
                                    lines per file)."
                },
                "max_count": {
                    "type": ["integer", "null"],
                    "minimum": 1,
                    "description": "Stop after this many matching lines (default 1000)."
                },
                "regex": {
                    "type": "boolean",
                    "default": false,
                    "description": "Treat pattern as a regular expression (Rust regex syntax) \
                                    instead of literal text."
                }
            },
            "required": ["pattern"]
        }),
    }
}
