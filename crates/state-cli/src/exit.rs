//! Exit codes, one per outcome class of the seam, so a script branches on what happened
//! without parsing output. Documented in `statectl --help` and docs/cli.md.

use state_api::Outcome;

pub const OK: u8 = 0;
/// Something failed that is none of the below: storage, a bug.
pub const FAILURE: u8 = 1;
/// The command line or the input was wrong (clap also exits 2 on bad flags).
pub const USAGE: u8 = 2;
pub const NOT_FOUND: u8 = 3;
/// A precondition did not hold: a version, a compare, a lease held by another.
pub const CONFLICT: u8 = 4;
/// A lease or claim token is no longer current.
pub const FENCED: u8 = 5;
/// The store could not be reached, or did not say whether a write was applied.
pub const UNAVAILABLE: u8 = 6;
/// The token does not cover what the command touches.
pub const FORBIDDEN: u8 = 7;
/// The token is past its quota (writes per second): retry later.
pub const LIMITED: u8 = 8;

pub fn of(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Ok => OK,
        Outcome::Conflict => CONFLICT,
        Outcome::NotFound => NOT_FOUND,
        Outcome::Fenced => FENCED,
        Outcome::Forbidden => FORBIDDEN,
        Outcome::Invalid => USAGE,
        Outcome::Unavailable => UNAVAILABLE,
        Outcome::Limited => LIMITED,
        // Outcome is non-exhaustive: a class added later is a failure until mapped here.
        _ => FAILURE,
    }
}
