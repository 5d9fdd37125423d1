//! Skills: discovery with precedence, the index section, preloading and missing names.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod defs_support;

use cadre_subagents::SkillSet;
use defs_support::Ws;

fn skill(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")
}

#[test]
fn discovery_precedence_index_and_preload() {
    let ws = Ws::new();
    ws.write("skills/pdf/SKILL.md", &skill("pdf", "Low pdf.", "low body"));
    ws.write(
        "skills/tests/SKILL.md",
        &skill("tests", "Write tests.", "Test first."),
    );
    ws.write(
        ".claude/skills/pdf/SKILL.md",
        &skill("pdf", "Claude pdf.", "claude body"),
    );
    ws.write(
        ".cadre/skills/pdf/SKILL.md",
        "---\r\nname: pdf\r\ndescription: |\r\n  Fill PDF\r\n  forms.\r\n---\r\nUse pdftk.\r\n",
    );
    ws.write(
        ".cadre/skills/nameless/SKILL.md",
        "---\ndescription: From dir.\n---\nX\n",
    );
    ws.write(".cadre/skills/not-a-skill/README.md", "ignored");
    let set = SkillSet::discover(&ws.root());
    assert!(set.errors().is_empty(), "{:?}", set.errors());
    let names: Vec<&str> = set.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["nameless", "pdf", "tests"]);
    let pdf = set.get("pdf").unwrap();
    assert_eq!(pdf.description, "Fill PDF\nforms.");
    assert_eq!(pdf.body, "Use pdftk.");
    assert!(pdf.path.ends_with(".cadre/skills/pdf/SKILL.md"));

    let index = set.index_section().unwrap();
    assert!(index.starts_with("# Skills\n"), "{index}");
    assert!(
        index.contains("- pdf: Fill PDF forms. (.cadre/skills/pdf/SKILL.md)"),
        "{index}"
    );
    assert!(
        index.contains("- tests: Write tests. (skills/tests/SKILL.md)"),
        "{index}"
    );
    assert!(!index.contains("Low pdf"));

    let (section, missing) = set.preload(&["tests".into(), "ghost".into(), "pdf".into()]);
    assert_eq!(missing, ["ghost"]);
    assert!(
        section.contains("## Skill: tests\n\nTest first."),
        "{section}"
    );
    assert!(section.contains("## Skill: pdf\n\nUse pdftk."), "{section}");
    assert!(section.find("tests").unwrap() < section.find("Skill: pdf").unwrap());
}

#[test]
fn no_skills_no_section() {
    let ws = Ws::new();
    let set = SkillSet::discover(&ws.root());
    assert!(set.is_empty());
    assert_eq!(set.index_section(), None);
    let (section, missing) = set.preload(&["x".into()]);
    assert!(section.is_empty());
    assert_eq!(missing, ["x"]);
}

#[test]
fn broken_skill_files_are_errors() {
    let ws = Ws::new();
    ws.write("skills/ok/SKILL.md", &skill("ok", "Fine.", "b"));
    ws.write("skills/nodesc/SKILL.md", "---\nname: nodesc\n---\nb\n");
    ws.write("skills/nofront/SKILL.md", "just text\n");
    ws.write(
        "skills/badname/SKILL.md",
        "---\nname: Bad Name\ndescription: d\n---\n",
    );
    let set = SkillSet::discover(&ws.root());
    assert_eq!(set.len(), 1);
    let errors: Vec<String> = set
        .errors()
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("nodesc/SKILL.md: missing `description`"))
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("nofront/SKILL.md: no front matter"))
    );
    assert!(errors.iter().any(|e| e.contains("not a valid skill name")));
}
