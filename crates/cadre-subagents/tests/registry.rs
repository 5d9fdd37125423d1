//! The registry: built-in, declarations, files in precedence order, factories; override
//! lines; skills checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod defs_support;

use cadre_subagents::{
    AgentDefinition, AgentFactory, AgentRegistry, DefinitionSource, GENERAL_PURPOSE, SkillSet,
    WorkspaceMode,
};
use defs_support::Ws;
use std::sync::Arc;

fn def_file(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\nprompt of {description}\n")
}

fn failing_factory() -> AgentFactory {
    Arc::new(|_| Err("not built in tests".into()))
}

#[test]
fn general_purpose_is_builtin_shared_and_inherits() {
    let ws = Ws::new();
    let reg = ws.registry();
    assert_eq!(reg.names(), [GENERAL_PURPOSE]);
    let gp = reg.get(GENERAL_PURPOSE).unwrap();
    assert_eq!(gp.source, DefinitionSource::Builtin);
    assert_eq!(gp.workspace.mode, WorkspaceMode::Shared);
    assert_eq!(gp.tools, None);
    assert_eq!(gp.model, None);
    assert!(!gp.can_delegate);
    assert!(gp.description.len() > 40);
    let reg = AgentRegistry::builder()
        .workspace(ws.root())
        .user_dir(None)
        .disable_general_purpose()
        .load();
    assert!(reg.is_empty());
}

#[test]
fn precedence_across_every_directory_with_override_lines() {
    let ws = Ws::new();
    let user = tempfile::tempdir().unwrap();
    let user_dir = user.path().canonicalize().unwrap().join("agents");
    std::fs::create_dir_all(&user_dir).unwrap();
    // `shared` is defined everywhere; each level also has one agent of its own.
    std::fs::write(user_dir.join("shared.md"), def_file("shared", "user")).unwrap();
    std::fs::write(user_dir.join("mine.md"), def_file("mine", "user only")).unwrap();
    ws.write(
        ".harness9/agents/shared.md",
        &def_file("shared", "harness9"),
    );
    ws.write("subagents/shared.md", "---\ndescription: java\n---\nbody\n");
    ws.write(".claude/agents/shared.md", &def_file("shared", "claude"));
    ws.write(
        ".claude/agents/general-purpose.md",
        &def_file("general-purpose", "claude gp"),
    );
    ws.write(".cadre/agents/shared.md", &def_file("shared", "cadre"));
    ws.write(
        ".cadre/agents/general-purpose.md",
        &def_file("general-purpose", "cadre gp"),
    );

    let reg = AgentRegistry::builder()
        .workspace(ws.root())
        .user_dir(Some(user_dir.clone()))
        .declare(AgentDefinition::new("shared", "code"))
        .factory("made", "", failing_factory())
        .load();
    assert!(reg.errors().is_empty(), "{:?}", reg.errors());
    assert_eq!(reg.names(), ["general-purpose", "made", "mine", "shared"]);
    assert_eq!(reg.get("shared").unwrap().description, "cadre");
    assert_eq!(reg.get("general-purpose").unwrap().description, "cadre gp");
    assert_eq!(
        reg.get("mine").unwrap().workspace.mode,
        WorkspaceMode::Shared
    );
    let made = reg.get("made").unwrap();
    assert_eq!(made.source, DefinitionSource::Factory);
    assert_eq!(
        made.description, "made",
        "a blank description falls back to the name"
    );
    assert!(made.factory.is_some());

    let user_file = user_dir.join("shared.md").display().to_string();
    let expected = [
        format!("shared: {user_file} overrides code"),
        format!("shared: .harness9/agents/shared.md overrides {user_file}"),
        // `subagents/` is writable by the model: its file replaces nothing trusted.
        "shared: subagents/shared.md not loaded: it would replace a definition from a protected \
         directory, and the model can write its directory; .harness9/agents/shared.md is kept"
            .to_string(),
        // Within a directory, files load in name order.
        "general-purpose: .claude/agents/general-purpose.md overrides builtin".to_string(),
        "shared: .claude/agents/shared.md overrides .harness9/agents/shared.md".to_string(),
        "general-purpose: .cadre/agents/general-purpose.md overrides .claude/agents/general-purpose.md"
            .to_string(),
        "shared: .cadre/agents/shared.md overrides .claude/agents/shared.md".to_string(),
    ];
    assert_eq!(reg.overrides(), expected);
}

#[test]
fn factories_override_files_and_the_registry_is_cheap_to_share() {
    let ws = Ws::new();
    ws.write(".cadre/agents/builder.md", &def_file("builder", "file"));
    let reg = AgentRegistry::builder()
        .workspace(ws.root())
        .user_dir(None)
        .factory("builder", "custom builder", failing_factory())
        .load();
    assert_eq!(
        reg.get("builder").unwrap().source,
        DefinitionSource::Factory
    );
    assert_eq!(
        reg.overrides(),
        ["builder: factory overrides .cadre/agents/builder.md"]
    );
    let clone = reg.clone();
    assert_eq!(clone.names(), reg.names());
}

#[test]
fn bad_declarations_are_errors_not_entries() {
    let ws = Ws::new();
    let mut with_body_and_url = AgentDefinition::new("remote", "r");
    with_body_and_url.prompt = "hello".into();
    with_body_and_url.remote = Some(cadre_subagents::RemoteSpec {
        url: "http://x".into(),
        headers: Default::default(),
        protocol: Default::default(),
    });
    let mut escaping = AgentDefinition::new("escaper", "e");
    escaping.workspace.path = Some("../outside".into());
    let reg = AgentRegistry::builder()
        .workspace(ws.root())
        .user_dir(None)
        .declare(AgentDefinition::new("Bad Name", "x"))
        .declare(with_body_and_url)
        .declare(escaping)
        .declare(AgentDefinition::new("fine", "ok"))
        .load();
    assert_eq!(reg.names(), ["fine", "general-purpose"]);
    let reasons: Vec<String> = reg
        .errors()
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[0].starts_with("<code:Bad Name>: "), "{reasons:?}");
    assert!(reasons[1].contains("url"), "{reasons:?}");
    assert!(reasons[2].contains("escapes"), "{reasons:?}");
}

#[test]
fn missing_skills_are_warnings_with_the_source() {
    let ws = Ws::new();
    ws.write(
        "skills/style-guide/SKILL.md",
        "---\nname: style-guide\ndescription: House style.\n---\nUse tabs.\n",
    );
    let path = ws.write(
        ".cadre/agents/writer.md",
        "---\nname: writer\ndescription: Writes.\nskills: [style-guide, nope]\n---\n",
    );
    let reg = AgentRegistry::builder()
        .workspace(ws.root())
        .user_dir(None)
        .skills(SkillSet::discover(&ws.root()))
        .load();
    let w = reg.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].agent, "writer");
    assert_eq!(w[0].source, DefinitionSource::File(path));
    assert!(w[0].message.contains("`nope`"), "{w:?}");
    // Without a skill set nothing is checked.
    assert!(ws.registry().warnings().is_empty());
}

#[test]
fn warnings_of_overridden_definitions_are_kept() {
    let ws = Ws::new();
    ws.write(
        ".claude/agents/a.md",
        "---\nname: a\ndescription: low\ntools: NotebookEdit\n---\n",
    );
    ws.write(".cadre/agents/a.md", &def_file("a", "high"));
    let reg = ws.registry();
    assert_eq!(reg.get("a").unwrap().description, "high");
    assert!(reg.get("a").unwrap().warnings.is_empty());
    assert_eq!(reg.warnings().len(), 1);
    assert!(
        matches!(&reg.warnings()[0].source, DefinitionSource::File(p) if p.ends_with(".claude/agents/a.md"))
    );
}

#[test]
fn without_a_workspace_only_the_user_dir_is_read() {
    let user = tempfile::tempdir().unwrap();
    std::fs::write(user.path().join("u.md"), def_file("u", "user")).unwrap();
    std::fs::write(
        user.path().join("bad.md"),
        "---\nname: bad\ndescription: b\nworkspace: {path: ../x}\n---\n",
    )
    .unwrap();
    let reg = AgentRegistry::builder()
        .user_dir(Some(user.path().to_path_buf()))
        .load();
    assert_eq!(reg.names(), ["general-purpose", "u"]);
    assert_eq!(reg.errors().len(), 1);
}

#[test]
fn names_differing_only_in_case_are_one_agent_with_a_warning() {
    let ws = Ws::new();
    ws.write(
        ".claude/agents/a-review.md",
        &def_file("Code-Reviewer", "capitals"),
    );
    ws.write(
        ".claude/agents/b-review.md",
        &def_file("code-reviewer", "lower"),
    );
    let reg = ws.registry();
    assert_eq!(reg.names(), ["code-reviewer", "general-purpose"]);
    assert_eq!(reg.get("CODE-reviewer").unwrap().description, "lower");
    assert_eq!(
        reg.overrides(),
        [
            "code-reviewer: .claude/agents/b-review.md overrides .claude/agents/a-review.md \
          (`code-reviewer` and `Code-Reviewer` differ only in case)"
        ]
    );
}
