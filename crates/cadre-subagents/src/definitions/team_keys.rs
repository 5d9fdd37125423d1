//! The team keys of a definition's front matter: `team:` (the team of its parent its
//! children join when the spawning call names none) and `can_message:` (the labels, and
//! `lead`, its children may write to in their team).

use crate::AgentDefinition;
use crate::definitions::frontmatter::{scalar_text, show, string_list};
use serde_yaml_ng::Value;

/// Read `team` and `can_message` (each the key as written and its value) into `def`.
pub(crate) fn apply(
    team: Option<(&str, &Value)>,
    can_message: Option<(&str, &Value)>,
    def: &mut AgentDefinition,
) -> Result<(), String> {
    if let Some((k, v)) = team
        && !v.is_null()
    {
        let name = scalar_text(v)
            .ok_or_else(|| format!("`{k}` must be text, found {}", show(v)))?
            .trim()
            .to_string();
        if !crate::runtime::teams::valid_team_name(&name) {
            return Err(format!(
                "`{k}`: {name:?} is not a team name (1 to 64 letters, digits, '-', '_' or '.')"
            ));
        }
        def.team = Some(name);
    }
    if let Some((k, v)) = can_message {
        let labels = string_list(k, v)?.unwrap_or_default();
        if let Some(bad) = labels
            .iter()
            .find(|l| l.trim().is_empty() || l.trim() == "*")
        {
            return Err(format!(
                "`{k}`: {bad:?} is not a label (name members, or `lead`)"
            ));
        }
        def.can_message = Some(labels.iter().map(|l| l.trim().to_string()).collect());
    }
    Ok(())
}
