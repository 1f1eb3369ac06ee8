//! The official MCP memory server's knowledge graph (`@modelcontextprotocol/server-memory`):
//! its nine tools with their argument and result shapes, kept in the store instead of one
//! JSONL file, so any number of processes can write it at once without losing a write.
//!
//! Layout, under `memory-graph/` in the key space: an entity at `entity/<digest of its name>`
//! (the value is the entity as that server writes it), a relation at `relation/<digest of
//! from, to and type>`, and for each end of a relation a `link/<entity digest>/<relation
//! digest>` so deleting an entity finds its relations without reading the graph. Keys are
//! digests so that any name fits (keys are at most 512 bytes, names are not). A file imported
//! once is recorded at `import/<digest of its path>`.
//!
//! Every write is one rule the engine applies in one transaction (`rules`): reading the graph
//! and writing it cannot interleave with another process's write, which is what loses
//! observations in the original (each process reads the file, adds, and writes it back).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub mod calls;
pub mod jsonl;
pub mod rules;

/// Where the graph lives in the key space.
pub const ROOT: &str = "memory-graph/";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Entity {
    pub name: String,
    pub entity_type: String,
    pub observations: Vec<String>,
}

/// A directed edge, in active voice (`from` works at `to`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Relation {
    pub from: String,
    pub to: String,
    pub relation_type: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Graph {
    pub entities: Vec<Entity>,
    pub relations: Vec<Relation>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CreateEntitiesArgs {
    pub entities: Vec<Entity>,
}

/// The entities created (those whose name was new).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CreatedEntities {
    pub entities: Vec<Entity>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RelationsArgs {
    pub relations: Vec<Relation>,
}

/// The relations created (those not already there).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CreatedRelations {
    pub relations: Vec<Relation>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AddObservationsArgs {
    pub observations: Vec<ObservationsToAdd>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservationsToAdd {
    pub entity_name: String,
    pub contents: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AddedObservations {
    pub results: Vec<Added>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Added {
    pub entity_name: String,
    pub added_observations: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeleteEntitiesArgs {
    pub entity_names: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DeleteObservationsArgs {
    pub deletions: Vec<ObservationsToDelete>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservationsToDelete {
    pub entity_name: String,
    pub observations: Vec<String>,
}

/// What the deleting tools answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Done {
    pub success: bool,
    pub message: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct ReadGraphArgs {}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SearchNodesArgs {
    /// Matched, ignoring case, within names, types and observations.
    pub query: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OpenNodesArgs {
    pub names: Vec<String>,
}

/// A memory file's graph, to merge into the store once per file (`MEMORY_FILE_PATH` at the
/// first start, or `statectl import --format memory`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportArgs {
    /// Where the graph came from (its absolute path); a source already imported is skipped.
    pub source: String,
    #[serde(flatten)]
    pub graph: Graph,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Imported {
    /// False when this source had been imported before: nothing was changed.
    pub imported: bool,
    pub source: String,
    /// Entities created, entities that gained observations, relations created.
    pub entities_created: usize,
    pub entities_extended: usize,
    pub relations_created: usize,
}

/// The first 128 bits of SHA-256, in hex: a fixed-size key part for text of any length.
fn digest(parts: &[&str]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        // Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

pub fn entity_key(name: &str) -> String {
    format!("{ROOT}entity/{}", digest(&[name]))
}

pub fn relation_key(relation: &Relation) -> String {
    format!("{ROOT}relation/{}", digest(&[&relation.from, &relation.to, &relation.relation_type]))
}

/// Every link of one entity starts with this.
pub fn links_prefix(entity: &str) -> String {
    format!("{ROOT}link/{}/", digest(&[entity]))
}

pub fn link_key(entity: &str, relation: &Relation) -> String {
    format!("{}{}", links_prefix(entity), relation_key(relation).rsplit('/').next().unwrap_or_default())
}

pub fn import_key(source: &str) -> String {
    format!("{ROOT}import/{}", digest(&[source]))
}

pub const ENTITIES: &str = "memory-graph/entity/";
pub const RELATIONS: &str = "memory-graph/relation/";

/// What the deleting tools say, as that server said it.
pub fn done(what: &str) -> Done {
    Done { success: true, message: format!("{what} deleted successfully") }
}

#[cfg(test)]
mod tests;
