//! What a server exposes, chosen at start-up.

use state_core::catalog::{Profile, ToolGroup};

/// A compatibility profile selectable on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileArg {
    /// The agentcheckpoint server's tools: get_state, set_state, force_set_state, list_state, delete_state.
    Agentcheckpoint,
    /// mcp-state-sidecar's tools by name and shape (state_*, workflow_*, lease_*, session_*,
    /// history_log, sidecar_health, sidecar_reset), replacing ours of the same name.
    Sidecar,
    /// Caxton's StateTool interface: store, retrieve, delete, list, exists, batch_store, batch_retrieve.
    Caxton,
}

impl From<ProfileArg> for Profile {
    fn from(arg: ProfileArg) -> Profile {
        match arg {
            ProfileArg::Agentcheckpoint => Profile::AgentCheckpoint,
            ProfileArg::Sidecar => Profile::Sidecar,
            ProfileArg::Caxton => Profile::Caxton,
        }
    }
}

/// A tool group selectable on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupArg {
    /// Keys: get, set, delete, list, batch get, transactions, history.
    Kv,
    /// Leases with fencing tokens.
    Lease,
    /// Workflow runs: create, claim, checkpoint, resume, finish.
    Workflow,
    /// Versioned session snapshots.
    Session,
    /// Health and reset.
    Admin,
}

impl From<GroupArg> for ToolGroup {
    fn from(arg: GroupArg) -> ToolGroup {
        match arg {
            GroupArg::Kv => ToolGroup::Kv,
            GroupArg::Lease => ToolGroup::Lease,
            GroupArg::Workflow => ToolGroup::Workflow,
            GroupArg::Session => ToolGroup::Session,
            GroupArg::Admin => ToolGroup::Admin,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Tool profiles to expose; the native profile is always included.
    pub profiles: Vec<Profile>,
    /// Tool groups to expose (all when none are chosen).
    pub groups: Vec<ToolGroup>,
}

impl Options {
    pub fn new(compat: &[ProfileArg], groups: &[GroupArg]) -> Options {
        let mut profiles = vec![Profile::Native];
        for profile in compat.iter().map(|p| Profile::from(*p)) {
            if !profiles.contains(&profile) {
                profiles.push(profile);
            }
        }
        let groups = if groups.is_empty() {
            ToolGroup::ALL.to_vec()
        } else {
            groups.iter().map(|g| ToolGroup::from(*g)).collect()
        };
        Options { profiles, groups }
    }
}
