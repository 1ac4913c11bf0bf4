//! A deterministic embedder for tests and offline demos.

use crate::store::{Embedder, StoreError};

/// A deterministic stand-in for an embedding model: each word (lower-cased letters and
/// digits) is hashed into one of `dims` dimensions, so texts sharing words are close and
/// texts sharing none are orthogonal. Good enough to show semantic search offline and to test
/// it; it knows nothing of meaning (`car` and `automobile` are unrelated).
///
/// ```
/// use kit::store::Embedder;
/// use kit::testing::HashEmbedder;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::store::StoreError> {
/// let e = HashEmbedder::new(32);
/// let v = e.embed_documents(&["Ada likes tea".into(), "tea for Ada".into()]).await?;
/// assert_eq!(v[0].len(), 32);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct HashEmbedder {
    dims: usize,
}

impl HashEmbedder {
    /// Vectors of `dims` dimensions (at least 1).
    pub fn new(dims: usize) -> Self {
        HashEmbedder { dims: dims.max(1) }
    }

    /// The vector of one text.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dims];
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let word = word.to_lowercase();
            // FNV-1a, then a multiplicative mix so short words spread over every dimension.
            let hash = crate::ids::fnv1a(word.as_bytes()).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let slot = ((hash >> 32) % self.dims as u64) as usize;
            v[slot] += 1.0;
        }
        v
    }
}

#[async_trait::async_trait]
impl Embedder for HashEmbedder {
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, StoreError> {
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }
}
