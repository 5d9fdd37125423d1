//! `cadre tasks team SESSION NAME`: a team read back from the task store — its lead, its
//! members with the state of their tasks, its board and its newest messages — from any
//! process or node that shares the store, while the team works or after it is done.

use anyhow::{Result, bail};
use cadre_store::{BoardItem, TaskStore, TeamKey, TeamMessage, TeamStore};
use serde_json::{Value, json};

/// The newest messages shown.
const MESSAGES: usize = 50;

/// One member as shown: the stored member and what its task's record says.
struct Member {
    label: String,
    agent: String,
    task_id: Option<String>,
    active: bool,
    status: Option<String>,
    node: Option<String>,
    claims: Vec<u64>,
}

/// A team as the store holds it.
pub struct Team {
    session: String,
    name: String,
    lead: String,
    members: Vec<Member>,
    board: Vec<BoardItem>,
    messages: Vec<TeamMessage>,
}

/// Team `name` of `session`; an error when the store keeps no teams or has no such team.
pub async fn load(store: &dyn TaskStore, session: &str, name: &str) -> Result<Team> {
    let Some(teams) = store.teams() else {
        bail!("this task store keeps no teams");
    };
    let key = TeamKey::new(session, name);
    let Some(lead) = teams.team_lead(&key).await? else {
        bail!("no team {name:?} in session {session}");
    };
    let board = teams.board_list(&key, None).await?;
    let mut members = Vec::new();
    for m in teams.team_members(&key).await? {
        let record = match &m.task_id {
            Some(id) => store.get(id).await?,
            None => None,
        };
        let claims = (board.iter())
            .filter(|i| i.claimed_by.as_deref() == Some(m.label.as_str()))
            .filter(|i| i.status == cadre_store::BoardStatus::Claimed)
            .map(|i| i.id)
            .collect();
        members.push(Member {
            active: !m.ended,
            status: record.as_ref().map(|r| r.status.to_string()),
            node: record.map(|r| r.owner_node),
            label: m.label,
            agent: m.agent,
            task_id: m.task_id,
            claims,
        });
    }
    let messages = messages(teams, &key).await?;
    Ok(Team {
        session: session.to_string(),
        name: name.to_string(),
        lead,
        members,
        board,
        messages,
    })
}

async fn messages(teams: &dyn TeamStore, key: &TeamKey) -> Result<Vec<TeamMessage>> {
    Ok(teams.team_messages(key, MESSAGES).await?)
}

impl Team {
    /// The team as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "session": self.session,
            "team": self.name,
            "lead": self.lead,
            "members": self.members.iter().map(|m| json!({
                "label": m.label,
                "agent": m.agent,
                "task_id": m.task_id,
                "active": m.active,
                "status": m.status,
                "node": m.node,
                "claimed": m.claims,
            })).collect::<Vec<_>>(),
            "board": self.board.iter().map(|i| json!({
                "id": i.id,
                "title": i.title,
                "detail": i.detail,
                "status": i.status.as_str(),
                "added_by": i.added_by,
                "claimed_by": i.claimed_by,
                "result": i.result,
                "note": i.note,
            })).collect::<Vec<_>>(),
            "messages": self.messages.iter().map(|m| json!({
                "id": m.id,
                "from": m.sender,
                "to": m.recipient,
                "body": m.body,
                "delivered": m.delivered,
                "sent_at_ms": m.created_at,
            })).collect::<Vec<_>>(),
        })
    }

    /// The team as text: a heading, then its members, board and messages.
    pub fn text(&self) -> String {
        let mut s = format!(
            "team {} of session {} · lead {} · {} members\n",
            self.name,
            self.session,
            self.lead,
            self.members.len()
        );
        s.push_str("members:\n");
        for m in &self.members {
            let state = if m.active { "active" } else { "left" };
            s.push_str(&format!("  {} ({}) {state}", m.label, m.agent));
            if let Some(id) = &m.task_id {
                s.push_str(&format!("  {id}"));
            }
            if let (Some(status), Some(node)) = (&m.status, &m.node) {
                s.push_str(&format!(" {status} on {node}"));
            }
            if !m.claims.is_empty() {
                let ids: Vec<String> = m.claims.iter().map(|i| format!("#{i}")).collect();
                s.push_str(&format!("  holds {}", ids.join(", ")));
            }
            s.push('\n');
        }
        s.push_str(if self.board.is_empty() {
            "board: empty\n"
        } else {
            "board:\n"
        });
        for i in &self.board {
            s.push_str(&format!(
                "  #{} [{}] {}",
                i.id,
                i.status,
                one_line(&i.title)
            ));
            match (&i.claimed_by, &i.result) {
                (Some(by), Some(r)) => s.push_str(&format!(" — {by}: {}", one_line(r))),
                (Some(by), None) => s.push_str(&format!(" — {by}")),
                _ => {}
            }
            if let Some(n) = &i.note {
                s.push_str(&format!(" ({})", one_line(n)));
            }
            s.push('\n');
        }
        s.push_str(&format!("messages (newest {MESSAGES}):\n"));
        for m in &self.messages {
            s.push_str(&format!(
                "  {} -> {}: {}\n",
                m.sender,
                m.recipient,
                one_line(&m.body)
            ));
        }
        s
    }
}

/// `text` on one line, cut at 120 characters: a listing, not the message.
fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(120) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    }
}
