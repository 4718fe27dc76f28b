//! The context providers through `lsm agent run` against a loopback Chat Completions server:
//! the project's `AGENTS.md` in the system context of every request on the wire, and a
//! nested `sub/AGENTS.md` given just in time, after the first result of a tool that touched
//! `sub/`, and recorded once.

use std::sync::atomic::{AtomicUsize, Ordering};

use lsm_e2e::{lsm, run};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::loopback::Api;
use super::{stderr, stdout_json, transcript_of};

/// Reads `sub/notes.md`, then `sub/more.md`, then answers.
struct ReadTwiceThenAnswer(AtomicUsize);

impl Respond for ReadTwiceThenAnswer {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        let body = match n {
            1 => Api::Chat.answer(n, Some(("read_file", json!({"path": "sub/notes.md"}))), ""),
            2 => Api::Chat.answer(n, Some(("read_file", json!({"path": "sub/more.md"}))), ""),
            _ => Api::Chat.answer(n, None, "Read both."),
        };
        ResponseTemplate::new(200).set_body_json(body)
    }
}

const ROOT_RULE: &str = "Project rule: answer in one sentence.";
const SUB_RULE: &str = "Sub rule: quote the first line of every note.";

/// The messages of a request body whose role is `role`, their contents joined.
fn contents(body: &Value, role: &str) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == role)
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn agents_md_reaches_the_system_context_and_a_nested_one_arrives_just_in_time_once() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(Api::Chat.path()))
        .respond_with(ReadTwiceThenAnswer(AtomicUsize::new(0)))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), format!("{ROOT_RULE}\n")).unwrap();
    std::fs::write(dir.path().join("sub/AGENTS.md"), format!("{SUB_RULE}\n")).unwrap();
    std::fs::write(dir.path().join("sub/notes.md"), "first note\n").unwrap();
    std::fs::write(dir.path().join("sub/more.md"), "second note\n").unwrap();
    let mut cmd = lsm(dir.path());
    cmd.env_remove("OPENAI_API_KEY")
        .env(Api::Chat.key_env(), "sk-test-key")
        .args([
            "agent",
            "run",
            "general",
            "--task",
            "Read the notes in sub.",
        ])
        .args(["--provider", Api::Chat.provider(), "--model", "test-model"])
        .args(["--base-url", &format!("{}/v1", server.uri())])
        .args(["--agents-folder", "Agents", "--json"]);
    let out = tokio::task::spawn_blocking(move || run(&mut cmd))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["tool_sequence"], json!(["read_file", "read_file"]));

    let bodies: Vec<Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.body_json().unwrap())
        .collect();
    assert_eq!(bodies.len(), 3);
    // (a) The project's AGENTS.md and the environment block are system context on the wire
    // of every call.
    for body in &bodies {
        let system = contents(body, "system").concat();
        assert!(system.contains(ROOT_RULE), "{system}");
        assert!(system.contains("- date (UTC): "), "{system}");
        assert!(system.contains("read_file"), "{system}");
    }
    // (b) The nested file is not there before a tool touched sub/, follows the first result
    // that did, and is not given again after the second.
    assert!(!bodies[0].to_string().contains(SUB_RULE));
    let second = contents(&bodies[1], "tool");
    assert_eq!(second.len(), 1);
    assert!(
        second[0].starts_with("first note") && second[0].contains(SUB_RULE),
        "{second:?}"
    );
    let third = contents(&bodies[2], "tool");
    assert_eq!(third.len(), 2);
    assert!(
        third[0].contains(SUB_RULE),
        "kept in the history: {third:?}"
    );
    assert!(!third[1].contains(SUB_RULE), "given once: {third:?}");
    assert!(
        contents(&bodies[2], "system")
            .concat()
            .matches(SUB_RULE)
            .next()
            .is_none()
    );

    let lines = transcript_of(dir.path(), &summary);
    let guidance: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "guidance_added")
        .collect();
    assert_eq!(guidance.len(), 1, "{guidance:?}");
    assert!(
        guidance[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("sub/AGENTS.md"),
        "{:?}",
        guidance[0]
    );
    assert_eq!(guidance[0]["text"], format!("{SUB_RULE}\n"));
    assert_eq!(guidance[0]["tool"], "read_file");
    let instructions: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "project_instructions")
        .collect();
    assert_eq!(instructions.len(), 1);
    assert_eq!(
        instructions[0]["files"][0]["text"],
        format!("{ROOT_RULE}\n")
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["event"] == "environment_context")
            .count(),
        1
    );
}

#[test]
fn the_providers_can_be_switched_off() {
    let (dir, script) = super::workspace_with_script(&[super::text("ok")]);
    std::fs::write(dir.path().join("AGENTS.md"), format!("{ROOT_RULE}\n")).unwrap();
    let mut cmd = lsm(dir.path());
    cmd.env("LSM_AGENTS_CONTEXT_PROJECT_INSTRUCTIONS", "false")
        .env("LSM_AGENTS_CONTEXT_ENVIRONMENT", "false")
        .args(["agent", "run", "general", "--task", "t"])
        .arg("--provider")
        .arg(format!("scripted:{}", script.display()))
        .args(["--agents-folder", "Agents", "--json"]);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = transcript_of(dir.path(), &stdout_json(&out));
    assert!(
        lines
            .iter()
            .all(|l| l["event"] != "project_instructions" && l["event"] != "environment_context"),
        "{lines:?}"
    );
    // On by default.
    let (dir, script) = super::workspace_with_script(&[super::text("ok")]);
    std::fs::write(dir.path().join("AGENTS.md"), format!("{ROOT_RULE}\n")).unwrap();
    let out = super::agent_run(dir.path(), &script, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = transcript_of(dir.path(), &stdout_json(&out));
    assert!(lines.iter().any(|l| l["event"] == "project_instructions"));
}
