//! Something that fails on every try while it lasts (a full disk), told
//! once when it begins and once when it ends rather than at every try.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether an outage is under way. Shared by the exchanges of a tunnel,
/// hence atomic.
#[derive(Debug, Default)]
pub(super) struct Outage(AtomicBool);

impl Outage {
    /// Notes a failure; true when it begins an outage.
    pub(super) fn began(&self) -> bool {
        !self.0.swap(true, Ordering::Relaxed)
    }

    /// Notes a success; true when it ends an outage. A read, not a write,
    /// while all is well: it runs for every delivery.
    pub(super) fn ended(&self) -> bool {
        self.0.load(Ordering::Relaxed) && self.0.swap(false, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_begins_and_ends_once() {
        let outage = Outage::default();
        assert!(!outage.ended(), "nothing to end yet");
        assert!(outage.began());
        assert!(!outage.began(), "already under way");
        assert!(outage.ended());
        assert!(!outage.ended());
    }
}
