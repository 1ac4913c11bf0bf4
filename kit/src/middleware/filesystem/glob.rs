//! Glob patterns for the `glob` tool and `grep`'s file filter.
//!
//! * `*` matches any run of characters within one path segment, `?` one character,
//!   `[abc]` / `[a-z]` / `[!a]` a character class, `\x` the character `x`;
//! * `**` as a whole segment matches any number of directories (but never enters a directory
//!   whose name starts with `.`); wildcards never match a leading `.` of a name;
//! * `{a,b}` expands to alternatives (nesting allowed);
//! * a pattern without `/` matches the file name at any depth below the search path
//!   (`*.py`), a pattern with `/` matches the path relative to the search path
//!   (`src/**/*.rs`), and a pattern starting with `/` matches the absolute path (`/*.md`).

use super::limits::FsLimits;
use super::path::{file_name, relative_to};

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Literal(char),
    AnyChar,
    Star,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Token {
    fn matches(&self, c: char) -> bool {
        match self {
            Token::Literal(l) => *l == c,
            Token::AnyChar => true,
            Token::Star => true,
            Token::Class { negated, ranges } => {
                ranges.iter().any(|(lo, hi)| *lo <= c && c <= *hi) != *negated
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Globstar,
    Tokens(Vec<Token>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Anchor {
    /// No `/`: the file name, at any depth.
    Name,
    /// Relative to the search path.
    Relative,
    /// From the root.
    Absolute,
}

/// A compiled glob pattern.
#[derive(Debug, Clone)]
pub(crate) struct Glob {
    alternatives: Vec<(Anchor, Vec<Segment>)>,
}

impl Glob {
    /// Compiles `pattern` within the default [`FsLimits`]; the error says what is wrong with it.
    #[cfg(test)]
    pub(crate) fn new(pattern: &str) -> Result<Glob, String> {
        Self::with_limits(pattern, &FsLimits::default())
    }

    /// Compiles `pattern`, refusing one longer than `max_pattern_chars` or whose braces expand
    /// to more than `max_pattern_alternatives`; the error says what is wrong with it. Time and
    /// memory are linear in the pattern for each alternative, whatever its nesting.
    pub(crate) fn with_limits(pattern: &str, limits: &FsLimits) -> Result<Glob, String> {
        let pattern = pattern.trim();
        if pattern.is_empty() {
            return Err("the glob pattern is empty; pass a pattern such as '**/*.py'".into());
        }
        let chars = pattern.chars().count();
        if chars > limits.max_pattern_chars {
            return Err(format!(
                "the glob pattern has {chars} characters, more than the {} allowed; use a \
                 shorter pattern (FsLimits::max_pattern_chars)",
                limits.max_pattern_chars
            ));
        }
        let expanded = expand_braces(pattern, limits.max_pattern_alternatives)?;
        let alternatives = expanded
            .iter()
            .map(|alt| {
                let anchor = if alt.starts_with('/') {
                    Anchor::Absolute
                } else if alt.contains('/') || alt == "**" {
                    Anchor::Relative
                } else {
                    Anchor::Name
                };
                let mut segments: Vec<Segment> = Vec::new();
                for s in alt.split('/').filter(|s| !s.is_empty() && *s != ".") {
                    let segment = if s == "**" {
                        Segment::Globstar
                    } else {
                        Segment::Tokens(tokenize(s))
                    };
                    // `**/**` matches what `**` matches.
                    if segment == Segment::Globstar && segments.last() == Some(&Segment::Globstar) {
                        continue;
                    }
                    segments.push(segment);
                }
                (anchor, segments)
            })
            .collect();
        Ok(Glob { alternatives })
    }

    /// True when the file `path` (normalised, within `base`) matches, searching from `base`.
    pub(crate) fn matches(&self, path: &str, base: &str) -> bool {
        let mut relative = relative_to(path, base);
        if relative.is_empty() {
            // The search path is the file itself.
            relative = file_name(path);
        }
        let relative: Vec<&str> = relative.split('/').filter(|s| !s.is_empty()).collect();
        let absolute: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        self.alternatives
            .iter()
            .any(|(anchor, segments)| match anchor {
                Anchor::Absolute => match_segments(segments, &absolute),
                Anchor::Relative => match_segments(segments, &relative),
                Anchor::Name => {
                    // `**/<name>`: any depth, dot-directories excluded.
                    let Some((name, dirs)) = relative.split_last() else {
                        return false;
                    };
                    dirs.iter().all(|d| !d.starts_with('.'))
                        && match_segments(segments, std::slice::from_ref(name))
                }
            })
    }
}

/// The alternatives of a pattern together hold at most this many characters, so that matching
/// stays cheap whatever the braces multiply.
const MAX_EXPANDED_CHARS: usize = 64 * 1024;

/// Expands `{a,b}` groups (nesting allowed) into at most `max` alternatives, in order.
///
/// Iterative, with an explicit stack: each step expands the leftmost group that closes and
/// has a top-level comma, found in one pass. No recursion, so the depth of a pattern's groups
/// cannot exhaust the call stack; the count is checked at every alternative produced.
fn expand_braces(pattern: &str, max: usize) -> Result<Vec<String>, String> {
    let too_many = || {
        format!(
            "the glob pattern's braces expand to more than {max} alternatives (or more than \
             {MAX_EXPANDED_CHARS} characters in all); use fewer or smaller {{a,b}} groups \
             (FsLimits::max_pattern_alternatives)"
        )
    };
    let mut out_chars = 0usize;
    let mut out: Vec<String> = Vec::new();
    let mut pending: Vec<Vec<char>> = vec![pattern.chars().collect()];
    while let Some(chars) = pending.pop() {
        match first_group(&chars) {
            Some((open, close, commas)) => {
                let mut bounds = Vec::with_capacity(commas.len() + 2);
                bounds.push(open);
                bounds.extend(commas);
                bounds.push(close);
                // Pushed last-first, so the first alternative is expanded first.
                for w in bounds.windows(2).rev() {
                    let mut alt = Vec::with_capacity(chars.len());
                    alt.extend_from_slice(&chars[..open]);
                    alt.extend_from_slice(&chars[w[0] + 1..w[1]]);
                    alt.extend_from_slice(&chars[close + 1..]);
                    pending.push(alt);
                }
                // Every pending pattern yields at least one alternative.
                if pending.len().saturating_add(out.len()) > max {
                    return Err(too_many());
                }
            }
            None => {
                out_chars = out_chars.saturating_add(chars.len());
                if out.len() >= max || out_chars > MAX_EXPANDED_CHARS {
                    return Err(too_many());
                }
                out.push(chars.into_iter().collect());
            }
        }
    }
    Ok(out)
}

/// The leftmost `{` whose group closes and has a top-level comma: its index, the index of its
/// `}`, and its top-level commas. One pass with a stack of open groups; `\x` escapes `x`.
fn first_group(chars: &[char]) -> Option<(usize, usize, Vec<usize>)> {
    let mut open: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut best: Option<(usize, usize, Vec<usize>)> = None;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '{' => open.push((i, Vec::new())),
            ',' => {
                if let Some((_, commas)) = open.last_mut() {
                    commas.push(i);
                }
            }
            '}' => {
                if let Some((start, commas)) = open.pop()
                    && !commas.is_empty()
                    && best.as_ref().is_none_or(|(b, _, _)| start < *b)
                {
                    best = Some((start, i, commas));
                }
            }
            _ => {}
        }
        i += 1;
    }
    best
}

fn tokenize(segment: &str) -> Vec<Token> {
    let chars: Vec<char> = segment.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                tokens.push(Token::Literal(chars[i + 1]));
                i += 2;
            }
            '*' => {
                if tokens.last() != Some(&Token::Star) {
                    tokens.push(Token::Star);
                }
                i += 1;
            }
            '?' => {
                tokens.push(Token::AnyChar);
                i += 1;
            }
            '[' => match class(&chars, i) {
                Some((token, next)) => {
                    tokens.push(token);
                    i = next;
                }
                None => {
                    tokens.push(Token::Literal('['));
                    i += 1;
                }
            },
            c => {
                tokens.push(Token::Literal(c));
                i += 1;
            }
        }
    }
    tokens
}

/// Parses `[...]` at `start`: the token and the index after `]`, or `None` when unclosed.
fn class(chars: &[char], start: usize) -> Option<(Token, usize)> {
    let mut i = start + 1;
    let negated = matches!(chars.get(i), Some('!') | Some('^'));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    while i < chars.len() {
        let c = chars[i];
        if c == ']' && !first {
            return Some((Token::Class { negated, ranges }, i + 1));
        }
        first = false;
        let lo = if c == '\\' && i + 1 < chars.len() {
            i += 1;
            chars[i]
        } else {
            c
        };
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&h| h != ']') {
            let hi = chars[i + 2];
            ranges.push((lo.min(hi), lo.max(hi)));
            i += 3;
        } else {
            ranges.push((lo, lo));
            i += 1;
        }
    }
    None
}

fn match_segments(pattern: &[Segment], path: &[&str]) -> bool {
    let (np, ns) = (pattern.len(), path.len());
    // Each non-`**` segment takes one path segment: more of them than the path has never match.
    let fixed = pattern
        .iter()
        .filter(|s| !matches!(s, Segment::Globstar))
        .count();
    if fixed > ns || (fixed == np && np != ns) {
        return false;
    }
    // dp[i][j]: pattern[i..] matches path[j..].
    let mut dp = vec![vec![false; ns + 1]; np + 1];
    dp[np][ns] = true;
    for i in (0..np).rev() {
        for j in (0..=ns).rev() {
            dp[i][j] = match &pattern[i] {
                Segment::Globstar => {
                    dp[i + 1][j] || (j < ns && !path[j].starts_with('.') && dp[i][j + 1])
                }
                Segment::Tokens(tokens) => {
                    j < ns && match_name(tokens, path[j]) && dp[i + 1][j + 1]
                }
            };
        }
    }
    dp[0][0]
}

fn match_name(tokens: &[Token], name: &str) -> bool {
    let chars: Vec<char> = name.chars().collect();
    // Each token but `*` takes one character.
    if tokens.iter().filter(|t| **t != Token::Star).count() > chars.len() {
        return false;
    }
    if chars.first() == Some(&'.') && tokens.first() != Some(&Token::Literal('.')) {
        return false;
    }
    let (mut t, mut n) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while n < chars.len() {
        if t < tokens.len() && tokens[t] == Token::Star {
            star = Some((t, n));
            t += 1;
        } else if t < tokens.len() && tokens[t].matches(chars[n]) {
            t += 1;
            n += 1;
        } else if let Some((st, sn)) = star {
            t = st + 1;
            n = sn + 1;
            star = Some((st, sn + 1));
        } else {
            return false;
        }
    }
    tokens[t..].iter().all(|tok| *tok == Token::Star)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn m(pattern: &str, path: &str, base: &str) -> bool {
        Glob::new(pattern).unwrap().matches(path, base)
    }

    #[test]
    fn names_match_at_any_depth_but_not_in_dot_directories() {
        assert!(m("*.py", "/a.py", "/"));
        assert!(m("*.py", "/src/deep/a.py", "/"));
        assert!(!m("*.py", "/a.pyc", "/"));
        assert!(!m("*.py", "/.git/a.py", "/"));
        assert!(!m("*.py", "/.hidden.py", "/"));
        assert!(m(".*", "/.hidden.py", "/"));
        assert!(m("a?.txt", "/ab.txt", "/"));
        assert!(m("[ab]*.txt", "/b1.txt", "/"));
        assert!(!m("[!ab]*.txt", "/b1.txt", "/"));
        assert!(m("[a-c]x", "/bx", "/"));
    }

    #[test]
    fn paths_relative_absolute_and_globstar() {
        assert!(m("src/*.rs", "/src/a.rs", "/"));
        assert!(!m("src/*.rs", "/src/x/a.rs", "/"));
        assert!(m("src/**/*.rs", "/src/x/y/a.rs", "/"));
        assert!(m("src/**/*.rs", "/src/a.rs", "/"));
        assert!(m("**/*.rs", "/a.rs", "/"));
        assert!(!m("**/*.rs", "/.cache/a.rs", "/"));
        assert!(m("**", "/a/b/c", "/"));
        assert!(m("/*.md", "/a.md", "/"));
        assert!(!m("/*.md", "/d/a.md", "/"));
        assert!(m("/d/*.md", "/d/a.md", "/d"));
        // Relative patterns start at the search path.
        assert!(m("x/*.md", "/d/x/a.md", "/d"));
        assert!(!m("x/*.md", "/d/x/a.md", "/"));
        // A file as the search path matches on its name.
        assert!(m("*.md", "/d/a.md", "/d/a.md"));
    }

    #[test]
    fn braces_and_escapes() {
        assert!(m("*.{rs,toml}", "/Cargo.toml", "/"));
        assert!(m("*.{rs,toml}", "/src/lib.rs", "/"));
        assert!(!m("*.{rs,toml}", "/README.md", "/"));
        assert!(m("{src,tests}/**/*.rs", "/tests/a.rs", "/"));
        assert!(m("a{b,{c,d}}e", "/ade", "/"));
        assert!(m("\\*.txt", "/*.txt", "/"));
        assert!(!m("\\*.txt", "/a.txt", "/"));
        assert!(m("[.txt", "/[.txt", "/"), "an unclosed class is literal");
        assert!(m("{a.txt", "/{a.txt", "/"), "an unclosed brace is literal");
        let too_many = "{a,b}".repeat(11);
        let err = Glob::new(&too_many).unwrap_err();
        assert!(err.contains("more than 1000 alternatives"), "{err}");
        assert!(Glob::new(" ").unwrap_err().contains("empty"));
    }
}
