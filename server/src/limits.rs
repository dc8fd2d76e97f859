//! Connection caps: per caller IP and in total, so a crowd of slow or idle
//! connections from one place cannot starve everybody else.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// Counts open connections; a [`Slot`] is held for each.
pub struct ConnectionLimits {
    per_ip: usize,
    total: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    by_ip: HashMap<IpAddr, usize>,
    total: usize,
}

/// One open connection; dropping it frees its place.
pub struct Slot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl ConnectionLimits {
    /// Caps of `per_ip` connections per address and `total` overall.
    pub fn new(per_ip: usize, total: usize) -> Arc<Self> {
        Arc::new(Self {
            per_ip,
            total,
            open: Mutex::new(Open::default()),
        })
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        // Counter updates cannot be left half done, so poisoning is harmless.
        portpreview_shared::sync::lock(&self.open)
    }

    /// Takes a place for a connection from `ip`, or `None` when over a cap.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        let ip = place_of(ip);
        let mut open = self.open();
        if open.total >= self.total {
            return None;
        }
        let count = open.by_ip.entry(ip).or_insert(0);
        if *count >= self.per_ip {
            return None;
        }
        *count += 1;
        open.total += 1;
        Some(Slot {
            limits: Arc::clone(self),
            ip,
        })
    }
}

/// The place a connection is counted for: its IPv4 address, or its IPv6
/// /64 network. A host holds a whole /64 as often as one address (clouds
/// and ISPs hand one out per machine or per network), so counting each
/// IPv6 address alone would give it 2^64 caps; the callers of one IPv6
/// network share its cap, as those behind one IPv4 address do.
fn place_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        v4 @ IpAddr::V4(_) => v4,
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & !u128::from(u64::MAX))),
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.limits.open();
        open.total = open.total.saturating_sub(1);
        if let Some(count) = open.by_ip.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.by_ip.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_ip_and_in_total_and_frees_on_drop() {
        let limits = ConnectionLimits::new(2, 3);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = limits.admit(a).unwrap();
        let _a2 = limits.admit(a).unwrap();
        assert!(limits.admit(a).is_none(), "per-IP cap");
        let _b1 = limits.admit(b).unwrap();
        assert!(limits.admit(b).is_none(), "total cap");
        drop(a1);
        assert!(limits.admit(a).is_some());
        assert!(limits.open().by_ip.len() <= 2);
    }

    #[test]
    fn ipv6_addresses_of_one_network_share_its_cap() {
        let limits = ConnectionLimits::new(1, 10);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let _first = limits.admit(ip("2001:db8:1:2::1")).unwrap();
        assert!(
            limits.admit(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")).is_none(),
            "another address of the same /64"
        );
        assert!(
            limits.admit(ip("2001:db8:1:3::1")).is_some(),
            "the next /64 is another place"
        );
        assert!(limits.admit(ip("10.0.0.1")).is_some());
        assert!(
            limits.admit(ip("::ffff:10.0.0.2")).is_some(),
            "an IPv4 caller on a dual-stack socket is its IPv4 address"
        );
    }
}
