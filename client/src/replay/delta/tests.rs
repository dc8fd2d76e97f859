use super::*;

/// Whether a burst that took the state from `one` to `two` changed it
/// as the single delivery that took it from `zero` to `one` did.
fn acts_once(zero: &str, one: &str, two: &str) -> bool {
    moves_alike(zero, one, two)
}

/// The change under the reading that keeps lines' shapes.
fn change2(before: &str, after: &str) -> Change {
    changes(&[before, after]).remove(0)
}

#[test]
fn numbers_inside_identifiers_belong_to_their_words() {
    assert_eq!(
        tokens("evt_1Pq balance: 5.5 rows=-2 v1", Commas::Group),
        vec![
            Token::Text("evt_1Pq"),
            Token::Text("balance"),
            Token::Text(":"),
            Token::Count(5.5),
            Token::Text("rows"),
            Token::Text("="),
            Token::Count(-2.0),
            Token::Text("v1"),
        ]
    );
}

#[test]
fn dates_times_uuids_quoted_strings_and_large_numbers_count_nothing() {
    let line =
        r#"2026-12-02T14:00:05.123Z Dec  2 14:00:05 0f3c7a52-9d1e-4c0b-1234-5b6d7e8f9a0b "evt_1" 1764684000123 "42""#;
    assert_eq!(
        tokens(line, Commas::Group),
        vec![
            Token::Opaque("2026-12-02T14:00:05.123Z"),
            Token::Text("Dec"),
            Token::Count(2.0),
            Token::Opaque("14:00:05"),
            Token::Opaque("0f3c7a52-9d1e-4c0b-1234-5b6d7e8f9a0b"),
            Token::Opaque("\"evt_1\""),
            Token::Opaque("1764684000123"),
            Token::Count(42.0),
        ]
    );
}

/// A number of more digits than a float holds cannot be measured: a move
/// in its last ones would read as none, so it is a value replaced.
#[test]
fn a_number_longer_than_a_float_holds_is_a_value_replaced() {
    let change = change2("rate: 0.100000000000000000006", "rate: 0.100000000000000000007");
    assert_eq!(change.describe(), "1 value replaced");
    assert_eq!(change2("rate: 0.25", "rate: 0.5").describe(), "+0.25");
}

#[test]
fn a_counter_that_moved_ten_times_as_far_is_a_different_change() {
    let single = change2("count 5\n", "count 6\n");
    let burst = change2("count 6\n", "count 16\n");
    assert!(!same_change(&single, &burst));
    assert_eq!(multiple(&single, &burst), Some(10.0));
    assert!(same_change(&single, &change2("count 6", "count 7")));
    assert_eq!(single.describe(), "+1");
}

#[test]
fn a_count_beside_a_replaced_value_is_still_compared() {
    let state = |balance, last: &str| format!("balance: {balance}\nlast_event: {last}\n");
    assert!(!acts_once(&state(0, "-"), &state(100, "evt_A"), &state(500, "evt_B")));
    assert!(acts_once(&state(0, "-"), &state(100, "evt_A"), &state(200, "evt_B")));
    assert_eq!(
        change2(&state(0, "-"), &state(100, "evt_A")).describe(),
        "+100, 1 value replaced"
    );
    let json = |balance, last: &str| format!(r#"{{"balance": {balance}, "last_event": {last}}}"#);
    let (a, b) = (
        r#""0f3c7a52-9d1e-4c0b-8a3e-5b6d7e8f9a0b""#,
        r#""ab05c7a5-1234-4c0b-8a3e-5b6d7e8f9a0b""#,
    );
    assert!(
        !acts_once(&json(0, "null"), &json(100, a), &json(500, b)),
        "null, then a UUID"
    );
    assert!(acts_once(&json(0, "null"), &json(100, a), &json(200, b)));
}

#[test]
fn a_value_that_first_appears_with_the_first_row_is_no_second_effect() {
    // `SELECT count(*), max(id)` from an empty table prints `0|`.
    assert!(acts_once("0|\n", "1|1\n", "2|2\n"));
    assert!(!acts_once("0|\n", "1|1\n", "5|5\n"));
    assert!(acts_once("0 | \n", "1 | 1000000001\n", "2 | 1000000002\n"));
}

#[test]
fn clocks_count_nothing_whether_or_not_they_ticked() {
    let at = |n, time: &str| format!("credits: {n}\nupdated_at: {time}\n");
    assert!(acts_once(&at(0, "0"), &at(1, "1796224662"), &at(2, "1796224662")));
    assert!(acts_once(
        &at(3, "1764684000123"),
        &at(4, "1764684001175"),
        &at(5, "1764684001391")
    ));
    assert!(!acts_once(
        &at(3, "1764684000123"),
        &at(4, "1764684001175"),
        &at(6, "1764684001391")
    ));
    let log = |n, time: &str| format!("orders={n} at Dec  2 {time}");
    assert!(acts_once(&log(1, "14:00:05"), &log(2, "14:00:59"), &log(3, "14:01:02")));
    let iso = |n, time: &str| format!("orders={n} at {time}");
    assert!(acts_once(
        &iso(1, "2026-12-02T14:00:00.120Z"),
        &iso(2, "2026-12-02T14:00:01.050Z"),
        &iso(3, "2026-12-02 14:07:59+01:00")
    ));
}

#[test]
fn counts_written_as_strings_are_counts() {
    let json = |amount| format!(r#"{{"amount": "{amount}"}}"#);
    assert!(!acts_once(&json(0), &json(1050), &json(4200)));
}

#[test]
fn padding_that_widens_with_a_number_is_no_change_of_shape() {
    let single = change2(" balance \n---------\n       9\n", " balance \n---------\n      10\n");
    assert_eq!(single.describe(), "+1");
}

#[test]
fn dumps_compare_by_lines_added() {
    let single = change2("a\n", "a\nevt_x 100\n");
    let burst = change2("a\nevt_x 100\n", "a\nevt_x 100\nevt_y 100\nevt_y 100\n");
    assert!(!same_change(&single, &burst));
    assert_eq!(multiple(&single, &burst), Some(2.0));
    assert_eq!(burst.describe(), "2 lines added");
    assert!(same_change(
        &single,
        &change2("a\nevt_x 100\n", "a\nevt_x 100\nevt_y 100\n")
    ));
}

#[test]
fn a_count_beside_rows_added_is_compared_too() {
    // One row per event, but every copy of the burst credited: a race.
    let before = "balance: 0\n";
    let one = "balance: 100\nprocessed evt_A\n";
    let raced = "balance: 700\nprocessed evt_A\nprocessed evt_B\n";
    assert!(!acts_once(before, one, raced));
    let moves = changes(&[before, one, raced]);
    assert_eq!(moves[1].describe(), "+600, 1 line added");
    assert_eq!(multiple(&moves[0], &moves[1]), Some(6.0));
    assert!(acts_once(
        before,
        one,
        "balance: 200\nprocessed evt_A\nprocessed evt_B\n"
    ));
    // Rows in another order stayed; the one new row was added.
    let reordered = change2("a 1\nb 2\n", "b 2\na 1\nc 3\n");
    assert_eq!(reordered.describe(), "1 line added");
}

#[test]
fn a_row_credited_once_per_copy_is_told_from_a_row_given_the_next_id() {
    // `SELECT event, amount FROM credits`, one row per event.
    let (before, one) = ("", "evt_A|100\n");
    let every_copy = "evt_A|100\nevt_B|1000\n";
    assert!(
        acts_once(before, one, every_copy),
        "as many lines, no count beside them"
    );
    assert_eq!(
        multiplied_row(before, one, every_copy, 10),
        Some(Multiplied {
            one: "evt_A|100".into(),
            all: "evt_B|1000".into(),
            times: 10,
        })
    );
    // Some copies acted: 3 of 4.
    let three = multiplied_row(before, one, "evt_A|100\nevt_B|300\n", 4).unwrap();
    assert_eq!(three.times, 3);
    assert!(
        multiplied_row(before, one, "evt_A|100\nevt_B|500\n", 4).is_none(),
        "more than the copies"
    );
    assert_eq!(multiplied_row(before, one, "evt_A|100\nevt_B|100\n", 10), None);
    // A JSON map of amounts, and a list of objects.
    let map = |rows: &str| json_lines(&format!("{{{rows}}}"));
    let (one, all) = (map(r#""evt_A": 100"#), map(r#""evt_A": 100, "evt_B": 500"#));
    assert!(multiplied_row(&map(""), &one, &all, 5).is_some());
    let list = |rows: &str| json_lines(&format!("[{rows}]"));
    let row = |event: &str, amount| format!(r#"{{"event": "{event}", "amount": {amount}}}"#);
    let (one, all) = (
        list(&row("evt_A", 3)),
        list(&[row("evt_A", 3), row("evt_B", 12)].join(",")),
    );
    assert!(multiplied_row(&list(""), &one, &all, 4).is_some());
    // A row of that amount from an earlier run: the burst's row's lines
    // land apart once the list is sorted, and are paired all the same.
    let old = row("evt_0", 12);
    let (zero, one) = (list(&old), list(&[old.clone(), row("evt_A", 3)].join(",")));
    let all = list(&[old, row("evt_A", 3), row("evt_B", 12)].join(","));
    assert_eq!(multiplied_row(&zero, &one, &all, 4).map(|m| m.times), Some(4));
    // A generated ID is no amount: first on its line or named so, a
    // sequence may have handed the burst's row any number.
    assert_eq!(
        multiplied_row("", "1|evt_A|100\n", "1|evt_A|100\n2|evt_B|100\n", 2),
        None
    );
    assert_eq!(
        multiplied_row("", "1|evt_A|100\n", "1|evt_A|100\n4|evt_B|100\n", 4),
        None
    );
    // First on its line but further off than a sequence hands out, it is
    // the amount every copy added to (`SELECT amount, event_id`).
    let amount_first = multiplied_row("", "100|evt_A\n", "100|evt_A\n500|evt_B\n", 5);
    assert_eq!(amount_first.map(|m| m.times), Some(5));
    assert_eq!(multiplied_row("", "1|evt_A\n", "1|evt_A\n2|evt_B\n", 5), None);
    // Amounts beside earlier events' amounts are still amounts.
    let amounts_before = "100|evt_0\n";
    let (one, all) = ("100|evt_0\n100|evt_A\n", "100|evt_0\n100|evt_A\n500|evt_B\n");
    assert_eq!(multiplied_row(amounts_before, one, all, 5).map(|m| m.times), Some(5));
    // A baseline row numbered next after the rows before it is a sequence's,
    // however far on the burst's row was numbered (other inserts between).
    let ids_before = "1|evt_0\n2|evt_1\n";
    let (one, all) = ("1|evt_0\n2|evt_1\n3|evt_A\n", "1|evt_0\n2|evt_1\n3|evt_A\n9|evt_B\n");
    assert_eq!(multiplied_row(ids_before, one, all, 4), None);
    let (one, all) = (
        list(r#"{"id": 4, "amount": 3}"#),
        list(r#"{"id": 4, "amount": 3}, {"id": 8, "amount": 3}"#),
    );
    assert_eq!(multiplied_row(&list(""), &one, &all, 10), None);
    // After a table's border, under another name for an ID, or a
    // running total beside the amount: no multiple either.
    let boxed = |rows: &[&str]| rows.iter().map(|r| format!("│ {r} │\n")).collect::<String>();
    let (one, all) = (
        boxed(&["1 │ evt_A │ 1250"]),
        boxed(&["1 │ evt_A │ 1250", "2 │ evt_B │ 1250"]),
    );
    assert_eq!(multiplied_row("", &one, &all, 2), None);
    let (one, all) = (
        list(r#"{"rid": 1, "amount": 3}"#),
        list(r#"{"rid": 1, "amount": 3}, {"rid": 2, "amount": 3}"#),
    );
    assert_eq!(multiplied_row(&list(""), &one, &all, 4), None);
    assert_eq!(
        multiplied_row("", "evt_A|1250|1250\n", "evt_A|1250|1250\nevt_B|1250|2500\n", 4),
        None
    );
    assert!(multiplied_row("", "evt_A|1250|1250\n", "evt_A|1250|1250\nevt_B|5000|6250\n", 4).is_some());
    // A lone count one more is an ID too; beside an event, a quantity.
    assert_eq!(multiplied_row("", "1\n", "1\n2\n", 2), None);
    assert!(multiplied_row("", "evt_A|1\n", "evt_A|1\nevt_B|2\n", 2).is_some());
    assert!(multiplied_row("", "100\n", "100\n300\n", 4).is_some());
    assert_eq!(multiplied_row("x\n", "x\n", "x\n", 4), None);
}

fn json_lines(text: &str) -> String {
    super::super::json_state::lines(text).unwrap()
}

#[test]
fn a_value_standing_where_there_was_none_keeps_its_line() {
    // `SELECT count(*), max(id)` above the rows themselves.
    let (zero, one, two) = ("0|\n", "1|1\nevt_A\n", "2|2\nevt_A\nevt_B\n");
    assert!(acts_once(zero, one, two));
    // The empty column counts from nothing: max(id) moves by one a row.
    assert_eq!(change2(zero, one).describe(), "+1, +1, 1 line added");
    assert!(!acts_once(zero, one, "3|3\nevt_A\nevt_B\n"));
    // A row whose null became a clock as the first delivery was handled.
    let done = |n, at: &str| format!("done|{n}|{at}\n");
    let rows = |events: &str| events.lines().map(|e| format!("{e}\n")).collect::<String>();
    assert!(acts_once(
        &done(0, "null"),
        &(done(1, "1764684000") + &rows("evt_A")),
        &(done(2, "1764684007") + &rows("evt_A\nevt_B"))
    ));
}

#[test]
fn a_change_of_decimals_reads_as_the_probe_printed_them() {
    assert_eq!(change2("balance: 20.41", "balance: 20.51").describe(), "+0.1");
    assert_eq!(change2("balance: 20.51", "balance: 20.41").describe(), "−0.1");
    assert_eq!(change2("balance: 1.5", "balance: 3.25").describe(), "+1.75");
    assert_eq!(
        change2("balance: 10000000.01", "balance: 30000000.03").describe(),
        "+20000000.02"
    );
    assert_eq!(change2("balance: 0.1", "balance: 0.101").describe(), "+0.001");
    // A burst of three copies that each acted is three times one copy.
    assert_eq!(
        multiple(
            &change2("balance: 0.1", "balance: 0.2"),
            &change2("balance: 0.2", "balance: 0.5")
        ),
        Some(3.0)
    );
}

#[test]
fn a_sum_over_no_rows_is_none_and_then_the_first_amount() {
    // `SELECT sum(amount)` prints an empty line, JSON a null.
    assert_eq!(change2("\n", "100\n").describe(), "+100");
    assert!(acts_once("\n", "100\n", "200\n"));
    assert!(!acts_once("\n", "100\n", "400\n"));
    assert_eq!(multiple(&change2("\n", "100\n"), &change2("100\n", "400\n")), Some(3.0));
    assert_eq!(change2("total: null", "total: 100").describe(), "+100");
    // `count(*), sum(amount)` over no rows prints `0|`.
    assert!(acts_once("0|\n", "1|100\n", "2|200\n"));
    assert!(!acts_once("0|\n", "1|100\n", "2|500\n"));
    assert!(acts_once("0,\n", "1,100\n", "2,200\n"));
    assert!(!acts_once("total: null", "total: 100", "total: 400"));
}

#[test]
fn nothing_or_null_before_a_json_list_is_an_empty_list() {
    let list = |n: usize| json_lines(&format!("[{}]", vec![r#"{"id": 1}"#; n].join(",")));
    for nothing in ["", "\n", "null\n"] {
        assert!(acts_once(nothing, &list(1), &list(2)), "{nothing:?}");
        assert!(!acts_once(nothing, &list(1), &list(3)), "{nothing:?}");
        assert_eq!(change2(nothing, &list(1)).describe(), "+1, 2 lines added");
    }
}

/// A probe that prints a line of its own for "nothing yet" (Python's
/// `"\n".join([])` printed, `null`, `(none)`) then one line per event:
/// the first event adds a line, as each one after it does.
#[test]
fn a_line_saying_nothing_yet_is_no_line_before_the_first_row() {
    for nothing in ["\n", "null\n", "(none)\n", "-\n", "None\n", "<empty>\n"] {
        assert!(acts_once(nothing, "evt_A\n", "evt_A\nevt_B\n"), "{nothing:?}");
        assert!(!acts_once(nothing, "evt_A\n", "evt_A\nevt_B\nevt_B\n"), "{nothing:?}");
        assert_eq!(change2(nothing, "evt_A\n").describe(), "1 line added", "{nothing:?}");
    }
    // Nothing, and nothing still: no change, nor one row of "nothing".
    for nothing in ["\n", "(none)\n", "null\n"] {
        assert!(change2(nothing, nothing).is_none(), "{nothing:?}");
        assert!(change2(nothing, "None\n").counts_nothing(), "{nothing:?}");
    }
    // A sum over no rows prints a blank line, then a count: it moved.
    assert_eq!(change2("\n", "100\n").describe(), "+100");
    assert!(acts_once("\n", "100\n", "200\n"));
    // A word that is a value is not nothing: it was replaced.
    assert_eq!(change2("pending\n", "paid\n").describe(), "1 value replaced");
}

#[test]
fn a_header_printed_with_the_first_row_is_no_side_effect() {
    let column = |rows: &[&str]| {
        let mut out = String::from("id  event  amount\n--  -----  ------\n");
        rows.iter().for_each(|row| out.push_str(&format!("{row}\n")));
        out
    };
    let (one, two) = (
        column(&["1   evt_A  1250"]),
        column(&["1   evt_A  1250", "2   evt_B  1250"]),
    );
    let before = framing("", &one, &two).unwrap();
    assert_eq!(before, "id  event  amount\n--  -----  ------\n");
    assert!(acts_once(&before, &one, &two));
    let raced = column(&["1   evt_A  1250", "2   evt_B  1250", "3   evt_B  1250"]);
    assert!(!acts_once(framing("", &one, &raced).as_deref().unwrap(), &one, &raced));
    // A CSV header, and `sqlite3 -line` records with a blank line between.
    let csv = |rows: &[&str]| {
        format!(
            "rid,id,amount\n{}",
            rows.iter().map(|r| format!("{r}\n")).collect::<String>()
        )
    };
    let (one, two) = (csv(&["1,evt_A,100"]), csv(&["1,evt_A,100", "2,evt_B,100"]));
    assert!(acts_once(&framing("", &one, &two).unwrap(), &one, &two));
    let (one, two) = (
        "id = 1\namount = 100\n",
        "id = 1\namount = 100\n\nid = 2\namount = 100\n",
    );
    assert_eq!(framing("", one, two), None);
    assert!(acts_once("", one, two));
    // Rows of words only are rows, not a header.
    let (one, two) = ("processed evt_A\n", "processed evt_A\nprocessed evt_B\n");
    assert_eq!(framing("", one, two), None);
    assert_eq!(
        framing("x\n", "x\nheader\n", "x\nheader\n"),
        None,
        "only before an empty read"
    );
}

#[test]
fn a_psql_table_that_widens_and_counts_its_rows_is_the_same_table() {
    let table = |rows: &[(&str, u32)]| {
        let width = rows.iter().map(|(e, _)| e.len()).max().unwrap_or(0).max(5);
        let mut out = format!(" {:<width$} | amount\n{}+--------\n", "event", "-".repeat(width + 2));
        for (event, amount) in rows {
            out.push_str(&format!(" {event:<width$} | {amount:>6}\n"));
        }
        let n = rows.len();
        out.push_str(&format!("({n} row{})\n", if n == 1 { "" } else { "s" }));
        out
    };
    let (zero, one) = (table(&[]), table(&[("evt_A", 100)]));
    assert!(acts_once(&zero, &one, &table(&[("evt_A", 100), ("evt_long_B", 100)])));
    assert!(!acts_once(
        &zero,
        &one,
        &table(&[("evt_A", 100), ("evt_long_B", 100), ("evt_long_B", 100)])
    ));
}

#[test]
fn a_huge_line_of_another_shape_is_replaced_whole_without_aligning() {
    let before = "x ".repeat(5_000);
    let after = "y ".repeat(5_000);
    assert_eq!(change2(&before, &after).describe(), "5000 values replaced");
}

#[test]
fn amounts_written_with_thousands_separators_are_one_count() {
    assert_eq!(
        tokens("balance: 5,050", Commas::Group),
        [Token::Text("balance"), Token::Text(":"), Token::Count(5050.0)]
    );
    assert_eq!(tokens("1,234,567.50 USD", Commas::Group)[0], Token::Count(1_234_567.5));
    assert_eq!(
        tokens("1,2", Commas::Group)[0],
        Token::Count(1.0),
        "a list, not a grouped number"
    );
    assert_eq!(tokens("1,2345", Commas::Group)[0], Token::Count(1.0));
    assert_eq!(change2("balance: 5,050", "balance: 4,950").describe(), "−100");
    assert_eq!(change2("balance: 1,050", "balance: 950").describe(), "−100");
    assert!(acts_once("balance: 5,050", "balance: 4,950", "balance: 4,850"));
    assert!(!acts_once("5,000.00 USD", "4,900.00 USD", "4,700.00 USD"));
}

#[test]
fn commas_between_numbers_are_read_the_probes_way() {
    // CSV rows (count, sum) and JSON arrays: read whole, `1,50` and
    // `2,100` would be 1 and 50, then 2100.
    assert!(acts_once("0,0", "1,50", "2,100"));
    assert!(acts_once("[0,0]", "[500,100]", "[1000,200]"));
    assert!(acts_once("1,100", "2,200", "3,300"));
    // Races still show, whichever way the commas are read.
    assert!(!acts_once("0,0", "1,50", "6,300"));
    assert!(!acts_once("[0,0]", "[500,100]", "[3000,600]"));
    assert!(!acts_once("balance: 5,050", "balance: 4,950", "balance: 4,450"));
    assert!(!acts_once("balance: 1,050", "balance: 950", "balance: 450"));
    // Four columns read whole are one number as long as an ID: no
    // evidence either way, so the race shows under the other reading.
    assert!(!acts_once("5,500,100,100", "6,600,100,100", "8,800,100,100"));
    assert!(!acts_once(
        "[500,250,999,123]",
        "[501,250,999,123]",
        "[503,250,999,123]"
    ));
    // Each line read its own way.
    assert!(acts_once(
        "balance: 950\nrow: 9,950",
        "balance: 1,000\nrow: 10,1000",
        "balance: 1,050\nrow: 11,1050"
    ));
    // Described the way that keeps the line's shape.
    assert_eq!(change2("0,0", "1,50").describe(), "+1, +50");
    assert_eq!(change2("1,50", "2,100").describe(), "+1, +50");
    assert_eq!(change2("balance: 1,050", "balance: 950").describe(), "−100");
}

#[test]
fn no_movement_is_none() {
    assert!(change2("x 1", "x 1").is_none());
    assert_eq!(change2("x 1", "x 1").describe(), "no change");
    assert_eq!(change2("x 1", "x 3").describe(), "+2");
}

/// Amounts in micros or wei are as long as a clock: counts leave them
/// out, but a burst that moved one a whole multiple of one delivery's
/// round move is told apart.
#[test]
fn a_large_number_a_burst_moved_a_whole_multiple_of_one_delivery_is_found() {
    let wei = large_move(
        "balance: 1000000000000000000",
        "balance: 2000000000000000000",
        "balance: 12000000000000000000",
        10,
    );
    assert_eq!(
        wei,
        Some(LargeMove {
            values: [
                1_000_000_000_000_000_000,
                2_000_000_000_000_000_000,
                12_000_000_000_000_000_000
            ],
            times: 10,
        })
    );
    // A count that grew into a clock's size, beside a list that grew alike.
    let crossed = large_move(
        "balance: 0\nevt_0\n",
        "balance: 100000000\nevt_0\nevt_a\n",
        "balance: 1100000000\nevt_0\nevt_a\nevt_b\n",
        10,
    );
    assert_eq!(crossed.map(|l| l.times), Some(10));
    // Of two, the one moved furthest.
    assert_eq!(
        large_move(
            "a: 1000000000000\nb: 5000000000",
            "a: 2000000000000\nb: 6000000000",
            "a: 3000000000000\nb: 16000000000",
            10
        )
        .map(|l| l.times),
        Some(10)
    );
    // A burst that acted once moved it as far.
    assert_eq!(
        large_move("b: 1000000000000", "b: 2000000000000", "b: 3000000000000", 10).map(|l| l.times),
        Some(1)
    );
    // A clock's moves are no round sums.
    assert_eq!(
        large_move("at: 1733500000123", "at: 1733500001456", "at: 1733500004122", 10),
        None
    );
    // More times than there were copies is no copies' doing; counts are
    // left to the rest of the comparison; a line whose words another
    // shares is no one line.
    assert_eq!(large_move("b: 1000000000", "b: 1000000100", "b: 1000001300", 10), None);
    assert_eq!(large_move("b: 100", "b: 200", "b: 1200", 10), None);
    assert_eq!(
        large_move("b: 1000000000\nb: 5", "b: 2000000000\nb: 5", "b: 12000000000\nb: 5", 10),
        None
    );
}
