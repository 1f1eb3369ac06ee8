//! What one client is served: the tool profiles and groups it chose. A process that joins an
//! owner sends its choices, and the owner serves that connection with them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use state_core::catalog::{Operation, Profile, ToolGroup};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Tool profiles to expose; the native profile is always included.
    pub profiles: Vec<Profile>,
    /// Tool groups to expose (when none are chosen: the default groups, and the groups of
    /// the chosen compatibility profiles' tools).
    pub groups: Vec<ToolGroup>,
}

impl Default for Options {
    fn default() -> Options {
        Options::new([], [])
    }
}

impl Options {
    pub fn new(profiles: impl IntoIterator<Item = Profile>, groups: impl IntoIterator<Item = ToolGroup>) -> Options {
        let mut chosen = vec![Profile::Native];
        for profile in profiles {
            if !chosen.contains(&profile) {
                chosen.push(profile);
            }
        }
        let mut groups: Vec<ToolGroup> = groups.into_iter().collect();
        if groups.is_empty() {
            groups = ToolGroup::DEFAULT.to_vec();
            // `--compat sage` alone serves Sage's tools, whatever their groups.
            let theirs = Operation::all()
                .filter(|op| op.spec().profile != Profile::Native && chosen.contains(&op.spec().profile));
            for op in theirs {
                if !groups.contains(&op.spec().group) {
                    groups.push(op.spec().group);
                }
            }
        }
        Options { profiles: chosen, groups }
    }

    /// Whether a call of `op` is served: its profile and group were chosen. A profile's tool
    /// replacing a native one of the same name only changes what is listed; the native
    /// operation stays callable (state-http's REST routes, for one, are native).
    pub fn permits(&self, op: Operation) -> bool {
        let spec = op.spec();
        self.profiles.contains(&spec.profile) && self.groups.contains(&spec.group)
    }

    /// Every operation of every profile: for a frontend that filters what it offers itself.
    pub fn everything() -> Options {
        Options::new(Profile::ALL, ToolGroup::ALL)
    }

    /// The operations exposed, in catalog order (a profile's tool replaces a native one of
    /// the same name).
    pub fn exposed(&self) -> Vec<Operation> {
        Operation::exposed(&self.profiles, &self.groups)
    }
}

/// On the wire: names, so an owner can refuse a profile it does not know by name.
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
        Ok(Options::new(profiles, groups))
    }
}
