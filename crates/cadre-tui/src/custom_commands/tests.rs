#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::sync::Mutex;

fn text(s: &str) -> Piece {
    Piece::Text(s.to_string())
}

#[test]
fn arguments_and_positions_are_substituted() {
    assert_eq!(
        expand("Review $ARGUMENTS carefully", " src  lib "),
        [text("Review src  lib carefully")]
    );
    assert_eq!(
        expand("fix $1 in $2 ($3)", "\"issue 12\" 'a b'"),
        [text("fix issue 12 in a b ()")]
    );
    assert_eq!(expand("cost $5 and $", "x"), [text("cost  and $")]);
    // No placeholder: arguments are appended, never dropped.
    assert_eq!(
        expand("Review it", "src"),
        [text("Review it\n\nARGUMENTS: src")]
    );
    assert_eq!(expand("Review it", ""), [text("Review it")]);
}

#[test]
fn shell_lines_inline_commands_and_includes_are_pieces() {
    assert_eq!(
        expand(
            "Status:\n!git status\nDiff: !`git diff $1` end\nsee @src/a.rs, and me@x.org @",
            "HEAD"
        ),
        [
            text("Status:\n"),
            Piece::Shell("git status".into()),
            text("\nDiff: "),
            Piece::Shell("git diff HEAD".into()),
            text(" end\nsee "),
            Piece::Include("src/a.rs".into()),
            text(", and me@x.org @"),
        ]
    );
    // `!` alone, "!`" never closed and a Markdown `!important` at a line's start.
    assert_eq!(expand("! \nwow!` no", ""), [text("! \nwow!` no")]);
}

struct Fake(Mutex<Vec<String>>);

#[async_trait::async_trait]
impl Resolve for Fake {
    async fn shell(&self, command: &str) -> String {
        self.0.lock().unwrap().push(command.to_string());
        format!("out of {command}\n")
    }
    async fn include(&self, path: &str) -> Option<String> {
        (path == "a.txt").then(|| "AAA\n".to_string())
    }
}

#[tokio::test]
async fn render_fills_in_output_and_files_and_keeps_mentions() {
    let fake = Fake(Mutex::new(Vec::new()));
    let pieces = expand("!ls\nread @a.txt and ask @explorer", "");
    let out = render(&pieces, &fake).await;
    assert_eq!(
        out,
        "out of ls\nread \n<file path=\"a.txt\">\nAAA\n</file>\n and ask @explorer"
    );
    assert_eq!(*fake.0.lock().unwrap(), ["ls"]);
}

#[test]
fn files_load_with_front_matter_folders_and_precedence_and_broken_ones_warn() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("user");
    let proj = dir.path().join("proj");
    let write = |p: std::path::PathBuf, t: &str| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, t).unwrap();
    };
    write(user.join("review.md"), "user review");
    write(user.join("mine.md"), "only mine");
    write(
        proj.join("review.md"),
        "---\ndescription: Review code\nargument-hint: [path]\nallowed-tools: Read, Grep\nmodel: fast\n---\nReview $ARGUMENTS\n",
    );
    write(proj.join("frontend/component.md"), "Make $1");
    write(
        proj.join("broken.md"),
        "---\ndescription: [unclosed\n---\nx",
    );
    write(proj.join("bad name.md"), "x");
    write(proj.join("notes.txt"), "not a command");
    let set = CommandSet::load_from(&[user, proj.clone()]);
    let names: Vec<&str> = set.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["frontend:component", "mine", "review"]);
    let review = set.get("review").unwrap();
    assert_eq!(review.body, "Review $ARGUMENTS");
    assert_eq!(review.description.as_deref(), Some("Review code"));
    assert_eq!(review.argument_hint.as_deref(), Some("[path]"));
    assert_eq!(review.model.as_deref(), Some("fast"));
    assert_eq!(
        review.allowed_tools.as_deref(),
        Some(&["Read".to_string(), "Grep".to_string()][..])
    );
    let w = set.warnings.join("\n");
    assert_eq!(set.warnings.len(), 2, "{w}");
    assert!(
        w.contains(&proj.join("broken.md").display().to_string()),
        "{w}"
    );
    assert!(w.contains("bad name.md"), "{w}");
}

#[test]
fn invocations_split_into_name_and_arguments() {
    assert_eq!(
        split_invocation("/review src lib"),
        Some(("review", "src lib"))
    );
    assert_eq!(
        split_invocation("  /frontend:component  Btn "),
        Some(("frontend:component", "Btn"))
    );
    assert_eq!(split_invocation("/"), None);
    assert_eq!(split_invocation("review"), None);
}
