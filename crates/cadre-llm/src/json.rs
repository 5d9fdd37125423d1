//! JSON helpers for request bodies: encoding straight to bytes, `f32` settings without
//! float noise, and checking replayed tool-call arguments without building a tree.

use crate::{ModelRequest, ProviderError};
use bytes::Bytes;
use cadre_types::Message;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use std::fmt;

/// Encode a request body as JSON into a buffer sized for about `size_hint` bytes.
pub(crate) fn encode<T: Serialize + ?Sized>(
    body: &T,
    size_hint: usize,
) -> Result<Bytes, ProviderError> {
    let mut out = Vec::with_capacity(size_hint);
    serde_json::to_writer(&mut out, body)
        .map_err(|e| ProviderError::Config(format!("cannot encode request: {e}")))?;
    Ok(Bytes::from(out))
}

/// A guess at the encoded size of `request`'s body: its strings plus room for keys,
/// escapes and tool schemas, so the buffer rarely has to grow.
pub(crate) fn size_hint(request: &ModelRequest) -> usize {
    const PER_MESSAGE: usize = 64;
    const PER_TOOL: usize = 1024;
    let mut n = request.model.len() + request.system.len() + 256;
    for message in &request.messages {
        n += PER_MESSAGE;
        n += match message {
            Message::System { content } | Message::User { content } => content.len(),
            Message::Assistant {
                content,
                thinking,
                thinking_signature,
                tool_calls,
            } => {
                content.len()
                    + thinking.as_ref().map_or(0, String::len)
                    + thinking_signature.as_ref().map_or(0, String::len)
                    + tool_calls
                        .iter()
                        .map(|c| PER_MESSAGE + c.id.len() + c.name.len() + c.arguments.len())
                        .sum::<usize>()
            }
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => tool_call_id.len() + content.len(),
        };
    }
    n += request.tools.len() * PER_TOOL;
    // Escapes (quotes, newlines) make the JSON longer than the text it carries.
    n + n / 8
}

/// An `f32` setting as JSON without float noise (`0.2`, not `0.20000000298023224`): the
/// shortest decimal that reads back as the same `f32`, written as an `f64`. Non-finite
/// values are `null`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct JsonF32(pub f32);

impl Serialize for JsonF32 {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0.to_string().parse::<f64>() {
            Ok(v) if v.is_finite() => serializer.serialize_f64(v),
            _ => serializer.serialize_unit(),
        }
    }
}

/// True when `text` is one JSON object. Accepts exactly what parsing into a
/// `serde_json::Value` would accept as an object (string escapes, numbers and the nesting
/// limit are checked the same way) without building the tree.
pub(crate) fn is_json_object(text: &str) -> bool {
    serde_json::from_str::<ObjectCheck>(text).is_ok()
}

/// `text` as raw JSON borrowed from it, when it is a JSON object (see [`is_json_object`]).
pub(crate) fn raw_object(text: &str) -> Option<&RawValue> {
    if !is_json_object(text) {
        return None;
    }
    serde_json::from_str::<&RawValue>(text).ok()
}

/// Deserializes from a JSON object and nothing else, keeping nothing.
struct ObjectCheck;

impl<'de> Deserialize<'de> for ObjectCheck {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(CheckVisitor { object_only: true })?;
        Ok(ObjectCheck)
    }
}

/// Deserializes from any JSON value, keeping nothing. Unlike `serde::de::IgnoredAny`
/// (which serde_json skips without decoding), strings and numbers are decoded, so
/// invalid `\u` escapes and out-of-range numbers are rejected as `Value` rejects them.
struct AnyCheck;

impl<'de> Deserialize<'de> for AnyCheck {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CheckVisitor { object_only: false })?;
        Ok(AnyCheck)
    }
}

struct CheckVisitor {
    object_only: bool,
}

impl CheckVisitor {
    fn scalar<E: serde::de::Error>(&self, unexpected: serde::de::Unexpected) -> Result<(), E> {
        if self.object_only {
            Err(E::invalid_type(unexpected, self))
        } else {
            Ok(())
        }
    }
}

impl<'de> Visitor<'de> for CheckVisitor {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.object_only {
            "a JSON object"
        } else {
            "a JSON value"
        })
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<(), E> {
        self.scalar(serde::de::Unexpected::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        self.scalar(serde::de::Unexpected::Signed(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        self.scalar(serde::de::Unexpected::Unsigned(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        self.scalar(serde::de::Unexpected::Float(v))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        self.scalar(serde::de::Unexpected::Str(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.scalar(serde::de::Unexpected::Unit)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.object_only {
            return Err(serde::de::Error::invalid_type(
                serde::de::Unexpected::Seq,
                &self,
            ));
        }
        while seq.next_element::<AnyCheck>()?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<AnyCheck, AnyCheck>()?.is_some() {}
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn value_is_object(text: &str) -> bool {
        matches!(serde_json::from_str::<Value>(text), Ok(Value::Object(_)))
    }

    #[test]
    fn object_check_agrees_with_value() {
        let deep = format!("{}{}", "{\"a\":[".repeat(70), "]}".repeat(70));
        let cases = [
            r#"{"a":1}"#,
            r#"  {"a": {"b": [1, 2.5, -3, true, null, "x\n\u00e9"]}}  "#,
            "{}",
            r#"{"a":1"#,
            r#"{"a":1} x"#,
            r#"{"a":1}{}"#,
            "[1]",
            "[]",
            "\"{}\"",
            "1",
            "null",
            "",
            "not json",
            r#"{"a":"\ud800"}"#,
            r#"{"\udc00":1}"#,
            r#"{"a":"\ud83d\ude00"}"#,
            r#"{"a":"\q"}"#,
            r#"{"a":1e400}"#,
            r#"{"a":123456789012345678901234567890}"#,
            "{\"a\":\"tab\there\"}",
            r#"{"a":1,"a":2}"#,
            r"{1:2}",
            &deep,
        ];
        for case in cases {
            assert_eq!(is_json_object(case), value_is_object(case), "{case:?}");
        }
    }

    #[test]
    fn raw_object_borrows_the_text() {
        let text = r#"  {"b": 2, "a": [1]} "#;
        let raw = raw_object(text).unwrap();
        assert_eq!(raw.get(), r#"{"b": 2, "a": [1]}"#);
        assert!(raw_object("[1]").is_none());
        assert!(raw_object(r#"{"a":"\ud800"}"#).is_none());
    }

    #[test]
    fn f32_settings_have_no_float_noise() {
        for (v, text) in [
            (0.2f32, "0.2"),
            (0.7, "0.7"),
            (1.0, "1.0"),
            (0.0, "0.0"),
            (f32::NAN, "null"),
            (f32::INFINITY, "null"),
        ] {
            assert_eq!(serde_json::to_string(&JsonF32(v)).unwrap(), text);
        }
    }
}
