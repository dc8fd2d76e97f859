//! News of requests turned away while a tunnel's name was held for its
//! client, kept to be told once the client is back.
//!
//! Anyone on the internet can call a held name, so what is kept is bounded
//! on purpose: per name by count and by bytes, and across the relay by
//! bytes ([`crate::registry::LocalRegistry`] keeps that count). Past a
//! bound, news are dropped: the caller had its 503 all the same, and a
//! provider retries.

use std::time::Instant;

use portpreview_shared::codec::{self, EncodeError};
use portpreview_shared::ServerMessage;

use crate::turned_away::millis;

/// News kept for one held name at most: more than a blip's worth of
/// webhooks, few enough that telling them never fills a new session's
/// queue ([`crate::writer::QUEUE_ROOM`]).
pub const MAX_NEWS_PER_NAME: usize = 32;

/// Encoded bytes of news kept for one held name at most.
pub const MAX_BYTES_PER_NAME: usize = 64 * 1024;

/// Encoded bytes of news kept across every held name at most, so a crowd
/// of names held at once cannot grow the relay either.
pub const MAX_BYTES: usize = 2 * 1024 * 1024;

/// News of one request turned away while its tunnel's name was held.
#[derive(Debug, Clone)]
pub struct HeldNews {
    /// A [`ServerMessage::TurnedAway`], told after nothing yet.
    news: ServerMessage,
    /// When the relay answered the caller.
    answered: Instant,
    /// Its encoded size, counted against the bounds.
    size: usize,
}

impl HeldNews {
    /// Keeps `news` of a request answered just now; fails as a frame
    /// would, since news that cannot be sent is not worth keeping.
    pub fn new(news: ServerMessage) -> Result<Self, EncodeError> {
        let size = codec::encode(&news, &[])?.len();
        Ok(Self {
            news,
            answered: Instant::now(),
            size,
        })
    }

    /// Encoded bytes it takes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The news to tell now, saying how long it waited to be told.
    pub fn into_message(self) -> ServerMessage {
        let mut news = self.news;
        if let ServerMessage::TurnedAway { told_after_ms, .. } = &mut news {
            *told_after_ms = millis(self.answered.elapsed());
        }
        news
    }
}

/// The news kept for one held name, in the order the requests came.
#[derive(Debug, Default)]
pub struct Missed {
    news: Vec<HeldNews>,
    bytes: usize,
    dropped: u64,
}

impl Missed {
    /// Keeps `news` if it fits this name's bounds and `room`, the bytes
    /// left under the relay's; counts it dropped otherwise. Returns
    /// whether it was kept.
    pub fn keep(&mut self, news: HeldNews, room: usize) -> bool {
        let fits =
            self.news.len() < MAX_NEWS_PER_NAME && self.bytes + news.size <= MAX_BYTES_PER_NAME && news.size <= room;
        if !fits {
            self.dropped += 1;
            return false;
        }
        self.bytes += news.size;
        self.news.push(news);
        true
    }

    /// Encoded bytes kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// News dropped past the bounds.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The news kept, oldest first. The last one's reason also counts
    /// those dropped after it: the protocol has no word for them, and
    /// unsaid, the client's history would undercount the outage.
    pub fn into_news(self) -> Vec<HeldNews> {
        let mut news = self.news;
        let last_reason = news.last_mut().and_then(|last| match &mut last.news {
            ServerMessage::TurnedAway { reason, .. } => Some(reason),
            _ => None,
        });
        if let Some(reason) = last_reason.filter(|_| self.dropped > 0) {
            let dropped = usize::try_from(self.dropped).unwrap_or(usize::MAX);
            let more = portpreview_shared::text::counted(dropped, "more request", "more requests");
            reason.push_str(&format!(
                "; after it, {more} got this answer while the name was held, too many to be told one by one"
            ));
        }
        news
    }
}
