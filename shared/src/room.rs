//! Room in a queue counted in units of bytes, so that one semaphore bounds
//! both how many frames or bodies wait in it and how many bytes they hold.

/// The units of a room of `whole` units, each of `unit` bytes, that `len`
/// bytes take: one, and one more for every `unit` bytes; at most the whole
/// room, so that anything fits once the room is free.
pub fn units(len: usize, unit: usize, whole: usize) -> u32 {
    let units = (len / unit).saturating_add(1).min(whole);
    u32::try_from(units).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_frame_takes_a_unit_and_none_more_than_the_room() {
        assert_eq!(units(0, 1024, 64), 1);
        assert_eq!(units(1023, 1024, 64), 1);
        assert_eq!(units(1024, 1024, 64), 2);
        assert_eq!(units(64 * 1024, 16 * 1024, 64), 5);
        assert_eq!(units(usize::MAX, 1, 64), 64);
    }
}
