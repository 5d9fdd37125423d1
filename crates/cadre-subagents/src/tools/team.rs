//! The team tools of a team's members and its lead: `team_send`, `board_add`,
//! `board_claim`, `board_done`, `board_release`, `board_list`, `team_list`. A member's tools
//! hold its seat (team, label, whom it may write to); a lead's find its team by its session.
//! Replies are `key: value` lines; refusals say why. They touch no file and run nothing, so,
//! like `agent_send`, they are reads for the approval policy: a team's work is never held
//! up by an approval prompt nobody sees.

use crate::hooks::BoardTask;
use crate::runtime::RuntimeRef;
use crate::runtime::teams::TeamSeat;
use cadre_store::{BoardItem, BoardStatus, BoardUpdate, LEAD, StoreError, TeamKey, TeamStore};
use cadre_tools::{ToolContext, ToolError, ToolInfo, ToolOutput, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use std::borrow::Cow;
use std::sync::Arc;

/// Messages `team_list` shows.
const LIST_MESSAGES: usize = 20;

fn error(msg: impl std::fmt::Display) -> ToolOutput {
    ToolOutput::error(format!("Error: {msg}"))
}

/// Who calls a team tool, in which team.
struct Caller {
    key: TeamKey,
    /// Its label, or `lead`.
    me: String,
    seat: Option<Arc<TeamSeat>>,
}

/// What every team tool holds: the runtime, and the member's seat (none for a lead).
#[derive(Clone)]
pub(crate) struct TeamHandle {
    runtime: RuntimeRef,
    seat: Option<Arc<TeamSeat>>,
}

impl TeamHandle {
    pub(crate) fn new(runtime: RuntimeRef, seat: Option<Arc<TeamSeat>>) -> Self {
        Self { runtime, seat }
    }

    /// The caller of `ctx` naming `team` (optional: a member has one team, a lead of one
    /// team need not say it), or the answer that it has none.
    fn caller(&self, ctx: &ToolContext, team: Option<&str>) -> Result<Caller, ToolOutput> {
        if let Some(seat) = &self.seat {
            if let Some(t) = team
                && t != seat.key.name
            {
                return Err(error(format!(
                    "you are a member of team {} only, not of {t}",
                    seat.key.name
                )));
            }
            return Ok(Caller {
                key: seat.key.clone(),
                me: seat.label.clone(),
                seat: Some(seat.clone()),
            });
        }
        let runtime = self
            .runtime
            .upgrade()
            .ok_or_else(|| error("runtime is gone"))?;
        let session = &ctx.run.session_id;
        let led = runtime.led_teams().of(session);
        let name = match (team, led.as_slice()) {
            (Some(t), _) if led.iter().any(|l| l == t) => t.to_string(),
            (_, []) => {
                return Err(error(
                    "you lead no team: spawn members into one with agent_spawn(..., team=NAME) \
                     or task(..., team=NAME) first",
                ));
            }
            (Some(t), _) => {
                return Err(error(format!(
                    "you lead no team {t} (you lead: {})",
                    led.join(", ")
                )));
            }
            (None, [one]) => one.clone(),
            (None, _) => {
                return Err(error(format!(
                    "you lead several teams; give team: one of {}",
                    led.join(", ")
                )));
            }
        };
        Ok(Caller {
            key: TeamKey::new(session, &name),
            me: LEAD.to_string(),
            seat: None,
        })
    }

    fn runtime(&self) -> Result<Arc<crate::SubagentRuntime>, ToolError> {
        self.runtime.get()
    }
}

/// The store's teams, or the refusal that it keeps none.
fn store_teams(runtime: &crate::SubagentRuntime) -> Result<&dyn TeamStore, StoreError> {
    runtime
        .store()
        .teams()
        .ok_or_else(|| StoreError::TeamRefused("this task store keeps no teams".into()))
}

/// [`store_teams`], its refusal as the model reads it.
fn teams_of(runtime: &crate::SubagentRuntime) -> Result<&dyn TeamStore, ToolOutput> {
    store_teams(runtime).map_err(store_error)
}

/// A store answer as the model reads it: a refusal's own words, else the failure.
fn store_error(e: StoreError) -> ToolOutput {
    match e {
        StoreError::TeamRefused(why) => error(why),
        other => error(format!("the task store failed: {other}")),
    }
}

fn item_lines(i: &BoardItem) -> String {
    let mut s = format!("item: {}\ntitle: {}\nstatus: {}", i.id, i.title, i.status);
    if let Some(by) = &i.claimed_by {
        let verb = if i.status == BoardStatus::Done {
            "done_by"
        } else {
            "claimed_by"
        };
        s.push_str(&format!("\n{verb}: {by}"));
    }
    if let Some(d) = &i.detail {
        s.push_str(&format!("\ndetail: {d}"));
    }
    if let Some(r) = &i.result {
        s.push_str(&format!("\nresult: {r}"));
    }
    if let Some(n) = &i.note {
        s.push_str(&format!("\nnote: {n}"));
    }
    s
}

/// The answer to a board write.
fn board_answer(what: &str, u: BoardUpdate, me: &str) -> ToolOutput {
    if u.applied {
        return ToolOutput::ok(format!("status: {what}\n{}", item_lines(&u.item)));
    }
    let why = match (&u.item.status, u.item.claimed_by.as_deref()) {
        (BoardStatus::Claimed, Some(by)) if by != me => {
            format!("item {} is claimed by {by}", u.item.id)
        }
        (BoardStatus::Done, by) => format!(
            "item {} is done already (by {})",
            u.item.id,
            by.unwrap_or("-")
        ),
        _ => format!("item {} is not claimed by you ({me})", u.item.id),
    };
    ToolOutput::error(format!("Error: {why}\n{}", item_lines(&u.item)))
}

/// The optional team argument of every team tool.
#[derive(Deserialize, JsonSchema)]
pub struct TeamArg {
    /// The team; only a lead of several teams needs to give it.
    #[serde(default)]
    team: Option<String>,
}

macro_rules! team_tool {
    ($tool:ident, $name:literal) => {
        #[doc = concat!("`", $name, "`.")]
        pub struct $tool(pub(crate) TeamHandle);

        impl $tool {
            const NAME: &'static str = $name;
        }
    };
}

team_tool!(TeamSendTool, "team_send");
team_tool!(BoardAddTool, "board_add");
team_tool!(BoardClaimTool, "board_claim");
team_tool!(BoardDoneTool, "board_done");
team_tool!(BoardReleaseTool, "board_release");
team_tool!(BoardListTool, "board_list");
team_tool!(TeamListTool, "team_list");

/// The arguments of `team_send`.
#[derive(Deserialize, JsonSchema)]
pub struct SendArgs {
    /// A member's label, "lead", or "*" for every other member.
    to: String,
    /// The message (at most 16 KiB).
    message: String,
    #[serde(flatten)]
    team: TeamArg,
}

impl TypedTool for TeamSendTool {
    const INFO: ToolInfo = ToolInfo::delegation(Self::NAME).read_only().titled(&["to"]);
    type Args = SendArgs;

    fn description(&self) -> Cow<'_, str> {
        "Send a message to a member of your team (by label), to the team's lead (\"lead\") or \
         to every other member (\"*\"). It is fire and forget: the recipient reads it at the \
         end of its next request. At most 16 KiB."
            .into()
    }

    async fn run(&self, a: SendArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let runtime = self.0.runtime()?;
        let c = match self.0.caller(ctx, a.team.team.as_deref()) {
            Ok(c) => c,
            Err(out) => return Ok(out),
        };
        if a.to == c.me {
            return Ok(error(
                "that is you; send to another member, \"lead\" or \"*\"",
            ));
        }
        if let Some(seat) = &c.seat
            && !seat.may_message(&a.to)
        {
            let allowed = seat.can_message.clone().unwrap_or_default().join(", ");
            return Ok(error(format!(
                "{} may message only: {allowed} (its definition's can_message)",
                seat.label
            )));
        }
        let teams = match teams_of(&runtime) {
            Ok(t) => t,
            Err(out) => return Ok(out),
        };
        let mailbox = runtime.config().team_mailbox;
        match teams
            .send_team_message(&c.key, &c.me, &a.to, &a.message, mailbox)
            .await
        {
            Ok(sent) if sent.is_empty() => Ok(error("nobody else is in the team")),
            Ok(sent) => {
                let to: Vec<&str> = sent.iter().map(|m| m.recipient.as_str()).collect();
                Ok(ToolOutput::ok(format!(
                    "status: sent\nid: {}\nto: {}",
                    sent[0].id,
                    to.join(", ")
                )))
            }
            Err(e) => Ok(store_error(e)),
        }
    }
}

/// The arguments of `board_add`.
#[derive(Deserialize, JsonSchema)]
pub struct AddArgs {
    /// A short title.
    title: String,
    /// What is to be done, in more words.
    #[serde(default)]
    detail: Option<String>,
    #[serde(flatten)]
    team: TeamArg,
}

impl TypedTool for BoardAddTool {
    const INFO: ToolInfo = ToolInfo::delegation(Self::NAME)
        .read_only()
        .titled(&["title"]);
    type Args = AddArgs;

    fn description(&self) -> Cow<'_, str> {
        "Add an item to your team's shared board; it gets the next small number (1, 2, 3…) \
         and is open for any member to claim."
            .into()
    }

    async fn run(&self, a: AddArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let runtime = self.0.runtime()?;
        let (c, teams) = match self
            .0
            .caller(ctx, a.team.team.as_deref())
            .and_then(|c| teams_of(&runtime).map(|t| (c, t)))
        {
            Ok(x) => x,
            Err(out) => return Ok(out),
        };
        let detail = a.detail.filter(|d| !d.trim().is_empty());
        if let Some(hooks) = runtime.config().claude_hooks.clone() {
            let task = BoardTask {
                team: &c.key.name,
                by: &c.me,
                id: None,
                title: &a.title,
                detail: detail.as_deref(),
            };
            if let Some(reason) = hooks.task_created(task, &ctx.run).await {
                return Ok(error(format!(
                    "a TaskCreated hook refused the item, it was not added: {reason}"
                )));
            }
        }
        Ok(
            match teams
                .board_add(&c.key, &c.me, &a.title, detail.as_deref())
                .await
            {
                Ok(item) => ToolOutput::ok(format!("status: added\n{}", item_lines(&item))),
                Err(e) => store_error(e),
            },
        )
    }
}

/// The arguments of the board tools that name one item.
#[derive(Deserialize, JsonSchema)]
pub struct ItemArgs {
    /// The item's number.
    id: u64,
    #[serde(flatten)]
    team: TeamArg,
}

/// The arguments of `board_done`.
#[derive(Deserialize, JsonSchema)]
pub struct DoneArgs {
    /// The item's number.
    id: u64,
    /// What came of it.
    result: String,
    #[serde(flatten)]
    team: TeamArg,
}

/// Run a board write of one item for the caller.
async fn board_write<F, Fut>(
    h: &TeamHandle,
    ctx: &ToolContext,
    team: Option<&str>,
    what: &str,
    write: F,
) -> Result<ToolOutput, ToolError>
where
    F: FnOnce(Arc<crate::SubagentRuntime>, TeamKey, String) -> Fut,
    Fut: std::future::Future<Output = Result<BoardUpdate, StoreError>>,
{
    let runtime = h.runtime()?;
    let c = match h.caller(ctx, team) {
        Ok(c) => c,
        Err(out) => return Ok(out),
    };
    if let Err(out) = teams_of(&runtime) {
        return Ok(out);
    }
    let me = c.me.clone();
    Ok(match write(runtime, c.key, c.me).await {
        Ok(u) => board_answer(what, u, &me),
        Err(e) => store_error(e),
    })
}

impl TypedTool for BoardClaimTool {
    const INFO: ToolInfo = ToolInfo::delegation(Self::NAME).read_only();
    type Args = ItemArgs;

    fn description(&self) -> Cow<'_, str> {
        "Claim an open item of your team's board to work on it. Atomic: if another member \
         claimed it first, you are told who has it."
            .into()
    }

    async fn run(&self, a: ItemArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        board_write(
            &self.0,
            ctx,
            a.team.team.as_deref(),
            "claimed",
            |rt, key, me| async move { store_teams(&rt)?.board_claim(&key, a.id, &me).await },
        )
        .await
    }
}

impl TypedTool for BoardDoneTool {
    const INFO: ToolInfo = ToolInfo::delegation(Self::NAME).read_only();
    type Args = DoneArgs;

    fn description(&self) -> Cow<'_, str> {
        "Mark an item you claimed as done, with its result.".into()
    }

    async fn run(&self, a: DoneArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        board_write(
            &self.0,
            ctx,
            a.team.team.as_deref(),
            "done",
            |rt, key, me| async move {
                let teams = store_teams(&rt)?;
                if let Some(hooks) = rt.config().claude_hooks.clone() {
                    completing(&hooks, teams, &key, a.id, &me, &a.result, &ctx.run).await?;
                }
                teams.board_done(&key, a.id, &me, &a.result).await
            },
        )
        .await
    }
}

/// Ask the `TaskCompleted` hooks before `me` finishes item `id` of `key`; their refusal
/// as the store's, so the model reads it like any other. An item `me` does not hold is
/// left for the store to refuse, unasked.
async fn completing(
    hooks: &crate::hooks::ClaudeHooks,
    teams: &dyn TeamStore,
    key: &TeamKey,
    id: u64,
    me: &str,
    result: &str,
    run: &cadre_tools::RunContext,
) -> Result<(), StoreError> {
    let items = teams.board_list(key, Some(BoardStatus::Claimed)).await?;
    let Some(item) = items
        .iter()
        .find(|i| i.id == id && i.claimed_by.as_deref() == Some(me))
    else {
        return Ok(());
    };
    let task = BoardTask {
        team: &key.name,
        by: me,
        id: Some(id),
        title: &item.title,
        detail: item.detail.as_deref(),
    };
    match hooks.task_completed(task, result, run).await {
        Some(reason) => Err(StoreError::TeamRefused(format!(
            "a TaskCompleted hook refused to mark item {id} done; it stays claimed by you: \
             {reason}"
        ))),
        None => Ok(()),
    }
}

impl TypedTool for BoardReleaseTool {
    const INFO: ToolInfo = ToolInfo::delegation(Self::NAME).read_only();
    type Args = ItemArgs;

    fn description(&self) -> Cow<'_, str> {
        "Give back an item you claimed but will not finish: it is open again.".into()
    }

    async fn run(&self, a: ItemArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        board_write(
            &self.0,
            ctx,
            a.team.team.as_deref(),
            "released",
            |rt, key, me| async move { store_teams(&rt)?.board_release(&key, a.id, &me).await },
        )
        .await
    }
}

/// The arguments of `board_list`.
#[derive(Deserialize, JsonSchema)]
pub struct ListArgs {
    /// open, claimed, done or all (default all).
    #[serde(default)]
    status: Option<String>,
    #[serde(flatten)]
    team: TeamArg,
}

impl TypedTool for BoardListTool {
    const INFO: ToolInfo = ToolInfo::delegation(Self::NAME).read_only();
    type Args = ListArgs;

    fn description(&self) -> Cow<'_, str> {
        "List your team's board items: status open, claimed, done or all (default).".into()
    }

    async fn run(&self, a: ListArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let runtime = self.0.runtime()?;
        let (c, teams) = match self
            .0
            .caller(ctx, a.team.team.as_deref())
            .and_then(|c| teams_of(&runtime).map(|t| (c, t)))
        {
            Ok(x) => x,
            Err(out) => return Ok(out),
        };
        let status = match a.status.as_deref().map(str::trim) {
            None | Some("" | "all") => None,
            Some(s) => match BoardStatus::parse(s) {
                Some(s) => Some(s),
                None => {
                    return Ok(error(format!(
                        "status {s:?}: use open, claimed, done or all"
                    )));
                }
            },
        };
        Ok(match teams.board_list(&c.key, status).await {
            Ok(items) => {
                let mut out = format!("team: {}\nitems: {}", c.key.name, items.len());
                for i in &items {
                    out.push_str("\n\n");
                    out.push_str(&item_lines(i));
                }
                ToolOutput::ok(out)
            }
            Err(e) => store_error(e),
        })
    }
}

impl TypedTool for TeamListTool {
    const INFO: ToolInfo = ToolInfo::delegation(Self::NAME).read_only();
    type Args = TeamArg;

    fn description(&self) -> Cow<'_, str> {
        format!(
            "Show your team: its members (label, agent, state, the items they hold) and its \
             last {LIST_MESSAGES} messages."
        )
        .into()
    }

    async fn run(&self, a: TeamArg, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let runtime = self.0.runtime()?;
        let (c, teams) = match self
            .0
            .caller(ctx, a.team.as_deref())
            .and_then(|c| teams_of(&runtime).map(|t| (c, t)))
        {
            Ok(x) => x,
            Err(out) => return Ok(out),
        };
        let read = async {
            let members = teams.team_members(&c.key).await?;
            let claimed = teams.board_list(&c.key, Some(BoardStatus::Claimed)).await?;
            let messages = teams.team_messages(&c.key, LIST_MESSAGES).await?;
            Ok::<_, StoreError>((members, claimed, messages))
        };
        let (members, claimed, messages) = match read.await {
            Ok(x) => x,
            Err(e) => return Ok(store_error(e)),
        };
        let mut out = format!(
            "team: {}\nyou: {}\nmembers: {}",
            c.key.name,
            c.me,
            members.len()
        );
        for m in &members {
            let held: Vec<String> = claimed
                .iter()
                .filter(|i| i.claimed_by.as_deref() == Some(m.label.as_str()))
                .map(|i| i.id.to_string())
                .collect();
            out.push_str(&format!(
                "\n- {} ({}) {}; claimed: {}",
                m.label,
                m.agent,
                if m.ended { "ended" } else { "active" },
                if held.is_empty() {
                    "-".to_string()
                } else {
                    held.join(", ")
                }
            ));
        }
        out.push_str(&format!("\nmessages: {}", messages.len()));
        for m in &messages {
            out.push_str(&format!(
                "\n- #{} {} -> {}{}: {}",
                m.id,
                m.sender,
                m.recipient,
                if m.delivered { "" } else { " (unread)" },
                m.body
            ));
        }
        Ok(ToolOutput::ok(out))
    }
}
