//! A served agent's answer as A2A parts. By default the answer is text, one text part. An
//! agent served with `answer = "parts"` answers with a JSON array of A2A parts instead (text,
//! structured data, a file's bytes or a file's URL, in the v1.0 form), which the caller gets
//! as those parts: that is how a model-driven agent returns a file or a data artifact. An
//! answer that does not spell valid parts is delivered as text, so nothing is lost.

use super::Version;
use base64::Engine;
use serde_json::{Map, Value, json};

/// Most parts one answer may have.
const MAX_PARTS: usize = 64;
/// Longest `filename` / `mediaType`, in bytes.
const MAX_NAME: usize = 255;

/// How a served agent's answer text becomes parts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AnswerForm {
    /// One text part.
    #[default]
    Text,
    /// The answer is a JSON array of A2A parts.
    Parts,
}

/// Where a file part's content is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileContent {
    /// Inline, base64 (standard alphabet, padded), checked.
    Bytes(String),
    /// At an `http(s)` URL.
    Url(String),
}

/// One checked part of an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Text.
    Text(String),
    /// Structured data, with its media type when the agent named one.
    Data {
        /// Any JSON value.
        data: Value,
        /// E.g. `application/json`.
        media_type: Option<String>,
    },
    /// A file.
    File {
        /// Its bytes or its URL.
        content: FileContent,
        /// Its name.
        name: Option<String>,
        /// Its media type.
        media_type: Option<String>,
    },
}

impl Part {
    /// The part in the JSON of `version`.
    pub fn render(&self, version: Version) -> Value {
        match (self, version) {
            (Part::Text(t), Version::V1) => json!({"text": t}),
            (Part::Text(t), Version::V03) => json!({"kind": "text", "text": t}),
            (Part::Data { data, media_type }, Version::V1) => json!({
                "data": data,
                "mediaType": media_type.as_deref().unwrap_or("application/json"),
            }),
            (Part::Data { data, .. }, Version::V03) => json!({"kind": "data", "data": data}),
            (
                Part::File {
                    content,
                    name,
                    media_type,
                },
                Version::V1,
            ) => {
                let mut p = Map::new();
                match content {
                    FileContent::Bytes(b) => p.insert("raw".into(), json!(b)),
                    FileContent::Url(u) => p.insert("url".into(), json!(u)),
                };
                if let Some(n) = name {
                    p.insert("filename".into(), json!(n));
                }
                if let Some(m) = media_type {
                    p.insert("mediaType".into(), json!(m));
                }
                Value::Object(p)
            }
            (
                Part::File {
                    content,
                    name,
                    media_type,
                },
                Version::V03,
            ) => {
                let mut f = Map::new();
                match content {
                    FileContent::Bytes(b) => f.insert("bytes".into(), json!(b)),
                    FileContent::Url(u) => f.insert("uri".into(), json!(u)),
                };
                if let Some(n) = name {
                    f.insert("name".into(), json!(n));
                }
                if let Some(m) = media_type {
                    f.insert("mimeType".into(), json!(m));
                }
                json!({"kind": "file", "file": f})
            }
        }
    }
}

/// The parts of an answer given in `form`: for [`AnswerForm::Parts`], the parts its JSON
/// spells, or the whole answer as one text part when it spells none.
pub fn answer_parts(text: &str, form: AnswerForm) -> Vec<Part> {
    match form {
        AnswerForm::Text => vec![Part::Text(text.to_string())],
        AnswerForm::Parts => match parse_parts(text) {
            Ok(parts) => parts,
            Err(e) => {
                tracing::warn!("a served answer meant as A2A parts is sent as text: {e}");
                vec![Part::Text(text.to_string())]
            }
        },
    }
}

/// The answer parts rendered in `version`.
pub fn render_parts(text: &str, form: AnswerForm, version: Version) -> Vec<Value> {
    answer_parts(text, form)
        .iter()
        .map(|p| p.render(version))
        .collect()
}

/// Read an answer written as a JSON array of v1.0 parts (optionally inside one Markdown
/// code fence, as models like to write JSON). Each part has exactly one of `text`
/// (a string), `data` (any JSON), `raw` (base64 bytes) or `url` (`http`/`https`), and
/// optionally `filename` and `mediaType`.
pub fn parse_parts(text: &str) -> Result<Vec<Part>, String> {
    let v: Value =
        serde_json::from_str(unfenced(text)).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let list = v
        .as_array()
        .ok_or("the answer is not a JSON array of parts")?;
    if list.is_empty() || list.len() > MAX_PARTS {
        return Err(format!(
            "an answer has 1 to {MAX_PARTS} parts, not {}",
            list.len()
        ));
    }
    list.iter()
        .enumerate()
        .map(|(i, p)| part(p).map_err(|e| format!("part {i}: {e}")))
        .collect()
}

/// The inside of a text that is one fenced code block, else the text.
fn unfenced(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return t;
    };
    // Drop the info string (`json`) on the opening line.
    body.split_once('\n').map_or(body, |(_, b)| b).trim()
}

fn part(p: &Value) -> Result<Part, String> {
    let o = p.as_object().ok_or("not a JSON object")?;
    for k in o.keys() {
        if !matches!(
            k.as_str(),
            "text" | "data" | "raw" | "url" | "filename" | "mediaType"
        ) {
            return Err(format!("unknown field {k:?}"));
        }
    }
    let name = short_str(o.get("filename"), "filename")?;
    let media_type = short_str(o.get("mediaType"), "mediaType")?;
    let kinds: Vec<&str> = ["text", "data", "raw", "url"]
        .into_iter()
        .filter(|k| o.contains_key(*k))
        .collect();
    let [kind] = kinds[..] else {
        return Err("a part has exactly one of text, data, raw, url".into());
    };
    let string = |k: &str| {
        o.get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or(format!("{k} must be a string"))
    };
    match kind {
        "text" => Ok(Part::Text(string("text")?)),
        "data" => Ok(Part::Data {
            data: o.get("data").cloned().unwrap_or(Value::Null),
            media_type,
        }),
        "raw" => {
            let b = string("raw")?;
            base64::engine::general_purpose::STANDARD
                .decode(&b)
                .map_err(|e| format!("raw is not base64: {e}"))?;
            Ok(Part::File {
                content: FileContent::Bytes(b),
                name,
                media_type,
            })
        }
        _ => {
            let u = string("url")?;
            let parsed = reqwest::Url::parse(&u).map_err(|e| format!("url {u:?}: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(format!("url {u:?}: only http and https URLs"));
            }
            Ok(Part::File {
                content: FileContent::Url(u),
                name,
                media_type,
            })
        }
    }
}

fn short_str(v: Option<&Value>, key: &str) -> Result<Option<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() <= MAX_NAME && !s.chars().any(char::is_control) => {
            Ok(Some(s.clone()))
        }
        Some(_) => Err(format!(
            "{key} must be a string of at most {MAX_NAME} bytes without control characters"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_answers_are_one_text_part() {
        let p = render_parts("[1]", AnswerForm::Text, Version::V1);
        assert_eq!(p, [json!({"text": "[1]"})]);
    }

    #[test]
    fn parts_answers_give_files_and_data_in_both_versions() {
        let answer = r#"```json
[{"raw": "aGk=", "filename": "output.txt", "mediaType": "text/plain"},
 {"url": "https://example.com/output.txt", "filename": "output.txt"},
 {"data": {"key": "value", "count": 42}},
 {"text": "done"}]
```"#;
        let v1 = render_parts(answer, AnswerForm::Parts, Version::V1);
        assert_eq!(
            v1[0],
            json!({"raw": "aGk=", "filename": "output.txt", "mediaType": "text/plain"})
        );
        assert_eq!(v1[1]["url"], "https://example.com/output.txt");
        assert_eq!(v1[2]["data"], json!({"key": "value", "count": 42}));
        assert_eq!(v1[2]["mediaType"], "application/json");
        assert_eq!(v1[3], json!({"text": "done"}));
        let v03 = render_parts(answer, AnswerForm::Parts, Version::V03);
        assert_eq!(
            v03[0],
            json!({"kind": "file", "file": {"bytes": "aGk=", "name": "output.txt", "mimeType": "text/plain"}})
        );
        assert_eq!(v03[1]["file"]["uri"], "https://example.com/output.txt");
        assert_eq!(
            v03[2],
            json!({"kind": "data", "data": {"key": "value", "count": 42}})
        );
    }

    #[test]
    fn bad_parts_are_refused_and_the_answer_kept_as_text() {
        for (answer, why) in [
            ("not json", "not JSON"),
            (r#"{"text": "a"}"#, "array"),
            ("[]", "1 to 64"),
            (r#"[{"text": "a", "data": 1}]"#, "exactly one"),
            (r#"[{"raw": "***"}]"#, "base64"),
            (r#"[{"url": "file:///etc/passwd"}]"#, "http"),
            (r#"[{"text": "a", "extra": 1}]"#, "unknown field"),
            (r#"[{"text": "a", "filename": "a\nb"}]"#, "control"),
        ] {
            let e = parse_parts(answer).expect_err(answer);
            assert!(e.contains(why), "{answer}: {e}");
            assert_eq!(
                answer_parts(answer, AnswerForm::Parts),
                [Part::Text(answer.to_string())]
            );
        }
    }
}
