//! The answer to a request for a name held while its client reconnects.

use http::{Response, StatusCode};

use crate::body::{answer, retry_shortly, RelayBody};
use crate::held_news::HeldNews;
use crate::registry::{Registry, Route};
use crate::turned_away::TurnedAway;

/// Answers `request` for `name`, held while its client reconnects, with a
/// 503 that says when to try again. News of it is kept for the client,
/// whose history would otherwise never hear of the delivery.
pub fn answer_held(registry: &dyn Registry, name: &str, request: &TurnedAway<'_>) -> Response<RelayBody> {
    let reason = format!("tunnel {name} is reconnecting");
    request.tell(StatusCode::SERVICE_UNAVAILABLE, &reason, &[], |news, _| {
        if registry.hold_news(name, HeldNews::new(news.clone())?) {
            return Ok(());
        }
        // Its client may have taken the name back since it was routed.
        match registry.route(name) {
            Route::Live(tunnel) => tunnel.tell_turned_away(news, &[]),
            _ => Ok(()),
        }
    });
    retry_shortly(answer(StatusCode::SERVICE_UNAVAILABLE, reason))
}
