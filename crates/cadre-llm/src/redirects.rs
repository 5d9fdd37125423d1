//! The redirect policy of every client that sends credentials or a conversation (model
//! providers, remote agents, MCP servers over HTTP): a redirect is followed only within the
//! origin the request was sent to.
//!
//! reqwest's default follows any redirect and, on the way to another host, takes off only
//! the standard credential headers (`Authorization`, cookies). `x-api-key`, `api-key` and
//! the headers a configuration or an agent file adds would go along, and a 307 or 308
//! sends the body again: the whole conversation, to wherever the server points.

use reqwest::redirect::{Attempt, Policy};

/// Redirects followed at most for one request.
pub const MAX_REDIRECTS: usize = 5;

/// Follow a redirect only to the same scheme, host and port as the request's first URL,
/// at most [`MAX_REDIRECTS`] times; any other redirect is not followed, and the caller gets
/// the redirect response itself (see [`redirect_refused`]).
pub fn same_origin_redirects() -> Policy {
    Policy::custom(decide)
}

fn decide(attempt: Attempt<'_>) -> reqwest::redirect::Action {
    let same_origin = attempt
        .previous()
        .first()
        .is_some_and(|first| first.origin() == attempt.url().origin());
    if !same_origin {
        attempt.stop()
    } else if attempt.previous().len() > MAX_REDIRECTS {
        attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
    } else {
        attempt.follow()
    }
}

/// What to say of a redirect response that was not followed: where it pointed, and why it
/// was not followed. The caller's error already names the status.
pub fn redirect_refused(location: Option<&str>) -> String {
    let to = location.unwrap_or("no Location");
    format!(
        "a redirect to {to}: not followed, because it leaves the scheme, host \
         and port the request was sent to (credentials and the request body would go along); \
         point the URL at where it redirects"
    )
}
