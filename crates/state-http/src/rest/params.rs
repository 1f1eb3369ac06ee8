//! Query-string values typed by the operation's input schema: `limit=5` is the number 5,
//! `include_values=true` the boolean, `tags={"q":"gpu"}` an object.

use std::collections::HashMap;

use serde_json::Value;
use state_api::catalog::Operation;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Integer,
    Number,
    Boolean,
    /// Objects, arrays, or anything the schema leaves open: given as JSON.
    Json,
}

/// The kind of each argument an operation takes, from its JSON schema.
pub(crate) struct QueryTypes(HashMap<String, Kind>);

impl QueryTypes {
    pub(crate) fn of(op: Operation) -> QueryTypes {
        let schema = op.spec().input_schema();
        let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
        let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
        QueryTypes(properties.iter().map(|(name, property)| (name.clone(), kind(property, &defs))).collect())
    }

    /// `text` as the JSON value the argument `name` takes. Unknown names pass as text, for the
    /// operation's own check to name.
    pub(crate) fn value(&self, name: &str, text: &str) -> Result<Value, String> {
        self.value_of(name, name, text)
    }

    /// The value of the operation's argument `field`, given as the query parameter `parameter`
    /// (a route may name an argument its own way); errors name the parameter the caller used.
    pub(crate) fn value_of(&self, field: &str, parameter: &str, text: &str) -> Result<Value, String> {
        let bad = |what: &str| format!("query parameter `{parameter}` must be {what}, not `{text}`");
        match self.0.get(field).copied().unwrap_or(Kind::Text) {
            Kind::Text => Ok(Value::String(text.to_owned())),
            Kind::Integer => text.parse::<u64>().map(Value::from).map_err(|_| bad("a whole number")),
            // JSON has no infinity or NaN: serde_json would turn them into null, which reads
            // as "absent" (`ttl_seconds=inf` would mean no expiry at all).
            Kind::Number => match text.parse::<f64>() {
                Ok(number) if number.is_finite() => Ok(Value::from(number)),
                _ => Err(bad("a finite number")),
            },
            Kind::Boolean => text.parse::<bool>().map(Value::Bool).map_err(|_| bad("true or false")),
            Kind::Json => serde_json::from_str(text).map_err(|_| bad("JSON")),
        }
    }
}

fn kind(property: &Value, defs: &Value) -> Kind {
    let resolved = match property.get("$ref").and_then(Value::as_str) {
        Some(reference) => reference.rsplit('/').next().and_then(|name| defs.get(name)).unwrap_or(property),
        None => property,
    };
    // An optional argument is `anyOf: [X, null]`: X decides.
    if let Some(Value::Array(options)) = resolved.get("anyOf") {
        let real: Vec<&Value> = options.iter().filter(|o| o.get("type") != Some(&Value::from("null"))).collect();
        if let [only] = real.as_slice() {
            return kind(only, defs);
        }
    }
    // An enum documented per variant: a `oneOf` of string constants.
    if let Some(Value::Array(options)) = resolved.get("oneOf")
        && options.iter().all(|o| o.get("const").is_some_and(Value::is_string) || o.get("enum").is_some())
    {
        return Kind::Text;
    }
    let types: Vec<&str> = match resolved.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect(),
        _ => vec![],
    };
    match types.as_slice() {
        ["string"] => Kind::Text,
        ["integer"] => Kind::Integer,
        ["number"] => Kind::Number,
        ["boolean"] => Kind::Boolean,
        _ if resolved.get("enum").is_some() => Kind::Text,
        _ => Kind::Json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_take_the_type_the_schema_gives_them() {
        let history = QueryTypes::of(Operation::HistoryLog);
        assert_eq!(history.value("kind", "lease"), Ok(Value::from("lease")), "an enum is text");
        assert_eq!(history.value("since_revision", "7"), Ok(Value::from(7)), "an optional integer");
        assert_eq!(history.value("include_values", "true"), Ok(Value::Bool(true)));
        assert!(history.value("since_revision", "x").unwrap_err().contains("whole number"));
        let set = QueryTypes::of(Operation::StateSet);
        assert!(set.value("ttl_seconds", "inf").unwrap_err().contains("finite"));
        assert_eq!(set.value("ttl_seconds", "1.5"), Ok(Value::from(1.5)));
        let runs = QueryTypes::of(Operation::WorkflowList);
        assert_eq!(runs.value("tags", r#"{"q":"gpu"}"#), Ok(serde_json::json!({"q": "gpu"})));
        assert_eq!(runs.value("status", "running"), Ok(Value::from("running")));
    }
}
