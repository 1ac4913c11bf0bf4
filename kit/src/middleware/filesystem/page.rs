//! One page of a text file as `read_file` shows it, built while the file streams by.

/// One page of a text file: the lines `read_file` shows, and what it says about the rest.
///
/// Backends build it with [`FsBackend::read_page`](super::FsBackend::read_page). Lines are split
/// as [`str::lines`] splits them (`\n` or `\r\n`; no empty last line after a final newline).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FilePage {
    /// The lines shown, in order from the first one asked for: as many whole lines as fit the
    /// character budget, or the start of the first line when it alone does not fit.
    pub lines: Vec<String>,
    /// Lines in the whole file.
    pub total_lines: usize,
    /// When the first line asked for did not fit the budget: its length in characters (and
    /// `lines` holds its first `budget` characters).
    pub cut_line_chars: Option<usize>,
    /// The file holds only whitespace (or nothing).
    pub blank: bool,
    /// The file is not UTF-8 text: about how many bytes it holds (`lines` is empty).
    pub binary_bytes: Option<u64>,
}

/// Builds a [`FilePage`] from text fed in pieces of any size, holding at most `budget`
/// characters of it.
#[derive(Debug)]
pub(crate) struct LinePager {
    start: usize,
    end: usize,
    budget: usize,
    page: FilePage,
    /// Index of the line being read.
    line: usize,
    /// Characters of the current line so far, and how many of them were kept.
    chars: usize,
    kept: String,
    kept_chars: usize,
    /// The current line has any character.
    started: bool,
    last_cr: bool,
    /// Characters used by the lines shown so far (with their separators).
    used: usize,
    /// A line did not fit: nothing more is shown.
    full: bool,
}

impl LinePager {
    /// A pager showing lines `start..start + limit` within `budget` characters.
    pub(crate) fn new(start: usize, limit: usize, budget: usize) -> Self {
        LinePager {
            start,
            end: start.saturating_add(limit),
            budget: budget.max(1),
            page: FilePage {
                blank: true,
                ..FilePage::default()
            },
            line: 0,
            chars: 0,
            kept: String::new(),
            kept_chars: 0,
            started: false,
            last_cr: false,
            used: 0,
            full: false,
        }
    }

    fn showing(&self) -> bool {
        !self.full && self.line >= self.start && self.line < self.end
    }

    /// Adds text.
    pub(crate) fn feed(&mut self, mut text: &str) {
        while !text.is_empty() {
            match text.find('\n') {
                Some(i) => {
                    self.add(&text[..i]);
                    self.end_line(true);
                    text = &text[i + 1..];
                }
                None => {
                    self.add(text);
                    text = "";
                }
            }
        }
    }

    fn add(&mut self, part: &str) {
        if part.is_empty() {
            return;
        }
        if self.page.blank && !part.chars().all(char::is_whitespace) {
            self.page.blank = false;
        }
        self.started = true;
        self.last_cr = part.ends_with('\r');
        if !self.showing() {
            return;
        }
        let room = self.budget.saturating_sub(self.kept_chars);
        let mut n = 0;
        for c in part.chars() {
            if n < room {
                self.kept.push(c);
                self.kept_chars += 1;
            }
            n += 1;
        }
        self.chars = self.chars.saturating_add(n);
    }

    fn end_line(&mut self, newline: bool) {
        if self.showing() {
            let mut chars = self.chars;
            let mut kept = std::mem::take(&mut self.kept);
            if newline && self.last_cr {
                chars -= 1;
                if self.kept_chars > chars {
                    kept.pop();
                }
            }
            if self.line == self.start {
                if chars <= self.budget {
                    self.used = chars;
                    self.page.lines.push(kept);
                } else {
                    self.page.cut_line_chars = Some(chars);
                    self.page.lines.push(kept);
                    self.full = true;
                }
            } else if self.used.saturating_add(chars + 1) > self.budget {
                self.full = true;
            } else {
                self.used += chars + 1;
                self.page.lines.push(kept);
            }
        }
        self.line += 1;
        self.page.total_lines += 1;
        self.chars = 0;
        self.kept = String::new();
        self.kept_chars = 0;
        self.started = false;
        self.last_cr = false;
    }

    /// The page, once all the text was fed.
    pub(crate) fn finish(mut self) -> FilePage {
        if self.started {
            self.end_line(false);
        }
        self.page
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `read_file` showed before pages were streamed: the reference.
    fn reference(text: &str, start: usize, limit: usize, budget: usize) -> FilePage {
        let lines: Vec<&str> = text.lines().collect();
        let mut page = FilePage {
            total_lines: lines.len(),
            blank: text.trim().is_empty(),
            ..FilePage::default()
        };
        if start >= lines.len() {
            return page;
        }
        let end = start.saturating_add(limit).min(lines.len());
        let mut used = 0;
        for (i, line) in lines[start..end].iter().enumerate() {
            let cost = line.chars().count() + usize::from(i > 0);
            if used + cost > budget {
                if i == 0 {
                    page.cut_line_chars = Some(line.chars().count());
                    page.lines.push(line.chars().take(budget).collect());
                }
                break;
            }
            used += cost;
            page.lines.push(line.to_string());
        }
        page
    }

    #[test]
    fn any_split_gives_the_reference_page() {
        let texts = [
            "",
            "\n",
            "a",
            "a\n",
            "a\r\nbb\r\nccc",
            "one\ntwo\n\nfour\r\n\r\nsix\r",
            "  \n\t\r\n",
            "héllo wörld\nçava\n",
            "x\r\r\ny",
            "long line here\nshort\n",
        ];
        for text in texts {
            for (start, limit, budget) in
                [(0, 100, 80), (1, 2, 5), (0, 1, 3), (2, 10, 4), (0, 5, 1)]
            {
                let want = reference(text, start, limit, budget);
                for size in 1..=text.len().max(1) {
                    let mut pager = LinePager::new(start, limit, budget);
                    let mut at = 0;
                    while at < text.len() {
                        let mut end = (at + size).min(text.len());
                        while !text.is_char_boundary(end) {
                            end += 1;
                        }
                        pager.feed(&text[at..end]);
                        at = end;
                    }
                    assert_eq!(
                        pager.finish(),
                        want,
                        "{text:?} {start} {limit} {budget} / {size}"
                    );
                }
            }
        }
    }
}
