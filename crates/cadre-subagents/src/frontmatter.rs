//! Markdown files with YAML front matter: splitting the `---` block from the body and
//! parsing it with a real YAML parser (BOM and CRLF tolerant), plus helpers that read
//! the value shapes definition files use (strings, comma lists, positive integers).

use serde_yaml_ng::{Mapping, Value};

/// Files larger than this are refused rather than parsed.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// Why a front-matter document could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontMatterError {
    /// The first line is not `---`.
    #[error("no front matter: the first line must be `---`")]
    Missing,
    /// No line `---` closes the block.
    #[error("front matter is not closed: no line `---` after the opening one")]
    Unclosed,
    /// The YAML does not parse.
    #[error("invalid YAML in front matter: {0}")]
    Yaml(String),
    /// The YAML parses but is not a mapping of keys to values.
    #[error("front matter is not a mapping of keys to values (found {0})")]
    NotMapping(&'static str),
}

/// A parsed document: the front-matter mapping and the Markdown body.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The keys and values between the `---` lines (empty when the block is empty).
    pub front: Mapping,
    /// The text after the closing `---`, with leading blank lines and trailing whitespace
    /// removed. Further `---` lines stay in it.
    pub body: String,
    /// Keys whose one-line value was not valid YAML as written (typically a Claude Code
    /// `description` containing `: `) and was read as a quoted string instead.
    pub requoted: Vec<String>,
}

/// Normalise line endings and drop a leading UTF-8 byte-order mark.
fn normalise(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.contains('\r') {
        text.replace("\r\n", "\n")
    } else {
        text.to_string()
    }
}

fn is_delimiter(line: &str) -> bool {
    line.trim_end_matches([' ', '\t']) == "---"
}

/// Split `text` into its front-matter source and its body (both after BOM and CRLF
/// normalisation).
pub fn split(text: &str) -> Result<(String, String), FrontMatterError> {
    let text = normalise(text);
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if is_delimiter(first.trim_end_matches('\n')) => {}
        _ => return Err(FrontMatterError::Missing),
    }
    let mut front = String::new();
    let mut closed = false;
    for line in lines.by_ref() {
        if is_delimiter(line.trim_end_matches('\n')) {
            closed = true;
            break;
        }
        front.push_str(line);
    }
    if !closed {
        return Err(FrontMatterError::Unclosed);
    }
    let body: String = lines.collect();
    Ok((front, trim_body(&body)))
}

/// Drop whole blank lines from the start (keeping the first text line's indentation) and
/// trailing whitespace.
fn trim_body(raw: &str) -> String {
    let mut rest = raw;
    while let Some((line, tail)) = rest.split_once('\n') {
        if !line.trim().is_empty() {
            break;
        }
        rest = tail;
    }
    rest.trim_end().to_string()
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// Parse a whole document: front matter (as a YAML mapping) and body.
///
/// When the YAML does not parse, one repair is tried: top-level `key: value` lines whose
/// plain value contains `: ` or ` #` (invalid or misleading in YAML, yet common in files
/// written for Claude Code) are quoted. If that parses, the repaired keys are listed in
/// [`Document::requoted`]; otherwise the original YAML error is returned.
pub fn parse(text: &str) -> Result<Document, FrontMatterError> {
    let (front, body) = split(text)?;
    let (value, requoted) = if front.trim().is_empty() {
        (Value::Null, Vec::new())
    } else {
        match serde_yaml_ng::from_str::<Value>(&front) {
            Ok(v) => (v, Vec::new()),
            Err(e) => {
                let original = FrontMatterError::Yaml(e.to_string());
                let (repaired, keys) = requote_plain_values(&front);
                if keys.is_empty() {
                    return Err(original);
                }
                match serde_yaml_ng::from_str::<Value>(&repaired) {
                    Ok(v) => (v, keys),
                    Err(_) => return Err(original),
                }
            }
        }
    };
    let front = match value {
        Value::Null => Mapping::new(),
        Value::Mapping(m) => m,
        other => return Err(FrontMatterError::NotMapping(kind_of(&other))),
    };
    Ok(Document {
        front,
        body,
        requoted,
    })
}

/// Quote the one-line plain values of top-level keys that contain `: ` or ` #`.
fn requote_plain_values(front: &str) -> (String, Vec<String>) {
    let lines: Vec<&str> = front.lines().collect();
    let mut out = String::with_capacity(front.len() + 16);
    let mut keys = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let continued = lines
            .get(i + 1)
            .is_some_and(|next| next.starts_with([' ', '\t']) && !next.trim().is_empty());
        let candidate = line
            .split_once(": ")
            .filter(|(key, _)| {
                !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
            .map(|(key, value)| (key, value.trim()))
            .filter(|(_, value)| {
                !value.starts_with(['\'', '"', '[', '{', '|', '>', '&', '*', '!', '%', '@', '`'])
                    && (value.contains(": ") || value.contains(" #"))
            });
        match candidate {
            Some((key, value)) if !continued => {
                out.push_str(&format!("{key}: '{}'\n", value.replace('\'', "''")));
                keys.push(key.to_string());
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    (out, keys)
}

/// A scalar rendered as text (strings as is, numbers and booleans printed); `None` for
/// null, lists and mappings.
pub fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Tagged(t) => scalar_text(&t.value),
        _ => None,
    }
}

/// A list given as a YAML sequence of scalars or as one comma-separated string. Entries are
/// trimmed and empty entries skipped. `Ok(None)` for null.
pub fn string_list(key: &str, value: &Value) -> Result<Option<Vec<String>>, String> {
    match value {
        Value::Null => Ok(None),
        Value::Sequence(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                let text = scalar_text(item).ok_or_else(|| {
                    format!("`{key}` entries must be names, found {}", kind_of(item))
                })?;
                let text = text.trim();
                if !text.is_empty() {
                    out.push(text.to_string());
                }
            }
            Ok(Some(out))
        }
        other => {
            let text = scalar_text(other).ok_or_else(|| {
                format!(
                    "`{key}` must be a list or a comma-separated string, found {}",
                    kind_of(other)
                )
            })?;
            Ok(Some(
                text.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect(),
            ))
        }
    }
}

/// A positive integer (a YAML number, or a string holding one).
pub fn positive_int(key: &str, value: &Value) -> Result<u64, String> {
    let parsed = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    parsed
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("`{key}` must be a positive integer, found {}", show(value)))
}

/// A boolean (a YAML boolean, or the strings `true` / `false`).
pub fn boolean(key: &str, value: &Value) -> Result<bool, String> {
    match value {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s.trim().eq_ignore_ascii_case("true") => Ok(true),
        Value::String(s) if s.trim().eq_ignore_ascii_case("false") => Ok(false),
        other => Err(format!(
            "`{key}` must be true or false, found {}",
            show(other)
        )),
    }
}

/// A short rendering of a value for error messages.
pub fn show(value: &Value) -> String {
    match scalar_text(value) {
        Some(s) => format!("`{s}`"),
        None => kind_of(value).to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn splits_with_bom_crlf_and_dashes_in_body() {
        let text = "\u{feff}---\r\nname: a\r\n---\r\n\r\n  indented first\r\n---\r\nmore\r\n";
        let (front, body) = split(text).unwrap();
        assert_eq!(front, "name: a\n");
        assert_eq!(body, "  indented first\n---\nmore");
    }

    #[test]
    fn empty_block_is_an_empty_mapping() {
        let doc = parse("---\n---\nbody").unwrap();
        assert!(doc.front.is_empty());
        assert_eq!(doc.body, "body");
    }

    #[test]
    fn missing_and_unclosed_blocks_are_errors() {
        assert_eq!(split("name: a\n"), Err(FrontMatterError::Missing));
        assert_eq!(split(""), Err(FrontMatterError::Missing));
        assert_eq!(split("---\nname: a\n"), Err(FrontMatterError::Unclosed));
        assert_eq!(
            split("--- \nname: a\n---"),
            Ok(("name: a\n".into(), String::new()))
        );
    }

    #[test]
    fn non_mappings_are_refused() {
        assert_eq!(
            parse("---\n- a\n- b\n---\n"),
            Err(FrontMatterError::NotMapping("a list"))
        );
        assert!(matches!(
            parse("---\nname: [a\n---\n"),
            Err(FrontMatterError::Yaml(_))
        ));
    }

    #[test]
    fn claude_style_descriptions_with_colons_are_requoted() {
        let text = "---\nname: x\ndescription: Use it when: you need it. Example: a # b\ntools: Read\n---\n";
        let doc = parse(text).unwrap();
        assert_eq!(doc.requoted, ["description"]);
        assert_eq!(
            doc.front.get("description").and_then(Value::as_str),
            Some("Use it when: you need it. Example: a # b")
        );
        // Valid YAML is never touched, and real errors stay errors.
        assert!(
            parse("---\ndescription: 'a: b'\n---\n")
                .unwrap()
                .requoted
                .is_empty()
        );
        assert!(matches!(
            parse("---\nname: [a: b\n---\n"),
            Err(FrontMatterError::Yaml(_))
        ));
    }

    #[test]
    fn lists_and_numbers() {
        let v: Value = serde_yaml_ng::from_str("Read, Grep ,, Glob").unwrap();
        assert_eq!(
            string_list("tools", &v).unwrap(),
            Some(vec!["Read".into(), "Grep".into(), "Glob".into()])
        );
        let v: Value = serde_yaml_ng::from_str("[a, b]").unwrap();
        assert_eq!(
            string_list("tools", &v).unwrap(),
            Some(vec!["a".into(), "b".into()])
        );
        let v: Value = serde_yaml_ng::from_str("{a: 1}").unwrap();
        assert!(string_list("tools", &v).is_err());
        for (src, ok) in [
            ("8", true),
            ("'8'", true),
            ("0", false),
            ("-3", false),
            ("ten", false),
            ("1.5", false),
        ] {
            let v: Value = serde_yaml_ng::from_str(src).unwrap();
            assert_eq!(positive_int("max_turns", &v).is_ok(), ok, "{src}");
        }
    }
}
