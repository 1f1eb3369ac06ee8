//! Usage guides served as MCP resources, so an agent can read how to use the store without
//! leaving its client. The text lives in `docs/*.md` beside this crate.

use rmcp::model::{Resource, ResourceContents};
use state_api::catalog::Profile;

#[derive(Debug, PartialEq)]
pub(crate) struct Doc {
    pub(crate) uri: &'static str,
    name: &'static str,
    description: &'static str,
    profile: Profile,
    text: &'static str,
}

impl Doc {
    pub(crate) fn resource(&self) -> Resource {
        Resource::new(self.uri, self.name)
            .with_description(self.description)
            .with_mime_type("text/markdown")
            .with_size(self.text.len() as u64)
    }

    pub(crate) fn contents(&self) -> ResourceContents {
        ResourceContents::text(self.text, self.uri).with_mime_type("text/markdown")
    }
}

const DOCS: [Doc; 7] = [
    Doc {
        uri: "state://docs/usage",
        name: "Read, compare-and-set, retry",
        description: "The loop that keeps concurrent agents from losing each other's writes.",
        profile: Profile::Native,
        text: include_str!("../docs/usage.md"),
    },
    Doc {
        uri: "state://docs/coordination",
        name: "Leases, fencing tokens and workflow runs",
        description: "Owning a resource safely, and running work that survives a worker's death.",
        profile: Profile::Native,
        text: include_str!("../docs/coordination.md"),
    },
    Doc {
        uri: "state://docs/keys",
        name: "Key naming",
        description: "How to name keys so they list, page and group well.",
        profile: Profile::Native,
        text: include_str!("../docs/keys.md"),
    },
    Doc {
        uri: "state://docs/what-not-to-store",
        name: "What not to store",
        description: "What belongs elsewhere: large blobs, secrets, facts for semantic recall.",
        profile: Profile::Native,
        text: include_str!("../docs/what-not-to-store.md"),
    },
    Doc {
        uri: "checkpoint://docs/usage",
        name: "Usage Patterns",
        description: "Single-writer and multi-agent patterns with get_state, set_state and force_set_state.",
        profile: Profile::AgentCheckpoint,
        text: include_str!("../docs/agentcheckpoint-usage.md"),
    },
    Doc {
        uri: "checkpoint://docs/coordination",
        name: "Multi-Agent Coordination",
        description: "Version-guarded writes with set_state and what to do on a conflict.",
        profile: Profile::AgentCheckpoint,
        text: include_str!("../docs/agentcheckpoint-coordination.md"),
    },
    Doc {
        uri: "checkpoint://docs/keys",
        name: "Key Naming Convention",
        description: "Key structure and list_state patterns.",
        profile: Profile::AgentCheckpoint,
        text: include_str!("../docs/agentcheckpoint-keys.md"),
    },
];

pub(crate) fn for_profiles(profiles: &[Profile]) -> impl Iterator<Item = &'static Doc> + '_ {
    DOCS.iter().filter(|doc| profiles.contains(&doc.profile))
}
