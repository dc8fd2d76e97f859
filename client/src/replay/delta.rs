//! How a probe's output changed between two reads, so two changes can be compared.
//!
//! A probe prints a balance, a row count or a dump. When two reads differ
//! only in their numbers ("balance: 5" → "balance: 6") the change is the list
//! of numeric differences; otherwise it is the lines added and removed.

use std::collections::BTreeMap;

/// The change between two probe reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Same text with different numbers: the difference at each number's place.
    Numeric(Vec<f64>),
    /// Lines added and removed, counted (order ignored).
    Lines {
        /// Lines present after but not before.
        added: usize,
        /// Lines present before but not after.
        removed: usize,
    },
}

impl Change {
    /// True when nothing moved.
    pub fn is_none(&self) -> bool {
        match self {
            Change::Numeric(deltas) => deltas.iter().all(|d| *d == 0.0),
            Change::Lines { added, removed } => *added == 0 && *removed == 0,
        }
    }

    /// A short description: "+1", "+1, −2", "1 line added".
    pub fn describe(&self) -> String {
        match self {
            Change::Numeric(deltas) => {
                let moved: Vec<String> = deltas.iter().filter(|d| **d != 0.0).map(|d| signed(*d)).collect();
                if moved.is_empty() {
                    "no change".into()
                } else {
                    moved.join(", ")
                }
            }
            Change::Lines { added, removed } => match (added, removed) {
                (0, 0) => "no change".into(),
                (a, 0) => format!("{a} line{} added", plural(*a)),
                (0, r) => format!("{r} line{} removed", plural(*r)),
                (a, r) => format!("{a} line{} added, {r} removed", plural(*a)),
            },
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn signed(d: f64) -> String {
    if d > 0.0 {
        format!("+{}", trim(d))
    } else {
        format!("−{}", trim(-d))
    }
}

fn trim(d: f64) -> String {
    if d.fract() == 0.0 && d.abs() < 1e15 {
        format!("{}", d as i64)
    } else {
        format!("{d}")
    }
}

/// Splits text into its non-numeric skeleton and its standalone numbers.
/// Digits inside identifiers (`evt_1Pq`, `v1`) belong to the skeleton.
pub fn numbers(text: &str) -> (String, Vec<f64>) {
    let chars: Vec<char> = text.chars().collect();
    let mut skeleton = String::with_capacity(text.len());
    let mut values = Vec::new();
    let mut i = 0;
    let word = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let starts_number =
            chars[i].is_ascii_digit() || (chars[i] == '-' && chars.get(i + 1).is_some_and(|c| c.is_ascii_digit()));
        let after_word = i > 0 && (word(chars[i - 1]) || chars[i - 1] == '.');
        if starts_number && !after_word {
            let mut j = i + 1;
            while j < chars.len() && chars[j].is_ascii_digit() {
                j += 1;
            }
            if j + 1 < chars.len() && chars[j] == '.' && chars[j + 1].is_ascii_digit() {
                j += 1;
                while j < chars.len() && chars[j].is_ascii_digit() {
                    j += 1;
                }
            }
            let token: String = chars[i..j].iter().collect();
            let standalone = chars.get(j).is_none_or(|c| !word(*c));
            if let (true, Ok(value)) = (standalone, token.parse::<f64>()) {
                values.push(value);
                skeleton.push('#');
                i = j;
                continue;
            }
        }
        skeleton.push(chars[i]);
        i += 1;
    }
    (skeleton, values)
}

/// The change from `before` to `after`, numeric when only numbers differ.
pub fn change(before: &str, after: &str) -> Change {
    let (skel_a, nums_a) = numbers(before);
    let (skel_b, nums_b) = numbers(after);
    if skel_a == skel_b && nums_a.len() == nums_b.len() {
        return Change::Numeric(nums_a.iter().zip(&nums_b).map(|(a, b)| b - a).collect());
    }
    let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
    for line in before.lines() {
        *counts.entry(line).or_default() -= 1;
    }
    for line in after.lines() {
        *counts.entry(line).or_default() += 1;
    }
    let added = counts.values().filter(|c| **c > 0).map(|c| *c as usize).sum();
    let removed = counts.values().filter(|c| **c < 0).map(|c| (-*c) as usize).sum();
    Change::Lines { added, removed }
}

/// Whether two changes are the same size; numeric ones compared place by place.
pub fn same_change(a: &Change, b: &Change) -> bool {
    match (a, b) {
        (Change::Numeric(x), Change::Numeric(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(p, q)| (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0))
        }
        (Change::Lines { added: a1, removed: r1 }, Change::Lines { added: a2, removed: r2 }) => a1 == a2 && r1 == r2,
        _ => false,
    }
}

/// How many times larger `b` is than `a` when both move one number the same way.
pub fn multiple(a: &Change, b: &Change) -> Option<f64> {
    let (Change::Numeric(x), Change::Numeric(y)) = (a, b) else {
        let (Change::Lines { added: a1, removed: 0 }, Change::Lines { added: a2, removed: 0 }) = (a, b) else {
            return None;
        };
        return (*a1 > 0).then(|| *a2 as f64 / *a1 as f64);
    };
    let (i, base) = x.iter().enumerate().find(|(_, d)| **d != 0.0)?;
    let ratio = y.get(i)? / base;
    (ratio > 0.0).then_some(ratio)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_inside_identifiers_stay_in_the_skeleton() {
        let (skeleton, values) = numbers("evt_1Pq balance: 5.5 rows=-2 v1");
        assert_eq!(skeleton, "evt_1Pq balance: # rows=# v1");
        assert_eq!(values, vec![5.5, -2.0]);
    }

    #[test]
    fn a_counter_that_moved_ten_times_as_far_is_a_different_change() {
        let single = change("count 5\n", "count 6\n");
        let burst = change("count 6\n", "count 16\n");
        assert_eq!(single, Change::Numeric(vec![1.0]));
        assert!(!same_change(&single, &burst));
        assert_eq!(multiple(&single, &burst), Some(10.0));
        assert!(same_change(&single, &change("count 6", "count 7")));
    }

    #[test]
    fn dumps_compare_by_lines_added() {
        let single = change("a\n", "a\nevt_x 100\n");
        let burst = change("a\nevt_x 100\n", "a\nevt_x 100\nevt_y 100\nevt_y 100\n");
        assert_eq!(single, Change::Lines { added: 1, removed: 0 });
        assert!(!same_change(&single, &burst));
        assert_eq!(multiple(&single, &burst), Some(2.0));
        assert_eq!(burst.describe(), "2 lines added");
    }

    #[test]
    fn no_movement_is_none() {
        assert!(change("x 1", "x 1").is_none());
        assert_eq!(change("x 1", "x 1").describe(), "no change");
        assert_eq!(change("x 1", "x 3").describe(), "+2");
    }
}
