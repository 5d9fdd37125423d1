//! The JSON Schema a model is offered for a typed tool's arguments, derived from the Rust
//! type with `schemars` and shaped for the OpenAI and Anthropic tool APIs.
//!
//! What the derived schema is turned into, at every level:
//! * subschemas are inlined: no `$ref`, no `$defs`, no `$schema` (recursive argument types
//!   are not supported, and [`arguments_schema`]'s tests refuse any `$ref` that remains);
//! * `null` is left out of types, enums and defaults: an optional argument is one that is
//!   not `required`, as in a hand-written schema; the decoder still accepts an explicit
//!   `null`;
//! * unit enum variants with doc comments (which `schemars` writes as `oneOf` of `const`s)
//!   become one `enum`, which every provider accepts;
//! * `title`s and `format`s that are not standard JSON Schema (`uint`, `int64`, ...) go;
//! * single line breaks of doc comments become spaces (paragraph breaks stay), so a field's
//!   doc comment reads as one description.
//!
//! The root keeps `type: object`, `properties`, `required` (always present, possibly empty)
//! and `additionalProperties` when the type says so; its own title and description go (the
//! tool's description says what the tool does).
//!
//! Schemas are cached per type: a run asks for its tools' definitions once per run.

use schemars::generate::SchemaSettings;
use schemars::transform::{Transform, transform_subschemas};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value};
use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

/// Formats kept: those JSON Schema defines for strings.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "uuid",
    "regex",
];

/// The schema offered to the model for arguments of type `A` (see the module docs).
pub fn arguments_schema<A: JsonSchema + 'static>() -> Value {
    static CACHE: OnceLock<RwLock<HashMap<TypeId, Arc<Value>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let id = TypeId::of::<A>();
    if let Some(schema) = cache.read().ok().and_then(|c| c.get(&id).cloned()) {
        return Value::clone(&schema);
    }
    let schema = Arc::new(generate::<A>());
    if let Ok(mut c) = cache.write() {
        c.insert(id, schema.clone());
    }
    Value::clone(&schema)
}

/// Derive and shape the schema of `A`.
fn generate<A: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(ForModels)
        .into_generator();
    let mut root = generator.into_root_schema_for::<A>().to_value();
    if let Value::Object(map) = &mut root {
        map.remove("title");
        map.remove("description");
        map.insert("type".into(), Value::from("object"));
        map.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        map.entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
    }
    root
}

/// The shaping rules of the module docs, applied at every level.
#[derive(Clone)]
struct ForModels;

impl Transform for ForModels {
    fn transform(&mut self, schema: &mut Schema) {
        transform_subschemas(self, schema);
        let Some(map) = schema.as_object_mut() else {
            return;
        };
        drop_null(map);
        unit_variants_as_enum(map);
        map.remove("title");
        if map
            .get("format")
            .and_then(Value::as_str)
            .is_some_and(|f| !STANDARD_FORMATS.contains(&f))
        {
            map.remove("format");
        }
        if let Some(Value::String(text)) = map.get_mut("description") {
            *text = unwrap_lines(text);
        }
    }
}

/// Leave `null` out of `type`, `enum`, `default` and `anyOf`; an `anyOf` left with one branch is that
/// branch (its keywords join this schema's, which win).
fn drop_null(map: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            map.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if map.get("default").is_some_and(Value::is_null) {
        map.remove("default");
    }
    let Some(Value::Array(branches)) = map.get_mut("anyOf") else {
        return;
    };
    branches.retain(|b| b.get("type").and_then(Value::as_str) != Some("null"));
    if branches.len() == 1
        && let Some(Value::Object(only)) = branches.pop()
    {
        map.remove("anyOf");
        for (key, value) in only {
            map.entry(key).or_insert(value);
        }
    }
}

/// `{"oneOf": [{"const": "a", ...}, {"const": "b", ...}]}` → `{"type": "string", "enum":
/// ["a", "b"]}`; the variants' own descriptions go (the field's description says what the
/// values mean).
fn unit_variants_as_enum(map: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = map.get("oneOf") else {
        return;
    };
    let values: Option<Vec<Value>> = branches
        .iter()
        .map(|b| b.get("const").filter(|c| c.is_string()).cloned())
        .collect();
    let Some(values) = values.filter(|v| !v.is_empty()) else {
        return;
    };
    map.remove("oneOf");
    map.insert("type".into(), Value::from("string"));
    map.insert("enum".into(), Value::Array(values));
}

/// Doc-comment text as prose: lines joined with spaces, blank lines kept as paragraph breaks.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|para| {
            para.split('\n')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    /// How to sort.
    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code)]
    enum Order {
        /// First to last.
        Forward,
        /// Last to first.
        Backward,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Item {
        /// What it is.
        name: String,
    }

    /// The arguments (this title and description are not offered).
    #[derive(Deserialize, JsonSchema)]
    #[schemars(extend("additionalProperties" = false))]
    #[allow(dead_code)]
    struct Args {
        /// Where to look,
        /// over two lines.
        path: String,
        /// How many at most.
        #[schemars(range(min = 1))]
        limit: Option<u32>,
        /// The order.
        #[serde(default)]
        order: Option<Order>,
        /// Serializable, so `schemars` writes its `null` default.
        #[serde(default)]
        note: Option<String>,
        /// The items.
        items: Vec<Item>,
        /// Optional nested.
        #[serde(default)]
        first: Option<Item>,
    }

    #[test]
    fn derived_schemas_are_inline_without_null_or_custom_formats() {
        assert_eq!(
            arguments_schema::<Args>(),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Where to look, over two lines."},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many at most."},
                    "order": {
                        "type": "string",
                        "enum": ["forward", "backward"],
                        "description": "The order."
                    },
                    "note": {
                        "type": "string",
                        "description": "Serializable, so `schemars` writes its `null` default."
                    },
                    "items": {
                        "type": "array",
                        "description": "The items.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string", "description": "What it is."}
                            },
                            "required": ["name"]
                        }
                    },
                    "first": {
                        "type": "object",
                        "description": "Optional nested.",
                        "properties": {
                            "name": {"type": "string", "description": "What it is."}
                        },
                        "required": ["name"]
                    }
                },
                "required": ["path", "items"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn an_argument_free_type_still_has_properties_and_required() {
        #[derive(Deserialize, JsonSchema)]
        struct None {}
        assert_eq!(
            arguments_schema::<None>(),
            json!({"type": "object", "properties": {}, "required": []})
        );
    }
}
