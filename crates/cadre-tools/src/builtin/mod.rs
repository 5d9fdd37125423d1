//! The built-in tools: file reading and editing, searching, listing and running shell
//! commands, all confined to the run's [`Workspace`](crate::Workspace).

mod bash;
mod common;
mod edit_file;
mod glob;
mod grep;
mod line_window;
mod list_dir;
mod read_file;
mod todo_write;
mod web_fetch;
mod web_search;
mod write_file;

pub use bash::BashTool;
pub use edit_file::EditFileTool;
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use list_dir::ListDirTool;
pub use read_file::ReadFileTool;
pub use todo_write::{TODO_WRITE, TodoWriteTool, current_plan};
pub use web_fetch::{AddressRefused, WEB_FETCH, WebFetchConfig, WebFetchTool};
pub use web_search::{WEB_SEARCH, WebSearchConfig, WebSearchSetupError, WebSearchTool, mcp_target};
pub use write_file::WriteFileTool;

use crate::{SecretEnv, ToolInfo, ToolRegistry, TypedTool, names_of};
use std::sync::Arc;

/// The built-in tool set, written once: each tool type with how the registry builds it.
/// The registry, its order and the descriptors ([`BUILTIN_TOOLS`]) all come from this list.
macro_rules! builtin_set {
    (|$secrets:ident| $($ty:ty => $make:expr),+ $(,)?) => {
        const BUILTIN_COUNT: usize = [$(stringify!($ty)),+].len();

        /// What each built-in tool is, in registry order.
        pub const BUILTIN_TOOLS: [ToolInfo; BUILTIN_COUNT] = [$(<$ty as TypedTool>::INFO),+];

        fn registry_of($secrets: SecretEnv) -> ToolRegistry {
            ToolRegistry::new()$(.with(Arc::new($make)))+
        }
    };
}

builtin_set!(|secrets|
    ReadFileTool => ReadFileTool,
    WriteFileTool => WriteFileTool,
    EditFileTool => EditFileTool,
    GlobTool => GlobTool,
    GrepTool => GrepTool,
    ListDirTool => ListDirTool,
    BashTool => BashTool::new(secrets),
    TodoWriteTool => TodoWriteTool,
    WebFetchTool => WebFetchTool::default(),
);

/// Built-in tools that exist only where they are configured (`web_search` needs a
/// backend), so they are not in [`builtin_tools`]; their names are still known.
pub const CONFIGURED_TOOLS: [ToolInfo; 1] = [WebSearchTool::INFO];

/// The names of the built-in tools, in registry order.
pub const BUILTIN_TOOL_NAMES: &[&str] = &names_of(&BUILTIN_TOOLS);

/// The descriptor of the built-in tool (configured or not) named `name`.
pub fn builtin_info(name: &str) -> Option<&'static ToolInfo> {
    BUILTIN_TOOLS
        .iter()
        .chain(CONFIGURED_TOOLS.iter())
        .find(|i| i.name == name)
}

/// The reading tools (those with [`ToolInfo::reads_paths`]): a deny rule on a path of any
/// of these (`read_file(secrets/**)`) denies the path to every one and leaves it out of
/// what the listing ones print.
pub fn reading_tools() -> impl Iterator<Item = &'static str> {
    BUILTIN_TOOLS
        .iter()
        .chain(CONFIGURED_TOOLS.iter())
        .filter(|i| !i.reads_paths.is_empty())
        .map(|i| i.name)
}

/// True for a reading tool (see [`reading_tools`]).
pub fn is_reading_tool(name: &str) -> bool {
    reading_tools().any(|t| t == name)
}

/// A registry with all built-in tools, in this order: `read_file`, `write_file`,
/// `edit_file`, `glob`, `grep`, `list_dir`, `bash`, `todo_write`, `web_fetch` (with its
/// default bounds and private addresses refused); `bash` drops the default secrets
/// ([`SecretEnv::default`]) from its environment. `web_search` is not among them: it exists
/// only where a backend is configured.
pub fn builtin_tools() -> ToolRegistry {
    builtin_tools_with_secrets(SecretEnv::default())
}

/// As [`builtin_tools`], with `bash` dropping the variables `secrets` removes.
pub fn builtin_tools_with_secrets(secrets: SecretEnv) -> ToolRegistry {
    registry_of(secrets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn registry_has_all_tools_in_order_with_object_schemas() {
        let reg = builtin_tools();
        assert_eq!(
            reg.names(),
            [
                "read_file",
                "write_file",
                "edit_file",
                "glob",
                "grep",
                "list_dir",
                "bash",
                "todo_write",
                "web_fetch"
            ]
        );
        assert_eq!(reg.names(), BUILTIN_TOOL_NAMES);
        // Each instance says what its descriptor says.
        for (tool, info) in reg.iter().zip(BUILTIN_TOOLS.iter()) {
            assert_eq!(tool.name(), info.name);
            assert_eq!(tool.is_read_only(), info.read_only, "{}", info.name);
            assert_eq!(tool.kind(), crate::ToolKind::Builtin, "{}", info.name);
            assert_eq!(tool.reads_paths(), info.reads_paths, "{}", info.name);
            assert_eq!(tool.has_subject(), info.has_subject, "{}", info.name);
        }
        assert_eq!(
            reading_tools().collect::<Vec<_>>(),
            ["read_file", "glob", "grep", "list_dir"]
        );
        let subject: Vec<&str> = BUILTIN_TOOLS
            .iter()
            .filter(|i| i.has_subject)
            .map(|i| i.name)
            .collect();
        assert_eq!(
            subject,
            [
                "read_file",
                "write_file",
                "edit_file",
                "glob",
                "grep",
                "list_dir",
                "bash"
            ]
        );
        for def in reg.definitions() {
            assert_eq!(def.parameters["type"], "object", "{}", def.name);
            assert!(def.parameters["properties"].is_object(), "{}", def.name);
            assert!(def.parameters["required"].is_array(), "{}", def.name);
            assert!(def.description.len() > 40, "{}", def.name);
        }
        let read_only: Vec<&str> = reg
            .iter()
            .filter(|t| t.is_read_only())
            .map(|t| t.name())
            .collect();
        assert_eq!(
            read_only,
            [
                "read_file",
                "glob",
                "grep",
                "list_dir",
                "todo_write",
                "web_fetch"
            ]
        );
        let network: Vec<&str> = reg
            .iter()
            .filter(|t| t.uses_network())
            .map(|t| t.name())
            .collect();
        assert_eq!(network, ["web_fetch"]);
    }

    #[test]
    fn schemas_keep_their_arguments_and_reach_providers_as_written() {
        let search = WebSearchConfig {
            provider: "http".into(),
            query_arg: None,
            url: Some("http://127.0.0.1:9/?q={query}".into()),
            api_key_env: None,
            api_key_header: None,
            results: None,
        };
        let search = WebSearchTool::from_config(&search, |_| None, |_| None).unwrap();
        let reg = builtin_tools().with(Arc::new(search));
        // (tool, required, every property)
        let expected: &[(&str, &[&str], &[&str])] = &[
            ("read_file", &["path"], &["limit", "offset", "path"]),
            ("write_file", &["path", "content"], &["content", "path"]),
            (
                "edit_file",
                &["path", "old_string", "new_string"],
                &["new_string", "old_string", "path", "replace_all"],
            ),
            ("glob", &["pattern"], &["path", "pattern"]),
            (
                "grep",
                &["pattern"],
                &[
                    "case_insensitive",
                    "context",
                    "glob",
                    "output_mode",
                    "path",
                    "pattern",
                ],
            ),
            ("list_dir", &[], &["path"]),
            (
                "bash",
                &["command"],
                &["command", "description", "timeout_ms"],
            ),
            ("todo_write", &["todos"], &["todos"]),
            ("web_fetch", &["url"], &["prompt", "url"]),
            ("web_search", &["query"], &["query"]),
        ];
        assert_eq!(reg.len(), expected.len());
        for (name, required, properties) in expected {
            let def = reg.get(name).unwrap().definition();
            let schema = &def.parameters;
            assert_eq!(schema["required"], json!(required), "{name}");
            let got: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
            assert_eq!(got, *properties, "{name}");
            assert_eq!(schema["additionalProperties"], false, "{name}");
            let problems = cadre_testkit::schema_problems(schema);
            assert!(problems.is_empty(), "{name}: {problems:?}\n{schema:#}");
        }
        // The defaults the code applies are the ones the model is told.
        let read = reg.get("read_file").unwrap().definition().parameters;
        assert_eq!(read["properties"]["limit"]["default"], 2000);
        let bash = reg.get("bash").unwrap().definition();
        assert_eq!(
            bash.parameters["properties"]["timeout_ms"]["default"],
            120_000
        );
        assert!(bash.description.contains("(default 120000, max 600000)"));
        let todo = reg.get("todo_write").unwrap().definition().parameters;
        let item = &todo["properties"]["todos"]["items"];
        assert_eq!(item["properties"]["content"]["maxLength"], 500);
        assert_eq!(
            item["properties"]["status"]["enum"],
            json!(["pending", "in_progress", "completed"])
        );
    }

    #[tokio::test]
    async fn arguments_that_do_not_decode_are_reported_to_the_model() {
        use crate::Workspace;
        let dir = crate::testutil::tree(&[("a.txt", b"x\n")]);
        let ws = Workspace::new(dir.path()).unwrap();
        let ctx = crate::testutil::ctx(dir.path());
        let reg = builtin_tools();
        let cases = [
            (
                "read_file",
                json!({"path": 3}),
                "invalid type: integer `3`, expected a string",
            ),
            ("read_file", json!({}), "missing field `path`"),
            (
                "grep",
                json!({"pattern": "x", "context": -1}),
                "invalid value: integer `-1`",
            ),
            (
                "grep",
                json!({"pattern": "x", "output_mode": "lines"}),
                "unknown variant `lines`",
            ),
            ("bash", json!({"cmd": "ls"}), "missing field `command`"),
            (
                "todo_write",
                json!({"todos": [], "extra": 1}),
                "unknown field `extra`",
            ),
            (
                "web_fetch",
                json!({"url": ["a"]}),
                "invalid type: sequence, expected a string",
            ),
        ];
        for (name, args, want) in cases {
            let tool = reg.get(name).unwrap();
            for err in [
                tool.permission_subject(&args, &ws).unwrap_err(),
                tool.call(args.clone(), &ctx).await.unwrap_err(),
            ] {
                assert!(
                    matches!(err, crate::ToolError::InvalidArgs(_)),
                    "{name} {args}: {err}"
                );
                let text = err.to_string();
                assert!(
                    text.starts_with("invalid arguments: ") && text.contains(want),
                    "{name} {args}: {text}"
                );
            }
        }
        // An explicit `null` for an optional argument means "not given", as before.
        let out = reg
            .get("read_file")
            .unwrap()
            .call(
                json!({"path": "a.txt", "limit": null, "offset": null}),
                &ctx,
            )
            .await
            .unwrap();
        assert_eq!(out.content, "     1\tx\n");
    }

    #[test]
    fn permission_subjects_are_resolved_paths_and_parsed_commands() {
        use crate::{PermissionSubject, Workspace};
        use std::path::PathBuf;
        let dir = crate::testutil::tree(&[("src/a.rs", b""), ("secrets/key", b"k")]);
        std::os::unix::fs::symlink(dir.path().join("secrets"), dir.path().join("pub")).unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let reg = builtin_tools();
        let subject = |tool: &str, args: serde_json::Value| {
            reg.get(tool).unwrap().permission_subject(&args, &ws)
        };
        let abs = ws.root().join("secrets/key").display().to_string();
        let path_cases: &[(&str, serde_json::Value, &str)] = &[
            (
                "write_file",
                json!({"path": "src/a.rs", "content": ""}),
                "src/a.rs",
            ),
            (
                "write_file",
                json!({"path": "./src/../src/new.rs", "content": ""}),
                "src/new.rs",
            ),
            ("read_file", json!({"path": abs}), "secrets/key"),
            ("read_file", json!({"path": "pub/key"}), "secrets/key"),
            (
                "edit_file",
                json!({"path": "./secrets/key", "old_string": "a", "new_string": "b"}),
                "secrets/key",
            ),
            ("grep", json!({"pattern": "x"}), "."),
            ("glob", json!({"pattern": "*"}), "."),
            ("list_dir", json!({}), "."),
            ("list_dir", json!({"path": "pub"}), "secrets"),
        ];
        for (tool, args, want) in path_cases {
            let got = subject(tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args}: {e}"));
            assert_eq!(
                got,
                PermissionSubject::Path(PathBuf::from(want)),
                "{tool} {args}"
            );
        }
        for args in [
            json!({"path": "../x"}),
            json!({"path": "/etc/passwd"}),
            json!({}),
        ] {
            assert!(subject("read_file", args.clone()).is_err(), "{args}");
        }
        let PermissionSubject::Command(line) =
            subject("bash", json!({"command": "ls  -la"})).unwrap()
        else {
            panic!("bash has a command subject");
        };
        assert_eq!(line.commands()[0].text(), "ls -la");
        assert!(subject("bash", json!({"cmd": "ls"})).is_err());
    }

    #[test]
    fn declared_subjects_match_what_calls_act_on() {
        use crate::{PermissionSubject, Workspace};
        let dir = crate::testutil::tree(&[("a.txt", b"x\n")]);
        let ws = Workspace::new(dir.path()).unwrap();
        let reg = builtin_tools();
        let valid = |name: &str| match name {
            "read_file" | "list_dir" => json!({"path": "a.txt"}),
            "write_file" => json!({"path": "a.txt", "content": ""}),
            "edit_file" => json!({"path": "a.txt", "old_string": "x", "new_string": "y"}),
            "glob" | "grep" => json!({"pattern": "x"}),
            "bash" => json!({"command": "ls"}),
            "todo_write" => json!({"todos": []}),
            "web_fetch" => json!({"url": "https://example.com/"}),
            other => panic!("no sample arguments for {other}"),
        };
        for info in BUILTIN_TOOLS {
            let subject = reg
                .get(info.name)
                .unwrap()
                .permission_subject(&valid(info.name), &ws)
                .unwrap();
            let path_or_command = matches!(
                subject,
                PermissionSubject::Path(_) | PermissionSubject::Command(_)
            );
            assert_eq!(
                path_or_command, info.has_subject,
                "{}: {subject:?}",
                info.name
            );
            if !info.reads_paths.is_empty() {
                assert!(
                    matches!(subject, PermissionSubject::Path(_)),
                    "{}",
                    info.name
                );
            }
        }
    }

    #[tokio::test]
    async fn reading_tools_leave_hidden_paths_out() {
        use crate::testutil::{ctx_hiding, tree};
        let dir = tree(&[
            ("a.txt", b"needle\n"),
            ("secrets/key", b"needle secret\n"),
            ("secrets/deep/more", b"needle\n"),
            ("keys/a.pem", b"needle\n"),
            ("keys/a.pub", b"needle\n"),
        ]);
        std::os::unix::fs::symlink(dir.path().join("secrets"), dir.path().join("link")).unwrap();
        let ctx = ctx_hiding(dir.path(), &["secrets/**", "keys/*.pem"]);
        let reg = builtin_tools();
        let call = |tool: &'static str, args: serde_json::Value| {
            let t = reg.get(tool).unwrap();
            let ctx = ctx.clone();
            async move { t.call(args, &ctx).await }
        };
        let out = call(
            "grep",
            json!({"pattern": "needle", "output_mode": "files_with_matches"}),
        );
        assert_eq!(out.await.unwrap().content, "a.txt\nkeys/a.pub\n");
        let out = call("glob", json!({"pattern": "**/*"})).await.unwrap();
        assert_eq!(out.content, "a.txt\nkeys/a.pub\n");
        let out = call("list_dir", json!({})).await.unwrap();
        assert!(
            !out.content.contains("secrets") && !out.content.contains("link"),
            "{}",
            out.content
        );
        let out = call("list_dir", json!({"path": "keys"})).await.unwrap();
        assert!(
            out.content.contains("a.pub") && !out.content.contains("a.pem"),
            "{}",
            out.content
        );
        for (tool, args) in [
            ("grep", json!({"pattern": "needle", "path": "secrets"})),
            ("grep", json!({"pattern": "needle", "path": "link/key"})),
            ("glob", json!({"pattern": "*", "path": "link"})),
            ("list_dir", json!({"path": "secrets/deep"})),
            ("read_file", json!({"path": "keys/a.pem"})),
        ] {
            let err = call(tool, args.clone()).await.unwrap_err();
            assert!(
                err.to_string().contains("hidden by a permission deny rule"),
                "{tool} {args}: {err}"
            );
        }
    }
}
