//! Event keys hashed from content, worked out again by this version's rules.
//!
//! A key hashed from a body changes whenever the way it is hashed does: the
//! sender's name came into the hash of a body that is not JSON, a key over
//! chosen fields got a mark of its own, numbers past 64 bits came to be
//! hashed as written. Left as they were, the keys in a history written
//! before would never match a retry recorded after the upgrade, which
//! would count as a new event. A migration that follows such a change has
//! them made again (see `schema::REKEYED_AT`).

use portpreview_shared::provider::{event_key_again, Provider};
use rusqlite::{params, Connection, Row};

use super::{header_blob, NewDelivery};

/// Makes every content-hashed key and its scope again from the request
/// stored, in the caller's transaction; returns how many changed. The
/// event counts follow through their trigger.
pub(super) fn content_keys(conn: &Connection) -> rusqlite::Result<u64> {
    let mut read = conn.prepare(
        "SELECT d.id, d.provider, d.method, d.path, d.event_key, d.event_key_source, d.event_scope,
            d.request_headers, coalesce(b.data, d.request_body), d.request_body_size
         FROM deliveries d LEFT JOIN bodies b ON b.id = d.request_body_id
         WHERE d.event_key_source LIKE 'sha256:%'",
    )?;
    // Written after the walk, not during it: rows changed under a scan of
    // their own table may come round again.
    let mut changed = Vec::new();
    let mut rows = read.query([])?;
    while let Some(row) = rows.next()? {
        // A row that does not read as a delivery (a damaged history) is
        // left as it is, to be told of where it is read: it must not stop
        // the upgrade of every other.
        if let Ok(Some(again)) = made_again(row) {
            changed.push(again);
        }
    }
    let mut write =
        conn.prepare("UPDATE deliveries SET event_key = ?2, event_key_source = ?3, event_scope = ?4 WHERE id = ?1")?;
    for (id, key, source, scope) in &changed {
        write.execute(params![id, key, source, scope])?;
    }
    Ok(changed.len() as u64)
}

/// The row's (id, key, key source, scope) made again, when they differ
/// from those stored and its body was stored whole: a body cut short was
/// hashed whole, and what is left would hash to another.
fn made_again(row: &Row<'_>) -> rusqlite::Result<Option<(i64, String, String, String)>> {
    let body: Vec<u8> = row.get(8)?;
    let size: i64 = row.get(9)?;
    if i64::try_from(body.len()).unwrap_or(i64::MAX) < size {
        return Ok(None);
    }
    let Ok(request_headers) = header_blob::decode(&row.get::<_, Vec<u8>>(7)?) else {
        return Ok(None);
    };
    let (key, source, scope): (String, String, String) = (row.get(4)?, row.get(5)?, row.get(6)?);
    let provider: Option<String> = row.get(1)?;
    let again = event_key_again(
        provider.as_deref().and_then(Provider::from_name),
        &request_headers,
        &body,
        &source,
    );
    let request = NewDelivery {
        method: row.get(2)?,
        path: row.get(3)?,
        provider,
        request_headers,
        event_key_source: again.source.clone(),
        ..NewDelivery::default()
    };
    let again_scope = request.event_scope();
    if (&again.key, &again.source, &again_scope) == (&key, &source, &scope) {
        return Ok(None);
    }
    Ok(Some((row.get(0)?, again.key, again.source, again_scope)))
}
