//! Tool schema normalisation: the JSON Schema of a tool's arguments made acceptable to
//! the OpenAI and Anthropic tool APIs.
//!
//! Both APIs want an `object` schema at the top level and reject some annotation
//! keywords in places. [`normalize_tool_schema`] applies these rules, the same for both:
//!
//! * a non-object schema (`null`, `true`, a string) becomes `{"type":"object","properties":{}}`;
//! * the top level gets `"type": "object"` (replacing any other type) and a `properties` object;
//! * top-level `anyOf` / `oneOf` / `allOf` (rejected by Anthropic, unsupported by OpenAI)
//!   are removed; the properties of their object branches are merged into the top-level
//!   `properties` (existing ones win) so the model still sees every argument;
//! * the annotation keywords `$schema`, `$id`, `$comment` and `examples` are removed at
//!   every level of the schema — only where they are keywords, never a property that
//!   happens to have that name.
//!
//! Everything else (`description`, `enum`, `default`, `format`, `additionalProperties`,
//! `$ref`/`$defs`, ...) is kept unchanged.

use serde_json::{Map, Value};

/// Keywords removed at every level.
const DROPPED: [&str; 4] = ["$schema", "$id", "$comment", "examples"];
/// Keywords whose value is a map of name → subschema.
const SCHEMA_MAPS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is a subschema.
const SCHEMA_SINGLE: [&str; 10] = [
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "additionalItems",
];
/// Keywords whose value is a list of subschemas.
const SCHEMA_LISTS: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
/// Combinators removed at the top level.
const TOP_COMBINATORS: [&str; 3] = ["anyOf", "oneOf", "allOf"];

/// Normalise a tool's argument schema for the OpenAI and Anthropic tool APIs (rules in
/// the module documentation). The input is not changed.
pub fn normalize_tool_schema(schema: &Value) -> Value {
    let mut root = match schema {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    clean(&mut root);

    let mut merged = Map::new();
    for key in TOP_COMBINATORS {
        if let Some(Value::Array(branches)) = root.remove(key) {
            for branch in branches {
                if let Value::Object(mut b) = branch
                    && let Some(Value::Object(props)) = b.remove("properties")
                {
                    for (name, prop) in props {
                        merged.entry(name).or_insert(prop);
                    }
                }
            }
        }
    }

    root.insert("type".into(), Value::String("object".into()));
    let props = root
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if !props.is_object() {
        *props = Value::Object(Map::new());
    }
    if let Value::Object(props) = props {
        for (name, prop) in merged {
            props.entry(name).or_insert(prop);
        }
    }
    Value::Object(root)
}

/// Remove the dropped keywords from one schema object and recurse into its subschemas.
fn clean(schema: &mut Map<String, Value>) {
    for key in DROPPED {
        schema.remove(key);
    }
    for key in SCHEMA_MAPS {
        if let Some(Value::Object(map)) = schema.get_mut(key) {
            for sub in map.values_mut() {
                clean_value(sub);
            }
        }
    }
    for key in SCHEMA_SINGLE {
        if let Some(sub) = schema.get_mut(key) {
            clean_value(sub);
        }
    }
    for key in SCHEMA_LISTS {
        if let Some(Value::Array(list)) = schema.get_mut(key) {
            for sub in list {
                clean_value(sub);
            }
        }
    }
    // `items` may also be a list (older drafts); handled by clean_value on arrays.
}

fn clean_value(value: &mut Value) {
    match value {
        Value::Object(map) => clean(map),
        Value::Array(list) => {
            for sub in list {
                clean_value(sub);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn non_object_schemas_become_empty_objects() {
        let empty = json!({"type": "object", "properties": {}});
        assert_eq!(normalize_tool_schema(&Value::Null), empty);
        assert_eq!(normalize_tool_schema(&json!(true)), empty);
        assert_eq!(normalize_tool_schema(&json!({})), empty);
        assert_eq!(
            normalize_tool_schema(&json!({"type": ["object", "null"], "properties": 3})),
            empty
        );
    }

    #[test]
    fn annotations_are_dropped_only_where_they_are_keywords() {
        let input = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$id": "x",
            "type": "object",
            "properties": {
                "examples": {"type": "string", "examples": ["a"], "$comment": "c"},
                "list": {"type": "array", "items": {"type": "integer", "examples": [1], "default": 2}},
                "nested": {"type": "object", "properties": {"$id": {"type": "string"}},
                           "additionalProperties": false}
            },
            "required": ["examples"]
        });
        let expected = json!({
            "type": "object",
            "properties": {
                "examples": {"type": "string"},
                "list": {"type": "array", "items": {"type": "integer", "default": 2}},
                "nested": {"type": "object", "properties": {"$id": {"type": "string"}},
                           "additionalProperties": false}
            },
            "required": ["examples"]
        });
        assert_eq!(normalize_tool_schema(&input), expected);
    }

    #[test]
    fn top_level_combinators_are_flattened() {
        let input = json!({
            "properties": {"a": {"type": "string"}},
            "anyOf": [
                {"type": "object", "properties": {"b": {"type": "integer", "examples": [1]}}},
                {"type": "object", "properties": {"a": {"type": "number"}}}
            ]
        });
        let out = normalize_tool_schema(&input);
        assert_eq!(
            out,
            json!({
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}
            })
        );
    }

    #[test]
    fn nested_combinators_and_defs_are_cleaned_but_kept() {
        let input = json!({
            "type": "object",
            "properties": {"x": {"oneOf": [{"type": "string", "$comment": "c"}, {"$ref": "#/$defs/y"}]}},
            "$defs": {"y": {"type": "integer", "examples": [3]}}
        });
        let out = normalize_tool_schema(&input);
        assert_eq!(
            out,
            json!({
                "type": "object",
                "properties": {"x": {"oneOf": [{"type": "string"}, {"$ref": "#/$defs/y"}]}},
                "$defs": {"y": {"type": "integer"}}
            })
        );
    }
}
