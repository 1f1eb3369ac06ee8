//! [`Pages`]: the pages of a listing, for callers that want more than one. Every listing
//! answers `next_cursor` while more remain, and takes it back as `cursor`; following it is
//! written here once.

use serde_json::Value;

use crate::api::Api;
use crate::catalog::Operation;
use crate::reply::Reply;

/// The pages of one listing, in order, one call each.
pub struct Pages {
    api: Api,
    op: Operation,
    args: Value,
    done: bool,
}

impl Pages {
    /// The pages of the listing `op` answers to `args` through `api`, following its cursor.
    pub fn new(api: Api, op: Operation, args: Value) -> Pages {
        Pages { api, op, args, done: false }
    }

    /// The next page's reply; `None` after the last page, or after a reply that was not a
    /// page (an error ends the listing: it is returned, and nothing follows it).
    pub async fn next(&mut self) -> Option<Reply> {
        if self.done {
            return None;
        }
        let reply = self.api.call(self.op, self.args.clone()).await;
        let cursor = reply.body.as_ref().ok().and_then(|page| page.get("next_cursor")).filter(|c| !c.is_null());
        match cursor {
            Some(cursor) => self.args["cursor"] = cursor.clone(),
            None => self.done = true,
        }
        Some(reply)
    }
}
