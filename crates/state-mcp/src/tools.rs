//! MCP tool definitions, generated from the operation catalog, and the two tools a default
//! session uses to reach the rest: `state_tools` lists the groups not yet listed and enables
//! them, `state_call` runs any served tool by name (for clients that never refresh their list).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value, json};
use state_api::Options;

use crate::schema::{self, Direction};
use state_api::catalog::{Effect, Operation, ToolGroup};

pub(crate) const DISCOVER_TOOL: &str = "state_tools";
pub(crate) const CALL_TOOL: &str = "state_call";

/// The tools one server serves, built once at start-up. List order is the catalog's, so it is
/// stable across calls as MCP requires.
pub(crate) struct ToolSet {
    options: Options,
    definitions: HashMap<Operation, Tool>,
    by_name: HashMap<&'static str, Operation>,
    discover: Option<[Tool; 2]>,
}

impl ToolSet {
    pub(crate) fn new(options: &Options) -> ToolSet {
        let served = options.served();
        let definitions = served.iter().map(|op| (*op, definition(*op))).collect();
        let by_name = served.iter().map(|op| (op.name(), *op)).collect();
        let discover = options.discover.then(|| [discover_definition(options), call_definition()]);
        ToolSet { options: options.clone(), definitions, by_name, discover }
    }

    /// What a session lists once it has enabled `enabled`.
    pub(crate) fn listed(&self, enabled: &[ToolGroup]) -> Vec<Tool> {
        let mut tools: Vec<Tool> =
            self.options.listed_with(enabled).iter().filter_map(|op| self.definitions.get(op).cloned()).collect();
        tools.extend(self.discover.iter().flatten().cloned());
        tools
    }

    /// A served operation by the name a client calls it, listed or not.
    pub(crate) fn get(&self, name: &str) -> Option<Operation> {
        self.by_name.get(name).copied()
    }

    pub(crate) fn definition(&self, name: &str) -> Option<Tool> {
        if let Some(op) = self.get(name) {
            return self.definitions.get(&op).cloned();
        }
        self.discover.iter().flatten().find(|t| t.name == name).cloned()
    }

    pub(crate) fn discovers(&self) -> bool {
        self.discover.is_some()
    }

    pub(crate) fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.by_name.keys().copied().collect();
        names.extend(self.discover.iter().flatten().map(|t| t.name.as_ref()));
        names.sort_unstable();
        names
    }

    /// `state_tools`: enables `enable` (group names) on top of `enabled`, and answers with
    /// every group still to discover and the definitions of the tools just enabled.
    pub(crate) fn discover(
        &self,
        enabled: &mut Vec<ToolGroup>,
        arguments: &Map<String, Value>,
    ) -> Result<Value, String> {
        let asked = match arguments.get("enable") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(names)) => names
                .iter()
                .map(|name| {
                    let group = name.as_str().and_then(ToolGroup::from_name);
                    group.filter(|g| self.options.groups.contains(g)).ok_or_else(|| {
                        let offered: Vec<&str> = self.options.groups.iter().map(|g| g.name()).collect();
                        format!("no tool group {name}; this server's groups are: {}", offered.join(", "))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(other) => return Err(format!("`enable` is a list of group names, not {other}")),
        };
        if let Some(unknown) = arguments.keys().find(|k| *k != "enable") {
            return Err(format!("unknown argument `{unknown}`; state_tools takes only `enable`"));
        }
        let before = self.options.listed_with(enabled);
        for group in asked {
            if !enabled.contains(&group) {
                enabled.push(group);
            }
        }
        let added: Vec<Value> = self
            .options
            .listed_with(enabled)
            .into_iter()
            .filter(|op| !before.contains(op))
            .filter_map(|op| self.definitions.get(&op))
            .map(|tool| json!({"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema}))
            .collect();
        let groups: Vec<Value> = self
            .options
            .groups_to_discover(enabled)
            .into_iter()
            .map(|(group, ops)| {
                json!({"group": group.name(), "about": group.summary(), "tools": ops.iter().map(|op| op.name()).collect::<Vec<_>>()})
            })
            .collect();
        Ok(json!({
            "enabled": enabled.iter().map(|g| g.name()).collect::<Vec<_>>(),
            "tools": added,
            "more": groups,
        }))
    }
}

/// Enabled groups of one session (a legacy session's list grows with them).
#[derive(Default)]
pub(crate) struct Enabled(Mutex<Vec<ToolGroup>>);

impl Enabled {
    pub(crate) fn get(&self) -> Vec<ToolGroup> {
        self.0.lock().map(|g| g.clone()).unwrap_or_default()
    }

    pub(crate) fn update<T>(&self, change: impl FnOnce(&mut Vec<ToolGroup>) -> T) -> T {
        let mut guard = match self.0.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        change(&mut guard)
    }
}

fn definition(op: Operation) -> Tool {
    let spec = op.spec();
    // The title is the tool's own field; repeating it in the annotations costs every client.
    let annotations = match spec.effect {
        Effect::ReadOnly => ToolAnnotations::new().read_only(true),
        Effect::IdempotentWrite => ToolAnnotations::new().read_only(false).destructive(true).idempotent(true),
        Effect::Additive => ToolAnnotations::new().read_only(false).destructive(false).idempotent(true),
        Effect::Write => ToolAnnotations::new().read_only(false).destructive(true).idempotent(false),
    }
    .open_world(false);
    let input = schema::for_tool_list(spec.input_schema(), Direction::Input);
    let mut tool =
        Tool::new(spec.name, spec.description, Arc::new(input)).with_title(spec.title).with_annotations(annotations);
    if let Some(output) = spec.output_schema() {
        tool = tool.with_raw_output_schema(Arc::new(schema::for_tool_list(output, Direction::Output)));
    }
    tool
}

fn object(value: Value) -> Arc<Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::default(),
    }
}

fn discover_definition(options: &Options) -> Tool {
    let undiscovered = options.groups_to_discover(&[]);
    let about: Vec<String> =
        undiscovered.iter().map(|(group, _)| format!("{}: {}", group.name(), group.summary())).collect();
    let description = format!(
        "More tools, by group. {}. Enable groups to get their tools' definitions (your tool list updates; if it does not, run them with state_call).",
        about.join("; ")
    );
    let names: Vec<&str> = undiscovered.iter().map(|(group, _)| group.name()).collect();
    let schema = json!({
        "type": "object",
        "properties": {"enable": {"type": "array", "items": {"enum": names}}},
        "additionalProperties": false,
    });
    Tool::new(DISCOVER_TOOL, description, object(schema))
        .with_title("More tools")
        .with_annotations(ToolAnnotations::new().read_only(true).open_world(false))
}

fn call_definition() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {"tool": {"type": "string"}, "arguments": {"type": "object"}},
        "required": ["tool"],
        "additionalProperties": false,
    });
    Tool::new(
        CALL_TOOL,
        "Run any tool of this server by name with its arguments (for tools state_tools enabled that your list lacks).",
        object(schema),
    )
    .with_title("Run a tool")
    .with_annotations(ToolAnnotations::new().read_only(false).destructive(true).open_world(false))
}
