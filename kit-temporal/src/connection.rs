//! A connection to a Temporal frontend, in one namespace.

use std::str::FromStr;

use temporalio_client::{Client, ClientOptions, Connection, ConnectionOptions};

use crate::error::TemporalError;

/// A connected Temporal client in one namespace; cheap to clone. Workers and run handles share
/// it.
#[derive(Clone)]
pub struct TemporalConnection {
    client: Client,
    address: String,
    namespace: String,
}

impl std::fmt::Debug for TemporalConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemporalConnection")
            .field("address", &self.address)
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl TemporalConnection {
    /// Connects to the frontend at `address` (`host:port`, or a `http://`/`https://` URL; the
    /// dev server's is `127.0.0.1:7233`) in `namespace` (the dev server has `default`).
    ///
    /// `https://` needs the crate's `tls` feature.
    pub async fn connect(
        address: impl Into<String>,
        namespace: impl Into<String>,
    ) -> Result<Self, TemporalError> {
        let address = address.into();
        let namespace = namespace.into();
        let connect_error = |message: String| TemporalError::Connect {
            address: address.clone(),
            message,
        };
        let url = if address.contains("://") {
            address.clone()
        } else {
            format!("http://{address}")
        };
        let url = temporalio_client::Url::from_str(&url)
            .map_err(|e| connect_error(format!("not a valid address: {e}")))?;
        let connection = Connection::connect(ConnectionOptions::new(url).build())
            .await
            .map_err(|e| connect_error(e.to_string()))?;
        let client = Client::new(connection, ClientOptions::new(namespace.clone()).build())
            .map_err(|e| connect_error(e.to_string()))?;
        Ok(TemporalConnection {
            client,
            address,
            namespace,
        })
    }

    /// The underlying Temporal SDK client, for anything kit-temporal does not wrap.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The address connected to.
    pub fn address(&self) -> &str {
        &self.address
    }
}
