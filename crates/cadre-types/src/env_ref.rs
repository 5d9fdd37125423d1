//! `${NAME}` references to environment variables in configuration values (provider and
//! remote-agent headers, MCP server commands, arguments, environments, URLs and headers):
//! the one parser of the syntax, used to expand values and to tell a reference from a literal.
//!
//! The one rule, wherever a value is expanded:
//! - a reference is `${NAME}` or `${NAME:-default}`, where NAME is letters, digits and `_`,
//!   not starting with a digit;
//! - `${NAME:-default}` gives the default when NAME is unset or empty;
//! - an unset NAME without a default is an error naming the variable (never a value);
//! - a `${` with no `}` after it is an error giving its byte offset;
//! - anything else (`$NAME`, `$$`, `${}`, `${A-B}`) is literal text; there is no escape.
//!
//! Callers prefix the error with where the value was found (provider and header, server and
//! field, agent and header). The lookup is passed in, so this module does no I/O itself.

/// An expansion that could not be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvRefError {
    /// The variable is unset and the reference has no default.
    #[error("environment variable {name} is not set")]
    Unset {
        /// The variable's name (never its value).
        name: String,
    },
    /// A `${` that no `}` closes.
    #[error("unclosed `${{` at byte {at}")]
    Unclosed {
        /// Byte offset of the `$` in the value.
        at: usize,
    },
}

/// One reference found in a value.
struct Reference<'a> {
    /// Byte range of the whole `${...}` in the value.
    start: usize,
    end: usize,
    name: &'a str,
    default: Option<&'a str>,
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The first reference at or after byte `from`; `Err(offset)` when a `${` before it is unclosed.
fn next_reference(value: &str, mut from: usize) -> Result<Option<Reference<'_>>, usize> {
    while let Some(rel) = value[from..].find("${") {
        let start = from + rel;
        let body_start = start + 2;
        let close = value[body_start..].find('}').ok_or(start)?;
        let body = &value[body_start..body_start + close];
        let (name, default) = match body.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (body, None),
        };
        if valid_name(name) {
            return Ok(Some(Reference {
                start,
                end: body_start + close + 1,
                name,
                default,
            }));
        }
        from = body_start;
    }
    Ok(None)
}

/// True when `value` contains at least one `${NAME}` reference (before any unclosed `${`).
pub fn has_env_reference(value: &str) -> bool {
    matches!(next_reference(value, 0), Ok(Some(_)))
}

/// The names `value` refers to, in order (duplicates kept; none after an unclosed `${`).
pub fn referenced_names(value: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Ok(Some(r)) = next_reference(value, at) {
        out.push(r.name);
        at = r.end;
    }
    out
}

/// Replace every reference in `value` with `lookup(NAME)`, or its default when the variable
/// is unset (or empty, as in the shell's `:-`). An unset variable without a default, or an
/// unclosed `${`, is an error.
pub fn expand_with(
    value: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, EnvRefError> {
    let mut out = String::with_capacity(value.len());
    let mut at = 0;
    while let Some(r) = next_reference(value, at).map_err(|at| EnvRefError::Unclosed { at })? {
        out.push_str(&value[at..r.start]);
        match (lookup(r.name), r.default) {
            (Some(v), Some(d)) if v.is_empty() => out.push_str(d),
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(EnvRefError::Unset {
                    name: r.name.to_string(),
                });
            }
        }
        at = r.end;
    }
    out.push_str(&value[at..]);
    Ok(out)
}

/// [`expand_with`] from the environment cadre started with ([`crate::process_env::var`]).
pub fn expand_env(value: &str) -> Result<String, EnvRefError> {
    expand_with(value, |name| crate::process_env::var(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("t0k".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn references_expand_and_literals_stay() {
        assert_eq!(expand_with("Bearer ${TOKEN}", env).unwrap(), "Bearer t0k");
        assert_eq!(expand_with("plain", env).unwrap(), "plain");
        assert_eq!(expand_with("${TOKEN}${TOKEN}", env).unwrap(), "t0kt0k");
        for literal in ["$TOKEN", "$$", "$${}", "${}", "${A-B}", "${1X}", "a } b"] {
            assert_eq!(expand_with(literal, env).unwrap(), literal);
        }
        assert_eq!(expand_with("${A-B} ${TOKEN}", env).unwrap(), "${A-B} t0k");
        // `$$` is no escape: the `${TOKEN}` after it is still a reference.
        assert_eq!(expand_with("$${TOKEN}", env).unwrap(), "$t0k");
    }

    #[test]
    fn an_unclosed_reference_is_an_error_at_its_offset() {
        for (value, at) in [
            ("x ${", 2),
            ("${TOKEN", 0),
            ("${TOKEN} ${NOPE", 9),
            ("$${", 1),
        ] {
            assert_eq!(
                expand_with(value, env),
                Err(EnvRefError::Unclosed { at }),
                "{value}"
            );
        }
        assert_eq!(
            expand_with("x ${", env).unwrap_err().to_string(),
            "unclosed `${` at byte 2"
        );
        // A `}` closes a `${` even when what it encloses is no name (then it is literal).
        assert!(matches!(
            expand_with("${A-B ${NOPE}", env),
            Err(EnvRefError::Unset { name }) if name == "NOPE"
        ));
    }

    #[test]
    fn defaults_and_unset_variables() {
        assert_eq!(expand_with("${NOPE:-dflt}", env).unwrap(), "dflt");
        assert_eq!(expand_with("${EMPTY:-dflt}", env).unwrap(), "dflt");
        assert_eq!(expand_with("${EMPTY}", env).unwrap(), "");
        assert_eq!(expand_with("${TOKEN:-dflt}", env).unwrap(), "t0k");
        let e = expand_with("a ${NOPE} b", env).unwrap_err();
        assert_eq!(
            e,
            EnvRefError::Unset {
                name: "NOPE".into()
            }
        );
        assert_eq!(e.to_string(), "environment variable NOPE is not set");
    }

    #[test]
    fn detection_matches_expansion() {
        assert!(has_env_reference("${A_B1}"));
        assert!(has_env_reference("x ${} y ${_OK}"));
        assert!(has_env_reference("${X:-d}"));
        assert!(!has_env_reference("$TOKEN"));
        assert!(!has_env_reference("${}"));
        assert!(!has_env_reference("${A-B}"));
        assert_eq!(referenced_names("${A} ${B:-x} $C ${A}"), ["A", "B", "A"]);
    }
}
