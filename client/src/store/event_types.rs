//! Event types for the deliveries a history stored before it kept them:
//! worked out once, as the migration that added them runs, from each
//! request as it was stored.

use portpreview_shared::provider::{event_type, Provider};
use rusqlite::{params, Connection, Row};

use super::header_blob;

/// Gives every delivery stored without an event type the one its request
/// names, in the caller's transaction; returns how many got one.
pub(super) fn fill(conn: &Connection) -> rusqlite::Result<u64> {
    let mut read = conn.prepare(
        "SELECT d.id, d.provider, d.request_headers, coalesce(b.data, d.request_body), d.request_body_size
         FROM deliveries d LEFT JOIN bodies b ON b.id = d.request_body_id
         WHERE NOT EXISTS (SELECT 1 FROM event_types t WHERE t.delivery_id = d.id)",
    )?;
    let mut write = conn.prepare("INSERT INTO event_types (delivery_id, event_type) VALUES (?1, ?2)")?;
    let mut typed = 0;
    let mut rows = read.query([])?;
    while let Some(row) = rows.next()? {
        // A row that does not read as a delivery (a damaged history) is
        // left as it is, to be told of where it is read: it must not stop
        // the upgrade of every other.
        if let Ok(Some((id, kind))) = type_of(row) {
            write.execute(params![id, kind])?;
            typed += 1;
        }
    }
    Ok(typed)
}

/// The row's id and the event type its request names, if it names one.
fn type_of(row: &Row<'_>) -> rusqlite::Result<Option<(i64, String)>> {
    let id: i64 = row.get(0)?;
    let provider: Option<String> = row.get(1)?;
    let Ok(headers) = header_blob::decode(&row.get::<_, Vec<u8>>(2)?) else {
        return Ok(None);
    };
    let body: Vec<u8> = row.get(3)?;
    let whole = i64::try_from(body.len()).unwrap_or(i64::MAX) >= row.get::<_, i64>(4)?;
    let provider = provider.as_deref().and_then(Provider::from_name);
    // The body is untrusted: a panic reading it leaves that one row untyped.
    let found = std::panic::catch_unwind(|| event_type(provider, &headers, &body, whole)).unwrap_or_default();
    Ok(found.map(|kind| (id, kind)))
}
