//! What a server exposes, chosen at start-up.

use state_core::catalog::Profile;

/// A compatibility profile selectable on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileArg {
    /// The agentcheckpoint server's tools: get_state, set_state, force_set_state, list_state, delete_state.
    Agentcheckpoint,
}

impl From<ProfileArg> for Profile {
    fn from(arg: ProfileArg) -> Profile {
        match arg {
            ProfileArg::Agentcheckpoint => Profile::AgentCheckpoint,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Tool profiles to expose; the native profile is always included.
    pub profiles: Vec<Profile>,
}

impl Options {
    pub fn new(compat: &[ProfileArg]) -> Options {
        let mut profiles = vec![Profile::Native];
        for profile in compat.iter().map(|p| Profile::from(*p)) {
            if !profiles.contains(&profile) {
                profiles.push(profile);
            }
        }
        Options { profiles }
    }
}
