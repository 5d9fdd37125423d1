//! [`TeamStore`] on SQLite and PostgreSQL: each state change is one write on the store's
//! writer. Writes of one team first update the team's row (its counters), which on
//! PostgreSQL locks it until the write commits: concurrent joins, sends and adds of one
//! team from several nodes are serialised there, so that size and mailbox limits hold and
//! item numbers never repeat. Claims are conditional updates: one claimer wins.

use super::conn::{Arg, Row, WriteConn};
use super::{SqlStore, now_ms};
use crate::error::{StoreError, StoreResult};
use crate::team::{
    self, BoardItem, BoardStatus, BoardUpdate, EVERYONE, LEAD, NewMember, TeamKey, TeamMember,
    TeamMessage, TeamStore,
};

const MEMBER_COLS: &str = "label, agent, task_id, joined_at, ended";
const MESSAGE_COLS: &str = "id, sender, recipient, body, delivered, created_at";
const ITEM_COLS: &str = "id, title, detail, status, added_by, claimed_by, result, note";

/// `$1` session, `$2` team: the condition naming a team's rows.
const OF_TEAM: &str = "session_id = $1 AND team = $2";

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn key_args(key: &TeamKey) -> Vec<Arg> {
    vec![Arg::from(&key.session), Arg::from(&key.name)]
}

fn member(r: &Row) -> StoreResult<TeamMember> {
    Ok(TeamMember {
        label: r.try_get("label")?,
        agent: r.try_get("agent")?,
        task_id: r.try_get("task_id")?,
        joined_at: to_u64(r.try_get("joined_at")?),
        ended: r.try_get("ended")?,
    })
}

fn message(r: &Row) -> StoreResult<TeamMessage> {
    Ok(TeamMessage {
        id: to_u64(r.try_get("id")?),
        sender: r.try_get("sender")?,
        recipient: r.try_get("recipient")?,
        body: r.try_get("body")?,
        delivered: r.try_get("delivered")?,
        created_at: to_u64(r.try_get("created_at")?),
    })
}

fn item(r: &Row) -> StoreResult<BoardItem> {
    let status: String = r.try_get("status")?;
    Ok(BoardItem {
        id: to_u64(r.try_get("id")?),
        title: r.try_get("title")?,
        detail: r.try_get("detail")?,
        status: BoardStatus::parse(&status).ok_or_else(|| StoreError::Corrupt {
            id: "team_board".into(),
            reason: format!("status {status:?}"),
        })?,
        added_by: r.try_get("added_by")?,
        claimed_by: r.try_get("claimed_by")?,
        result: r.try_get("result")?,
        note: r.try_get("note")?,
    })
}

/// Take the next number of counter `column` of the team in `args[..2]`; `None` when the
/// team does not exist.
async fn next_number(
    p: &mut dyn WriteConn,
    column: &str,
    args: &[Arg],
) -> StoreResult<Option<i64>> {
    let sql = format!(
        "UPDATE teams SET {column} = {column} + 1 WHERE session_id = $1 AND name = $2 \
         RETURNING {column}"
    );
    let rows = p.fetch(&sql, &args[..2]).await?;
    rows.first().map(|r| r.try_get::<i64, _>(0)).transpose()
}

/// The item `args[2]` of the team in `args[..2]`, read inside a write.
async fn item_in_write(p: &mut dyn WriteConn, args: &[Arg]) -> StoreResult<Option<BoardItem>> {
    let sql = format!("SELECT {ITEM_COLS} FROM team_board WHERE {OF_TEAM} AND id = $3");
    let rows = p.fetch(&sql, &args[..3]).await?;
    rows.first().map(item).transpose()
}

/// Who a send to `to` reaches, from the team's rows (inside the send's write).
async fn recipients(
    p: &mut dyn WriteConn,
    key: &TeamKey,
    from: &str,
    to: &str,
) -> StoreResult<Result<Vec<String>, StoreError>> {
    if to == LEAD {
        return Ok(Ok(vec![LEAD.to_string()]));
    }
    let args = [
        Arg::from(&key.session),
        Arg::from(&key.name),
        Arg::from(if to == EVERYONE { from } else { to }),
    ];
    let cond = if to == EVERYONE { "<>" } else { "=" };
    let sql = format!(
        "SELECT label FROM team_members WHERE {OF_TEAM} AND NOT ended AND label {cond} $3 \
         ORDER BY member_no"
    );
    let labels = p
        .fetch(&sql, &args)
        .await?
        .iter()
        .map(|r| r.try_get::<String, _>(0))
        .collect::<StoreResult<Vec<_>>>()?;
    if labels.is_empty() && to != EVERYONE {
        return Ok(Err(team::not_member(key, to)));
    }
    Ok(Ok(labels))
}

impl SqlStore {
    /// A board write: `update` (binding `$1` session, `$2` team, `$3` item, `$4` member,
    /// `$5` now, then `extra`) and the item as it is afterwards.
    async fn board_write(
        &self,
        key: &TeamKey,
        id: u64,
        by: &str,
        update: &'static str,
        extra: Option<&str>,
    ) -> StoreResult<BoardUpdate> {
        let mut args = key_args(key);
        args.extend([to_i64(id).into(), by.into(), now_ms().into()]);
        if let Some(e) = extra {
            args.push(e.into());
        }
        let (applied, now) = on_writer!(&self.db, args, |p, a| {
            let applied = p.execute(update, a).await? > 0;
            (applied, item_in_write(p, a).await?)
        })?;
        match now {
            Some(item) => Ok(BoardUpdate { applied, item }),
            None => Err(team::no_item(key, id)),
        }
    }
}

#[async_trait::async_trait]
impl TeamStore for SqlStore {
    async fn join_team(
        &self,
        key: &TeamKey,
        lead: &str,
        m: &NewMember,
        max_size: usize,
    ) -> StoreResult<()> {
        let mut args = key_args(key);
        args.extend([
            Arg::from(&m.label),
            Arg::from(&m.agent),
            Arg::from(&m.task_id),
            now_ms().into(),
            i64::try_from(max_size).unwrap_or(i64::MAX).into(),
            Arg::from(lead),
        ]);
        let joined = on_writer!(&self.db, args, |p, a| {
            p.execute(
                "INSERT INTO teams (session_id, name, lead, created_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (session_id, name) DO NOTHING",
                &[a[0].clone(), a[1].clone(), a[7].clone(), a[5].clone()],
            )
            .await?;
            // Locks the team's row on PostgreSQL: the count below stays true until commit.
            let no = next_number(p, "next_member", a).await?;
            let mut row = a[..7].to_vec();
            row.push(no.into());
            let active = "(SELECT COUNT(*) FROM team_members \
                           WHERE session_id = $1 AND team = $2 AND NOT ended)";
            let again = format!(
                "UPDATE team_members SET ended = FALSE, agent = $4, task_id = $5, joined_at = $6 \
                 WHERE {OF_TEAM} AND label = $3 AND (NOT ended OR {active} < $7)"
            );
            let first = format!(
                "INSERT INTO team_members (session_id, team, label, agent, task_id, joined_at, \
                   member_no) SELECT $1, $2, $3, $4, $5, $6, $8 WHERE {active} < $7 \
                 ON CONFLICT (session_id, team, label) DO NOTHING"
            );
            p.execute(&again, &a[..7]).await? > 0 || p.execute(&first, &row).await? > 0
        })?;
        if joined {
            Ok(())
        } else {
            Err(team::team_full(key, max_size))
        }
    }

    async fn team_lead(&self, key: &TeamKey) -> StoreResult<Option<String>> {
        let rows = self
            .db
            .fetch(
                "SELECT lead FROM teams WHERE session_id = $1 AND name = $2",
                key_args(key),
            )
            .await?;
        rows.first().map(|r| r.try_get("lead")).transpose()
    }

    async fn team_members(&self, key: &TeamKey) -> StoreResult<Vec<TeamMember>> {
        let sql =
            format!("SELECT {MEMBER_COLS} FROM team_members WHERE {OF_TEAM} ORDER BY member_no");
        let rows = self.db.fetch(&sql, key_args(key)).await?;
        rows.iter().map(member).collect()
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
        let now = now_ms();
        let args = (
            key.clone(),
            from.to_string(),
            to.to_string(),
            body.to_string(),
        );
        on_writer!(&self.db, args, |p, (key, from, to, body)| {
            send_in_write(p, key, from, to, body, mailbox, now).await?
        })?
    }

    async fn undelivered_team_messages(
        &self,
        key: &TeamKey,
        recipient: &str,
    ) -> StoreResult<Vec<TeamMessage>> {
        let mut args = key_args(key);
        args.push(recipient.into());
        let sql = format!(
            "SELECT {MESSAGE_COLS} FROM team_messages \
             WHERE {OF_TEAM} AND recipient = $3 AND NOT delivered ORDER BY id"
        );
        let rows = self.db.fetch(&sql, args).await?;
        rows.iter().map(message).collect()
    }

    async fn mark_team_messages_delivered(
        &self,
        key: &TeamKey,
        recipient: &str,
        ids: &[u64],
    ) -> StoreResult<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut args = key_args(key);
        args.push(recipient.into());
        let marks: Vec<String> = (0..ids.len()).map(|i| format!("${}", i + 4)).collect();
        args.extend(ids.iter().map(|&id| Arg::from(to_i64(id))));
        let sql = format!(
            "UPDATE team_messages SET delivered = TRUE \
             WHERE {OF_TEAM} AND recipient = $3 AND NOT delivered AND id IN ({})",
            marks.join(", ")
        );
        on_writer!(&self.db, (sql, args), |p, (sql, args)| {
            p.execute(sql, args).await?
        })
    }

    async fn team_messages(&self, key: &TeamKey, limit: usize) -> StoreResult<Vec<TeamMessage>> {
        let mut args = key_args(key);
        args.push(i64::try_from(limit).unwrap_or(i64::MAX).into());
        let sql = format!(
            "SELECT {MESSAGE_COLS} FROM team_messages WHERE {OF_TEAM} \
             ORDER BY id DESC, recipient DESC LIMIT $3"
        );
        let rows = self.db.fetch(&sql, args).await?;
        let mut newest = rows.iter().map(message).collect::<StoreResult<Vec<_>>>()?;
        newest.reverse();
        Ok(newest)
    }

    async fn board_add(
        &self,
        key: &TeamKey,
        by: &str,
        title: &str,
        detail: Option<&str>,
    ) -> StoreResult<BoardItem> {
        let mut args = key_args(key);
        args.extend([title.into(), detail.into(), by.into(), now_ms().into()]);
        let id = on_writer!(&self.db, args, |p, a| {
            match next_number(p, "next_item", a).await? {
                None => None,
                Some(id) => {
                    let mut row = a.clone();
                    row.push(id.into());
                    p.execute(
                        "INSERT INTO team_board (session_id, team, title, detail, added_by, \
                           updated_at, id) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                        &row,
                    )
                    .await?;
                    Some(id)
                }
            }
        })?;
        let id = id.ok_or_else(|| no_team(key))?;
        Ok(BoardItem {
            id: to_u64(id),
            title: title.to_string(),
            detail: detail.map(str::to_string),
            status: BoardStatus::Open,
            added_by: by.to_string(),
            claimed_by: None,
            result: None,
            note: None,
        })
    }

    async fn board_claim(&self, key: &TeamKey, id: u64, by: &str) -> StoreResult<BoardUpdate> {
        self.board_write(
            key,
            id,
            by,
            "UPDATE team_board SET status = 'claimed', claimed_by = $4, updated_at = $5 \
             WHERE session_id = $1 AND team = $2 AND id = $3 \
               AND (status = 'open' OR (status = 'claimed' AND claimed_by = $4))",
            None,
        )
        .await
    }

    async fn board_done(
        &self,
        key: &TeamKey,
        id: u64,
        by: &str,
        result: &str,
    ) -> StoreResult<BoardUpdate> {
        self.board_write(
            key,
            id,
            by,
            "UPDATE team_board SET status = 'done', result = $6, updated_at = $5 \
             WHERE session_id = $1 AND team = $2 AND id = $3 \
               AND status = 'claimed' AND claimed_by = $4",
            Some(result),
        )
        .await
    }

    async fn board_release(&self, key: &TeamKey, id: u64, by: &str) -> StoreResult<BoardUpdate> {
        self.board_write(
            key,
            id,
            by,
            "UPDATE team_board SET status = 'open', claimed_by = NULL, updated_at = $5 \
             WHERE session_id = $1 AND team = $2 AND id = $3 \
               AND status = 'claimed' AND claimed_by = $4",
            None,
        )
        .await
    }

    async fn board_list(
        &self,
        key: &TeamKey,
        status: Option<BoardStatus>,
    ) -> StoreResult<Vec<BoardItem>> {
        let mut args = key_args(key);
        let filter = match status {
            Some(s) => {
                args.push(s.as_str().into());
                " AND status = $3"
            }
            None => "",
        };
        let sql = format!("SELECT {ITEM_COLS} FROM team_board WHERE {OF_TEAM}{filter} ORDER BY id");
        let rows = self.db.fetch(&sql, args).await?;
        rows.iter().map(item).collect()
    }

    async fn member_ended(
        &self,
        key: &TeamKey,
        label: &str,
        note: &str,
    ) -> StoreResult<Vec<BoardItem>> {
        let mut args = key_args(key);
        args.extend([label.into(), note.into(), now_ms().into()]);
        let rows = on_writer!(&self.db, args, |p, a| {
            p.execute(
                "UPDATE team_members SET ended = TRUE \
                 WHERE session_id = $1 AND team = $2 AND label = $3",
                &a[..3],
            )
            .await?;
            let sql = format!(
                "UPDATE team_board SET status = 'open', claimed_by = NULL, note = $4, \
                   updated_at = $5 \
                 WHERE {OF_TEAM} AND status = 'claimed' AND claimed_by = $3 \
                 RETURNING {ITEM_COLS}"
            );
            p.fetch(&sql, a).await?
        })?;
        let mut released = rows.iter().map(item).collect::<StoreResult<Vec<_>>>()?;
        released.sort_by_key(|i| i.id);
        Ok(released)
    }
}

fn no_team(key: &TeamKey) -> StoreError {
    StoreError::TeamRefused(format!("there is no team {}", key.name))
}

/// The send of [`TeamStore::send_team_message`] inside its write: the team's message
/// counter first (the team's lock), then the recipients' mailboxes, then the rows. A
/// refusal is the write's value, so that it does not fail the writer's batch.
async fn send_in_write(
    p: &mut dyn WriteConn,
    key: &TeamKey,
    from: &str,
    to: &str,
    body: &str,
    mailbox: usize,
    now: i64,
) -> StoreResult<StoreResult<Vec<TeamMessage>>> {
    let Some(id) = next_number(p, "next_message", &key_args(key)).await? else {
        return Ok(Err(no_team(key)));
    };
    let names = match recipients(p, key, from, to).await? {
        Ok(n) => n,
        Err(e) => return Ok(Err(e)),
    };
    for r in &names {
        let mut args = key_args(key);
        args.push(r.into());
        let rows = p
            .fetch(
                "SELECT COUNT(*) AS n FROM team_messages \
                 WHERE session_id = $1 AND team = $2 AND recipient = $3 AND NOT delivered",
                &args,
            )
            .await?;
        let waiting: i64 = rows.first().map(|r| r.try_get(0)).transpose()?.unwrap_or(0);
        if usize::try_from(waiting).unwrap_or(usize::MAX) >= mailbox {
            return Ok(Err(team::mailbox_full(r, mailbox)));
        }
    }
    let mut sent = Vec::with_capacity(names.len());
    for r in names {
        let mut args = key_args(key);
        args.extend([
            id.into(),
            Arg::from(&r),
            from.into(),
            body.into(),
            now.into(),
        ]);
        p.execute(
            "INSERT INTO team_messages (session_id, team, id, recipient, sender, body, \
               created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &args,
        )
        .await?;
        sent.push(TeamMessage {
            id: to_u64(id),
            sender: from.to_string(),
            recipient: r,
            body: body.to_string(),
            delivered: false,
            created_at: to_u64(now),
        });
    }
    Ok(Ok(sent))
}
