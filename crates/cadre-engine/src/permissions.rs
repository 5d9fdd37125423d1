//! Permission policy: the approval mode and the `allow` / `deny` / `ask` rules that decide
//! whether a tool call runs, is refused, or needs a human decision.
//!
//! Rules are `tool` or `tool(glob)`: the tool part is a glob over tool names (so
//! `mcp__github__*` works, and a bare `mcp__github` covers every tool of that server);
//! the part in parentheses is a glob over the call's subject (the command for `bash`, the
//! path for file tools). Precedence: deny, then ask, then allow.

use globset::{Glob, GlobMatcher};
use serde::Deserialize;

/// How calls that no rule decides are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// Read-only tools run; mutating tools (`bash`, `write_file`, `edit_file`, ...) ask.
    #[default]
    Ask,
    /// Everything runs unless a rule denies or asks.
    AutoApprove,
    /// Mutating tools are refused; read-only tools run unless a rule denies them.
    ReadOnly,
    /// No checks at all: every call runs, rules are ignored. Hooks still run.
    Bypass,
}

impl std::str::FromStr for ApprovalMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ask" => Ok(Self::Ask),
            "auto-approve" | "auto" => Ok(Self::AutoApprove),
            "read-only" => Ok(Self::ReadOnly),
            "bypass" => Ok(Self::Bypass),
            other => Err(format!(
                "unknown approval mode {other:?} (expected ask, auto-approve, read-only or bypass)"
            )),
        }
    }
}

/// A rule that could not be parsed.
#[derive(Debug, thiserror::Error)]
#[error("bad permission rule {rule:?}: {reason}")]
pub struct RuleError {
    rule: String,
    reason: String,
}

#[derive(Debug, Clone)]
struct Rule {
    tool: GlobMatcher,
    server_prefix: Option<String>,
    subject: Option<GlobMatcher>,
}

impl Rule {
    fn parse(text: &str) -> Result<Self, RuleError> {
        let err = |reason: &str| RuleError {
            rule: text.to_string(),
            reason: reason.to_string(),
        };
        let text_trim = text.trim();
        let (tool, subject) = match text_trim.find('(') {
            Some(open) => {
                let inner = text_trim[open + 1..]
                    .strip_suffix(')')
                    .ok_or_else(|| err("missing closing parenthesis"))?;
                (&text_trim[..open], Some(inner))
            }
            None => (text_trim, None),
        };
        if tool.is_empty() {
            return Err(err("empty tool name"));
        }
        let glob = |p: &str| {
            Glob::new(p)
                .map(|g| g.compile_matcher())
                .map_err(|e| err(&e.to_string()))
        };
        let has_meta = tool.contains(['*', '?', '[', '{']);
        Ok(Self {
            tool: glob(tool)?,
            server_prefix: (!has_meta
                && tool.starts_with("mcp__")
                && tool.matches("__").count() == 1)
                .then(|| format!("{tool}__")),
            subject: subject.map(glob).transpose()?,
        })
    }

    fn matches(&self, tool: &str, subject: Option<&str>) -> bool {
        let name_ok = self.tool.is_match(tool)
            || self
                .server_prefix
                .as_deref()
                .is_some_and(|p| tool.starts_with(p));
        name_ok
            && match (&self.subject, subject) {
                (None, _) => true,
                (Some(g), Some(s)) => g.is_match(s),
                (Some(_), None) => false,
            }
    }
}

/// The `allow`, `deny` and `ask` rule lists.
#[derive(Debug, Clone, Default)]
pub struct PermissionRules {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    ask: Vec<Rule>,
}

impl PermissionRules {
    /// Parse the three lists.
    pub fn parse(allow: &[String], deny: &[String], ask: &[String]) -> Result<Self, RuleError> {
        let parse = |v: &[String]| {
            v.iter()
                .map(|r| Rule::parse(r))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Self {
            allow: parse(allow)?,
            deny: parse(deny)?,
            ask: parse(ask)?,
        })
    }
}

/// What the policy says about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyDecision {
    /// Run it.
    Allow,
    /// Refuse it, with the reason the model sees.
    Deny(String),
    /// Ask a human, with the reason shown.
    Ask(String),
}

/// Mode plus rules.
#[derive(Debug, Clone, Default)]
pub struct PermissionPolicy {
    /// The approval mode.
    pub mode: ApprovalMode,
    /// The rules.
    pub rules: PermissionRules,
}

impl PermissionPolicy {
    /// Decide on a call to `tool` acting on `subject`. `read_only` says whether the tool only
    /// reads; `session_approved` whether a human approved this tool for the session.
    pub fn decide(
        &self,
        tool: &str,
        subject: Option<&str>,
        read_only: bool,
        session_approved: bool,
    ) -> PolicyDecision {
        if self.mode == ApprovalMode::Bypass {
            return PolicyDecision::Allow;
        }
        let hit = |rules: &[Rule]| rules.iter().any(|r| r.matches(tool, subject));
        if hit(&self.rules.deny) {
            return PolicyDecision::Deny(format!("{tool} is denied by a permission rule"));
        }
        if self.mode == ApprovalMode::ReadOnly && !read_only {
            return PolicyDecision::Deny(format!(
                "{tool} changes the workspace and this session is read-only"
            ));
        }
        if session_approved {
            return PolicyDecision::Allow;
        }
        if hit(&self.rules.ask) {
            return PolicyDecision::Ask(format!("{tool} requires approval by a permission rule"));
        }
        if hit(&self.rules.allow) {
            return PolicyDecision::Allow;
        }
        match self.mode {
            ApprovalMode::Ask if !read_only => {
                PolicyDecision::Ask(format!("{tool} can change the workspace"))
            }
            _ => PolicyDecision::Allow,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PolicyDecision::*;

    fn policy(mode: ApprovalMode, allow: &[&str], deny: &[&str], ask: &[&str]) -> PermissionPolicy {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        PermissionPolicy {
            mode,
            rules: PermissionRules::parse(&v(allow), &v(deny), &v(ask)).unwrap(),
        }
    }

    fn kind(d: PolicyDecision) -> &'static str {
        match d {
            Allow => "allow",
            Deny(_) => "deny",
            Ask(_) => "ask",
        }
    }

    #[test]
    fn default_mode_asks_for_mutating_tools_only() {
        let p = policy(ApprovalMode::Ask, &[], &[], &[]);
        assert_eq!(kind(p.decide("read_file", Some("a"), true, false)), "allow");
        assert_eq!(kind(p.decide("bash", Some("ls"), false, false)), "ask");
        assert_eq!(kind(p.decide("write_file", Some("a"), false, false)), "ask");
    }

    #[test]
    fn deny_wins_over_allow_and_session_approval() {
        let p = policy(ApprovalMode::Ask, &["bash"], &["bash(rm *)"], &[]);
        assert_eq!(
            kind(p.decide("bash", Some("ls -la"), false, false)),
            "allow"
        );
        assert_eq!(
            kind(p.decide("bash", Some("rm -rf /"), false, false)),
            "deny"
        );
        assert_eq!(
            kind(p.decide("bash", Some("rm -rf /"), false, true)),
            "deny"
        );
    }

    type Case = (
        ApprovalMode,
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
        &'static str,
        bool,
        bool,
        &'static str,
    );

    #[test]
    fn table_of_modes_and_rules() {
        let cases: &[Case] = &[
            // mode, allow, deny, ask, tool, read_only, session_approved, expected
            (
                ApprovalMode::ReadOnly,
                &["bash"],
                &[],
                &[],
                "bash",
                false,
                false,
                "deny",
            ),
            (
                ApprovalMode::ReadOnly,
                &[],
                &[],
                &[],
                "grep",
                true,
                false,
                "allow",
            ),
            (
                ApprovalMode::ReadOnly,
                &[],
                &["grep"],
                &[],
                "grep",
                true,
                false,
                "deny",
            ),
            (
                ApprovalMode::AutoApprove,
                &[],
                &[],
                &[],
                "bash",
                false,
                false,
                "allow",
            ),
            (
                ApprovalMode::AutoApprove,
                &[],
                &[],
                &["bash"],
                "bash",
                false,
                false,
                "ask",
            ),
            (
                ApprovalMode::AutoApprove,
                &[],
                &["bash"],
                &[],
                "bash",
                false,
                false,
                "deny",
            ),
            (
                ApprovalMode::Bypass,
                &[],
                &["bash"],
                &[],
                "bash",
                false,
                false,
                "allow",
            ),
            (
                ApprovalMode::Ask,
                &[],
                &[],
                &[],
                "bash",
                false,
                true,
                "allow",
            ),
            (
                ApprovalMode::Ask,
                &[],
                &[],
                &["read_file"],
                "read_file",
                true,
                false,
                "ask",
            ),
            (
                ApprovalMode::Ask,
                &["mcp__gh"],
                &[],
                &[],
                "mcp__gh__create",
                false,
                false,
                "allow",
            ),
            (
                ApprovalMode::Ask,
                &["mcp__gh__*"],
                &[],
                &[],
                "mcp__gh__x",
                false,
                false,
                "allow",
            ),
            (
                ApprovalMode::Ask,
                &["mcp__gh"],
                &[],
                &[],
                "mcp__ghx__y",
                false,
                false,
                "ask",
            ),
        ];
        for (i, (mode, allow, deny, ask, tool, ro, sess, want)) in cases.iter().enumerate() {
            let p = policy(*mode, allow, deny, ask);
            assert_eq!(
                kind(p.decide(tool, Some("x"), *ro, *sess)),
                *want,
                "case {i}"
            );
        }
    }

    #[test]
    fn subject_globs_match_commands_and_paths() {
        let p = policy(
            ApprovalMode::Ask,
            &["bash(git status*)", "write_file(src/**)"],
            &[],
            &[],
        );
        assert_eq!(
            kind(p.decide("bash", Some("git status -s"), false, false)),
            "allow"
        );
        assert_eq!(
            kind(p.decide("bash", Some("git push"), false, false)),
            "ask"
        );
        assert_eq!(
            kind(p.decide("write_file", Some("src/a/b.rs"), false, false)),
            "allow"
        );
        assert_eq!(
            kind(p.decide("write_file", Some("docs/x.md"), false, false)),
            "ask"
        );
        assert_eq!(kind(p.decide("write_file", None, false, false)), "ask");
    }

    #[test]
    fn bad_rules_are_reported() {
        assert!(PermissionRules::parse(&["bash(ls".into()], &[], &[]).is_err());
        assert!(PermissionRules::parse(&["(x)".into()], &[], &[]).is_err());
        assert!("sideways".parse::<ApprovalMode>().is_err());
        assert_eq!(
            "read-only".parse::<ApprovalMode>(),
            Ok(ApprovalMode::ReadOnly)
        );
    }
}
