//! Compatibility profiles: the argument and result shapes of servers we replace, and adapters
//! (`<profile>::calls`) that map each of their tools onto native operations over the seam
//! (`seam::Seam`) and shape the answers. The few rules of theirs ours lack are stated with the
//! core's planners (`sidecar::rules`); the engine has no verb of any profile.

pub mod agentcheckpoint;
pub mod caxton;
pub mod goldfish;
pub mod memory;
pub mod sage;
pub mod seam;
pub mod sidecar;
