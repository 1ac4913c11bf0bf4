//! One search engine for every back-end: the back-end feeds candidates (items under the prefix,
//! not expired), the [`Collector`] applies the filter, ranks, and keeps one page.
//!
//! Without a query, candidates arrive newest first and the collector stops the scan as soon as
//! the page is full. With a query, every candidate is scored (the best cosine similarity among
//! its vectors) and a heap keeps the best `offset + limit`; items without vectors rank after
//! every scored one, newest first. Either way memory holds one page, whatever the store's size.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use super::embed::vector::{check, cosine, from_bytes};
use super::{Filter, Item, Search, SearchItem, StoreError};

/// Whether the back-end should keep feeding candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    More,
    Done,
}

/// Collects one page of a search.
pub(crate) struct Collector<'a> {
    filter: &'a Filter,
    query: Option<(&'a [f32], usize)>,
    offset: usize,
    limit: usize,
    /// Matches seen so far (no query).
    matched: usize,
    page: Vec<SearchItem>,
    /// The best `offset + limit` scored items (query), the worst on top.
    scored: BinaryHeap<Reverse<Ranked>>,
    /// The first `offset + limit` unscored items (query), in arrival order.
    unscored: Vec<Item>,
    seq: u64,
}

struct Ranked {
    score: f64,
    seq: u64,
    item: Item,
}

impl Ranked {
    /// Higher scores first; among equal scores, the earlier arrival.
    fn rank(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.rank(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank(other)
    }
}

impl<'a> Collector<'a> {
    /// A collector for `search`; `query` is the query's vector and the index's dimensions
    /// when the search has a query.
    pub(crate) fn new(search: &'a Search, query: Option<(&'a [f32], usize)>) -> Self {
        Collector {
            filter: &search.filter,
            query,
            offset: search.offset,
            limit: search.limit,
            matched: 0,
            page: Vec::new(),
            scored: BinaryHeap::new(),
            unscored: Vec::new(),
            seq: 0,
        }
    }

    /// When neither a filter nor a query decides, the back-end can page in its query: this
    /// returns `(offset, limit)` for it, and the collector then takes what comes.
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn window(&mut self) -> Option<(usize, usize)> {
        if !self.filter.is_empty() || self.query.is_some() {
            return None;
        }
        let window = (self.offset, self.limit);
        self.offset = 0;
        Some(window)
    }

    /// True when the next accepted candidate (of a search without a query) falls before the
    /// offset: the back-end may then [`skip`](Self::skip) it without building its item.
    pub(crate) fn skips_next(&self) -> bool {
        self.query.is_none() && self.matched < self.offset
    }

    /// Counts an accepted candidate that [`skips_next`](Self::skips_next) said falls before
    /// the offset.
    pub(crate) fn skip(&mut self) {
        self.matched += 1;
    }

    /// True when the candidates' vectors are needed (a search with a query).
    pub(crate) fn wants_vectors(&self) -> bool {
        self.query.is_some()
    }

    /// Whether any candidate is still wanted.
    pub(crate) fn done(&self) -> bool {
        self.limit == 0 || (self.query.is_none() && self.page.len() >= self.limit)
    }

    /// Whether a candidate's value passes the search's filter: offer only those.
    pub(crate) fn accepts(&self, value: &serde_json::Map<String, serde_json::Value>) -> bool {
        self.filter.matches(value)
    }

    /// Offers a candidate that [`accepts`](Self::accepts) took, with its vectors (ignored
    /// without a query).
    pub(crate) fn offer<'v>(
        &mut self,
        item: Item,
        vectors: impl IntoIterator<Item = &'v [f32]>,
    ) -> Result<Flow, StoreError> {
        if self.done() {
            return Ok(Flow::Done);
        }
        let Some((query, dims)) = self.query else {
            self.matched += 1;
            if self.matched > self.offset {
                self.page.push(SearchItem { item, score: None });
            }
            return Ok(if self.done() { Flow::Done } else { Flow::More });
        };
        let mut best: Option<f64> = None;
        for v in vectors {
            check(v, dims, || {
                format!("the stored vector of {:?} in {}", item.key, item.namespace)
            })?;
            let s = cosine(query, v);
            best = Some(best.map_or(s, |b: f64| b.max(s)));
        }
        let keep = self.offset.saturating_add(self.limit);
        self.seq += 1;
        match best {
            Some(score) => {
                self.scored.push(Reverse(Ranked {
                    score,
                    seq: self.seq,
                    item,
                }));
                if self.scored.len() > keep {
                    self.scored.pop();
                }
            }
            None if self.unscored.len() < keep => self.unscored.push(item),
            None => {}
        }
        Ok(Flow::More)
    }

    /// The page.
    pub(crate) fn finish(self) -> Vec<SearchItem> {
        if self.query.is_none() {
            return self.page;
        }
        let mut ranked: Vec<Ranked> = self.scored.into_iter().map(|r| r.0).collect();
        ranked.sort_by(|a, b| b.rank(a));
        ranked
            .into_iter()
            .map(|r| SearchItem {
                item: r.item,
                score: Some(r.score),
            })
            .chain(
                self.unscored
                    .into_iter()
                    .map(|item| SearchItem { item, score: None }),
            )
            .skip(self.offset)
            .take(self.limit)
            .collect()
    }
}

/// Turns the rows of an items-with-vectors scan (`items LEFT JOIN vectors`, ordered by
/// namespace and key, so an item's rows are adjacent) into candidates: parses each item once,
/// drops those the filter refuses, gathers the vectors of the others.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
#[derive(Default)]
pub(crate) struct Grouped {
    current: Option<Pending>,
}

struct Pending {
    ns: String,
    key: String,
    /// `None` when the filter refused it.
    item: Option<Item>,
    vectors: Vec<Vec<f32>>,
}

#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
impl Grouped {
    /// Feeds one row: its namespace and key as stored, how to read its item (called once per
    /// item), and its vector's bytes (`None` for an item without vectors).
    pub(crate) fn row<E: From<StoreError>>(
        &mut self,
        collector: &mut Collector<'_>,
        ns: String,
        key: String,
        item: impl FnOnce() -> Result<Item, E>,
        vector: Option<&[u8]>,
    ) -> Result<Flow, E> {
        let same = self
            .current
            .as_ref()
            .is_some_and(|p| p.ns == ns && p.key == key);
        if !same {
            if self.flush(collector)? == Flow::Done {
                return Ok(Flow::Done);
            }
            let found = item()?;
            let kept = collector.accepts(&found.value).then_some(found);
            self.current = Some(Pending {
                ns,
                key,
                item: kept,
                vectors: Vec::new(),
            });
        }
        if let (Some(p), Some(bytes)) = (self.current.as_mut(), vector)
            && p.item.is_some()
        {
            p.vectors.push(from_bytes(bytes, &p.key)?);
        }
        Ok(Flow::More)
    }

    /// Offers the item being read, if the filter kept it.
    fn flush(&mut self, collector: &mut Collector<'_>) -> Result<Flow, StoreError> {
        match self.current.take() {
            Some(Pending {
                item: Some(item),
                vectors,
                ..
            }) => collector.offer(item, vectors.iter().map(Vec::as_slice)),
            _ => Ok(Flow::More),
        }
    }

    /// Offers the last item.
    pub(crate) fn finish(mut self, collector: &mut Collector<'_>) -> Result<(), StoreError> {
        self.flush(collector).map(|_| ())
    }
}
