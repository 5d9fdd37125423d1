//! The text a whole-file write would replace, read before the call runs, so a preview (the
//! approval question, the tool line) shows an overwrite as the change it is rather than as
//! a file written from nothing.

use crate::{HiddenPaths, Workspace, builtin::builtin_info, read_to_string_capped};

/// Largest file whose text is read for a preview; a bigger one gets no old text.
pub const MAX_REPLACED_BYTES: u64 = 256 * 1024;

/// What a call of `tool` with `args` would overwrite: the current text of the existing file
/// it names, when `tool` writes whole files. `None` for other tools, a new file, a path
/// outside the workspace or a protected one, a file deny rules hide (a preview must not
/// show what reading it would refuse), and a file over [`MAX_REPLACED_BYTES`] or not text.
pub fn replaced_text(
    tool: &str,
    args: &serde_json::Value,
    workspace: &Workspace,
    hidden: &HiddenPaths,
) -> Option<String> {
    let info = builtin_info(tool)?;
    if info.edits?.old.is_some() {
        return None;
    }
    let given = args.get(*info.title.first()?)?.as_str()?;
    let abs = workspace.resolve(given).ok()?;
    let rel = workspace.relative(&abs);
    if !abs.is_file()
        || hidden.hides_entry(&rel, false)
        || workspace.policy().is_protected(&abs, &rel)
    {
        return None;
    }
    read_to_string_capped(&abs, MAX_REPLACED_BYTES).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::tree;
    use serde_json::json;

    #[test]
    fn an_existing_file_gives_its_text_and_nothing_else_does() {
        let dir = tree(&[("notes.md", b"# Notes\nold\n"), ("secret/key.txt", b"k\n")]);
        let ws = Workspace::new(dir.path()).unwrap();
        let none = HiddenPaths::default();
        let write = |path: &str| json!({"path": path, "content": "x"});
        assert_eq!(
            replaced_text("write_file", &write("notes.md"), &ws, &none).as_deref(),
            Some("# Notes\nold\n")
        );
        assert_eq!(
            replaced_text("write_file", &write("new.md"), &ws, &none),
            None
        );
        assert_eq!(
            replaced_text("write_file", &write("../../etc/passwd"), &ws, &none),
            None
        );
        assert_eq!(replaced_text("write_file", &write(""), &ws, &none), None);
        // edit_file carries its own old text; other tools write no file.
        assert_eq!(
            replaced_text("edit_file", &write("notes.md"), &ws, &none),
            None
        );
        assert_eq!(
            replaced_text("bash", &json!({"command": "ls"}), &ws, &none),
            None
        );
        // What deny rules hide from reading is not shown in a preview either.
        let hidden = HiddenPaths::new(&["secret/**".to_string()]).unwrap();
        assert_eq!(
            replaced_text("write_file", &write("secret/key.txt"), &ws, &hidden),
            None
        );
        assert!(replaced_text("write_file", &write("secret/key.txt"), &ws, &none).is_some());
        std::fs::write(dir.path().join("big.txt"), "x".repeat(300 * 1024)).unwrap();
        assert_eq!(
            replaced_text("write_file", &write("big.txt"), &ws, &none),
            None
        );
    }
}
