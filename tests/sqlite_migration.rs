//! SQLite files written by an earlier kit open, migrate once, and read back exactly what that kit
//! read: the fixture `tests/fixtures/sqlite-v2.sqlite` was written by kit's schema version 2
//! (see `support/sqlite_v2.rs`), and `sqlite-v2.json` is what that kit read back from it.

#[path = "support/sqlite_v2.rs"]
mod sqlite_v2;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kit::RunOptions;
use kit::checkpoint::sqlite::SQLITE_SCHEMA_VERSION;
use kit::checkpoint::{CheckpointError, Checkpointer, PruneStrategy, SqliteCheckpointer};
use serde_json::{Value, json};
use sqlite_v2::{DocUpdate, THREADS, asking, chain, dump};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sqlite-v2");

/// A copy of the fixture in a temporary directory (opening migrates it in place).
fn fixture(dir: &Path) -> PathBuf {
    let path = dir.join("v2.sqlite");
    std::fs::copy(format!("{FIXTURE}.sqlite"), &path).expect("the fixture copies");
    path
}

fn expected() -> Value {
    let text = std::fs::read_to_string(format!("{FIXTURE}.json")).expect("the fixture's dump");
    serde_json::from_str(&text).expect("the dump is JSON")
}

fn sql<T: rusqlite::types::FromSql>(path: &Path, query: &str) -> T {
    rusqlite::Connection::open(path)
        .expect("opens")
        .query_row(query, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{query}: {e}"))
}

/// SQL for the text of a stored checkpoint id (16 bytes of a UUID, or text).
fn id_text(column: &str) -> String {
    let hex = format!("lower(hex({column}))");
    format!(
        "CASE typeof({column}) WHEN 'blob' THEN substr({hex}, 1, 8) || '-' || substr({hex}, 9, 4) \
         || '-' || substr({hex}, 13, 4) || '-' || substr({hex}, 17, 4) || '-' || \
         substr({hex}, 21) ELSE {column} END"
    )
}

fn schema_version(path: &Path) -> i64 {
    sql(path, "SELECT version FROM kit_schema_version")
}

#[tokio::test]
async fn a_version_2_file_reads_back_as_that_kit_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path());
    assert_eq!(schema_version(&path), 2);
    let blob_rows_before: i64 = sql(&path, "SELECT COUNT(*) FROM kit_blobs");

    let cp = SqliteCheckpointer::open(&path).unwrap();
    assert_eq!(schema_version(&path), SQLITE_SCHEMA_VERSION);
    let got = dump(&cp).await;
    let want = expected();
    for (key, value) in want.as_object().unwrap() {
        assert_eq!(got.get(key), Some(value), "{key} reads back differently");
    }
    assert_eq!(got, want);

    // Only the blobs no checkpoint owns are left apart: the steps of the exit-durability runs,
    // what the prune kept, and the hand-written orphan.
    let loose: i64 = sql(&path, "SELECT COUNT(*) FROM kit_blobs");
    assert!(
        loose > 0 && loose < blob_rows_before / 3,
        "{loose} of {blob_rows_before}"
    );
    let owned_by_a_row: i64 = sql(
        &path,
        &format!(
            "SELECT COUNT(*) FROM kit_blobs b JOIN kit_checkpoints c
              ON c.thread_id = b.thread_id AND c.ns = b.ns AND {} = b.version",
            id_text("c.checkpoint_id")
        ),
    );
    assert_eq!(owned_by_a_row, 0);
    let by_thread: i64 = sql(
        &path,
        "SELECT COUNT(*) FROM kit_blobs WHERE thread_id NOT IN ('exit', 'pruned', 'custom')",
    );
    assert_eq!(by_thread, 0, "only those threads have blobs apart");

    // Opening again migrates nothing and reads the same.
    drop(cp);
    let again = SqliteCheckpointer::open(&path).unwrap();
    assert_eq!(dump(&again).await, want);
}

#[tokio::test]
async fn migrated_threads_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path());
    let cp: Arc<dyn Checkpointer> = Arc::new(SqliteCheckpointer::open(&path).unwrap());
    let opts = |thread: &str| RunOptions::new().thread_id(thread);

    // Each thread goes on from where the earlier kit left it: three more steps.
    for thread in ["chain", "big", "forked"] {
        let graph = chain(cp.clone());
        let before = graph
            .get_state(&opts(thread))
            .await
            .unwrap()
            .unwrap()
            .values;
        let out = graph
            .invoke(DocUpdate::new())
            .options(&opts(thread))
            .await
            .unwrap();
        assert_eq!(out.state().n, before.n + 3, "{thread}");
        let mut log = before.log.clone();
        log.extend(["a", "b", "c"].map(String::from));
        assert_eq!(out.state().log, log, "{thread}");
    }
    let big = chain(cp.clone())
        .get_state(&opts("big"))
        .await
        .unwrap()
        .unwrap();
    assert!(big.values.log[0].starts_with("0:xxx") && big.values.log[0].len() == 9_002);
    assert_eq!(big.values.log.len(), 3 * 4 + 3);

    // The exit-durability thread's chain runs through the blobs kept apart.
    let exit = chain(cp.clone())
        .get_state(&opts("exit"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(exit.values.log.join(""), "abcabc");

    // A paused thread resumes with the answer.
    let done = asking(cp.clone())
        .resume(json!("Ada"))
        .options(&opts("paused"))
        .await
        .unwrap();
    assert!(!done.is_interrupted());
    assert_eq!(done.state().log, [r#"hello "Ada""#]);

    // The pruned thread prunes again: what it kept apart goes once nothing reads it.
    let before = cp.history("pruned", "", None).await.unwrap().len();
    chain(cp.clone())
        .invoke(DocUpdate::new())
        .options(&opts("pruned"))
        .await
        .unwrap();
    let report = cp
        .prune("pruned", PruneStrategy::KeepLatest(1))
        .await
        .unwrap();
    assert_eq!(report.checkpoints as usize, before + 4 - 1);
    let state = chain(cp.clone())
        .get_state(&opts("pruned"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(state.values.n, 15);
    assert_eq!(state.values.log.join(""), "abc".repeat(5));
    assert_eq!(cp.history("pruned", "", None).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_version_1_file_migrates_through_2_to_3() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path());
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("DROP TABLE kit_thread_leases; UPDATE kit_schema_version SET version = 1;")
        .unwrap();
    let cp = SqliteCheckpointer::open(&path).unwrap();
    assert_eq!(schema_version(&path), SQLITE_SCHEMA_VERSION);
    let want = expected();
    for (thread, ns) in THREADS {
        let key = format!("{thread}|{ns}");
        let history = serde_json::to_value(cp.history(thread, ns, None).await.unwrap()).unwrap();
        assert_eq!(history, want[&key]["history"], "{key}");
    }
    let leases: i64 = sql(&path, "SELECT COUNT(*) FROM kit_thread_leases");
    assert_eq!(leases, 0, "the lease table exists");
}

#[tokio::test]
async fn a_damaged_version_2_file_is_refused_and_left_as_it_was() {
    let damages = [
        (
            "UPDATE kit_checkpoints SET source = 'teleport' WHERE thread_id = 'chain'",
            "chain",
            "teleport",
        ),
        (
            "UPDATE kit_checkpoints SET metadata = '{not json' WHERE thread_id = 'big'",
            "big",
            "metadata",
        ),
        (
            "UPDATE kit_checkpoints SET channel_versions = '[1, 2]' WHERE thread_id = 'exit'",
            "exit",
            "channel versions",
        ),
        (
            "UPDATE kit_blobs SET kind = 'half' WHERE thread_id = 'forked'
               AND version IN (SELECT checkpoint_id FROM kit_checkpoints WHERE thread_id = 'forked')",
            "forked",
            "half",
        ),
    ];
    for (damage, thread, says) in damages {
        let dir = tempfile::tempdir().unwrap();
        let path = fixture(dir.path());
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch(damage)
            .unwrap();
        let before: i64 = sql(&path, "SELECT COUNT(*) FROM kit_blobs");
        let err = SqliteCheckpointer::open(&path).unwrap_err();
        assert!(matches!(err, CheckpointError::Corrupt(_)), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("thread `{thread}`")) && text.contains(says),
            "the error names what is wrong: {text}"
        );
        assert!(
            text.contains("left as it was"),
            "and what became of the file: {text}"
        );
        // The migration is one transaction: nothing of it stayed.
        assert_eq!(schema_version(&path), 2);
        assert_eq!(sql::<i64>(&path, "SELECT COUNT(*) FROM kit_blobs"), before);
        let tables: i64 = sql(
            &path,
            "SELECT COUNT(*) FROM sqlite_master
              WHERE name IN ('kit_channels', 'kit_packed_checkpoints', 'kit_blobs_by_version')",
        );
        assert_eq!(tables, 0);
    }
}

/// A body SQLite holds as TEXT (written by hand, or by another tool) is read as its bytes.
#[tokio::test]
async fn a_body_stored_as_text_migrates() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path());
    let changed = rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE kit_checkpoints SET body = CAST(body AS TEXT) WHERE thread_id = 'custom'",
            [],
        )
        .unwrap();
    assert_eq!(
        changed, 4,
        "three checkpoints at the top, one in a namespace"
    );
    let cp = SqliteCheckpointer::open(&path).unwrap();
    let (got, want) = (dump(&cp).await, expected());
    for key in ["custom|", "custom|sub:1"] {
        assert_eq!(got[key], want[key], "{key}");
    }
}

/// On a migrated file, a rollback and a channel name the file never had both work.
#[tokio::test]
async fn a_migrated_file_rolls_back_and_takes_new_channels() {
    use kit::checkpoint::{
        BlobKind, ChannelBlob, CheckpointMeta, CheckpointSource, CheckpointWrite,
    };
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path());
    let cp = SqliteCheckpointer::open(&path).unwrap();
    let history = cp.history("chain", "", None).await.unwrap();
    // Back to the end of the second run: the third run's four checkpoints go.
    let marker = history[4].id.clone();
    assert_eq!(cp.rollback_after("chain", &marker).await.unwrap(), 4);
    assert_eq!(cp.head("chain", "").await.unwrap(), Some(marker.clone()));
    let state = chain(Arc::new(cp.clone()))
        .get_state(&RunOptions::new().thread_id("chain"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(state.values.n, 6);

    let id = kit::ids::time_ordered();
    let mut versions: std::collections::BTreeMap<String, String> = cp
        .load("chain", "", None)
        .await
        .unwrap()
        .unwrap()
        .channel_versions;
    versions.insert("brand_new".into(), id.clone());
    cp.put(CheckpointWrite {
        thread_id: "chain".into(),
        ns: "".into(),
        meta: CheckpointMeta {
            id: id.clone(),
            parent_id: Some(marker.clone()),
            step: 100,
            source: CheckpointSource::Update,
            created_at: kit::ids::now_rfc3339_millis(),
            next: Vec::new(),
            metadata: json!({}),
        },
        channel_versions: Arc::new(versions),
        blobs: vec![ChannelBlob {
            channel: "brand_new".into(),
            version: id.clone(),
            prev_version: None,
            kind: BlobKind::Full,
            data: b"42".to_vec(),
        }],
        body: b"{}".to_vec(),
        expected_head: Some(marker),
    })
    .await
    .unwrap();
    let again = SqliteCheckpointer::open(&path).unwrap();
    let loaded = again.load("chain", "", None).await.unwrap().unwrap();
    let names: Vec<&str> = loaded.channels.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["brand_new", "log", "n"]);
    assert_eq!(loaded.channels[0].full.as_deref(), Some(&b"42"[..]));
}
