//! An [`Embedder`] over the OpenAI embeddings API (`POST {base}/embeddings`), which OpenAI,
//! Azure OpenAI, Ollama, vLLM, llama.cpp and most inference servers speak.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::Embedder;
use crate::config::Config;
use crate::http::{HttpClient, HttpError, HttpErrorKind, HttpRequest};
use crate::store::StoreError;

/// The model used unless [`OpenAiEmbeddings::model`] says otherwise (1536 dimensions).
pub const DEFAULT_EMBEDDING_MODEL: &str = "text-embedding-3-small";

/// The API base URL used unless the configuration or [`OpenAiEmbeddings::base_url`] sets one.
const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Texts sent per request (the API takes up to 2048).
const DEFAULT_BATCH: usize = 512;

/// Embeddings from an OpenAI-compatible API: `POST {base_url}/embeddings` with
/// `{"model", "input": [texts], "encoding_format": "float"}` (and `"dimensions"` when set),
/// the key as a bearer token. Texts go in batches of 512; the answer's vectors are put back in
/// input order by their `index`, and an answer missing one, repeating one or holding anything
/// but numbers is an error naming the endpoint. Requests go through [`kit::http`](crate::http):
/// timeouts, retries on 429 and 5xx, bounded bodies, the key scrubbed from every error.
///
/// ```
/// use kit::store::{IndexConfig, MemoryStore, OpenAiEmbeddings};
/// use kit::Config;
///
/// let config = Config { openai_api_key: Some("sk-test".into()), ..Config::default() };
/// let embedder = OpenAiEmbeddings::new(&config)?.model("text-embedding-3-small");
/// let store = MemoryStore::new().index(IndexConfig::new(embedder, 1536))?;
///
/// // A local server needs no key.
/// let local = OpenAiEmbeddings::local("http://127.0.0.1:11434/v1").model("nomic-embed-text");
/// # let _ = (store, local);
/// # Ok::<(), kit::store::StoreError>(())
/// ```
#[derive(Clone)]
pub struct OpenAiEmbeddings {
    model: String,
    base_url: String,
    api_key: Option<String>,
    dimensions: Option<usize>,
    batch: usize,
    http: HttpClient,
}

impl std::fmt::Debug for OpenAiEmbeddings {
    /// Never prints the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbeddings")
            .field("model", &self.model)
            .field("base_url", &crate::http::redact_url_text(&self.base_url))
            .field("dimensions", &self.dimensions)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl OpenAiEmbeddings {
    /// Embeddings with the key and base URL of `config` (`OPENAI_API_KEY`, `OPENAI_BASE_URL`);
    /// fails when it has no key. For a local server without keys use [`local`](Self::local).
    pub fn new(config: &Config) -> Result<Self, StoreError> {
        let key = config
            .openai_api_key
            .clone()
            .filter(|k| !k.trim().is_empty())
            .ok_or_else(|| {
                StoreError::Embedding(
                    "OpenAI embeddings need an API key: set the OPENAI_API_KEY environment \
                     variable (or Config::openai_api_key); for a local server without keys use \
                     OpenAiEmbeddings::local(url)"
                        .to_string(),
                )
            })?;
        let base = config
            .openai_base_url
            .clone()
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        Ok(Self::local(base).api_key(key))
    }

    /// Embeddings from the environment (`OPENAI_API_KEY`, `OPENAI_BASE_URL`).
    pub fn from_env() -> Result<Self, StoreError> {
        Self::new(&Config::from_env())
    }

    /// Embeddings from a server at `base_url` (up to and including `/v1`) that needs no key.
    pub fn local(base_url: impl Into<String>) -> Self {
        OpenAiEmbeddings {
            model: DEFAULT_EMBEDDING_MODEL.to_string(),
            base_url: base_url.into(),
            api_key: None,
            dimensions: None,
            batch: DEFAULT_BATCH,
            http: HttpClient::new().timeout(Duration::from_secs(60)),
        }
    }

    /// The embedding model (default [`DEFAULT_EMBEDDING_MODEL`]).
    #[must_use]
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// The API base URL, up to and including `/v1`.
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The API key, sent as a bearer token.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Asks for vectors of this many dimensions (the `dimensions` parameter of the
    /// `text-embedding-3` models).
    #[must_use]
    pub fn dimensions(mut self, dims: usize) -> Self {
        self.dimensions = Some(dims);
        self
    }

    /// Texts per request (default 512; at least 1).
    #[must_use]
    pub fn batch_size(mut self, texts: usize) -> Self {
        self.batch = texts.max(1);
        self
    }

    /// The HTTP client (timeouts, retries, limits).
    #[must_use]
    pub fn http(mut self, client: HttpClient) -> Self {
        self.http = client;
        self
    }

    fn url(&self) -> String {
        format!("{}/embeddings", self.base_url.trim_end_matches('/'))
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, StoreError> {
        let mut body = json!({
            "model": self.model,
            "input": texts,
            "encoding_format": "float",
        });
        if let (Some(d), Some(map)) = (self.dimensions, body.as_object_mut()) {
            map.insert("dimensions".to_string(), Value::from(d));
        }
        let url = self.url();
        let mut request = HttpRequest::post(&url).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = self.http.send(request).await.map_err(http_error)?;
        parse_response(&response.body, texts.len()).map_err(|m| {
            StoreError::Embedding(format!(
                "{} answered {m}",
                crate::http::redact_url_text(&url)
            ))
        })
    }
}

#[async_trait::async_trait]
impl Embedder for OpenAiEmbeddings {
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, StoreError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch) {
            out.extend(self.embed_batch(batch).await?);
        }
        Ok(out)
    }
}

fn http_error(e: HttpError) -> StoreError {
    let hint = match (e.kind(), e.status()) {
        (HttpErrorKind::Status, Some(401 | 403)) => {
            " (the key comes from OPENAI_API_KEY, Config::openai_api_key or \
             OpenAiEmbeddings::api_key)"
        }
        (HttpErrorKind::Status, Some(404)) => {
            " (the base URL should end with /v1, and the model must exist on the server)"
        }
        _ => "",
    };
    StoreError::Embedding(format!("the embeddings request failed: {e}{hint}"))
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Datum>,
}

#[derive(Deserialize)]
struct Datum {
    index: usize,
    embedding: Vec<f32>,
}

/// Reads an embeddings answer for `expected` inputs: one vector per input, put in input order
/// by `index`. The error says what is wrong (after "… answered").
pub(crate) fn parse_response(body: &[u8], expected: usize) -> Result<Vec<Vec<f32>>, String> {
    let answer: Answer = serde_json::from_slice(body).map_err(|e| {
        format!(
            "something that is not an embeddings list ({e}); expected {{\"data\": [{{\"index\": \
             0, \"embedding\": [..]}}, ..]}}"
        )
    })?;
    if answer.data.len() != expected {
        return Err(format!(
            "{} vectors for {expected} texts",
            answer.data.len()
        ));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; expected];
    for datum in answer.data {
        match out.get_mut(datum.index) {
            Some(slot @ None) => *slot = Some(datum.embedding),
            Some(Some(_)) => return Err(format!("index {} twice", datum.index)),
            None => {
                return Err(format!("index {} for {expected} texts", datum.index));
            }
        }
    }
    // Every slot is filled: as many data as texts, no index twice.
    Ok(out.into_iter().flatten().collect())
}
