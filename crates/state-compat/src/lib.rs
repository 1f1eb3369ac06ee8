//! Compatibility profiles: the argument and result shapes of servers we replace, translated
//! to and from our operations. Pure data mapping; the semantics stay ours.

pub mod agentcheckpoint;
pub mod caxton;
pub mod goldfish;
pub mod sage;
pub mod sidecar;
