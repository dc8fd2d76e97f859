//! The number of files a process may hold open.
//!
//! Each connection is a file. Many systems start processes with a soft
//! limit of 256 or 1,024 under a far higher hard limit, so a relay serving
//! a thousand tunnels, or a replay burst of 512 attempts, would be refused
//! sockets by its own limit ("Too many open files") well before the
//! system's. Raising the soft limit to the hard one is what the limit pair
//! is for, and needs no privilege.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// What some systems refuse above, whatever the hard limit says (macOS's
/// `OPEN_MAX`); tried when the hard limit itself is refused.
const FALLBACK: u64 = 10_240;

/// The limit on open files in force now (`None`: unlimited or unknown).
pub fn limit() -> Option<u64> {
    getrlimit(Resource::Nofile).current
}

/// Raises the soft limit on open files as far as the hard limit allows,
/// and returns the limit now in force (`None`: unlimited or unknown).
pub fn raise_limit() -> Option<u64> {
    let limit = getrlimit(Resource::Nofile);
    let soft = limit.current?;
    let wanted = match limit.maximum {
        Some(hard) if hard <= soft => return Some(soft),
        Some(hard) => hard,
        None => u64::MAX,
    };
    for target in [wanted, wanted.min(FALLBACK)] {
        if target > soft
            && setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(target),
                    maximum: limit.maximum,
                },
            )
            .is_ok()
        {
            return Some(target);
        }
    }
    Some(soft)
}

/// The fewest open files PortPreview runs with. Below it, setting up
/// signal handling or the history fails part way, where tokio's signal
/// set-up panics instead of returning an error.
pub const FEWEST: u64 = 16;

/// [`raise_limit`], and one line saying why the process cannot run when
/// the limit stays under [`FEWEST`].
pub fn raise_to_enough() -> Result<(), String> {
    raise_limit();
    enough_for(FEWEST, "PortPreview")
}

/// One line saying why `who` cannot run when the limit in force is under
/// `fewest`.
pub fn enough_for(fewest: u64, who: &str) -> Result<(), String> {
    match limit() {
        Some(limit) if limit < fewest => Err(format!(
            "this process may open only {limit} files (ulimit -n); {who} needs at least {fewest}"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let before = getrlimit(Resource::Nofile);
        let now = raise_limit();
        let after = getrlimit(Resource::Nofile);
        assert_eq!(after.current, now);
        assert_eq!(after.maximum, before.maximum, "the hard limit is left as it was");
        if let (Some(soft), Some(hard)) = (after.current, after.maximum) {
            assert!(soft == hard || soft == FALLBACK, "soft {soft}, hard {hard}");
        }
    }
}
