//! Namespaces: the tuple of labels an item lives under (`("users", "ada", "memories")`), how a
//! label is checked, and the one text form every back-end stores and range-scans.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::StoreError;

/// The most bytes a namespace may take, its labels and separators counted (a database index
/// holds it with the key).
pub const MAX_NAMESPACE_BYTES: usize = 1024;

/// The most bytes a key may take.
pub const MAX_KEY_BYTES: usize = 1024;

/// The label that matches any label in a [`ListNamespaces`](super::ListNamespaces) pattern.
pub const WILDCARD: &str = "*";

/// Separates labels in the stored text form. It sorts below every character a label may hold,
/// so the byte order of the text is the order of the tuples, and a prefix is a range.
pub(crate) const SEP: char = '\u{1f}';

/// The character right after [`SEP`]: the end of a prefix's range.
const SEP_NEXT: char = '\u{20}';

/// A namespace: a path of labels, like a folder, under which items are kept by key.
///
/// Every label is non-empty, holds no control character and is not the wildcard `*`; the whole
/// namespace takes at most [`MAX_NAMESPACE_BYTES`]. A label may contain `.` (LangGraph forbids
/// it only because it stores namespaces joined by dots; kit does not). The empty namespace,
/// [`Namespace::root`], is a search prefix meaning the whole store; an item needs at least one
/// label.
///
/// ```
/// use kit::store::Namespace;
///
/// let ns = Namespace::new(["users", "ada@example.com", "memories"])?;
/// assert_eq!(ns.labels(), ["users", "ada@example.com", "memories"]);
/// assert!(ns.starts_with(&Namespace::new(["users"])?));
/// assert!(Namespace::new(["users", ""]).is_err());
/// # Ok::<(), kit::store::StoreError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize)]
#[serde(transparent)]
pub struct Namespace(Vec<String>);

impl Namespace {
    /// A namespace of these labels; the error says which label is wrong and why.
    pub fn new<I, S>(labels: I) -> Result<Self, StoreError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let labels: Vec<String> = labels.into_iter().map(Into::into).collect();
        check_labels(&labels, false)?;
        Ok(Namespace(labels))
    }

    /// The empty namespace: as a search prefix, the whole store.
    pub fn root() -> Self {
        Namespace(Vec::new())
    }

    /// The labels, outermost first.
    pub fn labels(&self) -> &[String] {
        &self.0
    }

    /// The number of labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True for [`Namespace::root`].
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// This namespace with one more label; the error says why the label is refused.
    pub fn child(&self, label: impl Into<String>) -> Result<Self, StoreError> {
        let mut labels = self.0.clone();
        labels.push(label.into());
        check_labels(&labels, false)?;
        Ok(Namespace(labels))
    }

    /// True when `prefix` is this namespace or one of its ancestors.
    pub fn starts_with(&self, prefix: &Namespace) -> bool {
        self.0.starts_with(&prefix.0)
    }

    /// The first `depth` labels (all of them when it has fewer).
    #[must_use]
    pub fn truncated(&self, depth: usize) -> Namespace {
        Namespace(self.0[..depth.min(self.0.len())].to_vec())
    }

    /// The stored text form: the labels joined by a separator below every label character.
    pub(crate) fn encoded(&self) -> String {
        let mut out = String::with_capacity(self.0.iter().map(|l| l.len() + 1).sum());
        for (i, label) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(SEP);
            }
            out.push_str(label);
        }
        out
    }

    /// Reads the stored text form back; text that is not one is corrupt data.
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn decode(text: &str) -> Result<Namespace, StoreError> {
        let labels: Vec<String> = text.split(SEP).map(String::from).collect();
        check_labels(&labels, false).map_err(|e| {
            StoreError::Corrupt(format!("a stored namespace does not read back: {e}"))
        })?;
        Ok(Namespace(labels))
    }

    /// The half-open range of stored text forms of this namespace and everything under it:
    /// `ns >= low AND ns < high`.
    pub(crate) fn range(&self) -> (String, String) {
        let low = self.encoded();
        let mut high = low.clone();
        high.push(SEP_NEXT);
        (low, high)
    }

    /// Checks that this namespace can hold an item.
    pub(crate) fn check_item(&self) -> Result<(), StoreError> {
        if self.0.is_empty() {
            return Err(StoreError::namespace(
                &self.0,
                "an item needs a namespace of at least one label, e.g. (\"users\", \"ada\")",
            ));
        }
        Ok(())
    }
}

impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Namespace{self}")
    }
}

/// Shows the tuple, as Python would: `("users", "ada")`.
impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, label) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{label:?}")?;
        }
        if self.0.len() == 1 {
            f.write_str(",")?;
        }
        f.write_str(")")
    }
}

impl<'de> Deserialize<'de> for Namespace {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let labels = Vec::<String>::deserialize(d)?;
        check_labels(&labels, false).map_err(serde::de::Error::custom)?;
        Ok(Namespace(labels))
    }
}

impl TryFrom<Vec<String>> for Namespace {
    type Error = StoreError;
    fn try_from(labels: Vec<String>) -> Result<Self, StoreError> {
        Namespace::new(labels)
    }
}

impl<const N: usize> TryFrom<[&str; N]> for Namespace {
    type Error = StoreError;
    fn try_from(labels: [&str; N]) -> Result<Self, StoreError> {
        Namespace::new(labels)
    }
}

/// Checks labels; `patterns` lets the wildcard through (a [`ListNamespaces`] pattern).
///
/// [`ListNamespaces`]: super::ListNamespaces
pub(crate) fn check_labels(labels: &[String], patterns: bool) -> Result<(), StoreError> {
    let mut bytes = 0usize;
    for (i, label) in labels.iter().enumerate() {
        if label.is_empty() {
            return Err(StoreError::namespace(
                labels,
                format!("label {i} is empty; every label needs at least one character"),
            ));
        }
        if label.chars().any(char::is_control) {
            return Err(StoreError::namespace(
                labels,
                format!(
                    "label {i} contains a control character; use printable text (ids, names, \
                     e-mail addresses are fine)"
                ),
            ));
        }
        if label == WILDCARD && !patterns {
            return Err(StoreError::namespace(
                labels,
                format!(
                    "label {i} is `*`, the wildcard of namespace patterns; an item's namespace \
                     cannot use it"
                ),
            ));
        }
        bytes += label.len() + usize::from(i > 0);
    }
    if bytes > MAX_NAMESPACE_BYTES {
        return Err(StoreError::namespace(
            labels,
            format!(
                "it takes {bytes} bytes, more than the {MAX_NAMESPACE_BYTES} allowed; use \
                 shorter labels (an id rather than a whole text)"
            ),
        ));
    }
    Ok(())
}

/// Checks a key: non-empty, no NUL, at most [`MAX_KEY_BYTES`].
pub(crate) fn check_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() {
        return Err(StoreError::key(key, "it is empty; give every item a key"));
    }
    if key.contains('\0') {
        return Err(StoreError::key(
            key,
            "it contains a NUL character; remove it",
        ));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(StoreError::key(
            key,
            format!(
                "it takes {} bytes, more than the {MAX_KEY_BYTES} allowed; use a shorter key \
                 (an id or a hash of the long text)",
                key.len()
            ),
        ));
    }
    Ok(())
}

/// Whether `namespace` matches a pattern from its start (`suffix == false`) or its end, `*`
/// matching any one label.
pub(crate) fn matches_pattern(namespace: &[String], pattern: &[String], suffix: bool) -> bool {
    if namespace.len() < pattern.len() {
        return false;
    }
    let same = |(label, want): (&String, &String)| want == WILDCARD || label == want;
    if suffix {
        namespace.iter().rev().zip(pattern.iter().rev()).all(same)
    } else {
        namespace.iter().zip(pattern.iter()).all(same)
    }
}
