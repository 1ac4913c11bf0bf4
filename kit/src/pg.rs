//! What the PostgreSQL back-ends (the checkpointer and the worker's run store) share: opening a
//! connection pool from a URL, with the tables in an optional schema of their own.

use deadpool_postgres::{Manager, Pool};
use tokio_postgres::NoTls;

/// Connections per pool.
pub(crate) const POOL_SIZE: usize = 16;

/// A pool for `url` (`search_path` set to `schema` when given) and the URL without its
/// password, for messages. The error says what was wrong and how to write it instead.
pub(crate) fn open_pool(
    url: &str,
    schema: Option<&str>,
    application_name: &str,
) -> Result<(Pool, String), String> {
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
    let pool = Pool::builder(Manager::new(config, NoTls))
        .max_size(POOL_SIZE)
        .build()
        .map_err(|e| format!("could not create the PostgreSQL pool for {location}: {e}"))?;
    Ok((pool, location))
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
