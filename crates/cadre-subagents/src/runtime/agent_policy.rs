//! A child's approval policy: its parent's, narrowed by what its definition adds (confining
//! rules such as `bash(git *)`, deny and ask rules, and a requested approval mode). Nothing
//! here can widen the parent's policy: the parent's rules all stay, and the mode only moves
//! towards read-only.

use crate::definitions::definition::{AgentPermissions, RequestedMode};
use cadre_engine::{ApprovalMode, PermissionPolicy, PermissionRules, RuleError};

/// The tools `acceptEdits` lets run without asking.
const EDIT_TOOLS: [&str; 2] = ["write_file", "edit_file"];

/// The approval mode of a child whose parent runs in `parent` and whose definition asks for
/// `requested`, and the allow rules that come with it:
///
/// | parent \ requested | none, `bypassPermissions` | `default` | `acceptEdits` | `plan` |
/// |---|---|---|---|---|
/// | `bypass` | bypass | ask | ask, edits allowed | read-only |
/// | `auto-approve` | auto-approve | ask | ask, edits allowed | read-only |
/// | `ask` | ask | ask | ask | read-only |
/// | `read-only` | read-only | read-only | read-only | read-only |
pub fn narrowed_mode(
    parent: ApprovalMode,
    requested: Option<RequestedMode>,
) -> (ApprovalMode, Vec<String>) {
    use ApprovalMode::*;
    let loose = matches!(parent, AutoApprove | Bypass);
    match requested {
        _ if parent == ReadOnly => (ReadOnly, Vec::new()),
        Some(RequestedMode::Plan) => (ReadOnly, Vec::new()),
        Some(RequestedMode::Default) if loose => (Ask, Vec::new()),
        Some(RequestedMode::AcceptEdits) if loose => (
            Ask,
            EDIT_TOOLS
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
        ),
        _ => (parent, Vec::new()),
    }
}

/// The policy a child runs under: the parent's rules plus the definition's, in the narrowed
/// mode. A parent in `bypass` ignores rules, so a child with rules of its own runs in
/// `auto-approve` instead, where they apply.
pub fn child_policy(
    parent: &PermissionPolicy,
    perms: &AgentPermissions,
) -> Result<PermissionPolicy, RuleError> {
    if perms.is_empty() {
        return Ok(parent.clone());
    }
    let (mut mode, allow) = narrowed_mode(parent.mode, perms.mode);
    let own = PermissionRules::parse(&allow, &perms.deny, &perms.ask)?.confined_to(&perms.only)?;
    if mode == ApprovalMode::Bypass && !(perms.deny.is_empty() && perms.ask.is_empty()) {
        mode = ApprovalMode::AutoApprove;
    }
    Ok(PermissionPolicy {
        mode,
        rules: parent.rules.merged(&own)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_engine::PolicyDecision;
    use cadre_tools::PermissionSubject;

    const MODES: [ApprovalMode; 4] = [
        ApprovalMode::Bypass,
        ApprovalMode::AutoApprove,
        ApprovalMode::Ask,
        ApprovalMode::ReadOnly,
    ];

    /// Looseness of a mode: a child's is never above its parent's.
    fn rank(m: ApprovalMode) -> u8 {
        match m {
            ApprovalMode::ReadOnly => 0,
            ApprovalMode::Ask => 1,
            ApprovalMode::AutoApprove => 2,
            ApprovalMode::Bypass => 3,
        }
    }

    #[test]
    fn the_mode_only_narrows() {
        let requests = [
            None,
            Some(RequestedMode::Default),
            Some(RequestedMode::AcceptEdits),
            Some(RequestedMode::Plan),
            Some(RequestedMode::BypassPermissions),
        ];
        for parent in MODES {
            for requested in requests {
                let (child, _) = narrowed_mode(parent, requested);
                assert!(
                    rank(child) <= rank(parent),
                    "{parent:?} {requested:?} -> {child:?}"
                );
            }
        }
        assert_eq!(
            narrowed_mode(ApprovalMode::AutoApprove, Some(RequestedMode::AcceptEdits)),
            (
                ApprovalMode::Ask,
                vec!["write_file".into(), "edit_file".into()]
            )
        );
        assert_eq!(
            narrowed_mode(ApprovalMode::Ask, Some(RequestedMode::AcceptEdits)),
            (ApprovalMode::Ask, vec![])
        );
        assert_eq!(
            narrowed_mode(ApprovalMode::Bypass, Some(RequestedMode::Plan)).0,
            ApprovalMode::ReadOnly
        );
    }

    #[test]
    fn a_childs_calls_are_never_allowed_where_its_parent_refuses() {
        let path = |p: &str| PermissionSubject::Path(p.into());
        let subjects: [(&str, PermissionSubject, bool); 6] = [
            ("bash", PermissionSubject::command("git status"), false),
            (
                "bash",
                PermissionSubject::command("git log && rm -rf x"),
                false,
            ),
            ("bash", PermissionSubject::command("rm -rf x"), false),
            ("write_file", path("a.txt"), false),
            ("edit_file", path("b.txt"), false),
            ("read_file", path("a.txt"), true),
        ];
        let defs = [
            AgentPermissions {
                only: vec!["bash(git *)".into()],
                ..Default::default()
            },
            AgentPermissions {
                mode: Some(RequestedMode::AcceptEdits),
                ..Default::default()
            },
            AgentPermissions {
                deny: vec!["write_file".into()],
                ask: vec!["bash".into()],
                mode: Some(RequestedMode::BypassPermissions),
                ..Default::default()
            },
        ];
        let strictness = |d: &PolicyDecision| match d {
            PolicyDecision::Allow => 0,
            PolicyDecision::Ask(_) => 1,
            PolicyDecision::Deny(_) => 2,
        };
        for mode in MODES {
            let parent = PermissionPolicy {
                mode,
                rules: PermissionRules::parse(&[], &["bash(rm *)".into()], &[]).unwrap(),
            };
            for perms in &defs {
                let child = child_policy(&parent, perms).unwrap();
                for (tool, subject, ro) in &subjects {
                    let p = parent.decide(tool, subject, *ro, false);
                    let c = child.decide(tool, subject, *ro, false);
                    assert!(
                        strictness(&c) >= strictness(&p),
                        "{mode:?} {perms:?} {tool} {subject:?}: parent {p:?}, child {c:?}"
                    );
                }
            }
        }
    }
}
