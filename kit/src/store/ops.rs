//! The arguments of store operations beyond namespace and key: [`PutOptions`] (time to live,
//! what to index), [`GetOptions`], [`Search`] and [`ListNamespaces`], and the store-wide
//! [`TtlConfig`].

use std::time::Duration;

use super::{Filter, Namespace};

/// Options of [`Store::put_opts`](super::Store::put_opts).
///
/// ```
/// use std::time::Duration;
/// use kit::store::PutOptions;
///
/// let opts = PutOptions::new().ttl(Duration::from_secs(3600)).index(["text"]);
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[must_use]
pub struct PutOptions {
    /// `None`: the store's default; `Some(None)`: never expires; `Some(Some(d))`: expires `d`
    /// after its last write (or read, see [`TtlConfig::refresh_on_read`]).
    pub(crate) ttl: Option<Option<Duration>>,
    pub(crate) index: Index,
}

impl PutOptions {
    /// The store's defaults: its default time to live and its index fields.
    pub fn new() -> Self {
        Self::default()
    }

    /// The item expires this long after it was last written (or read, when the store refreshes
    /// on read).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(Some(ttl));
        self
    }

    /// The item never expires, whatever the store's default.
    pub fn no_ttl(mut self) -> Self {
        self.ttl = Some(None);
        self
    }

    /// Embeds these fields of the value instead of the index's (field paths as in
    /// [`IndexConfig::fields`](super::IndexConfig::fields)). Ignored by a store without an
    /// index.
    pub fn index<I, S>(mut self, fields: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.index = Index::Fields(fields.into_iter().map(Into::into).collect());
        self
    }

    /// Does not embed this item: it is still found by `get` and by filters, but a search with a
    /// query ranks it after every item that has vectors (LangGraph's `index=False`).
    pub fn no_index(mut self) -> Self {
        self.index = Index::Off;
        self
    }
}

/// What to embed of one item.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Index {
    /// The index's fields.
    #[default]
    Default,
    /// Nothing.
    Off,
    /// These field paths.
    Fields(Vec<String>),
}

/// Options of [`Store::get_opts`](super::Store::get_opts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use]
pub struct GetOptions {
    pub(crate) refresh_ttl: Option<bool>,
}

impl GetOptions {
    /// The store's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether this read pushes the item's expiry back (default: the store's
    /// [`TtlConfig::refresh_on_read`]).
    pub fn refresh_ttl(mut self, refresh: bool) -> Self {
        self.refresh_ttl = Some(refresh);
        self
    }
}

/// The default number of items a search returns (LangGraph's).
pub const DEFAULT_SEARCH_LIMIT: usize = 10;

/// The default number of namespaces a listing returns (LangGraph's).
pub const DEFAULT_LIST_LIMIT: usize = 100;

/// A search: the items under a namespace prefix that pass a filter, ranked by a
/// natural-language query when there is one (else most recently updated first), one page of
/// them.
///
/// ```
/// use kit::store::{Filter, Namespace, Search};
///
/// let search = Search::new(Namespace::new(["users", "ada"])?)
///     .filter(Filter::new().eq("kind", "preference").gte("weight", 0.5))
///     .query("what does Ada like to eat?")
///     .limit(5)
///     .offset(0);
/// # let _ = search;
/// # Ok::<(), kit::store::StoreError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Search {
    pub(crate) prefix: Namespace,
    pub(crate) filter: Filter,
    pub(crate) query: Option<String>,
    pub(crate) limit: usize,
    pub(crate) offset: usize,
    pub(crate) refresh_ttl: Option<bool>,
}

impl Search {
    /// Everything under `prefix` ([`Namespace::root`] for the whole store), the newest
    /// [`DEFAULT_SEARCH_LIMIT`] first.
    pub fn new(prefix: Namespace) -> Self {
        Search {
            prefix,
            filter: Filter::new(),
            query: None,
            limit: DEFAULT_SEARCH_LIMIT,
            offset: 0,
            refresh_ttl: None,
        }
    }

    /// Keeps only the items whose value passes `filter`.
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filter = filter;
        self
    }

    /// Ranks by similarity to this text (needs a store with an
    /// [`IndexConfig`](super::IndexConfig)).
    pub fn query(mut self, query: impl Into<String>) -> Self {
        self.query = Some(query.into());
        self
    }

    /// At most this many items.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Skips this many matching items first (the next page).
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }

    /// Whether the items returned have their expiry pushed back (default: the store's
    /// [`TtlConfig::refresh_on_read`]).
    pub fn refresh_ttl(mut self, refresh: bool) -> Self {
        self.refresh_ttl = Some(refresh);
        self
    }

    /// The namespace prefix.
    pub fn get_prefix(&self) -> &Namespace {
        &self.prefix
    }

    /// The filter.
    pub fn get_filter(&self) -> &Filter {
        &self.filter
    }

    /// The natural-language query, if any.
    pub fn get_query(&self) -> Option<&str> {
        self.query.as_deref()
    }

    /// The page size.
    pub fn get_limit(&self) -> usize {
        self.limit
    }

    /// The items skipped.
    pub fn get_offset(&self) -> usize {
        self.offset
    }
}

/// A listing of the namespaces that hold items: those matching a prefix and a suffix pattern
/// (`*` matches any one label), cut to a depth, sorted, one page of them (LangGraph's
/// `list_namespaces`).
///
/// ```
/// use kit::store::ListNamespaces;
///
/// // ("users", <anyone>, "memories", ..) namespaces, cut after three labels.
/// let list = ListNamespaces::new().prefix(["users", "*", "memories"]).max_depth(3);
/// # let _ = list;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct ListNamespaces {
    pub(crate) prefix: Vec<String>,
    pub(crate) suffix: Vec<String>,
    pub(crate) max_depth: Option<usize>,
    pub(crate) limit: usize,
    pub(crate) offset: usize,
}

impl Default for ListNamespaces {
    fn default() -> Self {
        ListNamespaces {
            prefix: Vec::new(),
            suffix: Vec::new(),
            max_depth: None,
            limit: DEFAULT_LIST_LIMIT,
            offset: 0,
        }
    }
}

impl ListNamespaces {
    /// Every namespace, the first [`DEFAULT_LIST_LIMIT`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Only namespaces starting with these labels (`*` for any label).
    pub fn prefix<I, S>(mut self, labels: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.prefix = labels.into_iter().map(Into::into).collect();
        self
    }

    /// Only namespaces ending with these labels (`*` for any label).
    pub fn suffix<I, S>(mut self, labels: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.suffix = labels.into_iter().map(Into::into).collect();
        self
    }

    /// Cuts every namespace to its first `depth` labels (duplicates then appear once).
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = Some(depth);
        self
    }

    /// At most this many namespaces.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Skips this many first.
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }
}

/// How a store treats times to live.
///
/// An item with a time to live expires that long after its last write — or its last read when
/// `refresh_on_read` is on (the default, as in LangGraph). An expired item is never returned,
/// listed or counted, whether or not it was deleted yet; [`Store::sweep_expired`] deletes them
/// (run it on a schedule with [`spawn_sweeper`](super::spawn_sweeper)).
///
/// ```
/// use std::time::Duration;
/// use kit::store::{MemoryStore, TtlConfig};
///
/// let store = MemoryStore::new()
///     .ttl_config(TtlConfig::new().default_ttl(Duration::from_secs(7 * 24 * 3600)));
/// # let _ = store;
/// ```
///
/// [`Store::sweep_expired`]: super::Store::sweep_expired
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct TtlConfig {
    pub(crate) default_ttl: Option<Duration>,
    pub(crate) refresh_on_read: bool,
}

impl Default for TtlConfig {
    fn default() -> Self {
        TtlConfig {
            default_ttl: None,
            refresh_on_read: true,
        }
    }
}

impl TtlConfig {
    /// No default time to live; reads refresh.
    pub fn new() -> Self {
        Self::default()
    }

    /// Items put without a time to live of their own expire after this.
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.default_ttl = Some(ttl);
        self
    }

    /// Whether reads (`get`, `search`) push an item's expiry back by default (default `true`).
    pub fn refresh_on_read(mut self, refresh: bool) -> Self {
        self.refresh_on_read = refresh;
        self
    }

    /// The time to live a put gives its item.
    pub(crate) fn ttl_for(&self, opts: &PutOptions) -> Option<Duration> {
        match opts.ttl {
            Some(ttl) => ttl,
            None => self.default_ttl,
        }
    }

    /// Whether a read refreshes, given its own choice.
    pub(crate) fn refresh(&self, asked: Option<bool>) -> bool {
        asked.unwrap_or(self.refresh_on_read)
    }
}
