//! The database layout, as an append-only list of migrations.
//!
//! Each entry moves the schema one version forward; `PRAGMA user_version`
//! records how many have run. Entries are never edited once released, only
//! appended, so any older database can be brought up to date.

use rusqlite::{Connection, TransactionBehavior};

/// One SQL batch per schema version; index 0 takes a database to version 1.
const MIGRATIONS: &[&str] = &[
    // Version 1: deliveries, their replay runs, and the indexes that keep
    // paging, grouping by event key and pruning cheap at 100,000 rows.
    "CREATE TABLE deliveries (
        id INTEGER PRIMARY KEY,
        received_at_ms INTEGER NOT NULL,
        tunnel_url TEXT NOT NULL,
        target TEXT NOT NULL,
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        request_headers BLOB NOT NULL,
        request_body BLOB NOT NULL,
        request_body_size INTEGER NOT NULL,
        provider TEXT,
        event_key TEXT NOT NULL,
        event_key_source TEXT NOT NULL,
        replay_of INTEGER,
        status INTEGER,
        response_headers BLOB,
        response_body BLOB,
        response_body_size INTEGER,
        duration_ms REAL,
        error TEXT,
        completed_at_ms INTEGER
    );
    CREATE INDEX deliveries_event_key ON deliveries (event_key, id) WHERE replay_of IS NULL;
    CREATE INDEX deliveries_provider ON deliveries (provider, id);
    CREATE INDEX deliveries_received_at ON deliveries (received_at_ms);
    CREATE INDEX deliveries_replay_of ON deliveries (replay_of) WHERE replay_of IS NOT NULL;
    CREATE TABLE replay_runs (
        id INTEGER PRIMARY KEY,
        delivery_id INTEGER NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
        started_at_ms INTEGER NOT NULL,
        times INTEGER NOT NULL,
        concurrency INTEGER NOT NULL,
        idempotent INTEGER,
        summary TEXT NOT NULL,
        report_json TEXT NOT NULL
    );
    CREATE INDEX replay_runs_delivery ON replay_runs (delivery_id, id);",
];

/// Schema version this build writes and understands.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// What `migrate` found when the database is newer than this build.
#[derive(Debug, PartialEq, Eq)]
pub struct NewerSchema {
    /// The database's `user_version`.
    pub found: i64,
}

/// Brings the schema up to date in one immediate transaction.
///
/// A database written by a newer PortPreview is left untouched: downgrading
/// would drop what the newer version relies on.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<Result<(), NewerSchema>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if found > SCHEMA_VERSION {
        return Ok(Err(NewerSchema { found }));
    }
    for sql in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
        tx.execute_batch(sql)?;
    }
    if found != SCHEMA_VERSION {
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    tx.commit()?;
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrating_twice_is_harmless() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap().unwrap();
        migrate(&mut conn).unwrap().unwrap();
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn a_newer_schema_is_left_alone() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        assert_eq!(
            migrate(&mut conn).unwrap(),
            Err(NewerSchema {
                found: SCHEMA_VERSION + 1
            })
        );
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(tables, 0);
    }
}
