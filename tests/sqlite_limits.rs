//! SQLite plans a query with the value bound to a bare `LIMIT ?`, so it prepares such a
//! statement again every time it runs with a new binding (a claim, an event page, a history
//! read). kit writes its limits `LIMIT ?N + 0`, which SQLite evaluates without planning on it.
//! This checks that behaviour of the bundled SQLite, and that kit's SQL keeps to it.

use rusqlite::{Connection, StatementStatus, params};

fn reprepares(conn: &Connection, sql: &str) -> i32 {
    for limit in 1..=4 {
        let mut stmt = conn.prepare_cached(sql).unwrap();
        let rows: Vec<i64> = stmt
            .query_map(params![limit], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows.len(), limit as usize, "{sql}");
    }
    conn.prepare_cached(sql)
        .unwrap()
        .get_status(StatementStatus::RePrepare)
}

#[test]
fn a_bound_limit_plus_zero_is_prepared_once() {
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch(
        "CREATE TABLE t (x INTEGER PRIMARY KEY);
         INSERT INTO t VALUES (1), (2), (3), (4), (5), (6);",
    )
    .unwrap();
    // The behaviour this guards against: every new binding prepares the statement again.
    assert_eq!(
        reprepares(&conn, "SELECT x FROM t ORDER BY x LIMIT ?1"),
        4,
        "the bundled SQLite no longer prepares a bare `LIMIT ?` again: `+ 0` can go"
    );
    assert_eq!(
        reprepares(&conn, "SELECT x FROM t ORDER BY x LIMIT ?1 + 0"),
        0
    );
    // `+ 0` keeps what a limit means: -1 is no limit, 0 no row, and an offset still applies.
    let read = |limit: i64, offset: i64| -> Vec<i64> {
        conn.prepare_cached("SELECT x FROM t ORDER BY x LIMIT ?1 + 0 OFFSET ?2")
            .unwrap()
            .query_map(params![limit, offset], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(read(-1, 0), [1, 2, 3, 4, 5, 6]);
    assert_eq!(read(0, 0), Vec::<i64>::new());
    assert_eq!(read(2, 3), [4, 5]);
    assert_eq!(read(-1, 4), [5, 6]);
}

#[test]
fn every_bound_limit_in_kits_sql_is_written_plus_zero() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kit/src");
    let mut stack = vec![root];
    let mut checked = 0;
    let mut bare = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            // PostgreSQL's `$N` is not SQLite's, and it plans bound limits generically.
            if path.extension().is_none_or(|e| e != "rs")
                || path.components().any(|c| c.as_os_str() == "postgres")
            {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                let mut rest = line;
                while let Some(at) = rest.find("LIMIT ") {
                    let after = &rest[at + "LIMIT ".len()..];
                    rest = after;
                    // A bound parameter in any of SQLite's forms: ?, ?N, :name, @name, $name.
                    let Some(first) = after.chars().next() else {
                        continue;
                    };
                    if !matches!(first, '?' | ':' | '@' | '$') {
                        continue;
                    }
                    checked += 1;
                    let name = after[1..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .count();
                    if first != '?' || name == 0 || !after[1 + name..].starts_with(" + 0") {
                        bare.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        checked >= 5,
        "found only {checked} bound limits: is the path right?"
    );
    assert!(bare.is_empty(), "bare `LIMIT ?`:\n{}", bare.join("\n"));
}
