//! The inbox written, cut short, compacted and read back.

use super::record::{Entry, FILLER_SPAN};
use super::*;
use crate::store::tests::{delivery, ScratchDir};

/// How `orphan`'s recorder made event keys, and every request it left.
fn read_all(orphan: &Orphan) -> (Vec<String>, Vec<(u64, NewDelivery)>) {
    let mut requests = orphan.requests().unwrap();
    let read = requests.by_ref().collect::<std::io::Result<Vec<_>>>().unwrap();
    (requests.key_fields().to_vec(), read)
}

/// Each request's sequence number and event key.
fn keys(requests: &[(u64, NewDelivery)]) -> Vec<(u64, &str)> {
    requests.iter().map(|(seq, d)| (*seq, d.event_key.as_str())).collect()
}

#[test]
fn a_dead_recorders_requests_are_read_back_and_a_live_one_is_left_alone() {
    let dir = ScratchDir::new("inbox-orphans");
    let db = dir.0.join("history.db");
    let mut live = Inbox::create(&db, &[]).unwrap();
    live.append(&mut delivery("evt_live", "/")).unwrap();
    {
        let mut dead = Inbox::create(&db, &["/id".to_string()]).unwrap();
        dead.append(&mut delivery("evt_1", "/a")).unwrap();
        dead.append(&mut delivery("evt_2", "/b")).unwrap();
        // Dropped without discard: its lock goes, its file stays.
    }
    let mut orphans = orphans(&db);
    assert_eq!(orphans.len(), 1, "only the unlocked inbox is an orphan");
    let (key_fields, requests) = read_all(&orphans[0]);
    assert_eq!(key_fields, ["/id"]);
    assert_eq!(keys(&requests), [(1, "evt_1"), (2, "evt_2")]);
    orphans.pop().unwrap().remove().unwrap();
    assert!(super::orphans(&db).is_empty());
    live.discard();
}

#[test]
fn a_lock_taken_on_a_file_its_name_no_longer_names_is_no_orphan() {
    let dir = ScratchDir::new("inbox-stale-lock");
    let path = dir.0.join("history.db-inbox-0");
    std::fs::write(&path, b"moved in and deleted by another recovery").unwrap();
    let opened_first = std::fs::File::open(&path).unwrap();
    assert!(orphan::still_named(&opened_first, &path));
    // Another recovery moved it in and deleted it; or its recorder put a
    // compacted file in its place.
    std::fs::remove_file(&path).unwrap();
    assert!(!orphan::still_named(&opened_first, &path));
    std::fs::write(dir.0.join("compacted"), b"").unwrap();
    std::fs::rename(dir.0.join("compacted"), &path).unwrap();
    assert!(!orphan::still_named(&opened_first, &path));
}

#[test]
fn requests_a_failed_write_dropped_are_reported_by_the_next_flush() {
    let dir = ScratchDir::new("inbox-dropped");
    let db = dir.0.join("history.db");
    let mut inbox = Inbox::create(&db, &[]).unwrap();
    inbox.append(&mut delivery("evt_staged", "/")).unwrap();
    // The disk refuses the next write, a large body's first part, which
    // carries the staged request with it.
    let writable = std::mem::replace(&mut inbox.file, File::open(&inbox.path).unwrap());
    let mut large = delivery("evt_large", "/");
    large.request_body = vec![b'x'; BODY_PART];
    assert!(
        inbox.append(&mut large).is_err(),
        "the large request hears of it at once"
    );
    inbox.file = writable;
    assert!(
        inbox.flush().is_err(),
        "the staged request is not in the file: its caller must not hear back as if it were"
    );
    inbox.flush().unwrap();
    assert_eq!(
        inbox.unwritten_after(0),
        1,
        "request 1 is in no file: a stop before SQLite has it loses it"
    );
    let next = inbox.append(&mut delivery("evt_next", "/")).unwrap();
    assert_eq!(next, 2);
    inbox.flush().unwrap();
    assert_eq!(inbox.unwritten_after(0), 1, "request 2 is written");
    assert_eq!(
        inbox.unwritten_after(1),
        0,
        "once SQLite has request 1, nothing is lost"
    );
    inbox.compact(1, RESTART_AT).unwrap();
    assert_eq!(inbox.unwritten_after(0), 0, "forgotten once stored");
    inbox.discard();
}

/// A request whose body went ahead in parts is counted lost when its own
/// record, staged after the parts, goes with a failed write.
#[test]
fn a_large_request_whose_record_a_failed_write_dropped_is_counted() {
    let dir = ScratchDir::new("inbox-parted-dropped");
    let db = dir.0.join("history.db");
    let mut inbox = Inbox::create(&db, &[]).unwrap();
    let body = inbox.begin_body().unwrap();
    inbox.append_body_part(body, &vec![b'x'; BODY_PART]).unwrap();
    let mut big = delivery("evt_big", "/");
    assert_eq!(inbox.append_parted(body, &mut big).unwrap(), 1);
    // The disk refuses the next write, which carries the staged record.
    let writable = std::mem::replace(&mut inbox.file, File::open(&inbox.path).unwrap());
    let next = inbox.begin_body().unwrap();
    assert!(inbox.append_body_part(next, b"part").is_err());
    inbox.file = writable;
    assert!(inbox.flush().is_err());
    assert_eq!(
        inbox.unwritten_after(0),
        1,
        "its parts are in the file, its record is not"
    );
    inbox.discard();
}

#[test]
fn a_request_whose_write_failed_gives_its_number_back() {
    let dir = ScratchDir::new("inbox-number-back");
    let db = dir.0.join("history.db");
    let mut inbox = Inbox::create(&db, &[]).unwrap();
    let big = |key: &str| {
        let mut d = delivery(key, "/");
        d.request_body = vec![b'x'; STAGE_LIMIT / 2 + 1];
        d
    };
    assert_eq!(inbox.append(&mut big("evt_1")).unwrap(), 1);
    // The second fills the stage, and its write fails.
    let writable = std::mem::replace(&mut inbox.file, File::open(&inbox.path).unwrap());
    assert!(inbox.append(&mut big("evt_2")).is_err());
    inbox.file = writable;
    assert!(inbox.flush().is_err(), "request 1 went with the failed write");
    assert!(
        inbox.all_applied(1),
        "with request 1 stored, nothing is left for the inbox to keep"
    );
    assert_eq!(inbox.append(&mut delivery("evt_3", "/")).unwrap(), 2);
    inbox.flush().unwrap();
    assert_eq!(
        inbox.unwritten_after(0),
        1,
        "request 1 was handed on and dropped; request 2's number, given back, is no loss"
    );
    inbox.discard();
}

#[test]
fn a_failed_write_of_a_request_alone_is_told_to_it_only() {
    let dir = ScratchDir::new("inbox-failed-alone");
    let db = dir.0.join("history.db");
    let mut inbox = Inbox::create(&db, &[]).unwrap();
    let writable = std::mem::replace(&mut inbox.file, File::open(&inbox.path).unwrap());
    let mut large = delivery("evt_large", "/");
    large.request_body = vec![b'x'; BODY_PART];
    assert!(inbox.append(&mut large).is_err());
    inbox.file = writable;
    inbox.flush().unwrap();
    assert_eq!(inbox.unwritten_after(0), 0, "the failed request was never handed on");
    inbox.discard();
}

#[test]
fn a_body_parts_head_and_bytes_read_back_as_the_part() {
    for (body, len) in [(0, 0), (3, 1), (200, BODY_PART), (u64::MAX, 70_000)] {
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut record = Vec::new();
        let entry = EntryRef::BodyPart {
            body,
            len: PartLen(len as u64),
        };
        encode_head(&mut record, 0, &entry, len).unwrap();
        record.extend_from_slice(&bytes);
        let declared = u32::from_le_bytes(record[..4].try_into().unwrap()) as usize;
        assert_eq!(
            declared,
            record.len() - 4,
            "body {body}, {len} bytes: the length covers the bytes"
        );
        match postcard::from_bytes::<(u64, Entry)>(&record[4..]).unwrap() {
            (0, Entry::BodyPart { body: read, bytes: got }) => {
                assert_eq!(read, body);
                assert!(got == bytes, "body {body}, {len} bytes read back");
            }
            other => panic!("read back as {other:?}"),
        }
    }
}

#[test]
fn staged_and_large_records_read_back_whole_and_in_order() {
    let dir = ScratchDir::new("inbox-large");
    let db = dir.0.join("history.db");
    let mut big = delivery("evt_big", "/big");
    big.request_body = (0..BODY_PART * 4).map(|i| (i % 251) as u8).collect();
    {
        let mut inbox = Inbox::create(&db, &[]).unwrap();
        inbox.append(&mut delivery("evt_1", "/a")).unwrap();
        assert_eq!(inbox.append(&mut big).unwrap(), 2);
        inbox.append(&mut delivery("evt_3", "/c")).unwrap();
        // Dropped without discard, as by a recorder that died.
    }
    let (_, requests) = read_all(&orphans(&db).pop().unwrap());
    assert_eq!(keys(&requests), [(1, "evt_1"), (2, "evt_big"), (3, "evt_3")]);
    assert!(
        requests[1].1.request_body == big.request_body,
        "the large body is intact"
    );
}

#[test]
fn requests_appended_between_a_large_bodys_parts_read_back_and_an_abandoned_body_is_skipped() {
    let dir = ScratchDir::new("inbox-parts");
    let db = dir.0.join("history.db");
    let mut big = delivery("evt_big", "/big");
    big.request_body = (0..BODY_PART * 2 + 7).map(|i| (i % 251) as u8).collect();
    {
        let mut inbox = Inbox::create(&db, &[]).unwrap();
        let body = inbox.begin_body().unwrap();
        let lost = inbox.begin_body().unwrap();
        let mut parts = big.request_body.chunks(BODY_PART);
        inbox.append_body_part(body, parts.next().unwrap()).unwrap();
        inbox.append_body_part(lost, b"never followed by its request").unwrap();
        assert_eq!(inbox.append(&mut delivery("evt_small", "/a")).unwrap(), 1);
        inbox.abandon_body(lost);
        for part in parts {
            inbox.append_body_part(body, part).unwrap();
        }
        let body_before = big.request_body.clone();
        assert_eq!(inbox.append_parted(body, &mut big).unwrap(), 2);
        assert!(big.request_body == body_before, "the delivery is left as it was");
        // Dropped without discard, as by a recorder that died.
    }
    let (_, requests) = read_all(&orphans(&db).pop().unwrap());
    assert_eq!(keys(&requests), [(1, "evt_small"), (2, "evt_big")]);
    assert!(
        requests[0].1.request_body.len() < 100,
        "a small request keeps its own body"
    );
    assert!(
        requests[1].1.request_body == big.request_body,
        "the large body is put back together from its parts"
    );
}

#[test]
fn a_large_body_still_being_written_survives_compaction_until_abandoned() {
    let dir = ScratchDir::new("inbox-parts-compact");
    let db = dir.0.join("history.db");
    let mut inbox = Inbox::create(&db, &[]).unwrap();
    let body = inbox.begin_body().unwrap();
    let part = vec![b'x'; BODY_PART];
    for _ in 0..(RESTART_AT as usize / BODY_PART + 1) {
        inbox.append_body_part(body, &part).unwrap();
    }
    let seq = inbox.append(&mut delivery("evt_small", "/a")).unwrap();
    inbox.compact(seq, RESTART_AT).unwrap();
    assert!(inbox.len > RESTART_AT, "the parts of a body in progress are kept");
    inbox.abandon_body(body);
    inbox.compact(seq, RESTART_AT).unwrap();
    assert!(
        inbox.len < 1024,
        "abandoned parts are dropped: {} bytes left",
        inbox.len
    );
    inbox.discard();
}

#[test]
fn a_record_cut_short_ends_the_inbox_without_an_error() {
    let dir = ScratchDir::new("inbox-torn");
    let db = dir.0.join("history.db");
    let path = {
        let mut inbox = Inbox::create(&db, &[]).unwrap();
        inbox.append(&mut delivery("evt_whole", "/")).unwrap();
        inbox.path.clone()
    };
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(&[200, 0, 0, 0, 1, 2, 3]).unwrap();
    let (_, requests) = read_all(&orphans(&db).pop().unwrap());
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].1.event_key, "evt_whole");
}

#[test]
fn an_inbox_starts_over_only_when_all_of_it_is_applied() {
    let dir = ScratchDir::new("inbox-restart");
    let db = dir.0.join("history.db");
    let mut inbox = Inbox::create(&db, &[]).unwrap();
    let mut big = delivery("evt_big", "/");
    big.request_body = vec![b'x'; RESTART_AT as usize];
    let seq = inbox.append(&mut big).unwrap();
    inbox.compact(seq - 1, RESTART_AT).unwrap();
    assert!(inbox.len > RESTART_AT, "a request not yet applied keeps the file");
    let replaced = inbox.compact(seq, RESTART_AT).unwrap();
    assert!(
        replaced.is_some(),
        "the old file is handed back, to be closed elsewhere"
    );
    assert!(inbox.len < 1024, "applied requests are dropped");
    assert_eq!(inbox.append(&mut big).unwrap(), seq + 1, "sequence numbers go on");
    inbox.discard();
    assert!(!inbox.path.exists());
}

#[test]
fn under_steady_load_the_inbox_keeps_only_what_sqlite_lacks() {
    let dir = ScratchDir::new("inbox-compact");
    let db = dir.0.join("history.db");
    let mut inbox = Inbox::create(&db, &["/id".to_string()]).unwrap();
    let mut big = delivery("evt_big", "/big");
    big.request_body = (0..BODY_PART).map(|i| (i % 251) as u8).collect();
    let mut largest = 0;
    let mut applied = 0;
    // A small request staged, then a large one written directly; the
    // writer is always one step behind, as it is under load.
    for n in 0..60 {
        inbox.append(&mut delivery(&format!("evt_{n}"), "/small")).unwrap();
        let newest = inbox.append(&mut big).unwrap();
        applied = newest - 2;
        inbox.compact(applied, RESTART_AT).unwrap();
        largest = largest.max(allocated(&inbox.path));
    }
    assert!(
        largest < 2 * RESTART_AT,
        "the file's blocks stay bounded though a request is always in flight: {largest} bytes"
    );
    let newest = inbox.next_seq - 1;
    let path = inbox.path.clone();
    drop(inbox);
    let (key_fields, requests) = read_all(&orphans(&db).pop().unwrap());
    assert_eq!(key_fields, ["/id"], "a compacted inbox still opens with its key fields");
    let seqs: Vec<u64> = requests.iter().map(|(seq, _)| *seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "whole records, in order: {seqs:?}"
    );
    assert!(seqs[0] <= applied + 1 && seqs.last() == Some(&newest), "{seqs:?}");
    let (_, last) = requests.last().unwrap();
    assert!(last.request_body == big.request_body, "the large body is intact");
    assert!(!path
        .with_file_name(format!(".{}.new", path.file_name().unwrap().to_string_lossy()))
        .exists());
}

#[test]
fn a_live_recorders_newest_request_is_read_from_record_heads_alone() {
    let dir = ScratchDir::new("inbox-live");
    let db = dir.0.join("history.db");
    let mut live = Inbox::create(&db, &[]).unwrap();
    assert_eq!(appended_by_live_recorders(&db), [], "nothing appended yet");
    live.append(&mut delivery("evt_1", "/a")).unwrap();
    // A large body goes ahead of its request: its parts are no request.
    let body = live.begin_body().unwrap();
    live.append_body_part(body, &vec![7u8; BODY_PART]).unwrap();
    live.flush().unwrap();
    let name = live.name().to_owned();
    assert_eq!(
        appended_by_live_recorders(&db),
        [Appended {
            name: name.clone(),
            newest: 1
        }]
    );
    let mut parted = delivery("evt_2", "/b");
    let seq = live.append_parted(body, &mut parted).unwrap();
    live.append(&mut delivery("evt_3", "/c")).unwrap();
    live.flush().unwrap();
    assert_eq!(seq, 2);
    assert_eq!(appended_by_live_recorders(&db), [Appended { name, newest: 3 }]);
    {
        let mut dead = Inbox::create(&db, &[]).unwrap();
        dead.append(&mut delivery("evt_4", "/d")).unwrap();
    }
    assert_eq!(
        appended_by_live_recorders(&db).len(),
        1,
        "a dead recorder's inbox is not waited for"
    );
    live.discard();
}

#[test]
fn a_request_recorded_before_host_preserved_existed_reads_as_not_preserved() {
    let mut preserved = delivery("evt_old", "/old");
    preserved.host_preserved = true;
    for entry in [
        EntryRef::Request(&preserved),
        EntryRef::PartedRequest {
            body: 7,
            request: &preserved,
        },
    ] {
        let mut record = Vec::new();
        encode_record(&mut record, 5, &entry).unwrap();
        let mut body = record[4..].to_vec();
        assert_eq!(body.pop(), Some(1), "the flag is the last byte written");
        match super::record::decode(&mut body) {
            Some((5, Entry::Request(d) | Entry::PartedRequest { request: d, .. })) => {
                assert_eq!((d.event_key.as_str(), d.host_preserved), ("evt_old", false));
            }
            other => panic!("read back as {other:?}"),
        }
    }
    assert!(
        super::record::decode(&mut vec![0xff; 12]).is_none(),
        "garbage stays unread"
    );
}

/// A request whose payload a reader of the raw file can look for.
fn secret_request(key: &str, len: usize) -> NewDelivery {
    let mut d = delivery(key, "/upload");
    d.request_body = b"tok_SECRET".iter().copied().cycle().take(len).collect();
    d
}

/// Bytes of the file the system holds for it.
fn allocated(path: &Path) -> u64 {
    std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(path).unwrap()) * 512
}

fn holds_secret(bytes: &[u8]) -> bool {
    bytes.windows(10).any(|w| w == b"tok_SECRET")
}

/// Appends large and small requests until the file holds `bytes` more;
/// returns the newest sequence number.
fn fill_with_secrets(inbox: &mut Inbox, bytes: u64) -> u64 {
    let until = inbox.len + bytes;
    let mut newest = 0;
    while inbox.len < until {
        inbox.append(&mut secret_request("evt_large", BODY_PART * 4)).unwrap();
        newest = inbox.append(&mut secret_request("evt_small", 2000)).unwrap();
        inbox.flush().unwrap();
    }
    newest
}

#[test]
fn stored_requests_are_punched_out_while_the_pending_ones_stay_where_they_are() {
    let dir = ScratchDir::new("inbox-punch");
    let db = dir.0.join("history.db");
    let mut inbox = Inbox::create(&db, &["/id".to_string()]).unwrap();
    let stored = fill_with_secrets(&mut inbox, RESTART_AT);
    let pending_large = inbox
        .append(&mut secret_request("evt_pending", BODY_PART * 3 + 5))
        .unwrap();
    let pending_small = inbox.append(&mut delivery("evt_last", "/")).unwrap();
    inbox.flush().unwrap();
    let (len, before) = (inbox.len, allocated(&inbox.path));

    match inbox.compact(stored, RESTART_AT).unwrap() {
        Some(Compacted::Punched) => {}
        other => panic!("expected a punch, got {other:?}"),
    }
    assert_eq!(inbox.len, len, "nothing moves: the file keeps its size");
    let after = allocated(&inbox.path);
    assert!(
        after + RESTART_AT <= before,
        "the stored requests' blocks are freed: {before} bytes held before, {after} after"
    );
    let raw = std::fs::read(&inbox.path).unwrap();
    assert!(
        !holds_secret(&raw[..inbox.hole_end as usize]),
        "their payloads are gone"
    );
    assert!(
        holds_secret(&raw[inbox.hole_end as usize..]),
        "the pending ones' are not"
    );
    assert_eq!(
        inbox.compact(stored, RESTART_AT).unwrap().map(|_| ()),
        None,
        "nothing more to drop"
    );

    drop(inbox);
    let (key_fields, requests) = read_all(&orphans(&db).pop().unwrap());
    assert_eq!(key_fields, ["/id"]);
    assert_eq!(
        keys(&requests),
        [(pending_large, "evt_pending"), (pending_small, "evt_last")],
        "exactly the requests SQLite lacks"
    );
    assert!(requests[0].1.request_body == secret_request("", BODY_PART * 3 + 5).request_body);
}

/// Under load the request still missing is often only staged when the
/// stored ones are punched out: the fillers reach the file's end, and
/// punching goes on working for the next time.
#[test]
fn stored_requests_are_punched_out_up_to_a_request_still_only_staged() {
    let dir = ScratchDir::new("inbox-punch-staged");
    let db = dir.0.join("history.db");
    let mut inbox = Inbox::create(&db, &[]).unwrap();
    let mut staged = 0;
    for round in 0..2 {
        let stored = fill_with_secrets(&mut inbox, RESTART_AT);
        staged = inbox.append(&mut delivery("evt_staged", "/")).unwrap();
        let before = allocated(&inbox.path);
        match inbox.compact(stored, RESTART_AT).unwrap() {
            Some(Compacted::Punched) => {}
            other => panic!("round {round}: expected a punch, got {other:?}"),
        }
        assert!(inbox.punch.is_some(), "round {round}: punching still works");
        assert!(allocated(&inbox.path) + RESTART_AT / 2 <= before, "round {round}");
        inbox.flush().unwrap();
    }
    let last = inbox.append(&mut delivery("evt_last", "/")).unwrap();
    inbox.flush().unwrap();
    drop(inbox);
    // The first round's staged request was stored by the second's.
    let (_, requests) = read_all(&orphans(&db).pop().unwrap());
    assert_eq!(keys(&requests), [(staged, "evt_staged"), (last, "evt_last")]);
}

/// A stored upload longer than one filler spans starts no request within
/// its reach: the fillers end where its parts' records start instead, and
/// nothing is copied.
#[test]
fn a_stored_upload_longer_than_a_filler_is_punched_out_part_by_part() {
    let dir = ScratchDir::new("inbox-punch-large");
    let db = dir.0.join("history.db");
    let mut inbox = Inbox::create(&db, &[]).unwrap();
    let large = FILLER_SPAN as usize + 4 * BODY_PART;
    let stored = inbox.append(&mut secret_request("evt_large", large)).unwrap();
    let pending = inbox.append(&mut delivery("evt_pending", "/")).unwrap();
    inbox.flush().unwrap();
    let (len, before) = (inbox.len, allocated(&inbox.path));

    match inbox.compact(stored, RESTART_AT).unwrap() {
        Some(Compacted::Punched) => {}
        other => panic!("expected a punch, got {other:?}"),
    }
    assert_eq!(inbox.len, len, "nothing moves");
    let after = allocated(&inbox.path);
    assert!(
        after + large as u64 - 2 * BODY_PART as u64 <= before,
        "the upload's blocks are freed: {before} bytes held before, {after} after"
    );
    drop(inbox);
    let (_, requests) = read_all(&orphans(&db).pop().unwrap());
    assert_eq!(keys(&requests), [(pending, "evt_pending")]);
}

#[test]
fn an_inbox_punched_again_and_again_reads_back_whole() {
    let dir = ScratchDir::new("inbox-punch-again");
    let db = dir.0.join("history.db");
    let mut inbox = Inbox::create(&db, &[]).unwrap();
    let mut pending = 0;
    let mut ends = Vec::new();
    // The third time the writer catches up on more than one filler spans.
    for grown in [RESTART_AT, RESTART_AT * 2, FILLER_SPAN * 2 + RESTART_AT] {
        let stored = fill_with_secrets(&mut inbox, grown);
        pending = inbox.append(&mut delivery("evt_pending", "/")).unwrap();
        inbox.flush().unwrap();
        assert!(matches!(
            inbox.compact(stored, RESTART_AT).unwrap(),
            Some(Compacted::Punched)
        ));
        ends.push(inbox.hole_end);
        let raw = std::fs::read(&inbox.path).unwrap();
        assert!(!holds_secret(&raw[..inbox.hole_end as usize]));
    }
    assert!(
        ends.windows(2).all(|w| w[0] < w[1]),
        "each punch goes further: {ends:?}"
    );
    assert!(
        allocated(&inbox.path) < RESTART_AT,
        "{} bytes held for a file of {}",
        allocated(&inbox.path),
        inbox.len
    );
    let name = inbox.name().to_owned();
    drop(inbox);
    let (_, requests) = read_all(&orphans(&db).pop().unwrap());
    assert_eq!(keys(&requests), [(pending, "evt_pending")], "in {name}");
}

#[test]
fn a_live_reader_finds_the_newest_request_past_punched_out_ones() {
    let dir = ScratchDir::new("inbox-punch-live");
    let db = dir.0.join("history.db");
    let mut live = Inbox::create(&db, &[]).unwrap();
    let stored = fill_with_secrets(&mut live, RESTART_AT);
    live.append(&mut delivery("evt_pending", "/")).unwrap();
    let newest = live.append(&mut delivery("evt_newest", "/")).unwrap();
    live.flush().unwrap();
    assert!(matches!(
        live.compact(stored, RESTART_AT).unwrap(),
        Some(Compacted::Punched)
    ));
    let name = live.name().to_owned();
    assert_eq!(appended_by_live_recorders(&db), [Appended { name, newest }]);
    live.discard();
}

#[test]
fn where_punching_is_refused_the_pending_requests_are_copied_into_a_fresh_file() {
    let dir = ScratchDir::new("inbox-punch-refused");
    let db = dir.0.join("history.db");
    let mut inbox = Inbox::create(&db, &[]).unwrap();
    let unsupported: Punch = |_, _, _| Err(std::io::Error::from(std::io::ErrorKind::Unsupported));
    inbox.punch = Some(unsupported);
    let stored = fill_with_secrets(&mut inbox, RESTART_AT);
    let pending = inbox.append(&mut secret_request("evt_pending", BODY_PART + 1)).unwrap();
    inbox.flush().unwrap();
    assert!(matches!(
        inbox.compact(stored, RESTART_AT).unwrap(),
        Some(Compacted::Replaced(_))
    ));
    assert!(inbox.punch.is_none(), "not tried again");
    assert!(inbox.len < BODY_PART as u64 * 2, "only the pending request is left");
    assert!(!holds_secret(
        &std::fs::read(&inbox.path).unwrap()[..inbox.opening_len as usize]
    ));
    drop(inbox);
    let (_, requests) = read_all(&orphans(&db).pop().unwrap());
    assert_eq!(keys(&requests), [(pending, "evt_pending")]);
}

#[test]
fn a_filler_of_any_span_reads_as_a_part_of_body_zero_that_readers_step_over() {
    let gaps = [136, 16_393, 2_097_162];
    let spans = (8..400)
        .chain(16_380..16_400)
        .chain(2_097_158..2_097_166)
        .chain([FILLER_SPAN]);
    for span in spans {
        let Some(head) = super::record::filler_head(span) else {
            assert!(gaps.contains(&span), "no filler for {span} bytes");
            continue;
        };
        let mut record = head.clone();
        record.resize(span as usize, 0);
        let len = u32::from_le_bytes(record[..4].try_into().unwrap()) as u64;
        assert_eq!(len + 4, span, "the length covers the span");
        assert!(super::record::is_filler(&record[4..]));
        match postcard::from_bytes::<(u64, Entry)>(&record[4..]).unwrap() {
            (0, Entry::BodyPart { body: 0, bytes }) => assert_eq!(bytes.len() as u64, span - head.len() as u64),
            other => panic!("read back as {other:?}"),
        }
    }
    assert!(super::record::filler_head(7).is_none(), "no record is that short");
}
