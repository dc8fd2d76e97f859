//! Locks taken the one way PortPreview takes them.

use std::sync::{Mutex, MutexGuard};

/// `mutex`, locked; a lock poisoned by a panic elsewhere is taken as it is.
///
/// Every critical section in PortPreview leaves its data whole at each
/// step (a counter moved, an entry inserted or removed, a value replaced),
/// so what a panicking holder left is still sound; and one exchange that
/// panicked must not take the tunnel, the relay or the history with it.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panic_is_still_taken() {
        let shared = Arc::new(Mutex::new(1));
        let held = Arc::clone(&shared);
        let _ = std::thread::spawn(move || {
            let mut value = held.lock().unwrap();
            *value = 2;
            panic!("while holding the lock");
        })
        .join();
        assert!(shared.is_poisoned());
        assert_eq!(*lock(&shared), 2);
    }
}
