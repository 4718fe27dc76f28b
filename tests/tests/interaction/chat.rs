//! `lsm chat`, driven in tmux: turns that continue one conversation, the slash commands, a
//! permission request answered at the chat's prompt, and a session killed mid-turn picked up
//! by `lsm chat --continue`.

use super::*;

/// The chat command in a pane that stays open after it ends (its exit code shown).
fn chat_command(dir: &Path, script: &Path, extra: &str) -> String {
    format!(
        "env -i HOME={home} PATH={path} TERM=xterm-256color {bin} chat --provider {provider} \
         --agents-folder Agents {extra}; echo EXIT=$?; sleep 120",
        home = quote(dir),
        path = quote(Path::new(&std::env::var("PATH").unwrap_or_default())),
        bin = quote(lsm_bin()),
        provider = quote(Path::new(&format!("scripted:{}", script.display()))),
    )
}

fn runs_of(dir: &Path) -> Vec<PathBuf> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(dir.join("Agents/general/logs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("transcript.jsonl").exists())
        .collect();
    runs.sort();
    runs
}

fn events(run_dir: &Path) -> Vec<Value> {
    lsm_test_support::script::read_jsonl(&run_dir.join("transcript.jsonl"))
}

#[test]
fn chat_turns_continue_one_conversation_and_the_slash_commands_answer() {
    let (dir, script) = workspace(&[text("Paris."), text("About two million.")]);
    let tmux = Tmux::start(dir.path(), &chat_command(dir.path(), &script, ""));
    tmux.wait_for("you>");
    tmux.text("Capital of France?");
    tmux.keys(&["Enter"]);
    tmux.wait_until("the first answer and a new prompt", |s| {
        s.contains("completed (done)") && s.trim_end().ends_with("you>")
    });
    tmux.text("/tokens");
    tmux.keys(&["Enter"]);
    tmux.wait_for("used of 200000 in this conversation");
    tmux.text("And its population?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("About two million.");
    tmux.text("/runs");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("2. run ");
    assert!(screen.contains("1. run "), "{screen}");
    tmux.text("/nope");
    tmux.keys(&["Enter"]);
    tmux.wait_for("unknown command /nope");
    tmux.text("/exit");
    tmux.keys(&["Enter"]);
    tmux.wait_for("EXIT=0");
    // The second turn is a run of its own that continues the first: it holds the first
    // turn's conversation, and its totals are its own.
    let mut runs = runs_of(dir.path());
    assert_eq!(runs.len(), 2, "{runs:?}");
    // Two runs of one second: the second turn is the one that continues.
    let continued_of = |run: &PathBuf| {
        events(run)
            .into_iter()
            .find(|e| e["event"] == "conversation_continued")
    };
    if continued_of(&runs[0]).is_some() {
        runs.swap(0, 1);
    }
    let continued = continued_of(&runs[1]).unwrap();
    let first_id = runs[0].file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(continued["from_run_id"], first_id.as_str());
    assert!(
        continued["contexts"]
            .to_string()
            .contains("Capital of France?")
    );
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(runs[1].join("run_summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["continues"], first_id.as_str());
    assert_eq!(summary["token_usage"]["iterations"], 1);
}

#[test]
fn a_chat_killed_mid_turn_is_picked_up_by_chat_continue() {
    let (dir, script) = workspace(&[
        call("write_file", json!({"path": "out.md", "content": "hello"})),
        text("Wrote out.md."),
        text("It says hello."),
    ]);
    let tmux = Tmux::start(dir.path(), &chat_command(dir.path(), &script, ""));
    tmux.wait_for("you>");
    tmux.text("write out.md");
    tmux.keys(&["Enter"]);
    tmux.wait_for("answer>");
    // Killed while the turn waits for a person.
    // The lsm process of this test only (its command line starts with the binary; the
    // pane's shell's does not).
    let pattern = format!(
        "^{} chat --provider scripted:{}",
        lsm_bin().display(),
        script.display()
    );
    let killed = Command::new("pkill")
        .args(["-9", "-f", &pattern])
        .status()
        .unwrap();
    assert!(killed.success());
    tmux.wait_for("EXIT=");
    drop(tmux);
    assert!(!dir.path().join("out.md").exists());

    let tmux = Tmux::start(dir.path(), &chat_command(dir.path(), &script, "--continue"));
    tmux.wait_for("did not finish: resuming it first");
    tmux.wait_for("answer>");
    tmux.keys(&["y", "Enter"]);
    tmux.wait_for("Wrote out.md.");
    tmux.wait_for("going on with the conversation of run");
    tmux.text("What does it say?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("It says hello.");
    tmux.text("/exit");
    tmux.keys(&["Enter"]);
    tmux.wait_for("EXIT=0");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.md")).unwrap(),
        "hello"
    );
    let runs = runs_of(dir.path());
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(
        runs.iter()
            .any(|r| events(r).iter().any(|e| e["event"] == "run_resumed")),
        "the killed turn was resumed"
    );
}

#[test]
fn ctrl_c_stops_the_turn_and_the_chat_goes_on() {
    let (dir, script) = workspace(&[
        {
            let mut slow = text("too slow to wait for");
            slow["delay_ms"] = json!(60_000);
            slow
        },
        text("Here now."),
    ]);
    let tmux = Tmux::start(dir.path(), &chat_command(dir.path(), &script, ""));
    tmux.wait_for("you>");
    tmux.text("take your time");
    tmux.keys(&["Enter"]);
    tmux.wait_for("waiting for the model");
    tmux.keys(&["C-c"]);
    tmux.wait_for("stopped (stop_requested)");
    // The session goes on: the next turn continues the stopped one.
    tmux.wait_until("the prompt again", |s| s.trim_end().ends_with("you>"));
    tmux.text("/runs");
    tmux.keys(&["Enter"]);
    tmux.wait_for("1. run ");
    tmux.text("/exit");
    tmux.keys(&["Enter"]);
    tmux.wait_for("EXIT=0");
}
