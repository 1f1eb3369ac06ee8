//! MCP tool definitions, generated from the operation catalog.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use state_core::catalog::{Effect, Operation};

use state_api::Options;

/// The tools one server exposes, built once at start-up. List order is the catalog's, so it is
/// stable across calls as MCP requires.
pub(crate) struct ToolSet {
    tools: Arc<Vec<Tool>>,
    by_name: HashMap<&'static str, Operation>,
}

impl ToolSet {
    pub(crate) fn new(options: &Options) -> ToolSet {
        let operations = options.exposed();
        let tools = operations.iter().map(|op| definition(*op)).collect();
        let by_name = operations.iter().map(|op| (op.name(), *op)).collect();
        ToolSet { tools: Arc::new(tools), by_name }
    }

    pub(crate) fn all(&self) -> Vec<Tool> {
        self.tools.as_ref().clone()
    }

    pub(crate) fn get(&self, name: &str) -> Option<Operation> {
        self.by_name.get(name).copied()
    }

    pub(crate) fn definition(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    pub(crate) fn names(&self) -> Vec<&'static str> {
        let mut names: Vec<_> = self.by_name.keys().copied().collect();
        names.sort_unstable();
        names
    }
}

fn definition(op: Operation) -> Tool {
    let spec = op.spec();
    // The title is the tool's own field; repeating it in the annotations costs every client.
    let annotations = match spec.effect {
        Effect::ReadOnly => ToolAnnotations::new().read_only(true),
        Effect::IdempotentWrite => ToolAnnotations::new().read_only(false).destructive(true).idempotent(true),
        Effect::Write => ToolAnnotations::new().read_only(false).destructive(true).idempotent(false),
    }
    .open_world(false);
    let mut tool = Tool::new(spec.name, spec.description, Arc::new(spec.input_schema()))
        .with_title(spec.title)
        .with_annotations(annotations);
    if let Some(output) = spec.output_schema() {
        tool = tool.with_raw_output_schema(Arc::new(output));
    }
    tool
}
