//! `--max-wall-seconds` from the command line: a run whose model is slower than the limit
//! pauses with exit code 9 (journaled, not finished), and `lsm runs resume` with a higher
//! limit finishes it.

use serde_json::json;

use super::resume::Ws;
use super::{stdout_json, text};

#[test]
fn a_run_out_of_wall_time_exits_9_and_resumes_to_the_end() {
    // The model's first answer takes 5 s; the run may take 1 s.
    let mut slow = text("late answer");
    slow["delay_ms"] = json!(5_000);
    let ws = Ws::new(&[slow, text("done")]);
    let mut c = ws.cmd();
    c.args(["agent", "run", "general", "--task", "answer"])
        .arg("--provider")
        .arg(format!("scripted:{}", ws.script.display()))
        .args(["--agents-folder", "Agents", "--yes", "--json"])
        .args(["--max-wall-seconds", "1"]);
    let out = lsm_e2e::run(&mut c);
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    let summary = stdout_json(&out);
    assert_eq!(summary["run_outcome"], "wall_time_exceeded", "{summary}");
    let run_id = summary["run_id"].as_str().unwrap().to_string();
    let journal = std::fs::read_to_string(ws.run_dir("general").join("transcript.jsonl")).unwrap();
    assert!(
        journal.contains("\"event\":\"wall_time_exceeded\""),
        "{journal}"
    );
    assert!(journal.contains("\"where\":\"llm_call\""), "{journal}");
    assert!(!journal.contains("\"event\":\"run_finished\""), "{journal}");

    // A zero limit is refused before anything runs.
    let refused = ws.resume(&run_id, &["--max-wall-seconds", "0"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");

    // Resumed with room, the abandoned model call is made again and the run finishes.
    let out = ws.resume(&run_id, &["--max-wall-seconds", "600", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let summary = stdout_json(&out);
    assert_eq!(summary["status"], "completed", "{summary}");
    let journal = std::fs::read_to_string(ws.run_dir("general").join("transcript.jsonl")).unwrap();
    assert_eq!(journal.matches("\"event\":\"run_finished\"").count(), 1);
}
