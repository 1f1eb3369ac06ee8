//! How a result is printed: JSON for scripts (`--json`), text for people. Text is derived
//! from the result's shape, so every command prints the same way: a list of records becomes
//! a table, a record becomes aligned `field  value` lines, and a result that carries ready
//! markdown (a restored checkpoint, a timeline, recalled notes) prints that.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// Longest a table cell gets before it is cut (with `…`).
const MAX_CELL: usize = 60;

pub(crate) fn json(body: &Value) -> String {
    serde_json::to_string_pretty(body).unwrap_or_else(|_| body.to_string())
}

pub(crate) fn text(body: &Value) -> String {
    let Value::Object(fields) = body else { return scalar(body) };
    for markdown in ["context", "formatted_context", "formatted"] {
        if let Some(Value::String(text)) = fields.get(markdown)
            && !text.is_empty()
        {
            return text.trim_end().to_owned();
        }
    }
    // The list a result is about: its first non-empty list of records, else its first (empty)
    // one, which prints "(none)". A transaction's empty `compared` must not hide its `results`.
    let lists = || fields.iter().filter(|(_, v)| v.as_array().is_some_and(|a| a.iter().all(Value::is_object)));
    let list = lists().find(|(_, v)| v.as_array().is_some_and(|a| !a.is_empty())).or_else(|| lists().next());
    match list {
        Some((name, Value::Array(rows))) => {
            let mut out = table(&nested_rows(rows));
            let rest: Map<String, Value> =
                fields.iter().filter(|(k, _)| *k != name).map(|(k, v)| (k.clone(), v.clone())).collect();
            if !rest.is_empty() {
                out.push_str("\n\n");
                out.push_str(&record(&rest));
            }
            out
        }
        _ => record(fields),
    }
}

/// A value as a person reads it: strings without quotes, the rest as compact JSON.
fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    }
}

/// A record as aligned `field  value` lines: a nested record's fields as `outer.inner`, a list
/// of plain values joined, a list of records as a table under its name; JSON only for what
/// fits none of those (lists of lists, say).
fn record(fields: &Map<String, Value>) -> String {
    let mut lines: Vec<(String, String)> = Vec::new();
    flatten("", fields, &mut lines);
    let width = lines.iter().filter(|(_, v)| !v.starts_with('\n')).map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, shown) in lines {
        if shown.starts_with('\n') {
            let _ = writeln!(out, "{name}:{shown}");
        } else {
            let _ = writeln!(out, "{name:width$}  {shown}");
        }
    }
    out.trim_end().to_owned()
}

fn flatten(prefix: &str, fields: &Map<String, Value>, lines: &mut Vec<(String, String)>) {
    for (name, value) in fields {
        let key = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        match value {
            Value::Object(inner) if !inner.is_empty() => flatten(&key, inner, lines),
            Value::Array(items) if items.iter().all(|v| !v.is_object() && !v.is_array()) => {
                let joined = items.iter().map(scalar).collect::<Vec<_>>().join(", ");
                lines.push((key, if items.is_empty() { "[]".to_owned() } else { joined }));
            }
            Value::Array(items) if items.iter().all(Value::is_object) => {
                let table = table(&nested_rows(items));
                lines.push((
                    key,
                    format!("\n{}", table.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")),
                ));
            }
            Value::Object(_) | Value::Array(_) => lines.push((key, value.to_string())),
            other => lines.push((key, scalar(other))),
        }
    }
}

fn cell(value: &Value) -> String {
    let text = scalar(value).replace(['\n', '\t'], " ");
    if text.chars().count() > MAX_CELL {
        format!("{}…", text.chars().take(MAX_CELL - 1).collect::<String>())
    } else {
        text
    }
}

/// Rows that each hold one list of records (a semaphore's holders, a scope's reservations)
/// become a row per record, beside its parent's other fields, instead of a cell of cut JSON.
fn nested_rows(rows: &[Value]) -> Vec<Value> {
    let records = |v: &Value| v.as_array().is_some_and(|a| !a.is_empty() && a.iter().all(Value::is_object));
    let nested: Vec<&String> = {
        let mut names: Vec<&String> = Vec::new();
        for row in rows.iter().filter_map(Value::as_object) {
            for (name, value) in row {
                if records(value) && !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names
    };
    let [field] = nested.as_slice() else { return rows.to_vec() };
    let mut flat = Vec::new();
    for row in rows {
        let Some(parent) = row.as_object() else { continue };
        let mut shared = parent.clone();
        let children = shared.remove(field.as_str()).and_then(|v| v.as_array().cloned()).unwrap_or_default();
        if children.is_empty() {
            flat.push(Value::Object(shared));
            continue;
        }
        for child in children {
            let mut merged = shared.clone();
            if let Value::Object(child) = child {
                merged.extend(child);
            }
            flat.push(Value::Object(merged));
        }
    }
    flat
}

fn table(rows: &[Value]) -> String {
    if rows.is_empty() {
        return "(none)".to_owned();
    }
    let mut columns: Vec<&str> = Vec::new();
    for row in rows.iter().filter_map(Value::as_object) {
        for key in row.keys() {
            if !columns.contains(&key.as_str()) {
                columns.push(key);
            }
        }
    }
    let cells: Vec<Vec<String>> =
        rows.iter().map(|row| columns.iter().map(|c| row.get(*c).map_or_else(String::new, cell)).collect()).collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| cells.iter().map(|r| r[i].chars().count()).max().unwrap_or(0).max(c.len()))
        .collect();
    let line = |values: Vec<String>| {
        let padded: Vec<String> = values.iter().zip(&widths).map(|(v, w)| format!("{v:w$}")).collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut out = line(columns.iter().map(|c| c.to_uppercase()).collect());
    for row in cells {
        out.push('\n');
        out.push_str(&line(row));
    }
    out
}

/// Creates (or empties) a file only its user may read: where a dump of the store goes.
pub(crate) fn private_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().mode(0o600).create(true).write(true).truncate(true).open(path)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn lists_become_tables_and_records_aligned_lines() {
        let listed = json!({"entries": [{"key": "a", "version": 1}, {"key": "bb", "version": 12, "value": {"x": 1}}], "revision": 7});
        assert_eq!(text(&listed), "KEY  VERSION  VALUE\na    1\nbb   12       {\"x\":1}\n\nrevision  7");
        assert_eq!(text(&json!({"status": "ok", "version": 2})), "status   ok\nversion  2");
        assert_eq!(text(&json!({"entries": [], "revision": 0})), "(none)\n\nrevision  0");
    }

    #[test]
    fn an_empty_list_does_not_hide_a_full_one() {
        let txn = json!({"compared": [], "results": [{"op": "put", "key": "b", "status": "ok"}], "succeeded": true});
        assert_eq!(text(&txn), "OP   KEY  STATUS\nput  b    ok\n\ncompared   []\nsucceeded  true");
    }

    #[test]
    fn ready_markdown_is_printed_as_it_is() {
        assert_eq!(text(&json!({"status": "ok", "context": "# Restored\n- a\n"})), "# Restored\n- a");
    }

    #[test]
    fn records_inside_rows_get_rows_of_their_own() {
        let listed = json!({"semaphores": [
            {"name": "gpu", "capacity": 2, "holders": [{"holder": "a", "expires_at": "t1"}, {"holder": "b", "expires_at": "t2"}]},
            {"name": "ci", "capacity": 1, "holders": [{"holder": "c", "expires_at": "t3"}]},
        ]});
        assert_eq!(
            text(&listed),
            "NAME  CAPACITY  HOLDER  EXPIRES_AT\ngpu   2         a       t1\ngpu   2         b       t2\nci    1         c       t3"
        );
    }

    /// `workflow status`, `paths reserve` and `health` printed JSON blobs inside aligned output
    /// (issue 31): nested records are fields of their own, lists of records tables.
    #[test]
    fn nested_records_print_as_fields_and_lists_of_records_as_tables() {
        let status = json!({"status": "ok", "run": {"run_id": "r1", "run_status": "running", "tags": {"team": "ops"}},
            "signals": [{"name": "go", "signal_id": 3}], "waiting_on": ["a", "b"]});
        assert_eq!(
            text(&status),
            "NAME  SIGNAL_ID\ngo    3\n\nstatus          ok\nrun.run_id      r1\nrun.run_status  running\n\
             run.tags.team   ops\nwaiting_on      a, b"
        );
        let health = json!({"status": "ok", "writes": {"batches": 3, "commits": 2}, "owner": {"pid": 7}});
        assert_eq!(text(&health), "status          ok\nwrites.batches  3\nwrites.commits  2\nowner.pid       7");
    }

    #[test]
    fn long_cells_are_cut() {
        let long = "x".repeat(100);
        let shown = text(&json!({"rows": [{"v": long}]}));
        assert!(shown.lines().nth(1).is_some_and(|l| l.chars().count() == MAX_CELL && l.ends_with('…')));
    }
}
