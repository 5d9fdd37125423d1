//! Agent teams in the task store: a lead's named team of children, the messages its
//! members send each other, and the team's shared board of work items.
//!
//! Every state change is one conditional write, so that members on several nodes (or
//! processes) sharing one database see one team: a message is handed over once (taking it
//! marks it delivered in the same write), a board item is claimed by compare and set (one
//! claimer wins, the others read who has it), and item ids are small per-team integers
//! drawn from the team's own counter.

use crate::error::StoreResult;

/// The largest message body a team member may send, in bytes.
pub const MAX_TEAM_MESSAGE_BYTES: usize = 16 * 1024;

/// The recipient name of a team's lead.
pub const LEAD: &str = "lead";

/// The recipient name that means every other (active) member.
pub const EVERYONE: &str = "*";

/// A team: scoped to its lead's session, like labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TeamKey {
    /// The lead's session: the session whose children the members are.
    pub session: String,
    /// The team's name, as the lead gave it.
    pub name: String,
}

impl TeamKey {
    /// The team `name` of `session`.
    pub fn new(session: &str, name: &str) -> Self {
        TeamKey {
            session: session.to_string(),
            name: name.to_string(),
        }
    }
}

/// A member joining a team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMember {
    /// The member's label (unique in the team).
    pub label: String,
    /// The agent definition it runs.
    pub agent: String,
    /// Its current task, when it has one.
    pub task_id: Option<String>,
}

/// A member of a team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamMember {
    /// The member's label.
    pub label: String,
    /// The agent definition it runs.
    pub agent: String,
    /// Its latest task.
    pub task_id: Option<String>,
    /// Unix ms it (last) joined.
    pub joined_at: u64,
    /// True once it ended (its claims were released then).
    pub ended: bool,
}

/// A message between members (or a member and the lead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamMessage {
    /// Per-team sequence number, from 1.
    pub id: u64,
    /// The sender's label (or [`LEAD`]).
    pub sender: String,
    /// The recipient's label (or [`LEAD`]); a message to [`EVERYONE`] is stored once per
    /// recipient.
    pub recipient: String,
    /// The text.
    pub body: String,
    /// True once it was handed to the recipient.
    pub delivered: bool,
    /// Unix ms it was sent.
    pub created_at: u64,
}

/// Where a board item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BoardStatus {
    /// Nobody has it.
    Open,
    /// A member claimed it.
    Claimed,
    /// Finished, with a result.
    Done,
}

impl BoardStatus {
    /// The stored (and shown) name.
    pub fn as_str(self) -> &'static str {
        match self {
            BoardStatus::Open => "open",
            BoardStatus::Claimed => "claimed",
            BoardStatus::Done => "done",
        }
    }

    /// The status named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "open" => Some(BoardStatus::Open),
            "claimed" => Some(BoardStatus::Claimed),
            "done" => Some(BoardStatus::Done),
            _ => None,
        }
    }
}

impl std::fmt::Display for BoardStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An item of a team's board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardItem {
    /// Per-team number, from 1.
    pub id: u64,
    /// Short title.
    pub title: String,
    /// Longer description.
    pub detail: Option<String>,
    /// Where it is.
    pub status: BoardStatus,
    /// Who added it.
    pub added_by: String,
    /// Who holds it (claimed), or who finished it (done).
    pub claimed_by: Option<String>,
    /// The result it was finished with.
    pub result: Option<String>,
    /// Why it is open again (its claimer ended without finishing it).
    pub note: Option<String>,
}

/// What a board write did: `applied` false when its condition did not hold (another member
/// has the item, it is done, or the writer does not hold it), with the item as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardUpdate {
    /// Whether the write took effect.
    pub applied: bool,
    /// The item after the write (or as it is, when refused).
    pub item: BoardItem,
}

/// Teams, their messages and their boards, shared by every node opening the same store.
#[async_trait::async_trait]
pub trait TeamStore: Send + Sync {
    /// Add `member` to team `key` (created, with `lead` as its lead's name, on first use).
    /// A member that joined before (a live child's next task) joins again, with its new
    /// task. Refused with [`crate::StoreError::TeamRefused`] when the team already has
    /// `max_size` active members.
    async fn join_team(
        &self,
        key: &TeamKey,
        lead: &str,
        member: &NewMember,
        max_size: usize,
    ) -> StoreResult<()>;

    /// The lead's name of team `key`, `None` when the team does not exist.
    async fn team_lead(&self, key: &TeamKey) -> StoreResult<Option<String>>;

    /// The members of `key`, in joining order.
    async fn team_members(&self, key: &TeamKey) -> StoreResult<Vec<TeamMember>>;

    /// Send `body` from `from` to `to` (an active member's label, [`LEAD`] or [`EVERYONE`]):
    /// the stored messages, one per recipient. Refused with
    /// [`crate::StoreError::TeamRefused`] (nothing stored) when the body is over
    /// [`MAX_TEAM_MESSAGE_BYTES`], the recipient is not an active member, or a recipient
    /// already has `mailbox` undelivered messages.
    async fn send_team_message(
        &self,
        key: &TeamKey,
        from: &str,
        to: &str,
        body: &str,
        mailbox: usize,
    ) -> StoreResult<Vec<TeamMessage>>;

    /// `recipient`'s undelivered messages, oldest first. Read only: the recipient marks
    /// them delivered ([`mark_team_messages_delivered`](Self::mark_team_messages_delivered))
    /// once its conversation (transcript and checkpoint) holds them, so a member lost in
    /// between, adopted on another node, reads them again.
    async fn undelivered_team_messages(
        &self,
        key: &TeamKey,
        recipient: &str,
    ) -> StoreResult<Vec<TeamMessage>>;

    /// Mark `recipient`'s messages `ids` delivered; how many this call marked (a message
    /// is marked once, whichever node asks).
    async fn mark_team_messages_delivered(
        &self,
        key: &TeamKey,
        recipient: &str,
        ids: &[u64],
    ) -> StoreResult<u64>;

    /// The newest `limit` messages of the team, oldest first.
    async fn team_messages(&self, key: &TeamKey, limit: usize) -> StoreResult<Vec<TeamMessage>>;

    /// Add an open item; it gets the team's next item number.
    async fn board_add(
        &self,
        key: &TeamKey,
        by: &str,
        title: &str,
        detail: Option<&str>,
    ) -> StoreResult<BoardItem>;

    /// Claim item `id` for `by` if it is open (or already `by`'s): compare and set.
    async fn board_claim(&self, key: &TeamKey, id: u64, by: &str) -> StoreResult<BoardUpdate>;

    /// Finish item `id` with `result`, if `by` holds it.
    async fn board_done(
        &self,
        key: &TeamKey,
        id: u64,
        by: &str,
        result: &str,
    ) -> StoreResult<BoardUpdate>;

    /// Put item `id` back to open, if `by` holds it.
    async fn board_release(&self, key: &TeamKey, id: u64, by: &str) -> StoreResult<BoardUpdate>;

    /// The board's items (of `status`, or all), by number.
    async fn board_list(
        &self,
        key: &TeamKey,
        status: Option<BoardStatus>,
    ) -> StoreResult<Vec<BoardItem>>;

    /// Member `label` ended: it leaves the active members, and the items it held go back
    /// to open with `note`. The items released.
    async fn member_ended(
        &self,
        key: &TeamKey,
        label: &str,
        note: &str,
    ) -> StoreResult<Vec<BoardItem>>;
}

/// Why a message body is refused before it reaches the store, if it is.
pub(crate) fn body_refusal(body: &str) -> Option<String> {
    (body.len() > MAX_TEAM_MESSAGE_BYTES).then(|| {
        format!(
            "message is {} bytes; a team message is at most {MAX_TEAM_MESSAGE_BYTES} bytes",
            body.len()
        )
    })
}

/// The refusal of a board write on a missing item.
pub(crate) fn no_item(key: &TeamKey, id: u64) -> crate::StoreError {
    crate::StoreError::TeamRefused(format!("team {} has no board item {id}", key.name))
}

/// The refusal of a send to someone who is not an active member.
pub(crate) fn not_member(key: &TeamKey, to: &str) -> crate::StoreError {
    crate::StoreError::TeamRefused(format!(
        "{to:?} is not an active member of team {}",
        key.name
    ))
}

/// The refusal of a send to a full mailbox.
pub(crate) fn mailbox_full(to: &str, mailbox: usize) -> crate::StoreError {
    crate::StoreError::TeamRefused(format!(
        "{to} already has {mailbox} undelivered team messages; nothing was sent (try again once it has read them)"
    ))
}

/// The refusal of a join to a full team.
pub(crate) fn team_full(key: &TeamKey, max: usize) -> crate::StoreError {
    crate::StoreError::TeamRefused(format!(
        "team {} already has {max} members ([subagents] max_team_size)",
        key.name
    ))
}
