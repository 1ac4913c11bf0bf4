//! What the PostgreSQL back-ends (the checkpointer and the worker's run store) share: a
//! connection pool opened from a URL, the tables in an optional schema of their own, migrations
//! one process at a time, and driver errors described.

use deadpool_postgres::{Manager, Object, Pool};
use tokio_postgres::NoTls;

/// The database a back-end keeps its tables in.
#[derive(Clone)]
pub(crate) struct Database {
    /// The connection pool.
    pub(crate) pool: Pool,
    /// The server and database, without the password (for messages).
    pub(crate) location: String,
    /// The PostgreSQL schema holding the tables, if one was given.
    pub(crate) schema: Option<String>,
    /// How the pool connects (for a connection of its own, such as the worker's `LISTEN`er).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) config: tokio_postgres::Config,
}

impl Database {
    /// A pool for `url`, with the tables in `schema` when given (see `open_parts`).
    pub(crate) fn open(
        url: &str,
        schema: Option<&str>,
        application_name: &str,
    ) -> Result<Self, String> {
        let (pool, location, config) = open_parts(url, schema, application_name)?;
        Ok(Database {
            pool,
            location,
            schema: schema.map(String::from),
            config,
        })
    }

    /// A connection from the pool; the error says what to check.
    pub(crate) async fn client(&self) -> Result<Object, String> {
        self.pool.get().await.map_err(|e| {
            let reason = match &e {
                deadpool_postgres::PoolError::Backend(e) => describe(e),
                other => other.to_string(),
            };
            format!(
                "could not connect to {}: {reason}; check that the server is running, reachable, \
                 and that the user, password and database are right",
                self.location
            )
        })
    }

    /// Drops the schema with all its tables (tests clean up with it). Does nothing without a
    /// schema.
    pub(crate) async fn drop_schema(&self) -> Result<(), String> {
        let Some(schema) = &self.schema else {
            return Ok(());
        };
        let client = self.client().await?;
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .await
            .map_err(|e| describe(&e))
    }

    /// Starts a migration inside `tx`: waits for the advisory lock `lock`, so one process
    /// migrates at a time, and creates the schema.
    pub(crate) async fn begin_migration(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        lock: i64,
    ) -> Result<(), tokio_postgres::Error> {
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock])
            .await?;
        if let Some(schema) = &self.schema {
            tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                .await?;
        }
        Ok(())
    }
}

/// The schema version recorded in `table` (0 when the table does not exist yet). It only
/// reads, so a process joining a running fleet can tell its tables are current without
/// locking them.
pub(crate) async fn stored_version(
    client: &impl deadpool_postgres::GenericClient,
    table: &str,
) -> Result<i64, tokio_postgres::Error> {
    let exists: bool = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
        .await?
        .try_get(0)?;
    if !exists {
        return Ok(0);
    }
    client
        .query_one(
            &format!("SELECT COALESCE(MAX(version), 0) FROM {table}"),
            &[],
        )
        .await?
        .try_get(0)
}

/// Whether tables at schema version `found` are current for a build that knows versions up
/// to `supported`: `Ok(true)` current, `Ok(false)` to migrate, `Err(found)` made by a newer
/// kit (left untouched: an older build would misread them).
pub(crate) fn is_current(found: i64, supported: i64) -> Result<bool, i64> {
    match found.cmp(&supported) {
        std::cmp::Ordering::Greater => Err(found),
        order => Ok(order.is_eq()),
    }
}

/// Records `version` in `table` (creating it when missing), inside the migration's `tx`.
pub(crate) async fn record_version(
    tx: &deadpool_postgres::Transaction<'_>,
    table: &str,
    version: i64,
) -> Result<(), tokio_postgres::Error> {
    tx.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {table} (version BIGINT NOT NULL); DELETE FROM {table}"
    ))
    .await?;
    tx.execute(
        &format!("INSERT INTO {table} (version) VALUES ($1)"),
        &[&version],
    )
    .await?;
    Ok(())
}

/// Describes a driver error: the server's message and code when there is one, else the error
/// and its sources.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut text = format!("{} (SQLSTATE {})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                text.push_str(&format!("; {detail}"));
            }
            text
        }
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            text
        }
    }
}

/// Connections per pool.
pub(crate) const POOL_SIZE: usize = 16;

/// A pool for `url` (`search_path` set to `schema` when given) and the URL without its
/// password, for messages. The error says what was wrong and how to write it instead.
#[cfg(test)]
pub(crate) fn open_pool(
    url: &str,
    schema: Option<&str>,
    application_name: &str,
) -> Result<(Pool, String), String> {
    open_parts(url, schema, application_name).map(|(pool, location, _)| (pool, location))
}

/// [`open_pool`], with the connection settings.
fn open_parts(
    url: &str,
    schema: Option<&str>,
    application_name: &str,
) -> Result<(Pool, String, tokio_postgres::Config), String> {
    if let Some(schema) = schema
        && !valid_schema(schema)
    {
        return Err(format!(
            "`{schema}` is not a usable PostgreSQL schema name; use lower-case letters, digits \
             and underscores, starting with a letter or underscore (at most 63)"
        ));
    }
    // The driver's message never repeats the URL, so no password can leak here.
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
        format!(
            "the PostgreSQL URL is not valid ({e}); use postgres://user:password@host:port/database"
        )
    })?;
    if let Some(schema) = schema {
        config.options(format!("-c search_path={schema}"));
    }
    if config.get_application_name().is_none() {
        config.application_name(application_name);
    }
    let location = redact(&config);
    let pool = Pool::builder(Manager::new(config.clone(), NoTls))
        .max_size(POOL_SIZE)
        .build()
        .map_err(|e| format!("could not create the PostgreSQL pool for {location}: {e}"))?;
    Ok((pool, location, config))
}

/// The connection target without the password.
fn redact(config: &tokio_postgres::Config) -> String {
    let user = config.get_user().unwrap_or("");
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            #[cfg(unix)]
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .unwrap_or_default();
    let port = config
        .get_ports()
        .first()
        .map(|p| format!(":{p}"))
        .unwrap_or_default();
    let db = config.get_dbname().unwrap_or("");
    format!("postgres://{user}@{host}{port}/{db}")
}

/// A schema name safe to put in `search_path` and `CREATE SCHEMA` unquoted.
fn valid_schema(schema: &str) -> bool {
    let mut chars = schema.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && schema.len() <= 63
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_schemas_and_urls_are_refused_and_passwords_never_shown() {
        for bad in ["Kit", "1abc", "a-b", "a; DROP TABLE x", ""] {
            let e = open_pool("postgres://u:p@localhost/db", Some(bad), "kit").unwrap_err();
            assert!(e.contains("schema name"), "{bad}: {e}");
        }
        let e = open_pool("not a url", None, "kit").unwrap_err();
        assert!(
            e.contains("postgres://user:password@host:port/database"),
            "{e}"
        );
        let (_, location) = open_pool(
            "postgres://kit:s3cret@db.internal:5433/runs",
            Some("kit_1"),
            "kit",
        )
        .unwrap();
        assert_eq!(location, "postgres://kit@db.internal:5433/runs");
    }
}
