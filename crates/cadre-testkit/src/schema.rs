//! A check that a tool's argument schema is what providers are sent as written: the plain,
//! inline JSON Schema subset that both the OpenAI and the Anthropic tool APIs accept, with
//! a description on every argument.

use serde_json::Value;

/// Keywords that must not appear anywhere: references and their definitions (not every
/// provider resolves them), combinators (Anthropic rejects them at the top level, weaker
/// models misread them below), meta and title annotations (providers drop or reject them).
const FORBIDDEN: &[&str] = &[
    "$ref",
    "$defs",
    "definitions",
    "$schema",
    "$id",
    "anyOf",
    "oneOf",
    "allOf",
    "title",
];

/// What is wrong with `schema` as a tool's argument schema; empty when nothing is. The
/// root must be an object schema with `properties` and a `required` list naming only its
/// properties; every property, at any depth, needs a description or to be the `items` of a
/// described array; no reference, combinator, meta or title keyword and no `null` type may appear.
pub fn schema_problems(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if schema.get("type") != Some(&Value::from("object")) {
        problems.push("the root is not `type: object`".to_string());
    }
    let props = schema.get("properties").and_then(Value::as_object);
    if props.is_none() {
        problems.push("the root has no `properties` object".to_string());
    }
    match schema.get("required").and_then(Value::as_array) {
        None => problems.push("the root has no `required` list".to_string()),
        Some(required) => {
            for name in required {
                let known = name
                    .as_str()
                    .is_some_and(|n| props.is_some_and(|p| p.contains_key(n)));
                if !known {
                    problems.push(format!("`required` names {name}, which is not a property"));
                }
            }
        }
    }
    walk(schema, "", &mut problems);
    problems
}

/// Check one schema object at `path` and everything below it.
fn walk(schema: &Value, path: &str, problems: &mut Vec<String>) {
    let Some(map) = schema.as_object() else {
        return;
    };
    for key in FORBIDDEN {
        if map.contains_key(*key) {
            problems.push(format!("{path}: has `{key}`"));
        }
    }
    let null_type = match map.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
        _ => false,
    };
    if null_type {
        problems.push(format!("{path}: allows `null`"));
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        for (name, prop) in props {
            let here = format!("{path}/{name}");
            let described = prop
                .get("description")
                .and_then(Value::as_str)
                .is_some_and(|d| !d.trim().is_empty());
            if !described {
                problems.push(format!("{here}: no description"));
            }
            walk(prop, &here, problems);
        }
    }
    if let Some(items) = map.get("items") {
        walk(items, &format!("{path}[]"), problems);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plain_described_schema_passes_and_each_flaw_is_named() {
        let good = json!({
            "type": "object",
            "properties": {"a": {"type": "string", "description": "A."},
                           "b": {"type": "array", "description": "B.",
                                 "items": {"type": "object", "properties": {
                                     "c": {"type": "integer", "description": "C."}}}}},
            "required": ["a"]
        });
        assert_eq!(schema_problems(&good), Vec::<String>::new());
        let bad = json!({
            "type": "object",
            "properties": {"a": {"type": ["string", "null"]},
                           "b": {"$ref": "#/$defs/B", "description": "B."}},
            "required": ["z"],
            "$defs": {"B": {"type": "string"}}
        });
        assert_eq!(
            schema_problems(&bad),
            [
                "`required` names \"z\", which is not a property",
                ": has `$defs`",
                "/a: no description",
                "/a: allows `null`",
                "/b: has `$ref`",
            ]
        );
    }
}
