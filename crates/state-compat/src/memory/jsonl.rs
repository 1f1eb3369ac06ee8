//! The memory server's file format: one JSON object per line, `{"type":"entity", name,
//! entityType, observations}` or `{"type":"relation", from, to, relationType}`. Read for the
//! one-time import of `MEMORY_FILE_PATH` and `statectl import --format memory`, written by
//! `statectl export --format memory`.

use serde::{Deserialize, Serialize};

use super::{Entity, Graph, Relation};

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Line {
    Entity(Entity),
    Relation(Relation),
}

/// A line that is not an entity or a relation, by its number (from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// The graph a memory file holds. Blank lines are skipped, as that server skipped them; any
/// line that is not JSON, or an entity or relation without its fields, is an error naming it.
pub fn parse(text: &str) -> Result<Graph, BadLine> {
    let mut graph = Graph::default();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |e: serde_json::Error| BadLine { line: index + 1, message: e.to_string() };
        let value: serde_json::Value = serde_json::from_str(line).map_err(bad)?;
        // Lines of another type were passed over by that server; so are they here.
        match value.get("type").and_then(serde_json::Value::as_str) {
            Some("entity") => graph.entities.push(serde_json::from_value(value).map_err(bad)?),
            Some("relation") => graph.relations.push(serde_json::from_value(value).map_err(bad)?),
            _ => {}
        }
    }
    Ok(graph)
}

/// The graph as a memory file: entities, then relations, one per line.
pub fn render(graph: &Graph) -> String {
    let lines = graph
        .entities
        .iter()
        .cloned()
        .map(Line::Entity)
        .chain(graph.relations.iter().cloned().map(Line::Relation))
        .filter_map(|line| serde_json::to_string(&line).ok());
    lines.collect::<Vec<_>>().join("\n")
}
