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

    /// True when the file `path` (normalised, within `base`) matches, searching from `base`;
    /// [`Spent`] once `steps` run out.
    pub(crate) fn matches(&self, path: &str, base: &str, steps: &mut Steps) -> Result<bool, Spent> {
        let mut relative = relative_to(path, base);
        if relative.is_empty() {
            // The search path is the file itself.
            relative = file_name(path);
        }
        steps.take(path.len())?;
        // Split on first use: most patterns need one of the two.
        let (mut relative_segments, mut absolute_segments) = (None, None);
        for (anchor, segments) in &self.alternatives {
            let matched = match anchor {
                Anchor::Absolute => {
                    let absolute = absolute_segments.get_or_insert_with(|| split(path));
                    match_segments(segments, absolute, steps)?
                }
                Anchor::Relative => {
                    let relative = relative_segments.get_or_insert_with(|| split(relative));
                    match_segments(segments, relative, steps)?
                }
                Anchor::Name => {
                    // `**/<name>`: any depth, dot-directories excluded.
                    let relative = relative_segments.get_or_insert_with(|| split(relative));
                    let Some((name, dirs)) = relative.split_last() else {
                        continue;
                    };
                    steps.take(dirs.len())?;
                    dirs.iter().all(|d| !d.starts_with('.'))
                        && match_segments(segments, std::slice::from_ref(name), steps)?
                }
            };
            if matched {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl Glob {
    /// The tokens and segments of every alternative: what matching one path segment against
    /// the whole pattern may read, per character of the path.
    pub(crate) fn size(&self) -> usize {
        self.alternatives
            .iter()
            .flat_map(|(_, segments)| segments)
            .map(|segment| match segment {
                Segment::Globstar => 1,
                Segment::Tokens(tokens) => tokens.len().max(1),
            })
            .sum()
    }
}

/// The comparisons matching may still spend: one per character tried against a token, per
/// path segment tried against a `**`, per character of a path split. A pattern like
/// `*a*a*a…b` costs its length times each name's, so the budget is what keeps one call of
/// `glob` bounded however the pattern and the files combine.
#[derive(Debug)]
pub(crate) struct Steps {
    left: usize,
}

/// The steps ran out before matching ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spent;

/// The non-empty segments of a path.
fn split(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

/// What the tools say when a pattern spent its steps.
pub(crate) fn spent_error(max: u64) -> String {
    format!(
        "matching the glob pattern against the files took more than {max} comparisons \
         (FsLimits::max_glob_steps); use fewer `*` wildcards and {{a,b}} alternatives, or \
         search a narrower `path`"
    )
}

impl Steps {
    /// A budget of `max` steps.
    pub(crate) fn new(max: u64) -> Steps {
        Steps {
            left: usize::try_from(max).unwrap_or(usize::MAX),
        }
    }

    fn take(&mut self, n: usize) -> Result<(), Spent> {
        match self.left.checked_sub(n) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => {
                self.left = 0;
                Err(Spent)
            }
        }
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

fn match_segments(pattern: &[Segment], path: &[&str], steps: &mut Steps) -> Result<bool, Spent> {
    let (np, ns) = (pattern.len(), path.len());
    steps.take(np)?;
    // Each non-`**` segment takes one path segment: more of them than the path has never match.
    let fixed = pattern
        .iter()
        .filter(|s| !matches!(s, Segment::Globstar))
        .count();
    if fixed > ns || (fixed == np && np != ns) {
        return Ok(false);
    }
    if fixed == np {
        // No `**`: segment by segment.
        for (segment, name) in pattern.iter().zip(path) {
            if let Segment::Tokens(tokens) = segment
                && !match_name(tokens, name, steps)?
            {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    // below[j]: pattern[i + 1..] matches path[j..]; here[j]: pattern[i..] matches path[j..].
    let mut below = vec![false; ns + 1];
    below[ns] = true;
    let mut here = vec![false; ns + 1];
    for segment in pattern.iter().rev() {
        steps.take(ns + 1)?;
        for j in (0..=ns).rev() {
            here[j] = match segment {
                Segment::Globstar => {
                    below[j] || (j < ns && !path[j].starts_with('.') && here[j + 1])
                }
                // The cheap half first: a name is compared only where the rest can match.
                Segment::Tokens(tokens) => {
                    j < ns && below[j + 1] && match_name(tokens, path[j], steps)?
                }
            };
        }
        std::mem::swap(&mut below, &mut here);
    }
    Ok(below[0])
}

fn match_name(tokens: &[Token], name: &str, steps: &mut Steps) -> Result<bool, Spent> {
    // What the check below reads: every token.
    steps.take(tokens.len())?;
    // Each token but `*` takes one character, and a name has no more characters than bytes
    // (its length in bytes costs nothing to read; counting its characters would).
    if tokens.iter().filter(|t| **t != Token::Star).count() > name.len() {
        return Ok(false);
    }
    if name.starts_with('.') && tokens.first() != Some(&Token::Literal('.')) {
        return Ok(false);
    }
    // `t` indexes tokens, `n` is a byte offset into `name`; `star` is the last `*` seen and
    // where its match would end next when the tokens after it fail.
    let (mut t, mut n) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while let Some(c) = name[n..].chars().next() {
        steps.take(1)?;
        let token = tokens.get(t);
        if token == Some(&Token::Star) {
            star = Some((t, n));
            t += 1;
        } else if token.is_some_and(|token| token.matches(c)) {
            t += 1;
            n += c.len_utf8();
        } else if let Some((st, sn)) = star {
            let swallowed = name[sn..].chars().next().map_or(1, char::len_utf8);
            t = st + 1;
            n = sn + swallowed;
            star = Some((st, n));
        } else {
            return Ok(false);
        }
    }
    Ok(tokens.iter().skip(t).all(|token| *token == Token::Star))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn m(pattern: &str, path: &str, base: &str) -> bool {
        let mut steps = Steps::new(u64::MAX);
        Glob::new(pattern)
            .unwrap()
            .matches(path, base, &mut steps)
            .unwrap()
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

    /// The definition, by trying every split: a segment pattern against a name.
    fn reference_name(tokens: &[Token], name: &[char]) -> bool {
        match tokens.split_first() {
            None => name.is_empty(),
            Some((Token::Star, rest)) => (0..=name.len()).any(|k| reference_name(rest, &name[k..])),
            Some((token, rest)) => {
                name.first().is_some_and(|&c| token.matches(c)) && reference_name(rest, &name[1..])
            }
        }
    }

    /// The definition: segments against a path, `**` taking any run of names without a
    /// leading `.`, and a wildcard never matching a name's leading `.`.
    fn reference_segments(pattern: &[Segment], path: &[&str]) -> bool {
        match pattern.split_first() {
            None => path.is_empty(),
            Some((Segment::Globstar, rest)) => (0..=path.len())
                .take_while(|&k| k == 0 || !path[k - 1].starts_with('.'))
                .any(|k| reference_segments(rest, &path[k..])),
            Some((Segment::Tokens(tokens), rest)) => path.first().is_some_and(|name| {
                let chars: Vec<char> = name.chars().collect();
                (!name.starts_with('.') || tokens.first() == Some(&Token::Literal('.')))
                    && reference_name(tokens, &chars)
                    && reference_segments(rest, &path[1..])
            }),
        }
    }

    fn reference(glob: &Glob, path: &str) -> bool {
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        glob.alternatives
            .iter()
            .any(|(anchor, pattern)| match anchor {
                Anchor::Absolute | Anchor::Relative => reference_segments(pattern, &segments),
                Anchor::Name => segments.split_last().is_some_and(|(name, dirs)| {
                    dirs.iter().all(|d| !d.starts_with('.'))
                        && reference_segments(pattern, std::slice::from_ref(name))
                }),
            })
    }

    #[test]
    fn matching_agrees_with_the_definition_on_random_patterns_and_paths() {
        const PATTERN: &[&str] = &[
            "a", "b", ".", "é", "*", "?", "[ab]", "[!a]", "[a-é]", "/", "**/", "{a,*b}",
        ];
        const NAME: &[&str] = &["a", "b", ".", "é", "ab"];
        let mut rng = fastrand::Rng::with_seed(0x6106);
        let (mut yes, mut no) = (0, 0);
        for _ in 0..20_000 {
            let pattern: String = (0..rng.usize(1..8))
                .map(|_| PATTERN[rng.usize(..PATTERN.len())])
                .collect();
            let Ok(glob) = Glob::new(&pattern) else {
                continue;
            };
            let path: String = (0..rng.usize(1..4))
                .map(|_| {
                    let name: String = (0..rng.usize(1..5))
                        .map(|_| NAME[rng.usize(..NAME.len())])
                        .collect();
                    format!("/{name}")
                })
                .collect();
            let expected = reference(&glob, &path);
            let mut steps = Steps::new(u64::MAX);
            assert_eq!(
                glob.matches(&path, "/", &mut steps),
                Ok(expected),
                "{pattern:?} on {path:?}"
            );
            if expected { yes += 1 } else { no += 1 }
        }
        // Both answers are exercised often.
        assert!(yes > 1_000 && no > 1_000, "{yes} matches, {no} not");
    }

    /// Steps one match spends.
    fn spent(pattern: &str, path: &str) -> (bool, usize) {
        let mut steps = Steps::new(u64::MAX);
        let matched = Glob::new(pattern)
            .unwrap()
            .matches(path, "/", &mut steps)
            .unwrap();
        (matched, usize::MAX - steps.left)
    }

    #[test]
    fn a_costly_pattern_spends_its_steps_and_stops() {
        // `*aaa…ab` against a long run of `a`: the 120 tokens after `*` are retried at every
        // position the `*` can end, so the cost is about their number times the name's.
        let pattern = format!("*{}b", "a".repeat(120));
        let name = format!("/{}", "a".repeat(255));
        let (matched, cost) = spent(&pattern, &name);
        assert!(!matched);
        assert!(cost > 40 * 255, "{cost}");
        let mut steps = Steps::new(5_000);
        let glob = Glob::new(&pattern).unwrap();
        assert_eq!(glob.matches(&name, "/", &mut steps), Err(Spent));
        // Once spent, every later file is refused at once.
        assert_eq!(glob.matches("/b", "/", &mut steps), Err(Spent));
        // A pattern past the length limit costs nothing to refuse.
        let err = Glob::new(&"*a".repeat(1 << 19)).unwrap_err();
        assert!(err.contains("more than the 4096 allowed"), "{err}");
    }

    #[test]
    fn the_cost_of_a_plain_pattern_grows_with_the_name_and_no_faster() {
        for pattern in ["*.rs", "**/*.rs", "src/**/*x*.rs", "*.{rs,toml,md}"] {
            let at = |len: usize| spent(pattern, &format!("/src/a/{}.rs", "x".repeat(len)));
            let (small_match, small) = at(1 << 10);
            let (large_match, large) = at(1 << 20);
            assert!(small_match && large_match, "{pattern}");
            assert!(
                large <= small * 1100,
                "{pattern}: {small} then {large} steps"
            );
        }
    }

    #[test]
    fn typical_patterns_over_a_hundred_thousand_files_stay_well_inside_the_default_budget() {
        let paths: Vec<String> = (0..100_000)
            .map(|i| format!("/repo/crate{}/src/module{}/file_{i}.rs", i % 50, i % 7))
            .collect();
        for pattern in [
            "**/*.rs",
            "*.py",
            "{src,tests}/**/*.{rs,toml}",
            "crate1*/**/file_9*",
        ] {
            let glob = Glob::new(pattern).unwrap();
            let mut steps = Steps::new(u64::MAX);
            for path in &paths {
                glob.matches(path, "/repo", &mut steps).unwrap();
            }
            let cost = usize::MAX - steps.left;
            assert!(
                cost < FsLimits::default().max_glob_steps as usize / 4,
                "{pattern}: {cost} steps"
            );
        }
    }
}
