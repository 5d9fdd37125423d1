//! Markdown files with YAML front matter: splitting the `---` block from the body and
//! parsing it with a real YAML parser (BOM and CRLF tolerant), plus helpers that read
//! the value shapes definition files use (strings, comma lists, positive integers).
//!
//! Every file here may come from a cloned repository, so parsing is bounded: the front matter
//! is at most [`MAX_FRONT_MATTER_BYTES`], nests at most [`MAX_NESTING`] levels and expands
//! (through aliases) to at most [`MAX_NODES`] values. The depth
//! bound matters because libyaml (inside `serde_yaml_ng`) does work proportional to the flow
//! depth (`[`, `{`) for every token, and `serde_yaml_ng` reads a whole document before its
//! own recursion limit applies, so deep nesting costs quadratic time (200 KB of `[` took
//! 47 s). The depth is therefore measured first with a streaming event parser that stops at
//! the bound.

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_yaml_ng::{Mapping, Value};
use std::borrow::Cow;
use std::fmt;

/// Files larger than this are refused without being read.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Front matter (the text between the `---` lines) larger than this is refused before any
/// YAML parsing.
pub const MAX_FRONT_MATTER_BYTES: usize = 64 * 1024;

/// Deepest nesting of mappings and lists (block or flow, the top-level mapping counting as
/// one) that front matter may have. Real definition files use three or four.
pub const MAX_NESTING: usize = 32;

/// Most values (scalars, lists and mappings, with every alias counted as a copy of what it
/// names) that front matter may expand to.
pub const MAX_NODES: u64 = 100_000;

/// Most top-level keys a front-matter block may have. Real definitions use a handful (the
/// richest format, OpenCode's, about twenty); a block of thousands is hostile, and parsing it
/// is most of what loading a directory of such files costs.
pub const MAX_TOP_LEVEL_KEYS: usize = 100;

/// Why a front-matter document could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontMatterError {
    /// The first line is not `---`.
    #[error("no front matter: the first line must be `---`")]
    Missing,
    /// No line `---` closes the block.
    #[error("front matter is not closed: no line `---` after the opening one")]
    Unclosed,
    /// The block is larger than [`MAX_FRONT_MATTER_BYTES`].
    #[error("front matter is larger than {} KiB", MAX_FRONT_MATTER_BYTES / 1024)]
    TooLarge,
    /// More than [`MAX_TOP_LEVEL_KEYS`] top-level keys.
    #[error("front matter has more than {MAX_TOP_LEVEL_KEYS} top-level keys")]
    TooManyKeys,
    /// Mappings and lists nest deeper than [`MAX_NESTING`].
    #[error("front matter nests lists and mappings more than {MAX_NESTING} levels deep")]
    TooDeep,
    /// Aliases would expand it to more than [`MAX_NODES`] values.
    #[error("front matter expands to more than {MAX_NODES} values through aliases")]
    TooManyNodes,
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
    /// Keys whose one-line value contains `: ` (invalid in plain YAML, common in Claude Code
    /// descriptions) and was therefore read as quoted text.
    pub requoted: Vec<String>,
    /// Top-level keys given more than once, in the order found; the last value is kept.
    pub duplicates: Vec<String>,
}

/// Normalise line endings and drop a leading UTF-8 byte-order mark; borrowed unless the text
/// has a `\r` (a file up to 1 MiB whose front matter can be at most 64 KiB is not copied).
fn normalise(text: &str) -> Cow<'_, str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

fn is_delimiter(line: &str) -> bool {
    line.trim_end_matches([' ', '\t']) == "---"
}

/// Split `text` into its front-matter source and its body (both after BOM and CRLF
/// normalisation). Front matter larger than [`MAX_FRONT_MATTER_BYTES`] is refused as soon as
/// the limit is passed; only the front matter and the body are copied.
pub fn split(text: &str) -> Result<(String, String), FrontMatterError> {
    let text = normalise(text);
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    if !is_delimiter(first) {
        return Err(FrontMatterError::Missing);
    }
    let mut end = 0;
    for line in rest.split_inclusive('\n') {
        if is_delimiter(line.trim_end_matches('\n')) {
            let body = &rest[end + line.len()..];
            return Ok((rest[..end].to_string(), trim_body(body)));
        }
        end += line.len();
        if end > MAX_FRONT_MATTER_BYTES {
            return Err(FrontMatterError::TooLarge);
        }
    }
    Err(FrontMatterError::Unclosed)
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

/// Check that `yaml` nests at most [`MAX_NESTING`] levels and expands to at most
/// [`MAX_NODES`] values (aliases counted as copies of what they name, so an alias bomb is
/// refused before `serde_yaml_ng` starts expanding it), reading its events one at a time and
/// stopping at the first bound passed, so the cost is linear whatever the input.
///
/// When the event parser rejects the text for another reason (it is stricter than libyaml in
/// a few corners), the rest cannot be measured; the text then passes only if it holds too few
/// `[`, `{` and `*` to nest deeply or expand at all, and is otherwise refused with that
/// parser's message.
fn check_structure(yaml: &str) -> Result<(), FrontMatterError> {
    use yaml_rust2::parser::{Event, Parser};
    let mut parser = Parser::new_from_str(yaml);
    // Open collections: (anchor id, node count when it started).
    let mut open: Vec<(usize, u64)> = Vec::new();
    let mut anchored: std::collections::HashMap<usize, u64> = std::collections::HashMap::new();
    let mut nodes: u64 = 0;
    loop {
        let event = match parser.next_token() {
            Ok((event, _)) => event,
            // Its scanner reads ahead and has its own flow-depth limit (255).
            Err(e) if e.info().contains("recursion limit") => {
                return Err(FrontMatterError::TooDeep);
            }
            Err(e) => {
                let risky = yaml
                    .bytes()
                    .filter(|b| matches!(b, b'[' | b'{' | b'*'))
                    .count();
                if risky <= MAX_NESTING {
                    return Ok(());
                }
                return Err(FrontMatterError::Yaml(e.to_string()));
            }
        };
        match event {
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if open.len() >= MAX_NESTING {
                    return Err(FrontMatterError::TooDeep);
                }
                open.push((anchor, nodes));
                nodes += 1;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((anchor, start)) = open.pop()
                    && anchor > 0
                {
                    anchored.insert(anchor, nodes - start);
                }
            }
            Event::Scalar(_, _, anchor, _) => {
                if anchor > 0 {
                    anchored.insert(anchor, 1);
                }
                nodes += 1;
            }
            Event::Alias(id) => {
                nodes = nodes.saturating_add(anchored.get(&id).copied().unwrap_or(1));
            }
            Event::StreamEnd => return Ok(()),
            _ => {}
        }
        if nodes > MAX_NODES {
            return Err(FrontMatterError::TooManyNodes);
        }
    }
}

/// The top level of a front-matter block: its pairs in order (duplicates kept, unlike
/// [`Mapping`], which refuses them), or what it is instead of a mapping.
enum TopLevel {
    Pairs(Vec<(Value, Value)>),
    Null,
    Other(&'static str),
}

impl<'de> Deserialize<'de> for TopLevel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Top;
        impl<'de> Visitor<'de> for Top {
            type Value = TopLevel;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of keys to values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevel, A::Error> {
                let mut pairs = Vec::new();
                while let Some(pair) = map.next_entry::<Value, Value>()? {
                    pairs.push(pair);
                }
                Ok(TopLevel::Pairs(pairs))
            }
            fn visit_unit<E>(self) -> Result<TopLevel, E> {
                Ok(TopLevel::Null)
            }
            fn visit_none<E>(self) -> Result<TopLevel, E> {
                Ok(TopLevel::Null)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<TopLevel, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(TopLevel::Other("a list"))
            }
            fn visit_str<E>(self, _: &str) -> Result<TopLevel, E> {
                Ok(TopLevel::Other("a string"))
            }
            fn visit_bool<E>(self, _: bool) -> Result<TopLevel, E> {
                Ok(TopLevel::Other("a boolean"))
            }
            fn visit_i64<E>(self, _: i64) -> Result<TopLevel, E> {
                Ok(TopLevel::Other("a number"))
            }
            fn visit_u64<E>(self, _: u64) -> Result<TopLevel, E> {
                Ok(TopLevel::Other("a number"))
            }
            fn visit_f64<E>(self, _: f64) -> Result<TopLevel, E> {
                Ok(TopLevel::Other("a number"))
            }
            fn visit_enum<A: serde::de::EnumAccess<'de>>(
                self,
                data: A,
            ) -> Result<TopLevel, A::Error> {
                use serde::de::VariantAccess;
                let (_, variant) = data.variant::<IgnoredAny>()?;
                variant.newtype_variant::<IgnoredAny>()?;
                Ok(TopLevel::Other("a tagged value"))
            }
        }
        d.deserialize_any(Top)
    }
}

/// True when `yaml`'s characters alone prove that it nests at most [`MAX_NESTING`] levels
/// and holds at most [`MAX_NODES`] values, so [`check_structure`] has nothing to find. Most
/// definition files qualify, and the event parse it saves costs as much as the YAML parse.
///
/// The proof: without `[`, `{` and `*` there are no flow collections and no aliases. A block
/// collection starts where its first key or its `-`/`?`/`:` indicator is, which is never
/// after the first character of its line that is not indentation or an indicator; so when
/// that character is in the first `MAX_NESTING / 2` columns of every line, so is every
/// collection. A nested block collection starts further right than its parent, except a
/// list that is a mapping's value, which may start in the key's column (and a list's own
/// items are further right), so the column grows at least every second level. Every value
/// owns a character of its own (its first one, or the `:`/`-`/`?` of an empty value), and no
/// character is the start of more than two. On a line, only the indicators before its first
/// content character and at most two characters of its content (a key and its value: block
/// context allows no more on one line) can own one, so a line holds the starts of at most
/// `2 * (indicators + 2)` values, and of at most twice its length; the sum over the lines
/// bounds the count. (Counting lines rather than bytes lets a long one-line description
/// skip the event parse.)
fn plainly_bounded(yaml: &str) -> bool {
    let columns = MAX_NESTING / 2;
    if yaml.bytes().any(|b| matches!(b, b'[' | b'{' | b'*')) {
        return false;
    }
    let mut values: u64 = 0;
    for line in yaml.lines().filter(|line| !line.trim().is_empty()) {
        let first = line
            .bytes()
            .position(|b| !matches!(b, b' ' | b'\t' | b'-' | b'?' | b':'))
            .unwrap_or(line.len());
        if first >= columns {
            return false;
        }
        values += (2 * line.len()).min(2 * (first + 2)) as u64;
    }
    values < MAX_NODES
}

/// Parse one front-matter block: bounded nesting, then the YAML itself.
fn parse_yaml(front: &str) -> Result<TopLevel, FrontMatterError> {
    if plainly_bounded(front) {
        // The fuzz target (built with debug assertions) checks the proof above.
        debug_assert!(
            check_structure(front).is_ok(),
            "plainly_bounded passed a text check_structure refuses: {front:?}"
        );
    } else {
        check_structure(front)?;
    }
    serde_yaml_ng::from_str::<TopLevel>(front).map_err(|e| FrontMatterError::Yaml(e.to_string()))
}

/// Parse a whole document: front matter (as a YAML mapping) and body.
///
/// When the YAML does not parse, one repair is tried: top-level `key: value` lines whose
/// plain one-line value contains `: ` (invalid in YAML, yet common in files written for
/// Claude Code) are quoted. If that parses, the repaired keys are listed in
/// [`Document::requoted`]. If it still does not parse, the error of the repaired text is
/// returned: the repair removed the first problem, so what remains is the real one (lines
/// keep their numbers).
pub fn parse(text: &str) -> Result<Document, FrontMatterError> {
    let (front, body) = split(text)?;
    if top_level_lines(&front) > MAX_TOP_LEVEL_KEYS {
        return Err(FrontMatterError::TooManyKeys);
    }
    let (top, requoted) = if front.trim().is_empty() {
        (TopLevel::Null, Vec::new())
    } else {
        match parse_yaml(&front) {
            Ok(top) => (top, Vec::new()),
            Err(FrontMatterError::Yaml(original)) => {
                let (repaired, keys) = requote_plain_values(&front);
                if keys.is_empty() {
                    return Err(FrontMatterError::Yaml(original));
                }
                (parse_yaml(&repaired)?, keys)
            }
            Err(other) => return Err(other),
        }
    };
    let pairs = match top {
        TopLevel::Null => Vec::new(),
        TopLevel::Pairs(pairs) => pairs,
        TopLevel::Other(kind) => return Err(FrontMatterError::NotMapping(kind)),
    };
    let mut front = Mapping::with_capacity(pairs.len());
    let mut duplicates = Vec::new();
    for (k, v) in pairs {
        if front.contains_key(&k) {
            duplicates.push(scalar_text(&k).unwrap_or_else(|| show(&k)));
        }
        front.insert(k, v);
    }
    Ok(Document {
        front,
        body,
        requoted,
        duplicates,
    })
}

/// How many lines could hold a top-level key: those starting in the first column with
/// neither a comment nor a list item (a top-level mapping's continuation lines are indented).
/// Counted before any parse, so a block of thousands of keys costs a line scan.
fn top_level_lines(front: &str) -> usize {
    front
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with([' ', '\t', '#', '-']))
        .count()
}

/// Quote the one-line plain values of top-level keys that contain `: ` (or end in `:`),
/// which plain YAML scalars cannot. Values that are valid as written, comments included
/// (`model: inherit # same as parent`), are left alone.
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
                !value.starts_with([
                    '\'', '"', '[', '{', '|', '>', '&', '*', '!', '%', '@', '`', '#',
                ]) && (value.contains(": ") || value.ends_with(':'))
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
pub fn positive_int(key: &str, value: &Value) -> Result<u64, ValueError> {
    let parsed = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    parsed.filter(|n| *n > 0).ok_or_else(|| ValueError {
        key: key.to_string(),
        expected: "a positive integer",
        found: show(value),
    })
}

/// A front-matter value of the wrong kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}` must be {expected}, found {found}")]
pub struct ValueError {
    /// The key whose value it is.
    pub key: String,
    /// What the key takes.
    pub expected: &'static str,
    /// The value as written, shortened.
    pub found: String,
}

/// A boolean (a YAML boolean, or the strings `true` / `false`).
pub fn boolean(key: &str, value: &Value) -> Result<bool, ValueError> {
    match value {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s.trim().eq_ignore_ascii_case("true") => Ok(true),
        Value::String(s) if s.trim().eq_ignore_ascii_case("false") => Ok(false),
        other => Err(ValueError {
            key: key.to_string(),
            expected: "true or false",
            found: show(other),
        }),
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
    fn the_repair_leaves_valid_lines_with_comments_alone() {
        let text = "---\nname: x\ndescription: Use this when: reviewing\nmodel: inherit # same as parent\ntools: Read, Grep, Bash # no writes\n---\n";
        let doc = parse(text).unwrap();
        assert_eq!(doc.requoted, ["description"]);
        let get = |k: &str| doc.front.get(k).and_then(Value::as_str).map(str::to_string);
        assert_eq!(get("model").as_deref(), Some("inherit"));
        assert_eq!(get("tools").as_deref(), Some("Read, Grep, Bash"));
        assert_eq!(
            get("description").as_deref(),
            Some("Use this when: reviewing")
        );
    }

    #[test]
    fn the_error_after_a_repair_is_the_one_that_remains() {
        // The repair fixes line 2; line 3 is broken on its own and is what gets reported.
        let err = parse("---\ndescription: Use when: x\ntools: [a\n---\n").unwrap_err();
        let FrontMatterError::Yaml(message) = err else {
            panic!("{err:?}")
        };
        assert!(
            message.contains("line 3") || message.contains("line 4"),
            "{message}"
        );
    }

    #[test]
    fn duplicate_top_level_keys_are_reported_not_fatal() {
        let doc = parse("---\nname: x\ncolor: red\ndescription: d\ncolor: blue\n---\n").unwrap();
        assert_eq!(doc.duplicates, ["color"]);
        assert_eq!(doc.front.get("color").and_then(Value::as_str), Some("blue"));
        // Nested duplicates stay YAML errors.
        assert!(parse("---\nworkspace: {mode: a, mode: b}\n---\n").is_err());
    }

    #[test]
    fn size_and_nesting_are_bounded_before_parsing() {
        let big = format!(
            "---\ndescription: {}\n---\n",
            "a".repeat(MAX_FRONT_MATTER_BYTES)
        );
        assert_eq!(parse(&big), Err(FrontMatterError::TooLarge));
        for open in ["[", "{", "[a, ", "- "] {
            let deep = format!("---\na: {}\n---\n", open.repeat(60_000 / open.len()));
            assert!(parse(&deep).is_err(), "{open}");
        }
        let deep = format!("---\na: {}\n---\n", "[".repeat(40));
        assert_eq!(parse(&deep), Err(FrontMatterError::TooDeep));
        // Quoted brackets are text, not nesting.
        let quoted = format!("---\na: \"{}\"\nb: [[x]]\n---\n", "[".repeat(200));
        assert!(parse(&quoted).is_ok());
        let ok = format!("---\na: {}x{}\n---\n", "[".repeat(30), "]".repeat(30));
        assert!(parse(&ok).is_ok());
        let mut bomb = String::from("---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for l in 1..8 {
            let p = l - 1;
            bomb.push_str(&format!("a{l}: &a{l} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"));
        }
        assert_eq!(
            parse(&(bomb + "---\n")),
            Err(FrontMatterError::TooManyNodes)
        );
        assert!(parse("---\na: &x [1, 2]\nb: *x\n---\n").is_ok());
    }

    #[test]
    fn the_character_proof_never_passes_what_the_event_parser_refuses() {
        let ordinary = "name: x\ndescription: Use it when: y\ntools: Read, Grep\nworkspace:\n  mode: shared\nskills:\n- a\n- b\n";
        assert!(plainly_bounded(ordinary));
        for refused in [
            "a: [x]\n".to_string(),
            "a: &x y\nb: *x\n".to_string(),
            format!("{}k: v\n", " ".repeat(MAX_NESTING / 2)),
            format!("{}x\n", "- ".repeat(MAX_NESTING + 1)),
            "k: v\n".repeat(MAX_NODES as usize / 4),
        ] {
            assert!(!plainly_bounded(&refused), "{refused:?}");
        }
        // One long line is one value, however long: no event parse needed.
        let long = format!("a: {}\n", "b".repeat(MAX_NODES as usize / 2));
        assert!(plainly_bounded(&long));
        assert_eq!(check_structure(&long), Ok(()));
        let deep = format!("{}x\n", "- ".repeat(MAX_NESTING + 1));
        assert_eq!(check_structure(&deep), Err(FrontMatterError::TooDeep));
        // Random block YAML built from indentation, indicators and keys: whatever the proof
        // passes, the event parser must accept too.
        let pieces = [
            " ", "  ", "- ", "? ", ": ", "k: ", "k:", "v", "|", "#", "\t", "-",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut passed = 0;
        for _ in 0..3000 {
            let mut text = String::new();
            for _ in 0..1 + next(40) {
                for _ in 0..next(24) {
                    text.push_str(pieces[next(pieces.len())]);
                }
                text.push('\n');
            }
            if plainly_bounded(&text) {
                passed += 1;
                assert_eq!(check_structure(&text), Ok(()), "{text:?}");
            }
        }
        assert!(passed > 100, "only {passed} texts exercised the proof");
    }

    #[test]
    fn thousands_of_top_level_keys_are_refused_before_parsing() {
        let keys = |n: usize| {
            let lines: String = (0..n).map(|k| format!("k{k}: a: b\n")).collect();
            format!("---\nname: many\n# a comment\n{lines}---\n")
        };
        assert!(parse(&keys(MAX_TOP_LEVEL_KEYS - 1)).is_ok());
        assert_eq!(
            parse(&keys(MAX_TOP_LEVEL_KEYS)),
            Err(FrontMatterError::TooManyKeys)
        );
        // Indented lines, comments and list items are not keys.
        let nested: String = (0..500).map(|k| format!("  k{k}: v\n")).collect();
        let text = format!("---\nname: a\nworkspace:\n{nested}# c\n---\n");
        assert!(parse(&text).is_ok());
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
