//! Black-box tests of answering an agent's requests: headless runs fail closed without
//! waiting, `--yes` approves, and `lsm tui` (driven in tmux) acknowledges what it shows and
//! approves a write.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use lsm_e2e::{lsm, lsm_bin, run};
use lsm_test_support::script::{call, text};
use serde_json::{Value, json};

fn workspace(lines: &[Value]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.jsonl");
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&script, body).unwrap();
    (dir, script)
}

/// `lsm agent run general --json` with stdin not a terminal; returns (exit code, summary,
/// transcript events).
fn headless(
    dir: &Path,
    script: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (i32, Value, Vec<Value>) {
    let mut cmd = lsm_e2e::general_run(dir, "t", &format!("scripted:{}", script.display()));
    cmd.arg("--json")
        .args(extra)
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not the summary ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let transcript = dir
        .join(".lsm/agents/general/logs")
        .join(summary["run_id"].as_str().unwrap())
        .join("transcript.jsonl");
    let events = std::fs::read_to_string(transcript)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status.code().unwrap_or(-1), summary, events)
}

fn find<'a>(events: &'a [Value], name: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["event"] == name)
        .unwrap_or_else(|| panic!("no {name} event in {events:#?}"))
}

#[test]
fn headless_permission_requests_are_denied_at_once_and_recorded() {
    let (dir, script) = workspace(&[
        call("write_file", json!({"path": "out.md", "content": "x"})),
        text("could not write"),
    ]);
    // Had the run waited on anyone, the request would end in a timeout two minutes later,
    // and the checks below would fail.
    let (code, summary, events) = headless(
        dir.path(),
        &script,
        &[],
        &[("LSM_AGENTS_INTERACTION_TIMEOUT_SECONDS", "120")],
    );
    assert_eq!(code, 0);
    assert!(!dir.path().join("out.md").exists());
    let request = find(&events, "interaction_request");
    assert_eq!(request["tool_name"], "write_file");
    assert!(request["request_id"].as_str().unwrap().starts_with("perm-"));
    let answer = find(&events, "interaction_response");
    assert_eq!(answer["decision"], "deny");
    assert_eq!(answer["source"], "unattended");
    assert!(events.iter().all(|e| e["event"] != "interaction_timeout"));
    let reason = summary["approvals_denials"]["events"][0]["reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("no one can answer"), "{reason}");
}

#[test]
fn yes_is_recorded_as_an_automatic_approval() {
    let (dir, script) = workspace(&[
        call("write_file", json!({"path": "out.md", "content": "yes"})),
        text("ok"),
    ]);
    let (code, _summary, events) = headless(dir.path(), &script, &["--yes"], &[]);
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.md")).unwrap(),
        "yes"
    );
    let answer = find(&events, "interaction_response");
    assert_eq!(answer["decision"], "approve");
    assert_eq!(answer["source"], "auto_approve");
    assert!(answer["user_message"].as_str().unwrap().contains("--yes"));
}

#[test]
fn headless_questions_get_the_auto_continue_answer_or_a_denial() {
    let script = [
        call("ask_user", json!({"question": "Which file?"})),
        text("done"),
    ];
    let (dir, path) = workspace(&script);
    let (code, _, events) = headless(
        dir.path(),
        &path,
        &[],
        &[("LSM_AGENTS_INTERACTION_AUTO_CONTINUE", "true")],
    );
    assert_eq!(code, 0);
    assert_eq!(
        find(&events, "tool_result")["content"],
        "Continue with your best judgment."
    );
    assert_eq!(
        find(&events, "interaction_response")["source"],
        "auto_continue"
    );

    let (dir, path) = workspace(&script);
    let (code, _, events) = headless(dir.path(), &path, &[], &[]);
    assert_eq!(code, 0);
    let result = find(&events, "tool_result");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("did not answer"),
        "{result}"
    );
    assert_eq!(
        find(&events, "interaction_response")["source"],
        "unattended"
    );
}

// ---------- the TUI, in tmux ----------

/// A tmux server of our own, killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    fn start(cwd: &Path, command: &str) -> Tmux {
        let available = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            available,
            "tmux is required for this test: apt-get install -y tmux (.ci/run installs it)"
        );
        let socket = format!(
            "lsm-e2e-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let t = Tmux { socket };
        let status = t
            .cmd()
            .args([
                "new-session",
                "-d",
                "-s",
                "lsm",
                "-x",
                "160",
                "-y",
                "40",
                "-c",
            ])
            .arg(cwd)
            .arg(command)
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session failed");
        t
    }

    fn keys(&self, keys: &[&str]) {
        let status = self
            .cmd()
            .args(["send-keys", "-t", "lsm"])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn text(&self, literal: &str) {
        let status = self
            .cmd()
            .args(["send-keys", "-t", "lsm", "-l", literal])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "lsm"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Wait (up to a minute, a failure guard) until the screen shows `needle`.
    fn wait_for(&self, needle: &str) -> String {
        self.wait_until(needle, |screen| screen.contains(needle))
    }

    /// Wait (up to a minute) until `done(screen)`; `what` names it in the failure.
    fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed {what:?}; last screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn running(&self) -> bool {
        self.cmd()
            .args(["has-session", "-t", "lsm"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

#[test]
fn the_tui_approves_a_write_and_the_file_is_written() {
    let (dir, script) = workspace(&[
        call(
            "write_file",
            json!({"path": "out.md", "content": "from the tui"}),
        ),
        text("wrote out.md"),
    ]);
    // One second before an unseen request times out: the request must survive on screen
    // far longer than that because showing it acknowledges it.
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[agents.interaction]\ntimeout_seconds = 1\n",
    )
    .unwrap();
    let command = format!(
        "env -i HOME={home} PATH={path} TERM=xterm-256color {bin} tui --provider {provider}",
        home = quote(dir.path()),
        path = quote(Path::new(&std::env::var("PATH").unwrap_or_default())),
        bin = quote(lsm_bin()),
        provider = quote(Path::new(&format!("scripted:{}", script.display()))),
    );
    let tmux = Tmux::start(dir.path(), &command);
    tmux.wait_for("[t] new run");
    tmux.keys(&["t"]);
    tmux.text("write the file");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Allow tool 'write_file' (risk: writes_workspace)?");
    assert!(screen.contains("waiting_user"), "{screen}");
    assert!(
        screen.contains(r#"{"content":"from the tui","path":"out.md"}"#),
        "{screen}"
    );
    // Three times the unacknowledged timeout: still waiting, because it is on screen.
    std::thread::sleep(Duration::from_secs(3));
    let screen = tmux.screen();
    assert!(
        screen.contains("waiting_user") && !screen.contains("timed out"),
        "{screen}"
    );
    assert!(
        !dir.path().join("out.md").exists(),
        "written before the answer"
    );
    tmux.keys(&["y"]);
    tmux.wait_for("completed");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.md")).unwrap(),
        "from the tui"
    );
    tmux.keys(&["q"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while tmux.running() {
        assert!(Instant::now() < deadline, "the TUI did not quit on q");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The transcript tells the story: shown (acknowledged once), approved by a person.
    let logs = dir.path().join(".lsm/agents/general/logs");
    // The run's folder (the agent's own log file sits beside it).
    let run_dir = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    let events: Vec<Value> = std::fs::read_to_string(run_dir.join("transcript.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = events
        .iter()
        .filter_map(|e| e["event"].as_str())
        .filter(|n| n.starts_with("interaction_"))
        .collect();
    assert_eq!(
        names,
        [
            "interaction_request",
            "interaction_acknowledged",
            "interaction_response"
        ]
    );
    let answer = find(&events, "interaction_response");
    assert_eq!(answer["decision"], "approve");
    assert_eq!(answer["source"], "person");
}

#[test]
fn the_terminal_prompt_acknowledges_a_request_and_takes_the_answer() {
    let (dir, script) = workspace(&[
        call(
            "write_file",
            json!({"path": "out.md", "content": "typed yes"}),
        ),
        text("wrote out.md"),
    ]);
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[agents.interaction]\ntimeout_seconds = 1\n",
    )
    .unwrap();
    // The pane stays open after the run so its exit code can be read.
    let command = format!(
        "env -i HOME={home} PATH={path} TERM=xterm-256color {bin} agent run general \
         --task 'write it' --provider {provider}; echo EXIT=$?; sleep 120",
        home = quote(dir.path()),
        path = quote(Path::new(&std::env::var("PATH").unwrap_or_default())),
        bin = quote(lsm_bin()),
        provider = quote(Path::new(&format!("scripted:{}", script.display()))),
    );
    let tmux = Tmux::start(dir.path(), &command);
    let screen = tmux.wait_for("[a] approve for the rest of the run >");
    assert!(
        screen.contains("Allow tool 'write_file' (risk: writes_workspace)?"),
        "{screen}"
    );
    // Three times the unacknowledged timeout: shown, so still waiting.
    std::thread::sleep(Duration::from_secs(3));
    assert!(!tmux.screen().contains("timed out"), "{}", tmux.screen());
    tmux.text("maybe");
    tmux.keys(&["Enter"]);
    // Not an answer: asked again.
    let hint = "[a] approve for the rest of the run >";
    tmux.wait_until("the answer hint twice", |screen| {
        screen.matches(hint).count() == 2
    });
    tmux.keys(&["y", "Enter"]);
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.md")).unwrap(),
        "typed yes"
    );
}

#[test]
fn tui_without_a_provider_is_a_usage_error_before_touching_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(lsm(dir.path()).arg("tui"));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no LLM provider configured"), "{err}");
    let out = run(lsm(dir.path()).args(["tui", "--provider", "scripted:/no/such.jsonl"]));
    assert_eq!(out.status.code(), Some(2));
    let out = run(lsm(dir.path()).arg("--help"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("tui"));
}

#[path = "interaction/chat.rs"]
mod chat;
