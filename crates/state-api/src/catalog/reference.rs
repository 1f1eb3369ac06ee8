//! `docs/tools.md`, written from the catalog: every tool of every profile, its arguments
//! (with their bounds), its result, the right a token needs, its REST route and its
//! `statectl` command. A test compares the file with this, so the reference cannot drift from
//! the code.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::{Cli, Effect, JsonObject, Needs, Operation, OperationSpec, Profile, RestMethod, ToolGroup};

/// The whole reference, as `docs/tools.md` holds it.
pub fn tools_reference() -> String {
    let mut out = String::from(
        "# Tools: the reference\n\n\
         Generated from the catalog (`crates/state-api/src/catalog/reference.rs`); a test fails when this \
         file differs from it. Regenerate with \
         `STATE_UPDATE_DOCS=1 cargo nextest run -E 'test(tools_reference)'`. How the tools work \
         together: [guide.md](guide.md); which are served by default: [mcp.md](mcp.md#tools).\n\n\
         Rights: a token's `read` covers reads of ids under its prefixes, `write` reads and changes, \
         `admin` everything (see [http.md](http.md)). Processes of the machine's own user need none.\n",
    );
    for profile in Profile::ALL {
        let specs: Vec<&OperationSpec> =
            Operation::all().map(Operation::spec).filter(|spec| spec.profile == profile).collect();
        if specs.is_empty() {
            continue;
        }
        if profile == Profile::Native {
            let _ = writeln!(out, "\n## Native tools\n");
            for group in ToolGroup::ALL {
                let in_group: Vec<_> = specs.iter().filter(|spec| spec.group == group).collect();
                if in_group.is_empty() {
                    continue;
                }
                let _ = writeln!(out, "\n### Group `{}`: {}\n", group.name(), group.summary());
                for spec in in_group {
                    tool(&mut out, spec, "####");
                }
            }
        } else {
            let _ = writeln!(out, "\n## Profile `{}` (`--compat {}`)\n", profile.name(), profile.name());
            for spec in specs {
                tool(&mut out, spec, "###");
            }
        }
    }
    // Each block ends with its blank line; headings add their own.
    while out.contains("\n\n\n") {
        out = out.replace("\n\n\n", "\n\n");
    }
    out
}

fn tool(out: &mut String, spec: &OperationSpec, heading: &str) {
    let _ = writeln!(out, "\n{heading} `{}`: {}\n", spec.name, spec.title);
    let _ = writeln!(out, "{}\n", spec.description.trim());
    let input = spec.input_schema();
    fields(out, "argument", &input, true);
    match spec.output_schema() {
        Some(output) => fields(out, "result field", &output, false),
        None => {
            let _ = writeln!(out, "Result: text.\n");
        }
    }
    let right = match (spec.needs(), spec.effect) {
        (Needs::WholeStoreAdmin, _) => "`admin` over the whole store (`\"\"`)".to_owned(),
        (Needs::WholeStore, Effect::ReadOnly) => "`read` over the whole store (`\"\"`)".to_owned(),
        (Needs::WholeStore, _) => "`write` over the whole store (`\"\"`)".to_owned(),
        (Needs::Typed(_), Effect::ReadOnly) => "`read` of the ids it names".to_owned(),
        (Needs::Typed(_), _) => "`write` of the ids it names".to_owned(),
    };
    let mut facts = vec![format!("Rights: {right}")];
    if let Some(route) = spec.rest {
        let method = match route.method {
            RestMethod::Get => "GET",
            RestMethod::Put => "PUT",
            RestMethod::Post => "POST",
            RestMethod::Delete => "DELETE",
        };
        facts.push(format!("REST: `{method} {}`", route.path));
    }
    facts.push(format!("REST (any tool): `POST /v1/call/{}/{}`", spec.profile.name(), spec.name));
    match spec.cli {
        Cli::Command(words) => facts.push(format!("statectl: `statectl {words}`")),
        Cli::CallOnly(_) => facts.push(format!("statectl: `statectl call {}`", spec.operation.id())),
    }
    let _ = writeln!(out, "{}.\n", facts.join(" · "));
}

/// A table of the schema's top-level properties.
fn fields(out: &mut String, what: &str, schema: &JsonObject, arguments: bool) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object).filter(|p| !p.is_empty()) else {
        if arguments {
            let _ = writeln!(out, "No arguments.\n");
        }
        return;
    };
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let defs = schema.get("$defs").and_then(Value::as_object);
    let _ = writeln!(out, "| {what} | type | {} |", if arguments { "required | about" } else { "about" });
    let _ = writeln!(out, "|---|---|{}", if arguments { "---|---|" } else { "---|" });
    for (name, property) in properties {
        let property = resolve(property, defs);
        let described = cell(&about(&property, defs));
        let typed = cell(&kind(&property, defs));
        if arguments {
            let needed = if required.contains(&name.as_str()) { "yes" } else { "" };
            let _ = writeln!(out, "| `{name}` | {typed} | {needed} | {described} |");
        } else {
            let _ = writeln!(out, "| `{name}` | {typed} | {described} |");
            // One level down, for results: a list's items (`events[].by`) or an object's fields.
            let (inner, path) = match property.get("items") {
                Some(items) => (resolve(items, defs), format!("{name}[]")),
                None => (property.clone(), name.clone()),
            };
            for (field, schema) in inner.get("properties").and_then(Value::as_object).into_iter().flatten() {
                let schema = resolve(schema, defs);
                let _ = writeln!(
                    out,
                    "| `{path}.{field}` | {} | {} |",
                    cell(&kind(&schema, defs)),
                    cell(&about(&schema, defs))
                );
            }
        }
    }
    let _ = writeln!(out);
}

/// A `$ref` to one of the schema's definitions, followed, keeping the property's own words.
fn resolve(property: &Value, defs: Option<&Map<String, Value>>) -> Value {
    let Some(reference) = property.get("$ref").and_then(Value::as_str) else { return property.clone() };
    let target = reference.rsplit('/').next().and_then(|name| defs?.get(name)).cloned().unwrap_or(Value::Null);
    let mut merged = target.as_object().cloned().unwrap_or_default();
    if let Some(own) = property.as_object() {
        for (k, v) in own.iter().filter(|(k, _)| *k != "$ref") {
            merged.insert(k.clone(), v.clone());
        }
    }
    Value::Object(merged)
}

/// The type in a few words: `string`, `integer 1–1000`, `one of a, b`, `array of string`.
fn kind(schema: &Value, defs: Option<&Map<String, Value>>) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let names: Vec<String> =
            values.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).collect();
        return format!("one of {}", names.join(", "));
    }
    if let Some(value) = schema.get("const") {
        return value.as_str().map_or_else(|| value.to_string(), str::to_owned);
    }
    for union in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(union).and_then(Value::as_array) {
            // A union of named values (each documented on its own) reads as one list of them.
            let named: Option<Vec<String>> = options
                .iter()
                .map(|option| {
                    let option = resolve(option, defs);
                    match (option.get("enum").and_then(Value::as_array), option.get("const")) {
                        (Some(values), _) => {
                            Some(values.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                        }
                        (None, Some(Value::String(one))) => Some(vec![one.clone()]),
                        _ => None,
                    }
                })
                .collect::<Option<Vec<Vec<String>>>>()
                .map(|lists| lists.concat());
            if let Some(names) = named.filter(|names| !names.is_empty()) {
                return format!("one of {}", names.join(", "));
            }
            let mut kinds: Vec<String> = Vec::new();
            for option in options {
                let option = resolve(option, defs);
                if option.get("type").and_then(Value::as_str) == Some("null") {
                    continue;
                }
                let described = kind(&option, defs);
                if !kinds.contains(&described) {
                    kinds.push(described);
                }
            }
            return kinds.join(" or ");
        }
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect(),
        _ => Vec::new(),
    };
    let mut text = if types.is_empty() { "any JSON".to_owned() } else { types.join(" or ") };
    if types == ["array"]
        && let Some(items) = schema.get("items")
    {
        text = format!("array of {}", kind(&resolve(items, defs), defs));
    }
    let bound = |name: &str| schema.get(name).and_then(Value::as_f64).map(number);
    match (bound("minimum"), bound("maximum")) {
        (Some(min), Some(max)) => text.push_str(&format!(" {min}–{max}")),
        (Some(min), None) => text.push_str(&format!(" ≥ {min}")),
        (None, Some(max)) => text.push_str(&format!(" ≤ {max}")),
        (None, None) => {}
    }
    if let (Some(min), Some(max)) = (bound("minLength"), bound("maxLength")) {
        text.push_str(&format!(" ({min}–{max} characters)"));
    } else if let Some(max) = bound("maxLength") {
        text.push_str(&format!(" (at most {max} characters)"));
    }
    text
}

/// The property's description, or its type's.
fn about(schema: &Value, defs: Option<&Map<String, Value>>) -> String {
    let own = schema.get("description").and_then(Value::as_str);
    let from_union =
        || {
            ["anyOf", "oneOf"].iter().find_map(|union| {
                schema.get(*union)?.as_array()?.iter().find_map(|option| {
                    resolve(option, defs).get("description").and_then(Value::as_str).map(str::to_owned)
                })
            })
        };
    own.map(str::to_owned).or_else(from_union).unwrap_or_default()
}

fn number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 { format!("{}", n as i64) } else { format!("{n}") }
}

/// Text fit for a table cell: one line, no pipes.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}
