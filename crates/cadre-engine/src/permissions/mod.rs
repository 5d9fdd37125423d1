//! Permission policy: the approval mode and the `allow` / `deny` / `ask` rules that decide
//! whether a tool call runs, is refused, or needs a human decision.
//!
//! Rules are `tool` or `tool(glob)`: the tool part is a glob over tool names (so
//! `mcp__github__*` works, and a bare `mcp__github` covers every tool of that server);
//! the part in parentheses is a glob over what the call acts on after resolution (the
//! workspace-relative path for file tools, each simple command of the line for `bash`).
//! Precedence: deny, then ask, then allow. The exact semantics, with a table of examples,
//! are in `docs/configuration.md`.

mod rule;

use cadre_tools::builtin::{is_reading_tool, reading_tools};
use cadre_tools::{CommandLine, HiddenPaths, PermissionSubject};
use rule::Rule;
pub use rule::RuleError;
use serde::Deserialize;
use std::sync::Arc;

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

/// The `allow`, `deny` and `ask` rule lists, and the confining rules of a sub-agent.
#[derive(Debug, Clone, Default)]
pub struct PermissionRules {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    ask: Vec<Rule>,
    /// A tool named by one of these may only make the calls one of them allows (a
    /// definition's `Bash(git *)`); checked in every mode, as part of what the agent has.
    only: Vec<Rule>,
    hidden: Arc<HiddenPaths>,
}

impl PermissionRules {
    /// Parse the three lists.
    pub fn parse(allow: &[String], deny: &[String], ask: &[String]) -> Result<Self, RuleError> {
        let parse = |v: &[String]| {
            v.iter()
                .map(|r| Rule::parse(r))
                .collect::<Result<Vec<_>, _>>()
        };
        let deny = parse(deny)?;
        Ok(Self {
            allow: parse(allow)?,
            hidden: hidden_by(&deny)?,
            deny,
            ask: parse(ask)?,
            only: Vec::new(),
        })
    }

    /// These rules with confining rules added: once a tool is named by one of `only`, its
    /// calls that none of them allows are refused.
    pub fn confined_to(mut self, only: &[String]) -> Result<Self, RuleError> {
        for r in only {
            self.only.push(Rule::parse(r)?);
        }
        Ok(self)
    }

    /// Every rule of `self` and of `more` (a child's rules on top of its parent's).
    pub fn merged(&self, more: &PermissionRules) -> Result<PermissionRules, RuleError> {
        let join = |a: &[Rule], b: &[Rule]| a.iter().chain(b).cloned().collect::<Vec<_>>();
        let deny = join(&self.deny, &more.deny);
        Ok(PermissionRules {
            allow: join(&self.allow, &more.allow),
            hidden: hidden_by(&deny)?,
            deny,
            ask: join(&self.ask, &more.ask),
            only: join(&self.only, &more.only),
        })
    }

    /// Why confining rules refuse this call, if they do: some name the tool and none
    /// allows the call.
    fn outside_confinement(&self, tool: &str, subject: &PermissionSubject) -> Option<String> {
        let scoped: Vec<&Rule> = self.only.iter().filter(|r| r.names(tool)).collect();
        if scoped.is_empty() || covers(&scoped, subject) {
            return None;
        }
        let texts: Vec<String> = scoped.iter().map(|r| format!("`{}`", r.text)).collect();
        Some(format!(
            "{tool} is limited for this agent to {}",
            texts.join(", ")
        ))
    }

    /// The paths reading tools must leave out of what they print: those the path deny
    /// rules of `read_file`, `grep`, `glob` or `list_dir` cover.
    pub fn hidden(&self) -> Arc<HiddenPaths> {
        self.hidden.clone()
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
        subject: &PermissionSubject,
        read_only: bool,
        session_approved: bool,
    ) -> PolicyDecision {
        if let Some(reason) = self.rules.outside_confinement(tool, subject) {
            return PolicyDecision::Deny(reason);
        }
        if self.mode == ApprovalMode::Bypass {
            return PolicyDecision::Allow;
        }
        if let Some(reason) = self.denied(tool, subject) {
            return PolicyDecision::Deny(reason);
        }
        if self.mode == ApprovalMode::ReadOnly && !read_only {
            return PolicyDecision::Deny(format!(
                "{tool} changes the workspace and this session is read-only"
            ));
        }
        // A guard that cannot be checked is asked about even after a session approval:
        // approving a tool never approves slipping past a deny rule.
        if let Some(reason) = self.unverifiable(tool, subject) {
            return PolicyDecision::Ask(reason);
        }
        if session_approved {
            return PolicyDecision::Allow;
        }
        if let Some((rule, _)) = first_hit(&self.rules.ask, tool, subject) {
            return PolicyDecision::Ask(format!(
                "{tool} requires approval by the permission rule `{}`",
                rule.text
            ));
        }
        if self.allowed(tool, subject) {
            return PolicyDecision::Allow;
        }
        if let PermissionSubject::Command(line) = subject
            && !line.is_parsed()
        {
            return PolicyDecision::Ask(format!(
                "{tool}: {}",
                line.unknown().unwrap_or("the command cannot be parsed")
            ));
        }
        match self.mode {
            ApprovalMode::Ask if !read_only => {
                PolicyDecision::Ask(format!("{tool} can change the workspace"))
            }
            _ => PolicyDecision::Allow,
        }
    }

    /// The reason a deny rule refuses the call, if one does.
    fn denied(&self, tool: &str, subject: &PermissionSubject) -> Option<String> {
        if let Some((rule, hit)) = first_hit(&self.rules.deny, tool, subject) {
            return Some(if hit.is_empty() {
                format!("{tool} is denied by the permission rule `{}`", rule.text)
            } else {
                format!(
                    "{tool} is denied by the permission rule `{}` (it matches `{hit}`)",
                    rule.text
                )
            });
        }
        let hidden = &self.rules.hidden;
        match subject {
            PermissionSubject::Path(p)
                if is_reading_tool(tool) && (hidden.hides(p) || hidden.hides_tree(p)) =>
            {
                Some(format!(
                    "{} is hidden from reading tools by the permission deny rules on {}",
                    p.display(),
                    hidden.patterns().join(", ")
                ))
            }
            _ => None,
        }
    }

    /// Why a deny or ask rule cannot be checked against a command line, if it cannot.
    fn unverifiable(&self, tool: &str, subject: &PermissionSubject) -> Option<String> {
        let PermissionSubject::Command(line) = subject else {
            return None;
        };
        self.rules
            .deny
            .iter()
            .chain(&self.rules.ask)
            .filter(|r| r.names(tool))
            .find_map(|r| {
                let glob = r.subject.as_ref()?;
                glob.could_match(line).map(|why| {
                    format!(
                        "cannot check this {tool} command against the permission rule `{}`: {why}",
                        r.text
                    )
                })
            })
    }

    /// Whether allow rules cover the call: a rule without parentheses, a path rule matching
    /// the path, or, for a command line, an allow rule for every simple command.
    fn allowed(&self, tool: &str, subject: &PermissionSubject) -> bool {
        let rules: Vec<&Rule> = self.rules.allow.iter().filter(|r| r.names(tool)).collect();
        covers(&rules, subject)
    }
}

/// Whether `rules` (all naming the call's tool) allow acting on `subject`: one without
/// parentheses, one matching the path, or, for a command line, one for every simple command.
fn covers(rules: &[&Rule], subject: &PermissionSubject) -> bool {
    if rules.iter().any(|r| r.subject.is_none()) {
        return true;
    }
    match subject {
        PermissionSubject::Command(line) => allowed_commands(rules, line),
        other => rules.iter().any(|r| r.allows_path(other)),
    }
}

/// What path deny rules of any reading tool hide: their paths, from every reading tool.
fn hidden_by(deny: &[Rule]) -> Result<Arc<HiddenPaths>, RuleError> {
    let hidden: Vec<String> = deny
        .iter()
        .filter(|r| reading_tools().any(|t| r.names(t)))
        .filter_map(|r| r.subject.as_ref().map(|s| s.raw.clone()))
        .collect();
    HiddenPaths::new(&hidden)
        .map(Arc::new)
        .map_err(|e| RuleError::new(&hidden.join(", "), &e.to_string()))
}

/// Whether every simple command of `line` is allowed by one of `rules`.
fn allowed_commands(rules: &[&Rule], line: &CommandLine) -> bool {
    !rules.is_empty()
        && line.allow_texts().is_some_and(|texts| {
            texts
                .iter()
                .all(|t| rules.iter().any(|r| r.allows_command(t)))
        })
}

/// The first of `rules` that matches, with what it matched.
fn first_hit<'a>(
    rules: &'a [Rule],
    tool: &str,
    subject: &PermissionSubject,
) -> Option<(&'a Rule, String)> {
    rules
        .iter()
        .find_map(|r| r.guard_hit(tool, subject).map(|hit| (r, hit)))
}

#[cfg(test)]
mod tests;
