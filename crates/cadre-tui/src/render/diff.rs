//! Diffs of the file tools' arguments: `edit_file` as old → new, `write_file` as the text
//! it replaces (read before the call ran; none for a new file) → the new content; shown
//! under the call and in the approval dialog.

use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use similar::{ChangeTag, TextDiff};

/// Diff lines shown at most (the rest is summarised).
pub const MAX_DIFF_LINES: usize = 200;

/// The text a file-writing call replaces and the text it writes, read from the argument
/// keys the tool declares ([`cadre_tools::EditArgs`]); `None` for a tool that writes no
/// file or arguments that do not hold them. `replaces` is the file's text before a
/// whole-file write.
fn edit_texts(tool: &str, args: &str, replaces: Option<&str>) -> Option<(String, String)> {
    let keys = cadre_tools::builtin::builtin_info(tool)?.edits?;
    let v: serde_json::Value = serde_json::from_str(args).ok()?;
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    let old = match keys.old {
        Some(k) => s(k)?,
        None => replaces.unwrap_or_default().to_string(),
    };
    Some((old, s(keys.new)?))
}

/// The diff a file tool call would make, when `tool` is one; `replaces` is the text a
/// whole-file write replaces.
pub fn tool_diff(tool: &str, args: &str, replaces: Option<&str>) -> Option<Vec<Line<'static>>> {
    let (old, new) = edit_texts(tool, args, replaces)?;
    Some(diff(&old, &new))
}

/// (added, removed) line counts of a file tool call.
pub fn tool_diff_stat(tool: &str, args: &str, replaces: Option<&str>) -> Option<(usize, usize)> {
    let (old, new) = edit_texts(tool, args, replaces)?;
    let d = TextDiff::from_lines(&old, &new);
    let mut stat = (0, 0);
    for c in d.iter_all_changes() {
        match c.tag() {
            ChangeTag::Insert => stat.0 += 1,
            ChangeTag::Delete => stat.1 += 1,
            ChangeTag::Equal => {}
        }
    }
    Some(stat)
}

/// A line diff of `old` to `new`.
pub fn diff(old: &str, new: &str) -> Vec<Line<'static>> {
    let d = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    let mut hidden = 0;
    for c in d.iter_all_changes() {
        if out.len() >= MAX_DIFF_LINES {
            hidden += 1;
            continue;
        }
        let (sign, style) = match c.tag() {
            ChangeTag::Insert => ("+", Style::default().fg(Color::Green)),
            ChangeTag::Delete => ("-", Style::default().fg(Color::Red)),
            ChangeTag::Equal => (" ", Style::default().fg(Color::DarkGray)),
        };
        let text = c.value().trim_end_matches(['\n', '\r']).to_string();
        out.push(Line::from(Span::styled(format!("{sign} {text}"), style)));
    }
    if hidden > 0 {
        out.push(Line::styled(
            format!("… {hidden} more diff lines"),
            Style::default().fg(Color::DarkGray),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_file_shows_removed_and_added_lines() {
        let args = r#"{"path":"a.py","old_string":"x = 1\ny = 2\n","new_string":"x = 1\ny = 3\n"}"#;
        let lines: Vec<String> = tool_diff("edit_file", args, None)
            .unwrap()
            .iter()
            .map(|l| l.spans[0].content.to_string())
            .collect();
        assert_eq!(lines, ["  x = 1", "- y = 2", "+ y = 3"]);
        assert_eq!(tool_diff_stat("edit_file", args, None), Some((1, 1)));
        assert_eq!(
            tool_diff_stat("write_file", r#"{"path":"b","content":"a\nb\n"}"#, None),
            Some((2, 0))
        );
        assert!(tool_diff("bash", "{}", None).is_none());
    }

    #[test]
    fn an_overwrite_is_diffed_against_the_text_it_replaces() {
        let args = r##"{"path":"notes.md","content":"# Notes\nnew\nmore\n"}"##;
        let before = Some("# Notes\nold\n");
        assert_eq!(tool_diff_stat("write_file", args, before), Some((2, 1)));
        let lines: Vec<String> = tool_diff("write_file", args, before)
            .unwrap()
            .iter()
            .map(|l| l.spans[0].content.to_string())
            .collect();
        assert_eq!(lines, ["  # Notes", "- old", "+ new", "+ more"]);
    }
}
