//! Definitions from directories the model can write (`subagents/`, `.gemini/agents/`) may
//! only narrow: `sandbox: off`, a wider `permissionMode` and `mcpServers` are dropped with a
//! warning, the child's resolved sandbox stays the default, and such a file never replaces
//! the built-in or a definition from a protected directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod defs_support;

use cadre_sandbox::{Launcher, SandboxMode, SandboxPolicy, SandboxSpec};
use cadre_subagents::{
    DefinitionSource, GENERAL_PURPOSE, RuntimeConfig, SandboxSettings, WRITABLE_NOTE,
};
use defs_support::Ws;
use std::sync::Arc;

const WIDENING: &str = "---\nname: NAME\ndescription: widening\nsandbox: off\n\
    permissionMode: bypassPermissions\nmcpServers:\n  - github\n---\nbody\n";

fn widening(name: &str) -> String {
    WIDENING.replace("NAME", name)
}

#[test]
fn a_writable_directory_file_named_general_purpose_does_not_replace_the_built_in() {
    let ws = Ws::new();
    ws.write(
        ".gemini/agents/general-purpose.md",
        &widening(GENERAL_PURPOSE),
    );
    ws.write("subagents/general-purpose.md", &widening(GENERAL_PURPOSE));
    let reg = ws.registry();
    let gp = reg.get(GENERAL_PURPOSE).unwrap();
    assert_eq!(gp.source, DefinitionSource::Builtin);
    assert_eq!(gp.sandbox, None);
    let lines = reg.overrides();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for line in lines {
        assert!(
            line.contains("not loaded") && line.ends_with("builtin is kept"),
            "{line}"
        );
    }
}

#[test]
fn a_writable_directory_file_that_widens_is_narrowed_with_warnings() {
    let ws = Ws::new();
    ws.write("subagents/helper.md", &widening("helper"));
    ws.write(".gemini/agents/gem.md", &widening("gem"));
    // The same file in a protected directory keeps what it asks for.
    ws.write(".claude/agents/trusted.md", &widening("trusted"));
    let reg = ws.registry();
    for name in ["helper", "gem"] {
        let d = reg.get(name).unwrap();
        assert!(d.model_writable, "{name}");
        assert_eq!(d.sandbox, None, "{name}");
        assert_eq!(d.permissions.mode, None, "{name}");
        assert!(d.mcp_servers.is_empty(), "{name}");
        let warned: Vec<&str> = reg
            .warnings()
            .iter()
            .filter(|w| w.agent == name && w.message.contains(WRITABLE_NOTE))
            .map(|w| w.message.as_str())
            .collect();
        assert_eq!(warned.len(), 3, "{name}: {warned:?}");
        assert!(
            warned.iter().any(|w| w.contains("`sandbox: off`")),
            "{warned:?}"
        );
    }
    let t = reg.get("trusted").unwrap();
    assert!(!t.model_writable);
    assert_eq!(t.sandbox.as_ref().map(|s| s.mode), Some(SandboxMode::Off));
    assert_eq!(t.mcp_servers.len(), 1);
}

#[test]
fn the_child_of_a_writable_definition_asking_sandbox_off_runs_sandboxed() {
    let ws = Ws::new();
    ws.write("subagents/helper.md", &widening("helper"));
    let reg = ws.registry();
    let mut def = reg.get("helper").unwrap().clone();
    let store = Arc::new(cadre_store::MemoryStore::new(cadre_store::NodeId::new("n")));
    let mut cfg = RuntimeConfig::new(ws.root(), store);
    cfg.sandbox = Some(SandboxSettings::new(Arc::new(Launcher::new(None))));
    let root = ws.root();
    let default = SandboxPolicy::resolve(&SandboxSpec::mode(SandboxMode::WorkspaceWrite), &root);
    let parent = SandboxPolicy::off();
    assert_eq!(cfg.sandbox_policy(&def, &root, &parent), default);
    // Even a request the loader let by stays within the default for sub-agents.
    def.sandbox = Some(SandboxSpec {
        mode: SandboxMode::Off,
        network: true,
        writable_roots: vec!["/".into()],
    });
    let policy = cfg.sandbox_policy(&def, &root, &parent);
    assert!(!policy.is_off());
    assert!(policy.is_within(&default), "{policy:?}");
    // Without the mark, the same request is honoured (a trusted definition may widen).
    def.model_writable = false;
    assert!(cfg.sandbox_policy(&def, &root, &parent).is_off());
}

/// Every place cadre reads definitions, skills or injected instructions from is in the file
/// tools' protected set and in `protected_roots`: adding a directory to the loader without
/// protecting it fails here.
#[test]
fn every_directory_cadre_reads_definitions_from_is_protected() {
    use cadre_subagents::{DirKind, SKILL_DIRS};
    use cadre_tools::{AccessPolicy, protected_roots};
    use std::path::Path;
    let root = Path::new("/w");
    let policy = AccessPolicy::default();
    let roots = protected_roots(root);
    let covered = |rel: &str| roots.iter().any(|r| root.join(rel).starts_with(r));
    let mut places: Vec<String> = DirKind::PROJECT
        .iter()
        .flat_map(|k| k.project_dirs().iter().map(|d| format!("{d}/x.md")))
        .collect();
    places.push(cadre_subagents::definitions::loader::CODEX_CONFIG.to_string());
    places.extend(SKILL_DIRS.iter().map(|d| format!("{d}/s/SKILL.md")));
    places.extend(
        cadre_engine::prompt::DEFAULT_MEMORY_FILES
            .iter()
            .map(|f| (*f).to_string()),
    );
    places.push(".mcp.json".to_string());
    for rel in &places {
        assert!(
            policy.is_protected(&root.join(rel), Path::new(rel)),
            "{rel} is read by cadre but file tools may write it"
        );
        assert!(covered(rel), "{rel} is missing from protected_roots");
    }
}
