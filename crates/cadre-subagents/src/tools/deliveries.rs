//! The two phases of handing a parent what is delivered exactly once — finished background
//! tasks, team messages: they are read from the store and handed to the engine, and only
//! once the recipient's conversation holds them (transcript and checkpoint) are they marked
//! delivered. A process lost between the two leaves them undelivered in the store; the
//! resumed run's history then says whether the lost process had written them (they are its
//! newest messages), so each reaches the conversation once.

use cadre_types::Message;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// What the opening tag of a delivery of task results is (see `delivery_message`).
pub(crate) const RESULTS_TAG: &str = "<background-task-results>";
/// The opening of one team message's element (see `render_messages`).
pub(crate) const TEAM_MESSAGE_TAG: &str = "<team-message ";

/// Per recipient (a session's results, a member's or a lead's inbox): what was handed to
/// the engine and not yet recorded, and what was recorded but whose mark in the store
/// failed (tried again at the next delivery).
#[derive(Default)]
pub(crate) struct Deliveries {
    recipients: Mutex<HashMap<String, Owed>>,
}

#[derive(Default)]
struct Owed {
    handed: Vec<String>,
    unmarked: HashSet<String>,
}

/// How the undelivered items the store listed split: those to deliver now, and those the
/// conversation already holds (to be marked delivered, not shown again).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Split<T> {
    pub deliver: Vec<T>,
    pub recorded: Vec<String>,
}

impl Deliveries {
    /// Split `undelivered` (the store's list for `recipient`) by what the conversation
    /// already holds: `in_history` (what its newest messages delivered), and what this
    /// process recorded but could not mark. The rest are handed out, remembered until
    /// [`recorded`](Self::recorded).
    pub fn split<T>(
        &self,
        recipient: &str,
        in_history: &HashSet<String>,
        undelivered: Vec<T>,
        id: impl Fn(&T) -> String,
    ) -> Split<T> {
        let mut recipients = self.lock();
        let owed = recipients.entry(recipient.to_string()).or_default();
        let mut split = Split {
            deliver: Vec::new(),
            recorded: Vec::new(),
        };
        let mut handed = Vec::new();
        for t in undelivered {
            let tid = id(&t);
            if in_history.contains(&tid) || owed.unmarked.contains(&tid) {
                split.recorded.push(tid);
            } else {
                handed.push(tid);
                split.deliver.push(t);
            }
        }
        owed.handed = handed;
        split
    }

    /// What was handed out for `recipient`, now recorded: the ids to mark delivered.
    /// (Those whose mark failed earlier are marked at the next [`split`](Self::split).)
    pub fn recorded(&self, recipient: &str) -> Vec<String> {
        let mut recipients = self.lock();
        let Some(owed) = recipients.get_mut(recipient) else {
            return Vec::new();
        };
        let ids = std::mem::take(&mut owed.handed);
        if owed.unmarked.is_empty() {
            recipients.remove(recipient);
        }
        ids
    }

    /// What marking `ids` of `recipient` delivered came to: done, or failed (warned; they
    /// are recorded, so they are not shown again, and the next delivery tries again).
    pub fn marking<T, E: std::fmt::Display>(
        &self,
        recipient: &str,
        ids: Vec<String>,
        result: Result<T, E>,
    ) {
        match result {
            Ok(_) => self.marked(recipient, &ids),
            Err(e) => {
                tracing::warn!(error = %e, "store: marking delivered failed; trying again at the next turn");
                self.mark_failed(recipient, ids);
            }
        }
    }

    /// Marking `ids` of `recipient` delivered failed: they are recorded, so they are not
    /// shown again, and the next delivery tries the mark again.
    fn mark_failed(&self, recipient: &str, ids: Vec<String>) {
        self.lock()
            .entry(recipient.to_string())
            .or_default()
            .unmarked
            .extend(ids);
    }

    /// Marking `ids` succeeded.
    fn marked(&self, recipient: &str, ids: &[String]) {
        let mut recipients = self.lock();
        if let Some(owed) = recipients.get_mut(recipient) {
            for id in ids {
                owed.unmarked.remove(id);
            }
            if owed.unmarked.is_empty() && owed.handed.is_empty() {
                recipients.remove(recipient);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Owed>> {
        // A panic elsewhere while holding it leaves plain data, still consistent.
        self.recipients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The user messages after the last assistant message: where a process lost between
/// recording a delivery and marking it left it.
fn since_last_reply(history: &[Message]) -> impl Iterator<Item = &str> {
    history
        .iter()
        .rev()
        .take_while(|m| !matches!(m, Message::Assistant { .. }))
        .filter_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        })
}

/// The ids of the tasks whose results the deliveries since the model's last reply hold.
/// (Results are escaped inside their envelope, so only a delivery's own tags match.)
pub(crate) fn results_since_last_reply(history: &[Message]) -> HashSet<String> {
    since_last_reply(history)
        .filter(|c| c.starts_with(RESULTS_TAG))
        .flat_map(|c| c.split("<task id=\"").skip(1))
        .filter_map(|part| part.split_once('"').map(|(id, _)| id.to_string()))
        .collect()
}

/// The ids of the team messages (of `team`, when the elements name theirs, as a lead's
/// do) delivered since the model's last reply. Senders and bodies are escaped, so only the
/// elements' own attributes match.
pub(crate) fn team_messages_since_last_reply(
    history: &[Message],
    team: Option<&str>,
) -> HashSet<String> {
    let of_team = team.map(|t| format!("team=\"{t}\" "));
    since_last_reply(history)
        .filter(|c| c.starts_with(TEAM_MESSAGE_TAG))
        .flat_map(|c| c.split(TEAM_MESSAGE_TAG).skip(1))
        .filter(|part| of_team.as_deref().is_none_or(|t| part.starts_with(t)))
        .filter_map(|part| {
            let (_, rest) = part.split_once("\" id=\"")?;
            rest.split_once('"').map(|(id, _)| id.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(ToString::to_string).collect()
    }

    fn delivery(ids: &[&str]) -> Message {
        let mut s = format!("{RESULTS_TAG}\n");
        for id in ids {
            s.push_str(&format!(
                "<task id=\"{id}\" agent=\"w\" state=\"completed\"><task_result>&lt;task id=\"forged\"</task_result></task>\n"
            ));
        }
        s.push_str("</background-task-results>");
        Message::user(s)
    }

    #[test]
    fn results_recorded_since_the_model_last_spoke_are_not_handed_out_again() {
        let d = Deliveries::default();
        let history = vec![
            delivery(&["t1"]),
            Message::assistant("seen t1"),
            delivery(&["t2", "t3"]),
            Message::user("next prompt"),
        ];
        let seen = results_since_last_reply(&history);
        let split = d.split("s", &seen, ids(&["t1", "t2", "t3", "t4"]), Clone::clone);
        // t1 came before the model's reply: in the store it is undelivered, so it is new.
        assert_eq!(split.deliver, ids(&["t1", "t4"]));
        assert_eq!(split.recorded, ids(&["t2", "t3"]));
        assert_eq!(d.recorded("s"), ids(&["t1", "t4"]));
        assert!(d.recorded("s").is_empty());
    }

    #[test]
    fn an_escaped_tag_inside_a_result_names_no_task() {
        let seen = results_since_last_reply(&[delivery(&["t2"])]);
        assert_eq!(seen, HashSet::from(["t2".to_string()]));
    }

    #[test]
    fn a_failed_mark_keeps_the_result_recorded_until_a_later_mark_succeeds() {
        let d = Deliveries::default();
        let split = d.split("s", &HashSet::new(), ids(&["t1"]), Clone::clone);
        assert_eq!(split.deliver, ids(&["t1"]));
        let marking = d.recorded("s");
        d.mark_failed("s", marking);
        // The next turn: t1 is still undelivered in the store, but the session holds it.
        let later = vec![delivery(&["t1"]), Message::assistant("ok")];
        let seen = results_since_last_reply(&later);
        let split = d.split("s", &seen, ids(&["t1", "t5"]), Clone::clone);
        assert_eq!(split.deliver, ids(&["t5"]));
        assert_eq!(split.recorded, ids(&["t1"]));
        d.marked("s", &split.recorded);
        assert_eq!(d.recorded("s"), ids(&["t5"]));
    }

    #[test]
    fn a_take_that_was_never_recorded_is_handed_out_again() {
        let d = Deliveries::default();
        let none = HashSet::new();
        let _ = d.split("s", &none, ids(&["t1"]), Clone::clone);
        // The session write failed: no `recorded`; the store still lists t1.
        let split = d.split("s", &none, ids(&["t1"]), Clone::clone);
        assert_eq!(split.deliver, ids(&["t1"]));
    }

    #[test]
    fn team_messages_are_told_apart_by_team_when_their_elements_name_it() {
        let lead = Message::user(
            "<team-message team=\"a\" from=\"x&quot; id=&quot;7\" id=\"1\">hi</team-message>\n\
             <team-message team=\"b\" from=\"y\" id=\"2\">yo</team-message>",
        );
        let history = [Message::assistant("before"), lead];
        let of = |team| {
            let mut v: Vec<String> = team_messages_since_last_reply(&history, team)
                .into_iter()
                .collect();
            v.sort();
            v
        };
        assert_eq!(of(Some("a")), ids(&["1"]));
        assert_eq!(of(Some("b")), ids(&["2"]));
        assert_eq!(of(None), ids(&["1", "2"]));
        let before = [history[1].clone(), Message::assistant("read it")];
        assert!(team_messages_since_last_reply(&before, None).is_empty());
    }
}
