//! Room in a writer's queue, counted in units of bytes so that one bound
//! holds both how many frames wait in it and how many bytes they carry,
//! and the queue's two lanes.
//!
//! Heads start something new for the peer (a request, an answer); bodies
//! go on with something started, and resets and close frames end it. A
//! writer takes heads first: on a slow link, a webhook does not wait
//! behind a window of every transfer in flight. Bodies may fill only part
//! of the room, so a head never waits for transfers to drain; senders
//! waiting for room get it in the order they asked (tokio's semaphores are
//! fair), so streams with more to send take turns, a chunk each. Each lane
//! keeps its order, and a writer that sorts everything queued so far into
//! [`Lines`] before it takes one writes every head queued before a body
//! ahead of it: the peer never hears of a body or a reset before its head.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::{AcquireError, Semaphore, SemaphorePermit, TryAcquireError};

/// The units of a room of `whole` units, each of `unit` bytes, that `len`
/// bytes take: one, and one more for every `unit` bytes; at most the whole
/// room, so that anything fits once the room is free.
pub fn units(len: usize, unit: usize, whole: usize) -> u32 {
    let units = (len / unit).saturating_add(1).min(whole);
    u32::try_from(units).unwrap_or(u32::MAX)
}

/// Which lane of the queue a frame waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Written first: what starts something new.
    Head,
    /// Written once no head is waiting: what goes on with it or ends it.
    Body,
}

/// Room left in a queue, part of which bodies may take.
#[derive(Clone)]
pub struct Room {
    /// Units left for heads and bodies together.
    all: Arc<Semaphore>,
    /// Units left for bodies, taken as well as `all`'s.
    bodies: Arc<Semaphore>,
    /// All the units bodies may take.
    body_room: u32,
}

/// Room taken for one frame; given back when dropped, unless kept.
#[must_use]
pub struct Taken<'a> {
    all: SemaphorePermit<'a>,
    bodies: Option<SemaphorePermit<'a>>,
}

impl Room {
    /// A room of `all` units, of which bodies may take `bodies`.
    pub fn new(all: usize, bodies: usize) -> Self {
        let bodies = bodies.min(all);
        Self {
            all: Arc::new(Semaphore::new(all)),
            bodies: Arc::new(Semaphore::new(bodies)),
            body_room: u32::try_from(bodies).unwrap_or(u32::MAX),
        }
    }

    /// Waits for `units` of room in `lane`, or all a body may take, so
    /// that any frame fits once the room is free; fails once the room is
    /// closed.
    pub async fn take(&self, units: u32, lane: Lane) -> Result<Taken<'_>, AcquireError> {
        let units = self.fitting(units, lane);
        let bodies = match lane {
            Lane::Body => Some(self.bodies.acquire_many(units).await?),
            Lane::Head => None,
        };
        let all = self.all.acquire_many(units).await?;
        Ok(Taken { all, bodies })
    }

    /// `units` of room in `lane` if there is that much now.
    pub fn try_take(&self, units: u32, lane: Lane) -> Result<Taken<'_>, TryAcquireError> {
        let units = self.fitting(units, lane);
        let bodies = match lane {
            Lane::Body => Some(self.bodies.try_acquire_many(units)?),
            Lane::Head => None,
        };
        let all = self.all.try_acquire_many(units)?;
        Ok(Taken { all, bodies })
    }

    fn fitting(&self, units: u32, lane: Lane) -> u32 {
        match lane {
            Lane::Body => units.min(self.body_room),
            Lane::Head => units,
        }
    }

    /// Gives back the `units` a frame of `lane` kept, once it is written.
    pub fn give_back(&self, units: usize, lane: Lane) {
        if units == 0 {
            return;
        }
        self.all.add_permits(units);
        if lane == Lane::Body {
            self.bodies.add_permits(units);
        }
    }

    /// No more room for anyone: whoever waits for it hears so at once.
    pub fn close(&self) {
        self.all.close();
        self.bodies.close();
    }
}

impl Taken<'_> {
    /// Keeps the room until [`Room::give_back`]; the units it holds.
    pub fn keep(self) -> usize {
        let units = self.all.num_permits();
        self.all.forget();
        if let Some(bodies) = self.bodies {
            bodies.forget();
        }
        units
    }
}

/// Frames a writer has taken from its queue, in their lanes, each in order.
/// Empty, as while a tunnel is idle, they hold no memory.
pub struct Lines<T> {
    heads: VecDeque<T>,
    bodies: VecDeque<T>,
}

impl<T> Default for Lines<T> {
    fn default() -> Self {
        Self {
            heads: VecDeque::new(),
            bodies: VecDeque::new(),
        }
    }
}

impl<T> Lines<T> {
    /// Puts `frame` at the back of `lane`.
    pub fn push(&mut self, lane: Lane, frame: T) {
        match lane {
            Lane::Head => self.heads.push_back(frame),
            Lane::Body => self.bodies.push_back(frame),
        }
    }

    /// The first head, else the first body.
    pub fn pop(&mut self) -> Option<T> {
        self.heads.pop_front().or_else(|| self.bodies.pop_front())
    }

    /// Keeps in `lane` only the frames `keep` picks, in their order.
    pub fn retain(&mut self, lane: Lane, keep: impl FnMut(&T) -> bool) {
        match lane {
            Lane::Head => self.heads.retain(keep),
            Lane::Body => self.bodies.retain(keep),
        }
    }

    /// Whether no frame is waiting.
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty() && self.bodies.is_empty()
    }
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

    #[test]
    fn bodies_leave_room_for_heads_and_room_comes_back() {
        let room = Room::new(10, 6);
        let body = room.try_take(6, Lane::Body).expect("room for bodies").keep();
        assert!(room.try_take(1, Lane::Body).is_err(), "the bodies' part is full");
        let head = room.try_take(4, Lane::Head).expect("room for heads").keep();
        assert!(room.try_take(1, Lane::Head).is_err(), "the whole room is full");
        room.give_back(head, Lane::Head);
        drop(room.try_take(4, Lane::Head).expect("a head's room came back"));
        room.give_back(body, Lane::Body);
        drop(room.try_take(6, Lane::Body).expect("the bodies' room came back"));
        // Dropped, not kept: given back.
        assert!(room.try_take(10, Lane::Head).is_ok());
        // A body larger than the bodies' part still fits, in all of it.
        let large = room.try_take(8, Lane::Body).expect("room for a large body").keep();
        assert_eq!(large, 6);
        room.give_back(large, Lane::Body);
        room.close();
        assert!(matches!(room.try_take(1, Lane::Head), Err(TryAcquireError::Closed)));
    }

    #[test]
    fn heads_come_out_first_and_each_lane_in_order() {
        let mut lines = Lines::default();
        for (frame, lane) in [(1, Lane::Body), (2, Lane::Head), (3, Lane::Body), (4, Lane::Head)] {
            lines.push(lane, frame);
        }
        lines.push(Lane::Body, 5);
        lines.retain(Lane::Body, |frame| *frame != 3);
        let order: Vec<_> = std::iter::from_fn(|| lines.pop()).collect();
        assert_eq!(order, [2, 4, 1, 5]);
        assert!(lines.is_empty());
    }
}
