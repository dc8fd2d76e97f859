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
    // Version 2: deliveries per event key, kept by triggers, so a page of the
    // history costs the same when one event was delivered 100,000 times.
    "CREATE TABLE event_counts (event_key TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO event_counts (event_key, n)
        SELECT event_key, count(*) FROM deliveries
        WHERE replay_of IS NULL AND event_key != '' GROUP BY event_key;
    CREATE TRIGGER event_counts_insert AFTER INSERT ON deliveries
        WHEN NEW.replay_of IS NULL AND NEW.event_key != ''
    BEGIN
        INSERT INTO event_counts (event_key, n) VALUES (NEW.event_key, 1)
            ON CONFLICT (event_key) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER event_counts_delete AFTER DELETE ON deliveries
        WHEN OLD.replay_of IS NULL AND OLD.event_key != ''
    BEGIN
        UPDATE event_counts SET n = n - 1 WHERE event_key = OLD.event_key;
        DELETE FROM event_counts WHERE event_key = OLD.event_key AND n <= 0;
    END;
    CREATE TRIGGER event_counts_update AFTER UPDATE OF event_key, replay_of ON deliveries
    BEGIN
        UPDATE event_counts SET n = n - 1
            WHERE event_key = OLD.event_key AND OLD.replay_of IS NULL AND OLD.event_key != '';
        DELETE FROM event_counts WHERE event_key = OLD.event_key AND n <= 0;
        INSERT INTO event_counts (event_key, n)
            SELECT NEW.event_key, 1 WHERE NEW.replay_of IS NULL AND NEW.event_key != ''
            ON CONFLICT (event_key) DO UPDATE SET n = n + 1;
    END;",
    // Version 3: answers in their own table. Filling in the answer columns of
    // a delivery row made SQLite rewrite the whole record, request body and
    // its overflow pages included, so every body went to the WAL twice; an
    // insert into `outcomes` writes only the answer.
    "CREATE TABLE outcomes (
        delivery_id INTEGER PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
        status INTEGER,
        response_headers BLOB,
        response_body BLOB,
        response_body_size INTEGER,
        duration_ms REAL,
        error TEXT,
        completed_at_ms INTEGER NOT NULL
    );
    INSERT INTO outcomes (delivery_id, status, response_headers, response_body, response_body_size,
            duration_ms, error, completed_at_ms)
        SELECT id, status, response_headers, response_body, response_body_size, duration_ms, error,
            completed_at_ms
        FROM deliveries WHERE completed_at_ms IS NOT NULL;
    ALTER TABLE deliveries DROP COLUMN status;
    ALTER TABLE deliveries DROP COLUMN response_headers;
    ALTER TABLE deliveries DROP COLUMN response_body;
    ALTER TABLE deliveries DROP COLUMN response_body_size;
    ALTER TABLE deliveries DROP COLUMN duration_ms;
    ALTER TABLE deliveries DROP COLUMN error;
    ALTER TABLE deliveries DROP COLUMN completed_at_ms;",
    // Version 4: two indexes fewer to update on every delivery. Each index
    // is one more page in every commit of the history writer. Paging
    // newest-first by id finds a provider's deliveries without an index,
    // and pruning is rare enough to scan.
    "DROP INDEX deliveries_provider;
    DROP INDEX deliveries_received_at;",
    // Version 5: how far each recorder's inbox file has been moved into the
    // history, so requests moved just before a crash are not moved twice.
    "CREATE TABLE inbox_applied (inbox TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;",
    // Version 6: an event's scope beside its key. GitHub sends one event to a
    // repository's hook and to its organisation's under one delivery ID, so
    // deliveries are counted per (key, scope), the scope being the hook ID.
    // Rows stored before keep the empty scope and are counted as they were.
    "ALTER TABLE deliveries ADD COLUMN event_scope TEXT NOT NULL DEFAULT '';
    DROP TRIGGER event_counts_insert;
    DROP TRIGGER event_counts_delete;
    DROP TRIGGER event_counts_update;
    DROP TABLE event_counts;
    CREATE TABLE event_counts (
        event_key TEXT NOT NULL,
        event_scope TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (event_key, event_scope)
    ) WITHOUT ROWID;
    INSERT INTO event_counts (event_key, event_scope, n)
        SELECT event_key, '', count(*) FROM deliveries
        WHERE replay_of IS NULL AND event_key != '' GROUP BY event_key;
    CREATE TRIGGER event_counts_insert AFTER INSERT ON deliveries
        WHEN NEW.replay_of IS NULL AND NEW.event_key != ''
    BEGIN
        INSERT INTO event_counts (event_key, event_scope, n) VALUES (NEW.event_key, NEW.event_scope, 1)
            ON CONFLICT (event_key, event_scope) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER event_counts_delete AFTER DELETE ON deliveries
        WHEN OLD.replay_of IS NULL AND OLD.event_key != ''
    BEGIN
        UPDATE event_counts SET n = n - 1
            WHERE event_key = OLD.event_key AND event_scope = OLD.event_scope;
        DELETE FROM event_counts
            WHERE event_key = OLD.event_key AND event_scope = OLD.event_scope AND n <= 0;
    END;
    CREATE TRIGGER event_counts_update AFTER UPDATE OF event_key, event_scope, replay_of ON deliveries
    BEGIN
        UPDATE event_counts SET n = n - 1
            WHERE event_key = OLD.event_key AND event_scope = OLD.event_scope
                AND OLD.replay_of IS NULL AND OLD.event_key != '';
        DELETE FROM event_counts
            WHERE event_key = OLD.event_key AND event_scope = OLD.event_scope AND n <= 0;
        INSERT INTO event_counts (event_key, event_scope, n)
            SELECT NEW.event_key, NEW.event_scope, 1 WHERE NEW.replay_of IS NULL AND NEW.event_key != ''
            ON CONFLICT (event_key, event_scope) DO UPDATE SET n = n + 1;
    END;",
    // Version 7: requests a recorder stored before their answers, by its
    // inbox, so that when the recorder dies the next open can give them an
    // outcome instead of leaving them waiting for good. Most answers land in
    // the same transaction as their requests and never pass through here.
    "CREATE TABLE unanswered (
        delivery_id INTEGER PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
        inbox TEXT NOT NULL
    );",
    // Version 8: large bodies stored once, by content. Providers retry with
    // the same body and replays send it again; stored in every row, each
    // copy of a large body went to the disk twice (the WAL, then the
    // database), which held recording to the disk's speed. The row keeps
    // an empty body and points here instead (see `store::write::SHARED_BODY`).
    "CREATE TABLE bodies (
        id INTEGER PRIMARY KEY,
        blake3 BLOB NOT NULL UNIQUE,
        data BLOB NOT NULL
    );
    ALTER TABLE deliveries ADD COLUMN request_body_id INTEGER REFERENCES bodies (id);
    ALTER TABLE outcomes ADD COLUMN response_body_id INTEGER REFERENCES bodies (id);
    CREATE INDEX deliveries_request_body ON deliveries (request_body_id) WHERE request_body_id IS NOT NULL;
    CREATE INDEX outcomes_response_body ON outcomes (response_body_id) WHERE response_body_id IS NOT NULL;",
    // Version 9: the highest delivery id pruning has removed. SQLite numbers
    // a new row one past the highest left, so pruning the newest deliveries
    // handed their ids out again, and an id already shown, or written into
    // a fixture, named another delivery. New deliveries are numbered past
    // this mark too (see `store::write::request_row`); one row at most.
    "CREATE TABLE retired_ids (highest INTEGER NOT NULL);",
    // Version 10: whether the handler got the caller's Host header
    // (`http --host-header preserve`) rather than its own address, so that
    // a replay or a curl export sends what the handler routed by.
    "ALTER TABLE deliveries ADD COLUMN host_preserved INTEGER NOT NULL DEFAULT 0;",
    // Body-hash keys came to be counted per method and path after some
    // histories had stored them unscoped: without this, a retry of one of
    // those deliveries would count as a new event. The trigger on
    // event_scope moves their counts along; the new trigger scopes what a
    // tunnel of an earlier version, still running, goes on inserting.
    // (GitHub's scope comes from a header SQL cannot read; its keys are
    // never body hashes anyway.)
    "UPDATE deliveries
        SET event_scope = method || ' ' || CASE WHEN instr(path, '?') > 0
            THEN substr(path, 1, instr(path, '?') - 1) ELSE path END
        WHERE event_scope = '' AND event_key_source LIKE 'sha256:%'
            AND provider IS NOT 'github';
    CREATE TRIGGER deliveries_hash_scope AFTER INSERT ON deliveries
        WHEN NEW.event_scope = '' AND NEW.event_key_source LIKE 'sha256:%'
            AND NEW.provider IS NOT 'github'
    BEGIN
        UPDATE deliveries
            SET event_scope = NEW.method || ' ' || CASE WHEN instr(NEW.path, '?') > 0
                THEN substr(NEW.path, 1, instr(NEW.path, '?') - 1) ELSE NEW.path END
            WHERE id = NEW.id;
    END;",
    // Version 12: what a listing reads first in each row, the bodies last.
    // A body kept in its row (under `store::write::SHARED_BODY`, or any
    // body stored before version 8) overflows onto pages of its own, and
    // SQLite reaches a column after it only by reading those pages: listing
    // by provider or status read every body it passed. The event key index
    // takes the scope too, so a delivery's number among its event's is
    // counted in the index. SQLite changes a table's layout only by copying
    // it; `migrate` turns foreign keys off around this, as SQLite's own
    // procedure does, so dropping the old tables cascades nowhere.
    "CREATE TABLE deliveries_new (
        id INTEGER PRIMARY KEY,
        received_at_ms INTEGER NOT NULL,
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        provider TEXT,
        event_key TEXT NOT NULL,
        event_key_source TEXT NOT NULL,
        event_scope TEXT NOT NULL DEFAULT '',
        replay_of INTEGER,
        host_preserved INTEGER NOT NULL DEFAULT 0,
        tunnel_url TEXT NOT NULL,
        target TEXT NOT NULL,
        request_body_size INTEGER NOT NULL,
        request_body_id INTEGER REFERENCES bodies (id),
        request_headers BLOB NOT NULL,
        request_body BLOB NOT NULL
    );
    INSERT INTO deliveries_new (id, received_at_ms, method, path, provider, event_key, event_key_source,
            event_scope, replay_of, host_preserved, tunnel_url, target, request_body_size, request_body_id,
            request_headers, request_body)
        SELECT id, received_at_ms, method, path, provider, event_key, event_key_source, event_scope, replay_of,
            host_preserved, tunnel_url, target, request_body_size, request_body_id, request_headers, request_body
        FROM deliveries;
    DROP TABLE deliveries;
    ALTER TABLE deliveries_new RENAME TO deliveries;
    CREATE INDEX deliveries_event_key ON deliveries (event_key, event_scope, id) WHERE replay_of IS NULL;
    CREATE INDEX deliveries_replay_of ON deliveries (replay_of) WHERE replay_of IS NOT NULL;
    CREATE INDEX deliveries_request_body ON deliveries (request_body_id) WHERE request_body_id IS NOT NULL;
    CREATE TRIGGER event_counts_insert AFTER INSERT ON deliveries
        WHEN NEW.replay_of IS NULL AND NEW.event_key != ''
    BEGIN
        INSERT INTO event_counts (event_key, event_scope, n) VALUES (NEW.event_key, NEW.event_scope, 1)
            ON CONFLICT (event_key, event_scope) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER event_counts_delete AFTER DELETE ON deliveries
        WHEN OLD.replay_of IS NULL AND OLD.event_key != ''
    BEGIN
        UPDATE event_counts SET n = n - 1
            WHERE event_key = OLD.event_key AND event_scope = OLD.event_scope;
        DELETE FROM event_counts
            WHERE event_key = OLD.event_key AND event_scope = OLD.event_scope AND n <= 0;
    END;
    CREATE TRIGGER event_counts_update AFTER UPDATE OF event_key, event_scope, replay_of ON deliveries
    BEGIN
        UPDATE event_counts SET n = n - 1
            WHERE event_key = OLD.event_key AND event_scope = OLD.event_scope
                AND OLD.replay_of IS NULL AND OLD.event_key != '';
        DELETE FROM event_counts
            WHERE event_key = OLD.event_key AND event_scope = OLD.event_scope AND n <= 0;
        INSERT INTO event_counts (event_key, event_scope, n)
            SELECT NEW.event_key, NEW.event_scope, 1 WHERE NEW.replay_of IS NULL AND NEW.event_key != ''
            ON CONFLICT (event_key, event_scope) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER deliveries_hash_scope AFTER INSERT ON deliveries
        WHEN NEW.event_scope = '' AND NEW.event_key_source LIKE 'sha256:%'
            AND NEW.provider IS NOT 'github'
    BEGIN
        UPDATE deliveries
            SET event_scope = NEW.method || ' ' || CASE WHEN instr(NEW.path, '?') > 0
                THEN substr(NEW.path, 1, instr(NEW.path, '?') - 1) ELSE NEW.path END
            WHERE id = NEW.id;
    END;
    CREATE TABLE outcomes_new (
        delivery_id INTEGER PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
        status INTEGER,
        duration_ms REAL,
        error TEXT,
        completed_at_ms INTEGER NOT NULL,
        response_body_size INTEGER,
        response_body_id INTEGER REFERENCES bodies (id),
        response_headers BLOB,
        response_body BLOB
    );
    INSERT INTO outcomes_new (delivery_id, status, duration_ms, error, completed_at_ms, response_body_size,
            response_body_id, response_headers, response_body)
        SELECT delivery_id, status, duration_ms, error, completed_at_ms, response_body_size, response_body_id,
            response_headers, response_body
        FROM outcomes;
    DROP TABLE outcomes;
    ALTER TABLE outcomes_new RENAME TO outcomes;
    CREATE INDEX outcomes_response_body ON outcomes (response_body_id) WHERE response_body_id IS NOT NULL;",
    // Version 13: content keys made again, in code (see `REKEYED_AT`).
    // Non-JSON bodies came to be hashed with their sender's name, and keys
    // over chosen fields with a mark of their own.
    "",
    // Version 14: requests stored before version 7 whose answers never
    // came. Their recorders listed no requests in `unanswered`, so when one
    // died nothing gave them an outcome, and they showed as in flight for
    // good. Every request stored since is answered in its transaction or
    // listed there, so one with neither is from such a recorder: it gets
    // what a dead recorder's requests get (`recorder::recover::ORPHANED`).
    // A recorder of that age still running answers with INSERT OR REPLACE,
    // which puts the true answer in its place.
    "INSERT INTO outcomes (delivery_id, error, completed_at_ms)
        SELECT d.id, 'PortPreview stopped before it recorded the answer', CAST(unixepoch('subsec') * 1000 AS INTEGER)
        FROM deliveries d
        WHERE NOT EXISTS (SELECT 1 FROM outcomes o WHERE o.delivery_id = d.id)
            AND NOT EXISTS (SELECT 1 FROM unanswered u WHERE u.delivery_id = d.id);",
    // Version 15: an event ID is its provider's. Stripe's `evt_1` and
    // Paddle's `evt_1` are two events, but deliveries were counted by key
    // alone (GitHub's by key and hook), so one was called the other's
    // retry and `replay evt_1` sent whichever came last. The scope of a key
    // that is a provider's ID now starts with the provider's name
    // (`NewDelivery::event_scope`); a trigger scopes what a tunnel of an
    // earlier version, still running, goes on inserting. Content keys are
    // made again too: a top-level `timestamp` is no longer left out of the
    // hash, as it is an event's own time for many senders.
    //
    // Such a tunnel reads its delivery's count back under the scope it
    // gave (and stops recording when it finds none), so the move leaves a
    // copy of the count there for it. Nothing of this version reads a
    // count under a scope its rows do not carry. The count on insert
    // leaves a row that is to move to the move, which counts it where it
    // lands (`event_counts_update`): SQLite fires the newest trigger
    // first, and counted before the move as well, the row was counted
    // twice, once under a scope no row has.
    "UPDATE deliveries SET event_scope = provider || ':' || event_scope
        WHERE provider IS NOT NULL AND event_key != '' AND event_key_source NOT LIKE 'sha256:%';
    CREATE TRIGGER deliveries_provider_scope AFTER INSERT ON deliveries
        WHEN NEW.provider IS NOT NULL AND NEW.event_key != '' AND NEW.event_key_source NOT LIKE 'sha256:%'
            AND substr(NEW.event_scope, 1, length(NEW.provider) + 1) IS NOT NEW.provider || ':'
    BEGIN
        UPDATE deliveries SET event_scope = NEW.provider || ':' || NEW.event_scope WHERE id = NEW.id;
        INSERT INTO event_counts (event_key, event_scope, n)
            SELECT NEW.event_key, NEW.event_scope, n FROM event_counts
            WHERE NEW.replay_of IS NULL AND event_key = NEW.event_key
                AND event_scope = NEW.provider || ':' || NEW.event_scope
            ON CONFLICT (event_key, event_scope) DO UPDATE SET n = excluded.n;
    END;
    DROP TRIGGER event_counts_insert;
    CREATE TRIGGER event_counts_insert AFTER INSERT ON deliveries
        WHEN NEW.replay_of IS NULL AND NEW.event_key != ''
            AND NOT (NEW.provider IS NOT NULL AND NEW.event_key_source NOT LIKE 'sha256:%'
                AND substr(NEW.event_scope, 1, length(NEW.provider) + 1) IS NOT NEW.provider || ':')
    BEGIN
        INSERT INTO event_counts (event_key, event_scope, n) VALUES (NEW.event_key, NEW.event_scope, 1)
            ON CONFLICT (event_key, event_scope) DO UPDATE SET n = n + 1;
    END;",
    // Version 16: each delivery's event type (`invoice.paid`,
    // `pull_request.opened`), which the history lists and filters by.
    // A table of its own: a column added to `deliveries` would come after
    // the request body (see version 12), and every page of a list would
    // walk each body's overflow pages to read it. Most senders name no
    // type a handler's tests can rely on, so a row is kept only for those
    // that do. Deliveries recorded before get theirs in code, from the
    // request stored (see `TYPED_AT`).
    "CREATE TABLE event_types (
        delivery_id INTEGER PRIMARY KEY REFERENCES deliveries (id) ON DELETE CASCADE,
        event_type TEXT NOT NULL
    );",
];

/// The versions whose migration goes on, after its SQL, to make every
/// content-hashed event key again by this build's rules (`rekey`): SQL
/// cannot hash a body as the key rules do. A change to those rules
/// appends a version here, with an empty migration.
const REKEYED_AT: &[usize] = &[13, 15];

/// The versions whose migration goes on to work out the event type of
/// every delivery stored without one (`event_types`): SQL cannot read a
/// provider's event as the rules in code do.
const TYPED_AT: &[usize] = &[16];

/// Written into the header of every history (`PRAGMA application_id`, the
/// field SQLite keeps for this), so that no other program's SQLite file is
/// ever taken for a history and written to. Reads "PPvw".
pub const APPLICATION_ID: i32 = 0x5050_7677;

/// What a database file holds, told before anything is written to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// Nothing yet: an empty file, or an SQLite database with no schema.
    Empty,
    /// A PortPreview history, of any schema version.
    History,
    /// Another program's database.
    Foreign,
}

/// Tells what the database behind `conn` holds. Histories written before
/// the application ID was set are known by their schema version and their
/// tables.
pub fn contents(conn: &Connection) -> rusqlite::Result<Contents> {
    // One read transaction: another process making the history commits its
    // header and tables together, and reads taken on either side of that
    // commit would show tables with no version, another program's file.
    let snapshot = conn.unchecked_transaction()?;
    let id: i32 = snapshot.query_row("PRAGMA application_id", [], |row| row.get(0))?;
    let version: i64 = snapshot.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    let (objects, ours): (i64, i64) = snapshot.query_row(
        "SELECT count(*), count(*) FILTER (WHERE type = 'table' AND name IN ('deliveries', 'replay_runs'))
         FROM sqlite_schema",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    snapshot.commit()?;
    if id == APPLICATION_ID {
        return Ok(Contents::History);
    }
    Ok(match (id, version, objects) {
        (0, 0, 0) => Contents::Empty,
        (0, version, _) if version > 0 && ours == 2 => Contents::History,
        _ => Contents::Foreign,
    })
}

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
    // Most opens find the schema current: they need no write lock, so a
    // reader never waits for a writer just to learn there is nothing to do.
    let seen: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if seen == SCHEMA_VERSION {
        return Ok(Ok(()));
    }
    // A migration that copies a table drops the old one, and with foreign
    // keys on that would delete every answer and replay run with it.
    // SQLite ignores this pragma inside a transaction, so it is set around.
    let keys: bool = conn.query_row("PRAGMA foreign_keys", [], |row| row.get(0))?;
    conn.pragma_update(None, "foreign_keys", false)?;
    let migrated = migrate_locked(conn);
    conn.pragma_update(None, "foreign_keys", keys)?;
    migrated
}

/// `migrate` under the write lock, in one transaction.
fn migrate_locked(conn: &mut Connection) -> rusqlite::Result<Result<(), NewerSchema>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Read again under the lock: another process may have migrated since.
    let found: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if found > SCHEMA_VERSION {
        return Ok(Err(NewerSchema { found }));
    }
    let (mut rekey, mut retype) = (false, false);
    for (done, sql) in MIGRATIONS.iter().enumerate().skip(usize::try_from(found).unwrap_or(0)) {
        tx.execute_batch(sql)?;
        rekey |= REKEYED_AT.contains(&(done + 1));
        retype |= TYPED_AT.contains(&(done + 1));
    }
    // Once, after the SQL: the rules are this build's, whichever versions
    // asked for them.
    if rekey {
        let changed = super::rekey::content_keys(&tx)?;
        tracing::debug!(changed, "content-hashed event keys made again");
    }
    if retype {
        let typed = super::event_types::fill(&tx)?;
        tracing::debug!(typed, "event types worked out for deliveries stored without");
    }
    if found != SCHEMA_VERSION {
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    tx.pragma_update(None, "application_id", APPLICATION_ID)?;
    tx.commit()?;
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store over `conn`, migrated as `portpreview http` would.
    fn opened(conn: Connection) -> crate::store::Store {
        crate::store::Store::setup(
            conn,
            std::path::PathBuf::from(":memory:"),
            super::super::open::Opening::Create,
        )
        .unwrap()
    }

    /// A history as a release at schema `version` left it, opened as the
    /// store opens one (foreign keys on, which the copy of version 12 must
    /// reckon with).
    fn history_at(version: usize) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        for sql in &MIGRATIONS[..version] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", version).unwrap();
        conn
    }

    #[test]
    fn migrating_twice_is_harmless() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap().unwrap();
        migrate(&mut conn).unwrap().unwrap();
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn an_older_database_is_brought_up_to_date_with_its_rows() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        for (key, replay_of) in [("evt_a", None), ("evt_a", None), ("evt_a", Some(1)), ("evt_b", None)] {
            conn.execute(
                "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                     request_body, request_body_size, event_key, event_key_source, replay_of)
                 VALUES (0, '', '', 'POST', '/', x'00', x'', 0, ?1, '', ?2)",
                rusqlite::params![key, replay_of],
            )
            .unwrap();
        }
        migrate(&mut conn).unwrap().unwrap();
        let counts: Vec<(String, i64)> = conn
            .prepare("SELECT event_key, n FROM event_counts ORDER BY event_key")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(counts, vec![("evt_a".to_owned(), 2), ("evt_b".to_owned(), 1)]);
    }

    #[test]
    fn a_version_2_database_keeps_its_answers_in_version_3() {
        use crate::store::ListQuery;
        use portpreview_shared::Header;

        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.execute_batch(MIGRATIONS[1]).unwrap();
        conn.pragma_update(None, "user_version", 2).unwrap();
        let headers = crate::store::header_blob::encode(&[Header::new("content-type", "text/plain")]);
        for key in ["evt_answered", "evt_failed", "evt_pending"] {
            conn.execute(
                "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                     request_body, request_body_size, event_key, event_key_source)
                 VALUES (5, '', 'http://127.0.0.1:3000', 'POST', '/hook', ?1, x'7b7d', 2, ?2, 'body:/id')",
                rusqlite::params![headers, key],
            )
            .unwrap();
        }
        conn.execute(
            "UPDATE deliveries SET status = 201, response_headers = ?1, response_body = x'6f6b',
                 response_body_size = 2, duration_ms = 12.5, completed_at_ms = 9 WHERE id = 1",
            [&headers],
        )
        .unwrap();
        conn.execute(
            "UPDATE deliveries SET error = 'connection refused', duration_ms = 3.0,
                 response_body_size = 0, completed_at_ms = 9 WHERE id = 2",
            [],
        )
        .unwrap();

        let store = opened(conn);
        let answered = store.get(1).unwrap().unwrap();
        let outcome = answered.outcome.unwrap();
        assert_eq!(outcome.status, Some(201));
        assert_eq!(
            outcome.response_headers,
            vec![Header::new("content-type", "text/plain")]
        );
        assert_eq!(outcome.response_body, b"ok");
        assert_eq!(outcome.duration_ms, Some(12.5));
        assert_eq!(answered.request.request_body, b"{}");
        let failed = store.get(2).unwrap().unwrap().outcome.unwrap();
        assert_eq!(
            (failed.status, failed.error.as_deref()),
            (None, Some("connection refused"))
        );
        // Left waiting by a recorder that kept no list of what waits.
        let pending = store.get(3).unwrap().unwrap().outcome.unwrap();
        assert_eq!(
            pending.error.as_deref(),
            Some(crate::store::recorder::recover::ORPHANED)
        );

        let page = store.list(&ListQuery::default()).unwrap();
        let statuses: Vec<_> = page.iter().map(|s| (s.id, s.status, s.duration_ms)).collect();
        assert_eq!(
            statuses,
            vec![(3, None, None), (2, None, Some(3.0)), (1, Some(201), Some(12.5))]
        );
        let columns: i64 = store
            .conn
            .query_row(
                "SELECT count(*) FROM pragma_table_info('deliveries') WHERE name = 'status'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(columns, 0, "answer columns are dropped from deliveries");
    }

    #[test]
    fn a_version_5_database_keeps_its_counts_and_new_github_deliveries_count_per_hook() {
        use crate::store::tests::delivery;
        use crate::store::{ListQuery, Store};
        use portpreview_shared::Header;

        let conn = history_at(5);
        for _ in 0..2 {
            conn.execute(
                "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                     request_body, request_body_size, provider, event_key, event_key_source)
                 VALUES (5, '', '', 'POST', '/gh', x'00', x'', 0, 'github', 'guid-1', 'header:X-GitHub-Delivery')",
                [],
            )
            .unwrap();
        }
        let store = opened(conn);
        let counts = |store: &Store| -> Vec<i64> {
            let mut page = store.list(&ListQuery::default()).unwrap();
            page.reverse();
            page.iter().map(|s| s.delivery_count).collect()
        };
        assert_eq!(counts(&store), [2, 2], "rows stored before keep their grouping");

        let from_hook = |hook: &str| {
            let mut d = delivery("guid-1", "/gh");
            d.provider = Some("github".into());
            d.request_headers.push(Header::new("x-github-hook-id", hook));
            d
        };
        for hook in ["111", "222", "111"] {
            store.insert_request(&from_hook(hook)).unwrap();
        }
        assert_eq!(
            counts(&store),
            [2, 2, 2, 1, 2],
            "the org hook's copy is no retry of the repository hook's"
        );
        assert_eq!(store.delivery_number(4).unwrap(), 1);
        assert_eq!(store.delivery_number(5).unwrap(), 2);
    }

    #[test]
    fn body_hash_keys_stored_unscoped_count_with_their_retries_after_the_upgrade() {
        use crate::store::tests::delivery;
        use rusqlite::params;

        // Keyed as every version has keyed a JSON body, so an earlier
        // tunnel still running writes the key this one works out.
        let body = br#"{"a":1}"#;
        let key = portpreview_shared::provider::event_key(&[], body, &[]).key;
        let conn = history_at(10);
        for path in ["/plain?attempt=1", "/other"] {
            conn.execute(
                "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                     request_body, request_body_size, event_key, event_key_source)
                 VALUES (5, '', '', 'POST', ?1, x'00', ?2, 7, ?3, 'sha256:body')",
                params![path, body, key],
            )
            .unwrap();
        }
        let store = opened(conn);
        // What a tunnel of the earlier version, still running, goes on writing.
        store
            .conn
            .execute(
                "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                     request_body, request_body_size, event_key, event_key_source)
                 VALUES (6, '', '', 'POST', '/plain', x'00', ?1, 7, ?2, 'sha256:body')",
                params![body, key],
            )
            .unwrap();
        assert_eq!(store.delivery_number(3).unwrap(), 2, "counted with the stored delivery");
        let mut retry = delivery(&key, "/plain?attempt=2");
        retry.provider = None;
        retry.event_key_source = "sha256:body".into();
        let id = store.insert_request(&retry).unwrap();
        assert_eq!(
            store.delivery_number(id).unwrap(),
            3,
            "a retry of the stored deliveries"
        );
        assert_eq!(
            store.delivery_number(2).unwrap(),
            1,
            "the same body sent elsewhere is its own event"
        );
    }

    #[test]
    fn version_12_puts_bodies_last_and_keeps_every_answer_run_and_count() {
        use crate::store::tests::delivery;
        use rusqlite::params;

        let conn = history_at(11);
        let headers =
            crate::store::header_blob::encode(&[portpreview_shared::Header::new("content-type", "text/plain")]);
        // Each larger than a page, as the bodies that made listings slow.
        let request_body = vec![b'q'; 20_000];
        let response_body = vec![b'a'; 30_000];
        for key in ["evt_1", "evt_1", "evt_2"] {
            conn.execute(
                "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                     request_body, request_body_size, provider, event_key, event_key_source)
                 VALUES (5, '', 'http://127.0.0.1:3000', 'POST', '/hook', ?1, ?2, 20000, 'stripe', ?3, 'body:/id')",
                params![headers, request_body, key],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO outcomes (delivery_id, status, response_headers, response_body, response_body_size,
                 duration_ms, completed_at_ms)
             VALUES (2, 500, ?1, ?2, 30000, 4.5, 9)",
            params![headers, response_body],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO replay_runs (delivery_id, started_at_ms, times, concurrency, idempotent, summary, report_json)
             VALUES (2, 10, 3, 1, 1, 'held', '{}')",
            [],
        )
        .unwrap();

        let store = opened(conn);
        let last_column = |table: &str| -> String {
            store
                .conn
                .query_row(
                    "SELECT name FROM pragma_table_info(?1) ORDER BY cid DESC LIMIT 1",
                    [table],
                    |r| r.get(0),
                )
                .unwrap()
        };
        assert_eq!(last_column("deliveries"), "request_body");
        assert_eq!(last_column("outcomes"), "response_body");

        let retried = store.get(2).unwrap().unwrap();
        assert_eq!(retried.request.request_body, request_body);
        assert_eq!(retried.request.request_headers[0].name, "content-type");
        assert_eq!(retried.delivery_count, 2);
        let outcome = retried.outcome.unwrap();
        assert_eq!((outcome.status, outcome.duration_ms), (Some(500), Some(4.5)));
        assert_eq!(outcome.response_body, response_body);
        assert_eq!(store.replay_runs(2).unwrap().len(), 1, "runs outlive the copy");
        assert_eq!(store.delivery_number(2).unwrap(), 2);

        // The triggers came along: counts go on, and a body hash is scoped.
        let id = store.insert_request(&delivery("evt_1", "/hook")).unwrap();
        assert_eq!(store.delivery_number(id).unwrap(), 3);
        store
            .conn
            .execute(
                "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                     request_body, request_body_size, event_key, event_key_source)
                 VALUES (6, '', '', 'PUT', '/a?b=1', x'00', x'', 0, 'hash-1', 'sha256:body')",
                [],
            )
            .unwrap();
        let scope: String = store
            .conn
            .query_row(
                "SELECT event_scope FROM deliveries WHERE event_key = 'hash-1'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(scope, "PUT /a");

        // Foreign keys are on again, and still cascade.
        let keys: bool = store.conn.query_row("PRAGMA foreign_keys", [], |r| r.get(0)).unwrap();
        assert!(keys);
        store.conn.execute("DELETE FROM deliveries WHERE id = 2", []).unwrap();
        let left: i64 = store
            .conn
            .query_row(
                "SELECT (SELECT count(*) FROM outcomes WHERE delivery_id = 2)
                     + (SELECT count(*) FROM replay_runs WHERE delivery_id = 2)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(left, 0);
    }

    #[test]
    fn deliveries_stored_before_event_types_get_theirs() {
        use portpreview_shared::Header;
        use rusqlite::params;

        let conn = history_at(15);
        let github = crate::store::header_blob::encode(&[Header::new("X-GitHub-Event", "pull_request")]);
        let none = crate::store::header_blob::encode(&[]);
        let rows: [(&[u8], &str, Option<&str>); 4] = [
            (&none, r#"{"id":"evt_1","type":"invoice.paid"}"#, Some("stripe")),
            (&github, r#"{"action":"opened"}"#, Some("github")),
            (&none, "plain text", None),
            // A row whose headers do not read, in a damaged history.
            (b"\xff\xff", r#"{"type":"invoice.paid"}"#, Some("stripe")),
        ];
        for (headers, body, provider) in rows {
            conn.execute(
                "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                     request_body, request_body_size, provider, event_key, event_key_source)
                 VALUES (5, '', '', 'POST', '/hook', ?1, ?2, ?3, ?4, '', 'none')",
                params![headers, body.as_bytes(), body.len(), provider],
            )
            .unwrap();
        }
        let store = opened(conn);
        let types: Vec<Option<String>> = (1..=3)
            .map(|id| store.get(id).unwrap().unwrap().request.event_type)
            .collect();
        assert_eq!(
            types,
            [Some("invoice.paid".into()), Some("pull_request.opened".into()), None]
        );
        let kept: i64 = store
            .conn
            .query_row("SELECT count(*) FROM event_types", [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            kept, 2,
            "only deliveries that name a type hold a row, and a damaged one none"
        );
    }

    #[test]
    fn content_keys_made_by_earlier_rules_are_made_again_and_counted_on() {
        use crate::store::NewDelivery;
        use portpreview_shared::provider::event_key;
        use rusqlite::params;

        let conn = history_at(12);
        let no_headers = crate::store::header_blob::encode(&[]);
        // Two deliveries of a text body keyed by an earlier rule, one keyed
        // by its provider's ID, and a body stored cut short.
        let rows = [
            (
                "hello plain text",
                16,
                None,
                "old-rule-hash",
                "sha256:body",
                "POST /plain",
            ),
            (
                "hello plain text",
                16,
                None,
                "old-rule-hash",
                "sha256:body",
                "POST /plain",
            ),
            (r#"{"id":"evt_1"}"#, 14, Some("stripe"), "evt_1", "body:/id", ""),
            ("hello", 100, None, "cut-hash", "sha256:body", "POST /plain"),
        ];
        for (body, size, provider, key, source, scope) in rows {
            conn.execute(
                "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                     request_body, request_body_size, provider, event_key, event_key_source, event_scope)
                 VALUES (5, '', '', 'POST', '/plain', ?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![no_headers, body.as_bytes(), size, provider, key, source, scope],
            )
            .unwrap();
        }

        // A row whose path is no text, in a damaged history.
        conn.execute(
            "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                 request_body, request_body_size, event_key, event_key_source, event_scope)
             VALUES (5, '', '', 'POST', x'2fff', x'00', x'6869', 2, 'damaged-hash', 'sha256:body', 'POST /plain')",
            [],
        )
        .unwrap();

        let store = opened(conn);
        let now = event_key(&[], b"hello plain text", &[]);
        assert_ne!(now.key, "old-rule-hash");
        let keys: Vec<(String, String)> = store
            .conn
            .prepare("SELECT event_key, event_scope FROM deliveries ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let plain = || (now.key.clone(), "POST /plain".to_owned());
        assert_eq!(
            keys,
            [
                plain(),
                plain(),
                ("evt_1".into(), "stripe:".into()),
                ("cut-hash".into(), "POST /plain".into()),
                ("damaged-hash".into(), "POST /plain".into())
            ],
            "a provider's ID, a body cut short and a damaged row keep their keys"
        );
        let counts: Vec<(String, i64)> = store
            .conn
            .prepare("SELECT event_key, n FROM event_counts ORDER BY event_key")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut expected = vec![
            (now.key.clone(), 2),
            ("cut-hash".into(), 1),
            ("damaged-hash".into(), 1),
            ("evt_1".into(), 1),
        ];
        expected.sort();
        assert_eq!(counts, expected, "the counts moved with the keys");

        // The retry that comes after the upgrade is the third delivery.
        let retry = NewDelivery {
            method: "POST".into(),
            path: "/plain".into(),
            request_body: b"hello plain text".to_vec(),
            event_key: now.key.clone(),
            event_key_source: now.source.clone(),
            ..NewDelivery::default()
        };
        let id = store.insert_request(&retry).unwrap();
        assert_eq!(store.delivery_number(id).unwrap(), 3);
    }

    #[test]
    fn a_version_14_history_counts_each_providers_ids_apart() {
        use crate::store::tests::delivery;
        use portpreview_shared::Header;

        let conn = history_at(14);
        let stored = [
            ("stripe", "evt_1", "body:/id", ""),
            ("stripe", "evt_1", "body:/id", ""),
            ("paddle", "evt_1", "body:/event_id", ""),
            ("github", "guid-1", "header:X-GitHub-Delivery", "111"),
        ];
        for (provider, key, source, scope) in stored {
            conn.execute(
                "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                     request_body, request_body_size, provider, event_key, event_key_source, event_scope)
                 VALUES (5, '', '', 'POST', '/hook', x'00', x'', 0, ?1, ?2, ?3, ?4)",
                rusqlite::params![provider, key, source, scope],
            )
            .unwrap();
        }
        let store = opened(conn);
        let numbers = |store: &crate::store::Store| -> Vec<i64> {
            let last: i64 = store
                .conn
                .query_row("SELECT max(id) FROM deliveries", [], |r| r.get(0))
                .unwrap();
            (1..=last).map(|id| store.delivery_number(id).unwrap()).collect()
        };
        assert_eq!(
            numbers(&store),
            [1, 2, 1, 1],
            "Paddle's evt_1 is no third Stripe delivery"
        );
        assert_eq!(store.events_with_key("evt_1").unwrap(), 2, "replay evt_1 is ambiguous");

        // A tunnel of an earlier version, still running, inserts unscoped,
        // and reads its count back under the scope it gave.
        store
            .conn
            .execute(
                "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                     request_body, request_body_size, provider, event_key, event_key_source)
                 VALUES (6, '', '', 'POST', '/hook', x'00', x'', 0, 'paddle', 'evt_1', 'body:/event_id')",
                [],
            )
            .unwrap();
        let read_back: i64 = store
            .conn
            .query_row(
                "SELECT n FROM event_counts WHERE event_key = 'evt_1' AND event_scope = ''",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(read_back, 2, "the earlier tunnel's own count: Paddle's 2nd");
        // This version scopes what it inserts itself, to the same effect.
        let mut retry = delivery("guid-1", "/hook");
        retry.provider = Some("github".into());
        retry.event_key_source = "header:X-GitHub-Delivery".into();
        retry.request_headers.push(Header::new("x-github-hook-id", "111"));
        store.insert_request(&retry).unwrap();
        assert_eq!(numbers(&store), [1, 2, 1, 1, 2, 2]);
        // An earlier version's content key too, moved by the older trigger.
        store
            .conn
            .execute(
                "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                     request_body, request_body_size, event_key, event_key_source)
                 VALUES (7, '', '', 'POST', '/plain', x'00', x'', 0, 'hash-1', 'sha256:body')",
                [],
            )
            .unwrap();
        let counts: Vec<(String, String, i64)> = store
            .conn
            .prepare(
                "SELECT event_key, event_scope, n FROM event_counts
                 WHERE event_scope != '' ORDER BY event_key, event_scope",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let counted = |key: &str, scope: &str, n| (key.to_owned(), scope.to_owned(), n);
        assert_eq!(
            counts,
            [
                counted("evt_1", "paddle:", 2),
                counted("evt_1", "stripe:", 2),
                counted("guid-1", "github:111", 2),
                counted("hash-1", "POST /plain", 1),
            ],
            "each counted once, where it was moved to (beside the copies an earlier tunnel reads)"
        );
    }

    #[test]
    fn requests_a_recorder_before_version_7_left_unanswered_get_an_outcome() {
        use crate::store::recorder::recover::ORPHANED;

        let conn = history_at(5);
        for key in ["evt_answered", "evt_lost"] {
            conn.execute(
                "INSERT INTO deliveries (received_at_ms, tunnel_url, target, method, path, request_headers,
                     request_body, request_body_size, provider, event_key, event_key_source)
                 VALUES (5, '', '', 'POST', '/hook', x'00', x'', 0, 'stripe', ?1, 'body:/id')",
                [key],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO outcomes (delivery_id, status, response_body_size, duration_ms, completed_at_ms)
             VALUES (1, 200, 0, 3.0, 9)",
            [],
        )
        .unwrap();

        let store = opened(conn);
        let answered = store.get(1).unwrap().unwrap().outcome.unwrap();
        assert_eq!((answered.status, answered.error), (Some(200), None));
        let lost = store.get(2).unwrap().unwrap().outcome.unwrap();
        assert_eq!((lost.status, lost.error.as_deref()), (None, Some(ORPHANED)));
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
