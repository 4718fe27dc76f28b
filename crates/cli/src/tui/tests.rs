//! The TUI on a `TestBackend` over fake runs: acknowledgement once per request (seed 001
//! §6.3 layer 1), keys, and snapshots of its screens.

use std::cell::RefCell;
use std::collections::HashMap;

use lsm_interaction::{Decision, InteractionRequest, PendingView};
use lsm_sandbox::{PermissionRequest, RiskLevel};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::{App, Input, Runs};
use lsm_app::runtime::{LogSnapshot, ManagerError, RunEnd, RunInfo, RunStatus};

#[derive(Default)]
struct Fake {
    runs: RefCell<Vec<RunInfo>>,
    pending: RefCell<HashMap<String, PendingView>>,
    logs: RefCell<HashMap<String, LogSnapshot>>,
    acks: RefCell<Vec<(String, String)>>,
    responses: RefCell<Vec<(String, String, Decision, String)>>,
    stops: RefCell<Vec<String>>,
    starts: RefCell<Vec<lsm_app::run::RunRequest>>,
}

impl Runs for Fake {
    fn list(&self) -> Vec<RunInfo> {
        self.runs.borrow().clone()
    }
    fn pending(&self, run_id: &str) -> Option<PendingView> {
        self.pending.borrow().get(run_id).cloned()
    }
    fn logs(&self, run_id: &str) -> LogSnapshot {
        self.logs.borrow().get(run_id).cloned().unwrap_or_default()
    }
    fn acknowledge(&self, run_id: &str, request_id: &str) -> Result<bool, ManagerError> {
        self.acks
            .borrow_mut()
            .push((run_id.into(), request_id.into()));
        Ok(true)
    }
    fn respond(
        &self,
        run_id: &str,
        request_id: &str,
        decision: Decision,
        message: &str,
    ) -> Result<(), ManagerError> {
        self.responses.borrow_mut().push((
            run_id.into(),
            request_id.into(),
            decision,
            message.into(),
        ));
        self.pending.borrow_mut().remove(run_id);
        Ok(())
    }
    fn stop(&self, run_id: &str) -> Result<(), ManagerError> {
        self.stops.borrow_mut().push(run_id.into());
        Ok(())
    }
    fn start(&self, request: lsm_app::run::RunRequest) -> Result<String, ManagerError> {
        let id = format!("r{}", self.runs.borrow().len() + 1);
        self.runs
            .borrow_mut()
            .push(run(&id, request.objective(), RunStatus::Queued));
        self.starts.borrow_mut().push(request);
        Ok(id)
    }
}

fn run(id: &str, task: &str, status: RunStatus) -> RunInfo {
    RunInfo {
        run_id: id.into(),
        agent: "general".into(),
        task: task.into(),
        status,
        record_id: None,
        end: None,
        workers: Vec::new(),
    }
}

fn permission(id: &str) -> PendingView {
    let mut request = InteractionRequest::permission(&PermissionRequest {
        tool_name: "write_file".into(),
        risk_level: RiskLevel::WritesWorkspace,
        reason: "tool 'write_file' needs permission by default".into(),
        args_summary: r##"{"content":"# Summary","path":"summary.md"}"##.into(),
        preview: Some(lsm_sandbox::preview::file_diff(
            "summary.md",
            "# Draft\nold text\n",
            "# Summary\nold text\n",
        )),
    });
    request.request_id = id.into();
    PendingView {
        request,
        acknowledged_at: None,
    }
}

fn question(id: &str) -> PendingView {
    let mut request = InteractionRequest::clarification(
        "ask_user",
        "Which notes file should I summarize?",
        Some("there are two candidates"),
    );
    request.request_id = id.into();
    PendingView {
        request,
        acknowledged_at: None,
    }
}

fn log(lines: &[&str]) -> LogSnapshot {
    LogSnapshot {
        lines: lines
            .iter()
            .enumerate()
            .map(|(i, t)| lsm_app::runtime::LogLine {
                seq: i as u64 + 1,
                event: "note".into(),
                text: (*t).into(),
            })
            .collect(),
        dropped: 0,
    }
}

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn code(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn terminal() -> Terminal<TestBackend> {
    Terminal::new(TestBackend::new(80, 24)).unwrap()
}

/// Two runs; the first waits on a permission request.
fn busy() -> Fake {
    let fake = Fake::default();
    fake.runs.borrow_mut().extend([
        run(
            "r1",
            "Summarize notes.md into summary.md",
            RunStatus::WaitingUser,
        ),
        run("r2", "List the drafts", RunStatus::Running),
    ]);
    fake.pending
        .borrow_mut()
        .insert("r1".into(), permission("perm-0123456789ab"));
    fake.logs.borrow_mut().insert(
        "r1".into(),
        log(&[
            "[__default__] llm call 1 (2 messages, 14 tools)",
            "[__default__] model requested 1 tool call(s)",
            "  -> write_file {\"content\":\"# Summary\",\"path\":\"summary.md\"}",
            "  ?? permission [perm-0123456789ab] waiting for an answer: Allow tool 'write_file' (risk: writes_workspace)?",
        ]),
    );
    fake
}

// ---------- acknowledgement (seed 001 §6.3 layer 1, "TUI acknowledgment signal") ----------

#[test]
fn a_shown_request_is_acknowledged_exactly_once_however_many_ticks_pass() {
    let fake = busy();
    let mut app = App::new("general");
    let mut t = terminal();
    for _ in 0..50 {
        app.tick(&mut t, &fake).unwrap();
    }
    assert_eq!(
        *fake.acks.borrow(),
        [("r1".to_string(), "perm-0123456789ab".to_string())]
    );
    // A second refresh for the same request id does not acknowledge again; a new id does.
    app.tick(&mut t, &fake).unwrap();
    assert_eq!(fake.acks.borrow().len(), 1);
    fake.pending
        .borrow_mut()
        .insert("r1".into(), permission("perm-ffffffffffff"));
    for _ in 0..5 {
        app.tick(&mut t, &fake).unwrap();
    }
    assert_eq!(fake.acks.borrow().len(), 2);
    assert_eq!(fake.acks.borrow()[1].1, "perm-ffffffffffff");
}

#[test]
fn a_request_is_acknowledged_only_when_its_run_is_on_screen() {
    let fake = busy();
    fake.pending.borrow_mut().clear();
    fake.pending
        .borrow_mut()
        .insert("r2".into(), question("clarify-0123456789ab"));
    let mut app = App::new("general");
    let mut t = terminal();
    app.tick(&mut t, &fake).unwrap();
    assert!(
        fake.acks.borrow().is_empty(),
        "acknowledged without being shown"
    );
    app.on_key(key('j'), &fake);
    app.tick(&mut t, &fake).unwrap();
    app.tick(&mut t, &fake).unwrap();
    assert_eq!(
        *fake.acks.borrow(),
        [("r2".to_string(), "clarify-0123456789ab".to_string())]
    );
}

// ---------- keys ----------

#[test]
fn y_n_and_a_answer_the_shown_permission_request() {
    for (k, decision) in [
        ('y', Decision::Approve),
        ('n', Decision::Deny),
        ('a', Decision::ApproveSession),
    ] {
        let fake = busy();
        let mut app = App::new("general");
        app.tick(&mut terminal(), &fake).unwrap();
        app.on_key(key(k), &fake);
        let responses = fake.responses.borrow();
        assert_eq!(responses.len(), 1, "{k}");
        assert_eq!(
            (
                responses[0].0.as_str(),
                responses[0].1.as_str(),
                responses[0].2
            ),
            ("r1", "perm-0123456789ab", decision)
        );
    }
}

#[test]
fn a_question_is_answered_with_a_typed_reply_and_never_with_approve() {
    let fake = busy();
    fake.pending
        .borrow_mut()
        .insert("r1".into(), question("clarify-0123456789ab"));
    let mut app = App::new("general");
    app.on_key(key('y'), &fake);
    app.on_key(key('a'), &fake);
    assert!(fake.responses.borrow().is_empty());
    app.on_key(key('r'), &fake);
    assert_eq!(*app.input(), Input::Reply(String::new()));
    for c in "notes.mdx".chars() {
        app.on_key(key(c), &fake);
    }
    app.on_key(code(KeyCode::Backspace), &fake);
    app.on_key(code(KeyCode::Enter), &fake);
    assert_eq!(
        *fake.responses.borrow(),
        [(
            "r1".to_string(),
            "clarify-0123456789ab".to_string(),
            Decision::Reply,
            "notes.md".to_string()
        )]
    );
    assert_eq!(*app.input(), Input::Keys);
}

#[test]
fn t_starts_the_agent_with_the_typed_task_and_s_stops_the_selected_run() {
    let fake = Fake::default();
    let mut app = App::new("general");
    app.on_key(key('t'), &fake);
    for c in "tidy up".chars() {
        app.on_key(key(c), &fake);
    }
    app.on_key(code(KeyCode::Enter), &fake);
    let started = |i: usize| {
        let r = &fake.starts.borrow()[i];
        (r.name.clone(), r.task.clone(), r.topic.clone())
    };
    assert_eq!(fake.starts.borrow().len(), 1);
    assert_eq!(started(0), ("general".into(), Some("tidy up".into()), None));
    app.on_key(key('s'), &fake);
    assert_eq!(*fake.stops.borrow(), ["r1"]);
    // Esc leaves typing without starting anything; q quits.
    app.on_key(key('t'), &fake);
    app.on_key(key('x'), &fake);
    app.on_key(code(KeyCode::Esc), &fake);
    assert_eq!(fake.starts.borrow().len(), 1);
    assert!(!app.quit);
    app.on_key(key('q'), &fake);
    assert!(app.quit);
}

#[test]
fn c_sends_a_follow_up_that_continues_the_selected_finished_run() {
    let fake = Fake::default();
    fake.runs
        .borrow_mut()
        .push(run("m1", "capital of France?", RunStatus::Running));
    let mut app = App::new("general");
    // Not finished: nothing to continue yet.
    app.on_key(key('c'), &fake);
    assert_eq!(*app.input(), Input::Keys);
    {
        let mut runs = fake.runs.borrow_mut();
        runs[0].status = RunStatus::Completed;
        runs[0].record_id = Some("rec-1".into());
        runs[0].end = Some(RunEnd {
            status: RunStatus::Completed,
            outcome: "done".into(),
            final_text: "Paris.".into(),
        });
    }
    app.on_key(key('c'), &fake);
    for c in "and its population?".chars() {
        app.on_key(key(c), &fake);
    }
    let mut t = terminal();
    app.tick(&mut t, &fake).unwrap();
    assert!(
        t.backend()
            .to_string()
            .contains("continue rec-1> and its population?_"),
        "{}",
        t.backend()
    );
    app.on_key(code(KeyCode::Enter), &fake);
    let starts = fake.starts.borrow();
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0].continue_run.as_deref(), Some("rec-1"));
    assert_eq!(starts[0].task.as_deref(), Some("and its population?"));
    assert_eq!(starts[0].name, "general");
    drop(starts);
    assert_eq!(*app.input(), Input::Keys);
    // The new turn is selected, and the conversation pane shows both turns above its log.
    let mut t = terminal();
    app.tick(&mut t, &fake).unwrap();
    let screen = t.backend().to_string();
    assert!(screen.contains("Conversation (2 turns)"), "{screen}");
    assert!(screen.contains("you: capital of France?"), "{screen}");
    assert!(screen.contains("general: Paris."), "{screen}");
    assert!(screen.contains("you: and its population?"), "{screen}");
}

// ---------- screens ----------

fn screen(fake: &Fake, app: &mut App) -> String {
    let mut t = terminal();
    app.tick(&mut t, fake).unwrap();
    t.backend().to_string()
}

#[test]
fn screen_with_a_permission_request() {
    let fake = busy();
    insta::assert_snapshot!(screen(&fake, &mut App::new("general")));
}

#[test]
fn screen_while_typing_a_reply_to_a_question() {
    let fake = busy();
    fake.pending
        .borrow_mut()
        .insert("r1".into(), question("clarify-0123456789ab"));
    let mut app = App::new("general");
    app.on_key(key('r'), &fake);
    for c in "notes.md".chars() {
        app.on_key(key(c), &fake);
    }
    insta::assert_snapshot!(screen(&fake, &mut app));
}

#[test]
fn screen_of_a_finished_run_with_dropped_log_lines() {
    let fake = busy();
    fake.pending.borrow_mut().clear();
    {
        let mut runs = fake.runs.borrow_mut();
        runs[0].status = RunStatus::Completed;
        runs[0].end = Some(RunEnd {
            status: RunStatus::Completed,
            outcome: "done".into(),
            final_text: "Wrote summary.md.".into(),
        });
    }
    fake.logs.borrow_mut().get_mut("r1").unwrap().dropped = 12;
    insta::assert_snapshot!(screen(&fake, &mut App::new("general")));
}

#[test]
fn screen_of_a_conductor_with_its_workers_nested_under_it() {
    let fake = busy();
    fake.pending.borrow_mut().clear();
    {
        let mut runs = fake.runs.borrow_mut();
        runs[0].agent = "conductor".into();
        runs[0].workers = vec![
            lsm_app::runtime::WorkerLine {
                item_id: "a1".into(),
                capability: "researcher".into(),
                status: "done".into(),
            },
            lsm_app::runtime::WorkerLine {
                item_id: "a2".into(),
                capability: "researcher".into(),
                status: "running".into(),
            },
            lsm_app::runtime::WorkerLine {
                item_id: "a3".into(),
                capability: "terminal".into(),
                status: "blocked".into(),
            },
        ];
    }
    let text = screen(&fake, &mut App::new("conductor"));
    for expected in [
        "├ a1 researcher done",
        "├ a2 researcher running",
        "└ a3 terminal blocked",
    ] {
        assert!(text.contains(expected), "{expected}:\n{text}");
    }
    insta::assert_snapshot!(text);
}

#[test]
fn screen_with_no_runs_while_typing_a_task() {
    let fake = Fake::default();
    let mut app = App::new("general");
    app.on_key(key('t'), &fake);
    for c in "Summarize notes.md".chars() {
        app.on_key(key(c), &fake);
    }
    insta::assert_snapshot!(screen(&fake, &mut app));
}

/// A run whose log is 40 long lines, numbered.
fn long_log() -> Fake {
    let fake = busy();
    fake.pending.borrow_mut().clear();
    let lines: Vec<String> = (1..=40)
        .map(|i| format!("line {i:02}: {}", "a long log line that wraps ".repeat(3)))
        .collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    fake.logs.borrow_mut().insert("r1".into(), log(&refs));
    fake
}

#[test]
fn the_log_wraps_follows_its_end_and_scrolls_back() {
    let fake = long_log();
    let mut app = App::new("general");
    let end = screen(&fake, &mut app);
    // Wrapped, not cut: the end of the last line is on screen, and the first is not.
    assert!(end.contains("line 40"), "{end}");
    assert!(!end.contains("line 01"), "{end}");
    insta::assert_snapshot!("log_at_its_end", end);
    app.on_key(code(KeyCode::PageUp), &fake);
    app.on_key(code(KeyCode::PageUp), &fake);
    let back = screen(&fake, &mut app);
    assert!(
        !back.contains("line 40") && back.contains("back 20 lines"),
        "{back}"
    );
    insta::assert_snapshot!("log_scrolled_back", back);
    app.on_key(code(KeyCode::End), &fake);
    assert!(screen(&fake, &mut app).contains("line 40"));
    // Scrolling back further than the log stops at its top.
    for _ in 0..50 {
        app.on_key(code(KeyCode::PageUp), &fake);
    }
    assert!(screen(&fake, &mut app).contains("line 01"));
}

#[test]
fn any_agent_can_be_started_with_its_task_or_topic() {
    let fake = Fake::default();
    let mut app = App::new("general");
    // `g` steps through the built-in agents; research takes a topic.
    while !screen(&fake, &mut app).contains("new: research") {
        app.on_key(key('g'), &fake);
    }
    app.on_key(key('t'), &fake);
    for c in "soil carbon".chars() {
        app.on_key(key(c), &fake);
    }
    let typing = screen(&fake, &mut app);
    assert!(
        typing.contains("new research run, topic> soil carbon"),
        "{typing}"
    );
    app.on_key(code(KeyCode::Enter), &fake);
    {
        let starts = fake.starts.borrow();
        assert_eq!(starts.len(), 1);
        assert_eq!(starts[0].name, "research");
        assert_eq!(
            (starts[0].task.as_deref(), starts[0].topic.as_deref()),
            (None, Some("soil carbon")),
            "a topic agent is given a topic"
        );
    }
    // Every agent is reachable, and the list wraps around.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..lsm_agents::definition::builtin().len() {
        app.on_key(key('g'), &fake);
        let s = screen(&fake, &mut app);
        let name = s
            .split("new: ")
            .nth(1)
            .unwrap()
            .split(')')
            .next()
            .unwrap()
            .to_string();
        seen.insert(name);
    }
    assert_eq!(
        seen.len(),
        lsm_agents::definition::builtin().len(),
        "{seen:?}"
    );
}

/// What a model, a tool or a file put in a run reaches the TUI as text to show: a
/// bidirectional override (which a terminal that shapes right-to-left text obeys, turning
/// `gpj.exe` around) never reaches the terminal. ratatui leaves out zero-width characters
/// (the overrides among them) and control characters from the cells it draws, and the task
/// in a title is clipped by `clip`, which shows `�`: this guards that against a ratatui
/// that stops doing so.
#[test]
fn a_bidirectional_override_in_a_request_a_log_or_a_run_is_shown_not_obeyed() {
    let hostile = "evil\u{202e}gpj.exe\u{2066}";
    let fake = Fake::default();
    fake.runs.borrow_mut().push(run(
        "r1",
        &format!("Summarize {hostile}"),
        RunStatus::WaitingUser,
    ));
    let mut request = InteractionRequest::permission(&PermissionRequest {
        tool_name: "write_file".into(),
        risk_level: RiskLevel::WritesWorkspace,
        reason: format!("the model wants to write {hostile}"),
        args_summary: String::new(),
        preview: Some(lsm_sandbox::preview::file_diff(
            hostile,
            "old\n",
            &format!("{hostile}\n"),
        )),
    });
    request.request_id = "perm-1".into();
    fake.pending.borrow_mut().insert(
        "r1".into(),
        PendingView {
            request,
            acknowledged_at: None,
        },
    );
    fake.logs
        .borrow_mut()
        .insert("r1".into(), log(&[&format!("  <- read_file: {hostile}")]));
    let shown = screen(&fake, &mut App::new("general"));
    assert!(
        !shown.contains(['\u{202e}', '\u{2066}']),
        "a bidirectional override reached the terminal: {shown:?}"
    );
    assert!(
        shown.contains("reason: the model wants to write evilgpj.exe"),
        "{shown}"
    );
    assert!(
        shown.contains("+evilgpj.exe") && shown.contains("evil\u{fffd}gpj.exe"),
        "{shown}"
    );
}

#[test]
fn g_cycles_through_the_catalogs_agents_definitions_included() {
    let fake = Fake::default();
    let mut agents = super::AgentChoice::of(&lsm_agents::Catalog::builtin());
    agents.push(super::AgentChoice {
        name: "reviewer".into(),
        input: "topic",
    });
    let mut app = App::new("terminal").with_agents(agents);
    app.on_key(key('g'), &fake);
    let s = screen(&fake, &mut app);
    assert!(s.contains("new: reviewer)"), "{s}");
    app.on_key(key('t'), &fake);
    let s = screen(&fake, &mut app);
    assert!(s.contains("new reviewer run, topic>"), "{s}");
}
