//! cadre's own configuration, other agents' configuration and git hooks cannot be written by
//! file tools, whatever the rules allow, in every approval mode but `bypass`: a real agent
//! (scripted model, real tools, real files) tries, through the harness.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_engine::{ApprovalMode, NonInteractiveApprovals, PermissionPolicy, PermissionRules};
use cadre_subagents::{Harness, RunOptions};
use cadre_types::EndState;
use std::path::Path;
use std::sync::Arc;

const PROTECTED: [&str; 4] = [
    ".cadre/config.toml",
    ".cadre/agents/x.md",
    ".mcp.json",
    ".git/hooks/pre-commit",
];
const ORIGINAL: &str = "original = true\n";

/// A turn that writes and edits every protected path, then one that reports the results.
fn script() -> String {
    let mut calls = Vec::new();
    for path in PROTECTED {
        calls.push(format!(
            r#"{{ name = "write_file", args = {{ path = "{path}", content = "mode = 'bypass'\n" }} }}"#
        ));
        calls.push(format!(
            r#"{{ name = "edit_file", args = {{ path = "{path}", old_string = "original", new_string = "owned" }} }}"#
        ));
    }
    format!(
        r#"
[[scripts]]
agent = "main"
prompt_contains = "configuration"
[[scripts.turns]]
tool_calls = [{}]
[[scripts.turns]]
text = "{{{{tool_results}}}}"

[[scripts]]
agent = "main"
prompt_contains = "delegate"
[[scripts.turns]]
tool_calls = [{{ name = "task", args = {{ subagent_type = "deployer", prompt = "go" }} }}]
[[scripts.turns]]
text = "{{{{tool_results}}}}"

[[scripts]]
agent = "deployer"
[[scripts.turns]]
tool_calls = [
  {{ name = "write_file", args = {{ path = "deploy/prod.yml", content = "owned" }} }},
  {{ name = "write_file", args = {{ path = ".mcp.json", content = "owned" }} }},
  {{ name = "write_file", args = {{ path = "notes.txt", content = "fine" }} }},
]
[[scripts.turns]]
text = "{{{{tool_results}}}}"
"#,
        calls.join(", ")
    )
}

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for path in PROTECTED {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, ORIGINAL).unwrap();
        }
        std::fs::write(dir.path().join("script.toml"), script()).unwrap();
        // An agent file that protects one more directory for its children.
        std::fs::write(
            dir.path().join(".cadre/agents/deployer.md"),
            "---\nname: deployer\ndescription: Deploys.\nworkspace: shared\n\
             protected_paths: [deploy/]\n---\nYou deploy.\n",
        )
        .unwrap();
        Self { dir }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn harness(&self, mode: ApprovalMode) -> Harness {
        // Rules that allow every write, with and without a subject.
        let allow: Vec<String> = ["write_file", "edit_file", "write_file(**)", "edit_file(**)"]
            .map(String::from)
            .to_vec();
        let rules = PermissionRules::parse(&allow, &[], &[]).unwrap();
        let harness = Harness::builder()
            .model(format!(
                "scripted:{}",
                self.root().join("script.toml").display()
            ))
            .workspace(self.root())
            .user_agents_dir(None)
            .in_memory_sessions()
            .permissions(PermissionPolicy { mode, rules })
            .build()
            .unwrap();
        assert!(harness.runtime().registry().get("deployer").is_some());
        harness
    }

    async fn run(&self, mode: ApprovalMode, prompt: &str) -> String {
        let harness = self.harness(mode);
        let mut session = harness.new_session().unwrap();
        let opts = RunOptions {
            // Anything that still asked would be approved: the refusal must come from the tools.
            approvals: Arc::new(NonInteractiveApprovals::new(true)),
            ..RunOptions::default()
        };
        let outcome = harness.run_in(&mut session, prompt, opts).await;
        assert_eq!(outcome.state, EndState::Completed, "{mode:?}");
        outcome.output
    }

    fn content(&self, path: &str) -> String {
        std::fs::read_to_string(self.root().join(path)).unwrap()
    }
}

#[tokio::test]
async fn protected_paths_are_refused_in_ask_and_auto_approve_even_with_allow_rules() {
    for mode in [ApprovalMode::Ask, ApprovalMode::AutoApprove] {
        let project = Project::new();
        let output = project.run(mode, "rewrite the configuration").await;
        for path in PROTECTED {
            assert_eq!(
                project.content(path),
                ORIGINAL,
                "{mode:?}: {path} was changed"
            );
            assert!(
                output.contains(&format!("{path} is protected")),
                "{mode:?}: no refusal for {path} in {output}"
            );
        }
        assert_eq!(output.matches("is protected").count(), 2 * PROTECTED.len());
    }
}

#[tokio::test]
async fn bypass_mode_writes_them() {
    let project = Project::new();
    let output = project
        .run(ApprovalMode::Bypass, "rewrite the configuration")
        .await;
    assert!(!output.contains("is protected"), "{output}");
    for path in PROTECTED {
        assert_eq!(project.content(path), "mode = 'bypass'\n", "{path}");
    }
}

#[tokio::test]
async fn a_definition_adds_protected_paths_for_its_children() {
    let project = Project::new();
    let output = project
        .run(ApprovalMode::AutoApprove, "delegate the deployment")
        .await;
    assert!(output.contains("deploy/prod.yml is protected"), "{output}");
    assert!(output.contains(".mcp.json is protected"), "{output}");
    assert!(!project.root().join("deploy").exists());
    assert_eq!(project.content(".mcp.json"), ORIGINAL);
    assert_eq!(project.content("notes.txt"), "fine");
}
