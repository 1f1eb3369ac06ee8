//! What one client is served: the operations it may call, and which of them its tool list
//! shows from the start. A process that joins an owner sends what it may call, and the owner
//! serves that connection with it.
//!
//! Every listed tool costs every session context tokens, so by default a client is shown a
//! short list ([`CORE`]) and discovers the rest (`state_tools`): everything stays callable,
//! but a conversation pays only for what it uses.

use crate::catalog::{Operation, Profile, ToolGroup};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The native operations a default session lists before it asks for more: reading, writing
/// and waiting on keys, which most sessions use and the rest build on.
pub const CORE: [Operation; 6] = [
    Operation::StateGet,
    Operation::StateSet,
    Operation::StateDelete,
    Operation::StateList,
    Operation::StateTxn,
    Operation::StateWatch,
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Profiles served; `Native` is among them when any native group is.
    pub profiles: Vec<Profile>,
    /// Native groups a client may call.
    pub groups: Vec<ToolGroup>,
    /// Native groups listed from the start (a subset of `groups`).
    pub listed: Vec<ToolGroup>,
    /// Whether the list starts short ([`CORE`], `listed`, the profiles' tools) with a tool that
    /// lists and enables the other groups for the session.
    pub discover: bool,
}

impl Default for Options {
    /// Every native operation callable; the short list with discovery.
    fn default() -> Options {
        Options::discovering([], [])
    }
}

impl Options {
    /// These native groups, listed in full, and these profiles' tools. No groups and no
    /// profiles is the default.
    pub fn new(profiles: impl IntoIterator<Item = Profile>, groups: impl IntoIterator<Item = ToolGroup>) -> Options {
        let profiles = dedup(profiles);
        let groups = dedup(groups);
        if profiles.is_empty() && groups.is_empty() {
            return Options::default();
        }
        Options::only(profiles, groups)
    }

    /// Exactly these profiles' tools and these native groups, listed in full; nothing when
    /// both are empty (`--tools none`).
    pub fn only(profiles: impl IntoIterator<Item = Profile>, groups: impl IntoIterator<Item = ToolGroup>) -> Options {
        let groups = dedup(groups);
        Options::serving(dedup(profiles), groups.clone(), groups, false)
    }

    /// Every native group callable, the short list with discovery, plus these groups listed
    /// from the start and these profiles' tools.
    pub fn discovering(
        profiles: impl IntoIterator<Item = Profile>,
        listed: impl IntoIterator<Item = ToolGroup>,
    ) -> Options {
        Options::serving(dedup(profiles), ToolGroup::ALL.to_vec(), dedup(listed), true)
    }

    /// Every operation of every profile, listed: for a frontend that filters what it offers
    /// itself, and for a process that joins on behalf of such a frontend.
    pub fn everything() -> Options {
        Options::new(Profile::ALL, ToolGroup::ALL)
    }

    fn serving(profiles: Vec<Profile>, groups: Vec<ToolGroup>, listed: Vec<ToolGroup>, discover: bool) -> Options {
        let mut chosen: Vec<Profile> = profiles.into_iter().filter(|p| *p != Profile::Native).collect();
        if !groups.is_empty() {
            chosen.insert(0, Profile::Native);
        }
        let listed = listed.into_iter().filter(|g| groups.contains(g)).collect();
        Options { profiles: chosen, groups, listed, discover }
    }

    /// Whether a call of `op` is served: a native operation of a chosen group, or a chosen
    /// profile's. A profile's tool replacing a native one of the same name only changes what
    /// is listed; the native operation stays callable where its group is served.
    pub fn permits(&self, op: Operation) -> bool {
        let spec = op.spec();
        match spec.profile {
            Profile::Native => self.groups.contains(&spec.group),
            profile => self.profiles.contains(&profile),
        }
    }

    /// Whether some operation of `group` is served: the group itself, or a profile's tool in it
    /// (a replaced server's checkpoint tools serve checkpoints).
    pub fn serves_group(&self, group: ToolGroup) -> bool {
        self.groups.contains(&group)
            || Operation::all().any(|op| {
                let spec = op.spec();
                spec.group == group && spec.profile != Profile::Native && self.profiles.contains(&spec.profile)
            })
    }

    /// Whether a server with this selection answers `op` on a route that names the operation
    /// itself (REST, the HTTP seam): a native operation of a served group, or a profile's
    /// operation where its profile or its group is served (a replaced server's shape of an
    /// operation this server offers anyway).
    pub fn covers(&self, op: Operation) -> bool {
        self.permits(op) || self.groups.contains(&op.spec().group)
    }

    /// Every operation served, in catalog order, by the name a client calls it: a profile's
    /// tool replaces a native one of the same name.
    pub fn served(&self) -> Vec<Operation> {
        let permitted: Vec<Operation> = Operation::all().filter(|op| self.permits(*op)).collect();
        let replaced = |op: &Operation| {
            op.spec().profile == Profile::Native
                && permitted.iter().any(|other| other.spec().profile != Profile::Native && other.name() == op.name())
        };
        permitted.iter().copied().filter(|op| !replaced(op)).collect()
    }

    /// The operations a session lists before it enables any group, in catalog order.
    pub fn listed_at_start(&self) -> Vec<Operation> {
        self.listed_with(&[])
    }

    /// The operations a session lists once it has enabled `enabled` (groups it asked for).
    pub fn listed_with(&self, enabled: &[ToolGroup]) -> Vec<Operation> {
        self.served()
            .into_iter()
            .filter(|op| {
                let spec = op.spec();
                // A profile's tools are its server's list; moving a whole graph in
                // (`memory_import`) is served but listed only with the transfer group.
                (spec.profile != Profile::Native && spec.group != ToolGroup::Transfer)
                    || self.listed.contains(&spec.group)
                    || enabled.contains(&spec.group)
                    || (self.discover && CORE.contains(op))
            })
            .collect()
    }

    /// The native groups a session could still enable, with the operations each would add.
    pub fn groups_to_discover(&self, enabled: &[ToolGroup]) -> Vec<(ToolGroup, Vec<Operation>)> {
        let listed = self.listed_with(enabled);
        self.groups
            .iter()
            .map(|group| {
                let more = self
                    .served()
                    .into_iter()
                    .filter(|op| op.spec().group == *group && op.spec().profile == Profile::Native)
                    .filter(|op| !listed.contains(op))
                    .collect::<Vec<_>>();
                (*group, more)
            })
            .filter(|(_, more)| !more.is_empty())
            .collect()
    }
}

fn dedup<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// On the wire: what may be called, by name, so an owner can refuse a profile it does not know
/// by name. How a joiner lists its tools is its own business.
#[derive(Serialize, Deserialize)]
struct Named {
    profiles: Vec<String>,
    groups: Vec<String>,
}

impl Serialize for Options {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Named {
            profiles: self.profiles.iter().map(|p| p.name().to_owned()).collect(),
            groups: self.groups.iter().map(|g| g.name().to_owned()).collect(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Options {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Options, D::Error> {
        use serde::de::Error;
        let named = Named::deserialize(deserializer)?;
        let profiles = named
            .profiles
            .iter()
            .map(|n| Profile::from_name(n).ok_or_else(|| D::Error::custom(format!("unknown tool profile `{n}`"))))
            .collect::<Result<Vec<_>, _>>()?;
        let groups = named
            .groups
            .iter()
            .map(|n| ToolGroup::from_name(n).ok_or_else(|| D::Error::custom(format!("unknown tool group `{n}`"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Options::only(profiles, groups))
    }
}

#[cfg(test)]
mod tests;
