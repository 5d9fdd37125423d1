//! Agent teams end to end with scripted members: a lead spawns `planner` and `coder` into
//! team `t`; the planner fills the board and writes to the coder, whose next request ends
//! with the message (its earlier bytes unchanged); both claim item 1 at once and one wins;
//! the board and the lead's `team_list` show what happened. Sends outside the team or past
//! `can_message` are refused, a member's own child has no team tools, and a member that
//! fails gives its claimed item back with a note the lead is told of.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::TurnExtension;
use cadre_llm::ModelRequest;
use cadre_store::{BoardStatus, TeamKey};
use cadre_subagents::{AgentDefinition, SubagentContext, TEAM_TOOLS};
use cadre_tools::ToolOutput;
use common::{Options, call, field, fixture, tool_results, worker};
use serde_json::json;

const SESSION: &str = "sess-lead";

const SCRIPT: &str = r#"
[[scripts]]
agent = "coder"
[[scripts.turns]]
text = "ready"
[[scripts.turns]]
tool_calls = [{ name = "board_claim", args = { id = 1 } }]
[[scripts.turns]]
tool_calls = [{ name = "board_done", args = { id = 1, result = "parsed" } }]
[[scripts.turns]]
tool_calls = [{ name = "team_send", args = { to = "lead", message = "coder finished" } }]
[[scripts.turns]]
text = "coded"

[[scripts]]
agent = "planner"
[[scripts.turns]]
tool_calls = [{ name = "board_add", args = { title = "parse the config" } }]
[[scripts.turns]]
tool_calls = [{ name = "board_add", args = { title = "write docs", detail = "all of them" } }]
[[scripts.turns]]
tool_calls = [{ name = "team_send", args = { to = "coder", message = "take item 1" } }]
[[scripts.turns]]
text = "planned"
[[scripts.turns]]
tool_calls = [{ name = "board_claim", args = { id = 1 } }]
[[scripts.turns]]
tool_calls = [{ name = "board_done", args = { id = 1, result = "planned it" } }]
[[scripts.turns]]
text = "claimed"
[[scripts.turns]]
tool_calls = [{ name = "board_list", args = { status = "done" } }]
[[scripts.turns]]
text = "{{tool_results}}"

[[scripts]]
agent = "flaky"
[[scripts.turns]]
tool_calls = [{ name = "board_claim", args = { id = 1 } }]
[[scripts.turns]]
error = "simulated provider failure"

[[scripts]]
agent = "chatty"
[[scripts.turns]]
tool_calls = [{ name = "team_send", args = { to = "stranger", message = "hi" } }]
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "helper", prompt = "help" } }]
[[scripts.turns]]
text = "chatted"

[[scripts]]
agent = "quiet"
[[scripts.turns]]
tool_calls = [{ name = "team_send", args = { to = "chatty", message = "psst" } }]
[[scripts.turns]]
tool_calls = [{ name = "team_send", args = { to = "lead", message = "only to you" } }]
[[scripts.turns]]
text = "quiet"

[[scripts]]
agent = "helper"
[[scripts.turns]]
text = "helped"
"#;

fn defs() -> Vec<AgentDefinition> {
    let mut chatty = worker("chatty");
    chatty.can_delegate = true;
    let mut quiet = worker("quiet");
    quiet.can_message = Some(vec!["lead".into()]);
    vec![
        worker("planner"),
        worker("coder"),
        worker("flaky"),
        worker("helper"),
        chatty,
        quiet,
    ]
}

fn team_fixture(max_team_size: usize) -> common::Fixture {
    fixture(
        SCRIPT,
        Options {
            defs: defs(),
            tweak: Box::new(move |c| {
                c.teams = true;
                c.max_team_size = max_team_size;
            }),
            ..Options::default()
        },
    )
}

fn tool_names(r: &ModelRequest) -> Vec<String> {
    r.tools.iter().map(|t| t.name.clone()).collect()
}

/// The tool results of `agent`'s last request.
fn results_of(f: &common::Fixture, agent: &str) -> Vec<(String, bool)> {
    let reqs = f.rec.of(agent);
    tool_results(&reqs.last().unwrap().messages)
}

fn ok(out: &ToolOutput) {
    assert!(!out.is_error, "{}", out.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
async fn a_scripted_team_messages_and_shares_a_board() {
    let f = team_fixture(8);
    let spawn = |agent: &str, task: &str| json!({"agent_id": agent, "label": agent, "team": "t", "task": task});
    ok(&call(&f, SESSION, "agent_spawn", spawn("coder", "hello")).await);
    let planned = call(&f, SESSION, "agent_spawn", spawn("planner", "plan")).await;
    ok(&planned);
    assert_eq!(field(&planned, "reply"), "planned");
    let planner = results_of(&f, "planner");
    assert!(planner[0].0.contains("item: 1"), "{planner:?}");
    assert!(planner[1].0.contains("item: 2"), "{planner:?}");
    assert!(planner[2].0.contains("to: coder"), "{planner:?}");

    // Both claim item 1 at once.
    let (c, p) = tokio::join!(
        call(
            &f,
            SESSION,
            "agent_send",
            json!({"label": "coder", "message": "work"})
        ),
        call(
            &f,
            SESSION,
            "agent_send",
            json!({"label": "planner", "message": "claim"})
        )
    );
    ok(&c);
    ok(&p);

    // The coder's request after the message ends with it, and starts with its previous
    // request's bytes.
    let coder = f.rec.of("coder");
    let (first, next) = (&coder[0], &coder[1]);
    assert_eq!(first.system, next.system);
    assert_eq!(tool_names(first), tool_names(next));
    let bytes =
        |r: &ModelRequest| serde_json::to_string(&r.messages[..first.messages.len()]).unwrap();
    assert_eq!(
        bytes(first),
        bytes(next),
        "the earlier messages are unchanged"
    );
    let last = serde_json::to_value(next.messages.last().unwrap()).unwrap();
    assert!(
        last.to_string()
            .contains(r#"<team-message from=\"planner\" id=\"1\">take item 1</team-message>"#),
        "{last}"
    );

    let coder = results_of(&f, "coder");
    let planner = results_of(&f, "planner");
    let (c_claim, p_claim) = (&coder[0], &planner[3]);
    let won: Vec<&str> = [("coder", c_claim), ("planner", p_claim)]
        .iter()
        .filter(|(_, r)| r.0.starts_with("status: claimed"))
        .map(|(who, _)| *who)
        .collect();
    assert_eq!(
        won.len(),
        1,
        "exactly one claim wins: {c_claim:?} {p_claim:?}"
    );
    let winner = won[0];
    let loser = if winner == "coder" { p_claim } else { c_claim };
    assert!(loser.1, "{loser:?}");
    assert!(
        loser.0.contains(&format!("claimed by {winner}"))
            || loser.0.contains(&format!("done already (by {winner})")),
        "the loser reads who has it: {loser:?}"
    );

    // The planner's board_list shows item 1 done by the winner.
    let checked = call(
        &f,
        SESSION,
        "agent_send",
        json!({"label": "planner", "message": "check"}),
    )
    .await;
    ok(&checked);
    assert!(checked.content.contains("item: 1"), "{}", checked.content);
    assert!(
        checked.content.contains("status: done"),
        "{}",
        checked.content
    );
    assert!(
        checked.content.contains(&format!("done_by: {winner}")),
        "{}",
        checked.content
    );
    assert!(
        !checked.content.contains("item: 2"),
        "only done items: {}",
        checked.content
    );

    // The lead sees both messages in team_list, and gets the one sent to it delivered.
    let list = call(&f, SESSION, "team_list", json!({})).await;
    ok(&list);
    assert!(
        list.content.contains("planner -> coder: take item 1"),
        "{}",
        list.content
    );
    assert!(list.content.contains("coder -> lead"), "{}", list.content);
    assert!(
        list.content.contains("- coder (coder) active"),
        "{}",
        list.content
    );
    let ctx = common::tool_context(&f, SESSION);
    let injected = SubagentContext::new(f.runtime.clone())
        .take_injections(&ctx.run, &[])
        .await;
    let text = serde_json::to_string(&injected).unwrap();
    assert!(
        text.contains(r#"<team-message team=\"t\" from=\"coder\""#),
        "{text}"
    );
    assert!(text.contains("coder finished"), "{text}");

    // That process was lost before its session held the message: the next one is handed
    // it again; once its conversation holds it, it is marked delivered and never repeated.
    let resumed = SubagentContext::new(f.runtime.clone());
    let again = resumed.take_injections(&ctx.run, &[]).await;
    let text = serde_json::to_string(&again).unwrap();
    assert!(text.contains("coder finished"), "{text}");
    let later = SubagentContext::new(f.runtime.clone());
    let text = serde_json::to_string(&later.take_injections(&ctx.run, &again).await).unwrap();
    assert!(!text.contains("coder finished"), "{text}");
    let teams = f.runtime.store().teams().unwrap();
    let key = cadre_store::TeamKey::new(SESSION, "t");
    assert!(
        teams
            .undelivered_team_messages(&key, "lead")
            .await
            .unwrap()
            .is_empty(),
        "marked delivered once the conversation held it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_outside_the_team_or_past_can_message_are_refused() {
    let f = team_fixture(8);
    let spawn = |agent: &str| json!({"agent_id": agent, "team": "t", "task": "go"});
    ok(&call(&f, SESSION, "agent_spawn", spawn("chatty")).await);
    ok(&call(&f, SESSION, "agent_spawn", spawn("quiet")).await);
    let chatty = results_of(&f, "chatty");
    assert!(chatty[0].1, "{chatty:?}");
    assert!(
        chatty[0].0.contains("not an active member of team t"),
        "{chatty:?}"
    );
    let quiet = results_of(&f, "quiet");
    assert!(
        quiet[0].1 && quiet[0].0.contains("may message only: lead"),
        "{quiet:?}"
    );
    assert!(!quiet[1].1 && quiet[1].0.contains("to: lead"), "{quiet:?}");

    // A member has the team tools; its own child does not.
    let member_tools = tool_names(&f.rec.of("chatty")[0]);
    for t in TEAM_TOOLS {
        assert!(
            member_tools.iter().any(|n| n == t),
            "{t} missing: {member_tools:?}"
        );
    }
    let helper_tools = tool_names(&f.rec.of("helper")[0]);
    assert!(
        helper_tools
            .iter()
            .all(|n| !TEAM_TOOLS.contains(&n.as_str())),
        "{helper_tools:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_member_gives_its_item_back_and_the_lead_is_told() {
    let f = team_fixture(8);
    ok(&call(
        &f,
        SESSION,
        "agent_spawn",
        json!({"agent_id": "coder", "team": "t"}),
    )
    .await);
    ok(&call(&f, SESSION, "board_add", json!({"title": "risky"})).await);
    let failed = call(
        &f,
        SESSION,
        "agent_spawn",
        json!({"agent_id": "flaky", "team": "t", "task": "go"}),
    )
    .await;
    assert!(failed.is_error, "{}", failed.content);
    assert!(results_of(&f, "flaky")[0].0.starts_with("status: claimed"));

    let teams = f.runtime.store().teams().unwrap();
    let key = TeamKey::new(SESSION, "t");
    let items = teams.board_list(&key, None).await.unwrap();
    assert_eq!(items[0].status, BoardStatus::Open);
    assert_eq!(items[0].claimed_by, None);
    let note = items[0].note.clone().unwrap();
    assert!(note.contains("flaky failed"), "{note}");
    let told = teams.team_messages(&key, 10).await.unwrap();
    assert!(
        told.iter().any(|m| m.recipient == "lead"
            && m.sender == "flaky"
            && m.body.contains("board items 1 are open again")),
        "{told:?}"
    );
    let list = call(&f, SESSION, "board_list", json!({"status": "open"})).await;
    assert!(
        list.content.contains("note: flaky failed"),
        "{}",
        list.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_is_bounded_and_named_plainly() {
    let f = team_fixture(1);
    ok(&call(
        &f,
        SESSION,
        "agent_spawn",
        json!({"agent_id": "coder", "team": "t"}),
    )
    .await);
    let full = call(
        &f,
        SESSION,
        "agent_spawn",
        json!({"agent_id": "planner", "team": "t"}),
    )
    .await;
    assert!(full.is_error, "{}", full.content);
    assert!(full.content.contains("max_team_size"), "{}", full.content);
    for bad in ["../x", "a b", "t\"><x"] {
        let out = call(
            &f,
            SESSION,
            "agent_spawn",
            json!({"agent_id": "planner", "team": bad}),
        )
        .await;
        assert!(
            out.is_error && out.content.contains("team name"),
            "{bad}: {}",
            out.content
        );
    }
    // A session that leads no team is told how to form one.
    let none = call(&f, "sess-other", "team_list", json!({})).await;
    assert!(
        none.is_error && none.content.contains("you lead no team"),
        "{}",
        none.content
    );
}

fn parsed(text: &str) -> Result<AgentDefinition, String> {
    let aliases = std::collections::HashMap::new();
    let cx = cadre_subagents::ParseContext {
        kind: cadre_subagents::DirKind::Claude,
        workspace: None,
        aliases: &aliases,
        extra_tools: &[],
        providers: None,
    };
    cadre_subagents::parse_definition(std::path::Path::new("member.md"), text, &cx)
        .map_err(|e| e.to_string())
}

#[test]
fn definitions_name_their_team_and_whom_they_may_message() {
    let d =
        parsed("---\ndescription: d\nteam: core-1\ncan_message: [coder, lead]\n---\nbody").unwrap();
    assert_eq!(d.team.as_deref(), Some("core-1"));
    assert_eq!(
        d.can_message,
        Some(vec!["coder".to_string(), "lead".to_string()])
    );
    // An empty list: it may message nobody.
    let mute = parsed("---\ndescription: d\ncanMessage: []\n---\nbody").unwrap();
    assert_eq!(mute.can_message, Some(vec![]));
    let open = parsed("---\ndescription: d\n---\nbody").unwrap();
    assert_eq!((open.team, open.can_message), (None, None));
    for bad in [
        "team: ../etc",
        "team: \"a b\"",
        "team: [x]",
        "can_message: [\"*\"]",
        "canMessage: {a: 1}",
    ] {
        let e = parsed(&format!("---\ndescription: d\n{bad}\n---\nbody")).unwrap_err();
        assert!(
            e.contains("team") || e.contains("can_message") || e.contains("canMessage"),
            "{bad}: {e}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_definitions_team_is_joined_by_default() {
    let mut planner = worker("planner");
    planner.team = Some("t".into());
    let f = fixture(
        SCRIPT,
        Options {
            defs: vec![planner, worker("coder")],
            tweak: Box::new(|c| c.teams = true),
            ..Options::default()
        },
    );
    ok(&call(
        &f,
        SESSION,
        "agent_spawn",
        json!({"agent_id": "coder", "team": "t"}),
    )
    .await);
    let out = call(
        &f,
        SESSION,
        "agent_spawn",
        json!({"agent_id": "planner", "task": "plan"}),
    )
    .await;
    ok(&out);
    let teams = f.runtime.store().teams().unwrap();
    let members = teams
        .team_members(&TeamKey::new(SESSION, "t"))
        .await
        .unwrap();
    let labels: Vec<&str> = members.iter().map(|m| m.label.as_str()).collect();
    assert_eq!(labels, ["coder", "planner"]);
}
