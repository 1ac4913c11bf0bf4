//! Semantic search: the [`Embedder`] trait, the [`IndexConfig`] a store is opened with, and
//! what is embedded of each item.
//!
//! When an item is put, the texts its index fields select are embedded (one call to the
//! embedder per put) and stored beside it, one vector per text. A search with a query embeds
//! the query and scores each candidate by the best cosine similarity among its vectors; the
//! scan is brute force over the candidates under the search's namespace prefix that pass its
//! filter, `O(items × vectors × dims)` per search, in bounded memory (the page is kept in a
//! heap). That is fast for the thousands of memories of a user or an agent; for millions of
//! documents use a vector database.

mod path;
pub(crate) mod vector;

#[cfg(feature = "embeddings")]
mod openai;
#[cfg(feature = "embeddings")]
pub use openai::{DEFAULT_EMBEDDING_MODEL, OpenAiEmbeddings};

pub(crate) use path::FieldPath;

use std::sync::Arc;

use serde_json::{Map, Value};

use super::StoreError;
use super::ops::Index;

/// Turns texts into vectors (LangChain's `Embeddings`).
///
/// [`OpenAiEmbeddings`] (feature `embeddings`) speaks the OpenAI embeddings API (OpenAI,
/// Azure, Ollama, vLLM, llama.cpp and every other compatible server);
/// [`HashEmbedder`](crate::testing::HashEmbedder) is a deterministic stand-in for tests. Any
/// other provider plugs in by implementing this trait:
///
/// ```
/// use kit::store::{Embedder, StoreError};
///
/// /// Two dimensions: how long the text is, and how many vowels it has.
/// struct Toy;
///
/// #[kit::async_trait]
/// impl Embedder for Toy {
///     async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, StoreError> {
///         Ok(texts
///             .iter()
///             .map(|t| vec![t.len() as f32, t.matches(['a', 'e', 'i', 'o', 'u']).count() as f32])
///             .collect())
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait Embedder: Send + Sync + 'static {
    /// One vector per text, in order.
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, StoreError>;

    /// The vector of a search query (the default embeds it as a document).
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, StoreError> {
        let mut vectors = self.embed_documents(&[text.to_string()]).await?;
        match vectors.pop() {
            Some(v) if vectors.is_empty() => Ok(v),
            _ => Err(StoreError::Embedding(format!(
                "the embedder returned {} vectors for one query; it must return exactly one",
                vectors.len() + 1
            ))),
        }
    }
}

crate::shared::into_shared! {
    /// What [`IndexConfig::new`] accepts: an embedder, or one already shared.
    IntoEmbedder::into_embedder => Embedder
}

/// Makes a store searchable by meaning: the embedder, the vectors' dimensions, and which fields
/// of each value are embedded (LangGraph's `index` config).
///
/// Fields are paths into the value: `$` (the whole value as JSON, the default), `text`,
/// `meta.title`, `items[*].text` (each element's text, a vector each), `tags[0]`, `notes[-1]`,
/// `*` (every field). A put can choose its own fields or none
/// ([`PutOptions::index`](super::PutOptions::index), [`no_index`](super::PutOptions::no_index)).
///
/// ```
/// use kit::store::{IndexConfig, MemoryStore};
/// use kit::testing::HashEmbedder;
///
/// let store = MemoryStore::new()
///     .index(IndexConfig::new(HashEmbedder::new(64), 64).fields(["text", "tags[*]"]))?;
/// # let _ = store;
/// # Ok::<(), kit::store::StoreError>(())
/// ```
#[derive(Clone)]
#[must_use]
pub struct IndexConfig {
    pub(crate) embedder: Arc<dyn Embedder>,
    pub(crate) dims: usize,
    pub(crate) fields: Vec<String>,
}

impl std::fmt::Debug for IndexConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexConfig")
            .field("dims", &self.dims)
            .field("fields", &self.fields)
            .finish_non_exhaustive()
    }
}

impl IndexConfig {
    /// Embeds whole values (`$`) with `embedder`, whose vectors have `dims` dimensions.
    pub fn new(embedder: impl IntoEmbedder, dims: usize) -> Self {
        IndexConfig {
            embedder: embedder.into_embedder(),
            dims,
            fields: vec!["$".to_string()],
        }
    }

    /// Embeds these fields of each value instead.
    pub fn fields<I, S>(mut self, fields: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.fields = fields.into_iter().map(Into::into).collect();
        self
    }

    /// Checks the configuration: parses the fields.
    pub(crate) fn compile(self) -> Result<CompiledIndex, StoreError> {
        if self.dims == 0 {
            return Err(StoreError::Embedding(
                "the index has 0 dimensions; give the length of the embedder's vectors, e.g. \
                 1536 for text-embedding-3-small"
                    .to_string(),
            ));
        }
        let fields = self
            .fields
            .iter()
            .map(|f| FieldPath::parse(f))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CompiledIndex {
            embedder: self.embedder,
            dims: self.dims,
            fields,
        })
    }
}

/// A checked [`IndexConfig`], as a store keeps it.
#[derive(Clone)]
pub(crate) struct CompiledIndex {
    pub(crate) embedder: Arc<dyn Embedder>,
    pub(crate) dims: usize,
    fields: Vec<FieldPath>,
}

/// One stored vector: which text of the item it embeds (`text`, `items[*].text.1`) and the
/// vector.
pub(crate) type Vectors = Vec<(String, Vec<f32>)>;

impl CompiledIndex {
    /// Embeds what `index` selects of `value`: nothing for `Index::Off` or when no field
    /// selects a text.
    pub(crate) async fn embed_item(
        &self,
        value: &Map<String, Value>,
        index: &Index,
        key: &str,
    ) -> Result<Vectors, StoreError> {
        let own;
        let fields: &[FieldPath] = match index {
            Index::Off => return Ok(Vec::new()),
            Index::Default => &self.fields,
            Index::Fields(paths) => {
                own = paths
                    .iter()
                    .map(|p| FieldPath::parse(p))
                    .collect::<Result<Vec<_>, _>>()?;
                &own
            }
        };
        let whole = Value::Object(value.clone());
        let mut labels = Vec::new();
        let mut texts = Vec::new();
        for field in fields {
            let found = field.texts(&whole);
            let many = found.len() > 1;
            for (i, text) in found.into_iter().enumerate() {
                labels.push(if many {
                    format!("{}.{i}", field.text)
                } else {
                    field.text.clone()
                });
                texts.push(text);
            }
        }
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let vectors = self.embedder.embed_documents(&texts).await?;
        if vectors.len() != texts.len() {
            return Err(StoreError::Embedding(format!(
                "the embedder returned {} vectors for {} texts of item {key:?}; it must return \
                 one per text, in order",
                vectors.len(),
                texts.len()
            )));
        }
        let mut out = Vec::with_capacity(vectors.len());
        for (label, v) in labels.into_iter().zip(vectors) {
            vector::check(&v, self.dims, || {
                format!("the vector of {key:?} at `{label}`")
            })?;
            out.push((label, v));
        }
        // One vector per label: a path listed twice embeds once.
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.dedup_by(|a, b| a.0 == b.0);
        Ok(out)
    }

    /// The vector of a search query.
    pub(crate) async fn embed_query(&self, query: &str) -> Result<Vec<f32>, StoreError> {
        let v = self.embedder.embed_query(query).await?;
        vector::check(&v, self.dims, || "the query's vector".to_string())?;
        Ok(v)
    }
}
