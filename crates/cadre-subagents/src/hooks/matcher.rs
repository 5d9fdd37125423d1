//! Hook matchers, as Claude Code reads them: empty, `*` or missing match everything; a
//! string of only letters, digits, `_`, `|`, `,`, `-` and spaces is a list of exact names;
//! anything else is a regular expression, searched anywhere in the name.

use regex_automata::meta::Regex;

/// What a group of handlers applies to.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// Every occurrence of the event.
    All,
    /// Exactly these names.
    Names(Vec<String>),
    /// Names this expression finds a match in.
    Pattern(Box<Regex>),
}

/// Why a matcher was refused.
#[derive(Debug, thiserror::Error)]
#[error("invalid matcher `{matcher}`: {reason}")]
pub struct MatcherError {
    /// The matcher as written.
    pub matcher: String,
    /// The regular expression's error.
    pub reason: String,
}

impl Matcher {
    /// The matcher written as `text` (`None`: missing).
    pub fn parse(text: Option<&str>) -> Result<Self, MatcherError> {
        let t = text.unwrap_or("").trim();
        if t.is_empty() || t == "*" {
            return Ok(Self::All);
        }
        let plain = t
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '|' | ',' | '-' | ' '));
        if plain {
            let names = t
                .split(['|', ','])
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect();
            return Ok(Self::Names(names));
        }
        Regex::new(t)
            .map(|r| Self::Pattern(Box::new(r)))
            .map_err(|e| MatcherError {
                matcher: t.to_string(),
                reason: e.to_string(),
            })
    }

    /// True when any of `names` (one subject's spellings) matches.
    pub fn matches_any<'a>(&self, mut names: impl Iterator<Item = &'a str>) -> bool {
        match self {
            Self::All => true,
            Self::Names(list) => names.any(|n| list.iter().any(|l| l == n)),
            Self::Pattern(re) => names.any(|n| re.is_match(n)),
        }
    }
}

/// Every spelling of the tool `name`: cadre's own and the names other harnesses use for it
/// (Claude Code's `Bash` for `bash`), so a matcher written for either matches.
pub fn tool_spellings(name: &str) -> Vec<&str> {
    let mut out = vec![name];
    if let Some(info) = crate::known_tool(name) {
        out.extend(info.foreign_names.iter().copied());
    }
    out
}

/// The name Claude Code gives the tool `name` (its first capitalised foreign name), or
/// `name` itself when Claude Code has no such tool (MCP tools are spelt alike).
pub fn claude_name(name: &str) -> &str {
    crate::known_tool(name)
        .and_then(|i| {
            i.foreign_names
                .iter()
                .find(|n| n.starts_with(|c: char| c.is_ascii_uppercase()))
                .copied()
        })
        .unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> Matcher {
        Matcher::parse(Some(s)).unwrap()
    }

    #[test]
    fn empty_star_and_missing_match_everything() {
        for t in [None, Some(""), Some("*"), Some("  ")] {
            assert!(
                Matcher::parse(t)
                    .unwrap()
                    .matches_any(["anything"].into_iter())
            );
        }
    }

    #[test]
    fn plain_strings_are_exact_name_lists() {
        let list = m("Edit|Write, bash");
        assert!(list.matches_any(["Write"].into_iter()));
        assert!(list.matches_any(["bash"].into_iter()));
        // Exact: not a substring, not case-folded.
        assert!(!list.matches_any(["Writer"].into_iter()));
        assert!(!list.matches_any(["write"].into_iter()));
        assert!(!m("Bash").matches_any(["BashOutput"].into_iter()));
    }

    #[test]
    fn anything_else_is_a_regular_expression() {
        let re = m("mcp__github__.*");
        assert!(re.matches_any(["mcp__github__create_issue"].into_iter()));
        assert!(!re.matches_any(["mcp__gitlab__x"].into_iter()));
        assert!(m("^Bash$").matches_any(["Bash"].into_iter()));
        assert!(!m("^Bash$").matches_any(["BashOutput"].into_iter()));
        assert!(Matcher::parse(Some("(unclosed")).is_err());
    }

    #[test]
    fn cadre_and_claude_tool_names_both_match() {
        assert!(m("Bash").matches_any(tool_spellings("bash").into_iter()));
        assert!(m("bash").matches_any(tool_spellings("bash").into_iter()));
        assert!(m("Write|Edit").matches_any(tool_spellings("edit_file").into_iter()));
        assert!(m("Read").matches_any(tool_spellings("read_file").into_iter()));
        assert!(m("Task").matches_any(tool_spellings("task").into_iter()));
        assert!(!m("Bash").matches_any(tool_spellings("read_file").into_iter()));
        assert_eq!(claude_name("bash"), "Bash");
        assert_eq!(claude_name("write_file"), "Write");
        assert_eq!(claude_name("mcp__s__t"), "mcp__s__t");
    }
}
