//! [`TeamStore`] for [`MemoryStore`]: the same teams, messages and boards as the SQL
//! store, under one lock (each operation is atomic, as each SQL write is).

use crate::error::{StoreError, StoreResult};
use crate::memory::MemoryStore;
use crate::team::{
    self, BoardItem, BoardStatus, BoardUpdate, EVERYONE, LEAD, NewMember, TeamKey, TeamMember,
    TeamMessage, TeamStore,
};
use cadre_types::unix_millis;
use std::collections::HashMap;
use std::sync::MutexGuard;

/// Every team of a memory store.
#[derive(Default)]
pub(crate) struct Teams {
    by_key: HashMap<TeamKey, Team>,
}

struct Team {
    lead: String,
    members: Vec<TeamMember>,
    messages: Vec<TeamMessage>,
    board: Vec<BoardItem>,
    next_message: u64,
}

impl Team {
    fn item_mut(&mut self, key: &TeamKey, id: u64) -> StoreResult<&mut BoardItem> {
        self.board
            .iter_mut()
            .find(|i| i.id == id)
            .ok_or_else(|| team::no_item(key, id))
    }

    fn active(&self) -> impl Iterator<Item = &TeamMember> {
        self.members.iter().filter(|m| !m.ended)
    }
}

impl MemoryStore {
    fn teams_lock(&self) -> MutexGuard<'_, Teams> {
        match self.shared.teams.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Run `f` on team `key`, refused when there is no such team.
    fn with_team<T>(
        &self,
        key: &TeamKey,
        f: impl FnOnce(&mut Team) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let mut teams = self.teams_lock();
        let t = teams
            .by_key
            .get_mut(key)
            .ok_or_else(|| StoreError::TeamRefused(format!("there is no team {}", key.name)))?;
        f(t)
    }

    /// A board write: `change` applies when `allowed` holds for the item.
    fn board_change(
        &self,
        key: &TeamKey,
        id: u64,
        allowed: impl FnOnce(&BoardItem) -> bool,
        change: impl FnOnce(&mut BoardItem),
    ) -> StoreResult<BoardUpdate> {
        self.with_team(key, |t| {
            let item = t.item_mut(key, id)?;
            let applied = allowed(item);
            if applied {
                change(item);
            }
            Ok(BoardUpdate {
                applied,
                item: item.clone(),
            })
        })
    }
}

fn holds(item: &BoardItem, by: &str) -> bool {
    item.status == BoardStatus::Claimed && item.claimed_by.as_deref() == Some(by)
}

#[async_trait::async_trait]
impl TeamStore for MemoryStore {
    async fn join_team(
        &self,
        key: &TeamKey,
        lead: &str,
        m: &NewMember,
        max_size: usize,
    ) -> StoreResult<()> {
        let mut teams = self.teams_lock();
        let t = teams.by_key.entry(key.clone()).or_insert_with(|| Team {
            lead: lead.to_string(),
            members: Vec::new(),
            messages: Vec::new(),
            board: Vec::new(),
            next_message: 0,
        });
        let active = t.active().count();
        let joined = TeamMember {
            label: m.label.clone(),
            agent: m.agent.clone(),
            task_id: m.task_id.clone(),
            joined_at: unix_millis(),
            ended: false,
        };
        match t.members.iter_mut().find(|x| x.label == m.label) {
            Some(x) if !x.ended || active < max_size => *x = joined,
            None if active < max_size => t.members.push(joined),
            _ => return Err(team::team_full(key, max_size)),
        }
        Ok(())
    }

    async fn team_lead(&self, key: &TeamKey) -> StoreResult<Option<String>> {
        Ok(self.teams_lock().by_key.get(key).map(|t| t.lead.clone()))
    }

    async fn team_members(&self, key: &TeamKey) -> StoreResult<Vec<TeamMember>> {
        let teams = self.teams_lock();
        // Kept in joining order: a member joining again keeps its place.
        Ok(teams
            .by_key
            .get(key)
            .map(|t| t.members.clone())
            .unwrap_or_default())
    }

    async fn send_team_message(
        &self,
        key: &TeamKey,
        from: &str,
        to: &str,
        body: &str,
        mailbox: usize,
    ) -> StoreResult<Vec<TeamMessage>> {
        if let Some(why) = team::body_refusal(body) {
            return Err(StoreError::TeamRefused(why));
        }
        self.with_team(key, |t| {
            let names: Vec<String> = if to == LEAD {
                vec![LEAD.to_string()]
            } else {
                let names: Vec<String> = t
                    .active()
                    .filter(|m| {
                        if to == EVERYONE {
                            m.label != from
                        } else {
                            m.label == to
                        }
                    })
                    .map(|m| m.label.clone())
                    .collect();
                if names.is_empty() && to != EVERYONE {
                    return Err(team::not_member(key, to));
                }
                names
            };
            for r in &names {
                let waiting = t
                    .messages
                    .iter()
                    .filter(|m| &m.recipient == r && !m.delivered)
                    .count();
                if waiting >= mailbox {
                    return Err(team::mailbox_full(r, mailbox));
                }
            }
            t.next_message += 1;
            let now = unix_millis();
            let sent: Vec<TeamMessage> = names
                .into_iter()
                .map(|recipient| TeamMessage {
                    id: t.next_message,
                    sender: from.to_string(),
                    recipient,
                    body: body.to_string(),
                    delivered: false,
                    created_at: now,
                })
                .collect();
            t.messages.extend(sent.iter().cloned());
            Ok(sent)
        })
    }

    async fn undelivered_team_messages(
        &self,
        key: &TeamKey,
        recipient: &str,
    ) -> StoreResult<Vec<TeamMessage>> {
        let teams = self.teams_lock();
        let Some(t) = teams.by_key.get(key) else {
            return Ok(Vec::new());
        };
        Ok(t.messages
            .iter()
            .filter(|m| m.recipient == recipient && !m.delivered)
            .cloned()
            .collect())
    }

    async fn mark_team_messages_delivered(
        &self,
        key: &TeamKey,
        recipient: &str,
        ids: &[u64],
    ) -> StoreResult<u64> {
        let mut teams = self.teams_lock();
        let Some(t) = teams.by_key.get_mut(key) else {
            return Ok(0);
        };
        let mut n = 0;
        for m in t
            .messages
            .iter_mut()
            .filter(|m| m.recipient == recipient && !m.delivered && ids.contains(&m.id))
        {
            m.delivered = true;
            n += 1;
        }
        Ok(n)
    }

    async fn team_messages(&self, key: &TeamKey, limit: usize) -> StoreResult<Vec<TeamMessage>> {
        let teams = self.teams_lock();
        let all = teams
            .by_key
            .get(key)
            .map(|t| t.messages.as_slice())
            .unwrap_or_default();
        Ok(all[all.len().saturating_sub(limit)..].to_vec())
    }

    async fn board_add(
        &self,
        key: &TeamKey,
        by: &str,
        title: &str,
        detail: Option<&str>,
    ) -> StoreResult<BoardItem> {
        self.with_team(key, |t| {
            let item = BoardItem {
                id: t.board.last().map_or(1, |i| i.id + 1),
                title: title.to_string(),
                detail: detail.map(str::to_string),
                status: BoardStatus::Open,
                added_by: by.to_string(),
                claimed_by: None,
                result: None,
                note: None,
            };
            t.board.push(item.clone());
            Ok(item)
        })
    }

    async fn board_claim(&self, key: &TeamKey, id: u64, by: &str) -> StoreResult<BoardUpdate> {
        self.board_change(
            key,
            id,
            |i| i.status == BoardStatus::Open || holds(i, by),
            |i| {
                i.status = BoardStatus::Claimed;
                i.claimed_by = Some(by.to_string());
            },
        )
    }

    async fn board_done(
        &self,
        key: &TeamKey,
        id: u64,
        by: &str,
        result: &str,
    ) -> StoreResult<BoardUpdate> {
        self.board_change(
            key,
            id,
            |i| holds(i, by),
            |i| {
                i.status = BoardStatus::Done;
                i.result = Some(result.to_string());
            },
        )
    }

    async fn board_release(&self, key: &TeamKey, id: u64, by: &str) -> StoreResult<BoardUpdate> {
        self.board_change(
            key,
            id,
            |i| holds(i, by),
            |i| {
                i.status = BoardStatus::Open;
                i.claimed_by = None;
            },
        )
    }

    async fn board_list(
        &self,
        key: &TeamKey,
        status: Option<BoardStatus>,
    ) -> StoreResult<Vec<BoardItem>> {
        let teams = self.teams_lock();
        Ok(teams
            .by_key
            .get(key)
            .map(|t| {
                t.board
                    .iter()
                    .filter(|i| status.is_none_or(|s| i.status == s))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn member_ended(
        &self,
        key: &TeamKey,
        label: &str,
        note: &str,
    ) -> StoreResult<Vec<BoardItem>> {
        let mut teams = self.teams_lock();
        let Some(t) = teams.by_key.get_mut(key) else {
            return Ok(Vec::new());
        };
        for m in t.members.iter_mut().filter(|m| m.label == label) {
            m.ended = true;
        }
        let mut released = Vec::new();
        for i in t.board.iter_mut().filter(|i| holds(i, label)) {
            i.status = BoardStatus::Open;
            i.claimed_by = None;
            i.note = Some(note.to_string());
            released.push(i.clone());
        }
        Ok(released)
    }
}
