//! Tool-argument decoding: the arguments text of a model's tool call, decoded as the engine
//! decodes it, then read by every built-in tool's permission check and by the read-only
//! tools themselves, in a workspace holding symlinks that lead out of it. Never a panic;
//! every path subject is inside the workspace; nothing from outside it is ever printed.
//!
//! Input: the first byte picks the tool the call names; the rest is the arguments text.
#![no_main]

use cadre_engine::DenyAll;
use cadre_tools::builtin::builtin_tools;
use cadre_tools::{PermissionSubject, RunContext, ToolContext, ToolGrant, ToolRegistry, Workspace};
use cadre_types::NullSink;
use libfuzzer_sys::fuzz_target;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock};
use tokio_util::sync::CancellationToken;

/// Text only a file outside the workspace holds.
const OUTSIDE: &str = "OUTSIDE-THE-WORKSPACE-5e1f";

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    tools: ToolRegistry,
    ctx: ToolContext,
    rt: tokio::runtime::Runtime,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        let root = dir.path().join("ws");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(outside.join("secret.txt"), OUTSIDE).unwrap();
        std::fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(root.join("notes.md"), "# notes\nline two\n").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("link.txt")).unwrap();
        std::os::unix::fs::symlink("../outside/secret.txt", root.join("rel.txt")).unwrap();
        let root = root.canonicalize().unwrap();
        let workspace = Arc::new(Workspace::new(&root).unwrap());
        let ctx = ToolContext {
            call_id: "call-fuzz".into(),
            workspace,
            cancel: CancellationToken::new(),
            run: Arc::new(RunContext {
                session_id: "s-fuzz".into(),
                agent: "main".into(),
                model: "scripted:fuzz".into(),
                task_id: None,
                user_id: None,
                parent_session_id: None,
                depth: 0,
                tool_grant: ToolGrant::unrestricted(),
                budget: cadre_tools::Budget::unlimited(),
                trace_id: "trace-fuzz".into(),
                events: Arc::new(NullSink),
                approvals: Arc::new(DenyAll::new("fuzz", "no approvals while fuzzing")),
            }),
            tools: Arc::new(ToolRegistry::new()),
            hidden: Arc::default(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Fixture {
            _dir: dir,
            root,
            tools: builtin_tools(),
            ctx,
            rt,
        }
    })
}

/// A path subject is relative to the root, with no way up, and resolves inside it.
fn check_inside(root: &Path, tool: &str, rel: &Path) {
    assert!(
        rel.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir)),
        "{tool}: subject {rel:?} is not a plain relative path"
    );
    if let Ok(real) = root.join(rel).canonicalize() {
        assert!(
            real.starts_with(root),
            "{tool}: subject {rel:?} resolves to {real:?}, outside the workspace"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(raw) = std::str::from_utf8(rest) else {
        return;
    };
    let fx = fixture();
    let names = fx.tools.names();
    let name = names[usize::from(pick) % names.len()];
    let Ok(args) = cadre_tools::decode_arguments(name, raw) else {
        return;
    };
    assert!(args.is_object());
    for tool in fx.tools.iter() {
        if let Ok(PermissionSubject::Path(rel)) = tool.permission_subject(&args, &fx.ctx.workspace)
        {
            check_inside(&fx.root, tool.name(), &rel);
        }
    }
    let Some(tool) = fx.tools.get(name) else {
        return;
    };
    // Tools whose calls change nothing are run too; those reaching the network are not
    // (a fuzz run makes no requests to other machines).
    if !tool.is_read_only() || tool.uses_network() {
        return;
    }
    // The engine checks the subject before it calls; a refused one never reaches the tool.
    if tool.permission_subject(&args, &fx.ctx.workspace).is_err() {
        return;
    }
    // A marker the arguments spell themselves may come back (grep's "no matches for ...").
    let asked = args.to_string().contains(OUTSIDE);
    if let Ok(out) = fx.rt.block_on(tool.call(args, &fx.ctx)) {
        assert!(
            asked || !out.content.contains(OUTSIDE),
            "{name} printed a file outside the workspace: {}",
            out.content
        );
    }
});
