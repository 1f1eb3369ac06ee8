//! Goldfish's `checkpoint` over the seam: every answer is text in the asked format, failures
//! included, as that server wrote them; the outcome still says what happened.

use serde_json::Value;

use super::*;
use crate::seam::{Answer, Answered, Outcome, Seam, native};

fn text<E>(outcome: Outcome, text: String) -> Answered<E> {
    Ok(Answer::plain(outcome, Value::String(text)))
}

/// Takes its arguments as parsed or why they did not parse: a malformed call is answered in
/// text too.
pub async fn checkpoint<S: Seam>(
    seam: &S,
    args: Result<CheckpointArgs, String>,
    id: Option<String>,
) -> Answered<S::Error> {
    let args = match args {
        Ok(args) => args,
        Err(message) => return text(Outcome::Invalid, error_text(&message)),
    };
    let action = match action(&args) {
        Ok(action) => action,
        Err(unknown) => return text(Outcome::Invalid, unknown_action(&unknown)),
    };
    let format = args.output();
    let answer = match action {
        Action::Save => {
            let description = args.description.clone().unwrap_or_default();
            let saved = seam.call(native::CHECKPOINT_SAVE, args.save_request(id)).await;
            saved.map(|r| (Outcome::Ok, super::saved(format, &description, &r)))
        }
        Action::Restore => match args.restore_request() {
            Err(message) => return text(Outcome::Invalid, error_text(&message)),
            Ok(request) => seam.call(native::CHECKPOINT_RESTORE, request).await.map(|r| {
                let outcome = match r.status {
                    RestoreStatus::Ok => Outcome::Ok,
                    RestoreStatus::NotFound => Outcome::NotFound,
                    RestoreStatus::Ambiguous => Outcome::Invalid,
                };
                (outcome, restored(format, &r))
            }),
        },
        Action::Search => match args.search_request() {
            Err(message) => return text(Outcome::Invalid, error_text(&message)),
            Ok(request) => {
                let query = request.query.clone();
                seam.call(native::CHECKPOINT_SEARCH, request).await.map(|r| (Outcome::Ok, found(format, &query, &r)))
            }
        },
        Action::Timeline => {
            let request = args.timeline_request();
            seam.call(native::CHECKPOINT_TIMELINE, request).await.map(|r| (Outcome::Ok, timeline(format, &r)))
        }
    };
    match answer {
        Ok((outcome, answer)) => text(outcome, answer),
        Err(error) => match S::invalid(&error) {
            Some(invalid) => text(Outcome::Invalid, error_text(&invalid.to_string())),
            None => Err(error.into()),
        },
    }
}
