//! What a person sees on stderr: retries announced at the default level, the internal
//! context label never shown, an error printed once.

use lsm_e2e::{lsm, run};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::stderr;

/// A server that answers every request with `status`.
async fn failing(status: u16) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(status)
                .set_body_json(serde_json::json!({"error": {"message": "slow down"}})),
        )
        .mount(&server)
        .await;
    server
}

fn openai(cmd: &mut std::process::Command, server: &MockServer) {
    cmd.env("OPENAI_API_KEY", "sk-test-progress-key")
        .args([
            "-c",
            "llm.max_retries=2",
            "-c",
            "llm.retry_base_delay_ms=20",
        ])
        .args(["--provider", "openai", "--model", "m"])
        .args(["--base-url", &format!("{}/v1", server.uri())]);
}

#[tokio::test(flavor = "multi_thread")]
async fn retries_are_announced_and_the_final_error_is_printed_once() {
    let server = failing(429).await;
    let dir = tempfile::tempdir().unwrap();
    let mut ping = lsm(dir.path());
    ping.args(["llm", "ping"]);
    openai(&mut ping, &server);
    let out = tokio::task::spawn_blocking(move || run(&mut ping))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("429 from openai, retry 1/2 in "), "{err}");
    assert!(err.contains("429 from openai, retry 2/2 in "), "{err}");

    let server = failing(500).await;
    std::fs::write(dir.path().join("notes.md"), "hello\n").unwrap();
    let mut agent = lsm(dir.path());
    agent.args(["agent", "run", "general", "--task", "t"]);
    openai(&mut agent, &server);
    let out = tokio::task::spawn_blocking(move || run(&mut agent))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("500 from openai, retry 1/2 in "), "{err}");
    assert!(!err.contains("__default__"), "{err}");
    assert_eq!(
        err.matches("after 3 attempt(s)").count(),
        1,
        "the error once: {err}"
    );
}

/// On a terminal (a pseudo-terminal from `script`, as a person's), nothing a model writes or
/// a file holds drives it: the answer's OSC 52 clipboard write and screen clear, and the
/// window title in the file the agent reads, arrive as `�`. Into a pipe, the answer is
/// written as the model wrote it.
#[test]
fn escape_sequences_from_a_model_or_a_file_never_reach_a_terminal() {
    use lsm_test_support::script::{call, text};
    let answer = "done \u{1b}]52;c;ZXZpbA==\u{7} \u{1b}[2J";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "hi \u{1b}]0;owned\u{7}\n").unwrap();
    let lines = [
        call("read_file", serde_json::json!({"path": "notes.md"})),
        text(answer),
    ];
    let script = lsm_test_support::script::write(dir.path(), "script.jsonl", &lines).unwrap();
    let args: Vec<String> = [
        "agent",
        "run",
        "general",
        "--task",
        "t",
        "--agents-folder",
        "Agents",
        "--provider",
        &format!("scripted:{}", script.display()),
    ]
    .map(String::from)
    .into();
    let out = run(&mut lsm_e2e::lsm_on_a_terminal(dir.path(), &args));
    let seen = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{seen}");
    assert!(seen.contains("done �]52;c;ZXZpbA==� �[2J"), "{seen:?}");
    for sequence in ["\u{1b}]52", "\u{1b}[2J", "\u{1b}]0;owned"] {
        assert!(
            !seen.contains(sequence),
            "{sequence:?} reached the terminal: {seen:?}"
        );
    }

    let mut piped = lsm(dir.path());
    piped.args(&args);
    let out = run(&mut piped);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(answer));
}

/// `lsm query` and `lsm runs list` show what a document or a task holds without obeying it:
/// a heading's and a task's escape sequences are shown as `�`, on one line, wherever the
/// output goes; the query's answer is cleaned on a terminal and written as the model wrote it
/// into a pipe.
#[test]
fn a_heading_a_task_or_an_answer_cannot_drive_the_terminal_through_query_or_runs_list() {
    use lsm_test_support::script::text;
    let dir = super::lexical_kb(&[(
        "wing.md",
        "# Wing \u{1b}]0;owned\u{7} flutter\n\nFlutter is an aeroelastic vibration of a wing.\n",
    )]);
    let answer = "Flutter is a vibration [S1]. \u{1b}[2J";
    lsm_test_support::script::write(dir.path(), "answer.jsonl", &[text(answer)]).unwrap();
    let ingested = run(lsm(dir.path()).args(["ingest", "notes"]));
    assert_eq!(ingested.status.code(), Some(0), "{}", stderr(&ingested));
    let query: Vec<String> = [
        "query",
        "What is flutter?",
        "--provider",
        "scripted:answer.jsonl",
    ]
    .map(String::from)
    .into();

    let piped = run(lsm(dir.path()).args(&query));
    assert_eq!(piped.status.code(), Some(0), "{}", stderr(&piped));
    let shown = String::from_utf8_lossy(&piped.stdout);
    let (first, sources) = shown.split_once('\n').unwrap();
    assert_eq!(first, answer, "into a pipe, the answer as written");
    assert!(
        sources.contains("Wing �]0;owned� flutter") && !sources.contains(['\u{1b}', '\u{7}']),
        "{sources:?}"
    );

    // `script` may leave its own terminal codes; none of the answer's or the heading's.
    let on_terminal = run(&mut lsm_e2e::lsm_on_a_terminal(dir.path(), &query));
    let seen = String::from_utf8_lossy(&on_terminal.stdout);
    assert_eq!(on_terminal.status.code(), Some(0), "{seen}");
    assert!(seen.contains("vibration [S1]. �[2J"), "{seen:?}");
    for sequence in ["\u{1b}[2J", "\u{1b}]0;owned"] {
        assert!(
            !seen.contains(sequence),
            "{sequence:?} reached the terminal: {seen:?}"
        );
    }

    lsm_test_support::script::write(dir.path(), "done.jsonl", &[text("done")]).unwrap();
    let task = "tidy \u{1b}]0;owned\u{7} notes";
    let ran = run(lsm(dir.path()).args([
        "agent",
        "run",
        "general",
        "--task",
        task,
        "--agents-folder",
        "Agents",
        "--provider",
        "scripted:done.jsonl",
    ]));
    assert_eq!(ran.status.code(), Some(0), "{}", stderr(&ran));
    let listed = run(lsm(dir.path()).args(["runs", "list", "--agents-folder", "Agents"]));
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let table = String::from_utf8_lossy(&listed.stdout);
    assert!(
        table.contains("tidy �]0;owned� notes") && !table.contains(['\u{1b}', '\u{7}']),
        "{table:?}"
    );
}

/// Other lines made of outside text: a file's name in `lsm ingest`'s failures and `lsm kb
/// rm`'s removals, the first line of each answer in `lsm agent run-many`'s table, and `lsm
/// llm ping`'s reply on a terminal.
#[test]
fn file_names_and_replies_in_other_commands_cannot_drive_the_terminal() {
    use lsm_test_support::script::text;
    let dir = super::lexical_kb(&[
        (
            "a \u{1b}]0;owned\u{7}.md",
            "# A\n\nFlutter is a vibration.\n",
        ),
        // Not a PDF: it fails, and its failure names it.
        ("b \u{1b}]0;owned\u{7}.pdf", "not a pdf"),
    ]);
    let clean = |out: &std::process::Output| {
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!all.contains(['\u{1b}', '\u{7}']), "{all:?}");
        all
    };
    let ingested = run(lsm(dir.path()).args(["ingest", "notes"]));
    let shown = clean(&ingested);
    assert!(shown.contains("b �]0;owned�.pdf"), "{shown}");

    let removed = run(lsm(dir.path()).args(["kb", "rm", "notes"]));
    assert_eq!(removed.status.code(), Some(0), "{}", stderr(&removed));
    let shown = clean(&removed);
    assert!(
        shown.contains("removed ") && shown.contains("a �]0;owned�.md"),
        "{shown}"
    );

    let reply = "pong \u{1b}]0;owned\u{7}";
    lsm_test_support::script::write(dir.path(), "reply.jsonl", &[text(reply)]).unwrap();
    let ping: Vec<String> = ["llm", "ping", "--provider", "scripted:reply.jsonl"]
        .map(String::from)
        .into();
    let on_terminal = run(&mut lsm_e2e::lsm_on_a_terminal(dir.path(), &ping));
    let seen = String::from_utf8_lossy(&on_terminal.stdout);
    assert_eq!(on_terminal.status.code(), Some(0), "{seen}");
    assert!(
        seen.contains("reply: pong �]0;owned�") && !seen.contains("\u{1b}]0;owned"),
        "{seen:?}"
    );

    lsm_test_support::script::write(dir.path(), "answer.jsonl", &[text(reply)]).unwrap();
    let many = run(lsm(dir.path()).args([
        "agent",
        "run-many",
        "general",
        "--count",
        "1",
        "--task",
        "t",
        "--agents-folder",
        "Agents",
        "--provider",
        "scripted:answer.jsonl",
    ]));
    assert_eq!(many.status.code(), Some(0), "{}", stderr(&many));
    let shown = clean(&many);
    assert!(shown.contains("pong �]0;owned�"), "{shown}");
}

#[test]
fn a_hostile_project_folder_cannot_drive_the_terminal_through_config_show_runs_list_or_a_summary() {
    let tmp = tempfile::tempdir().unwrap();
    // A project checked out under a folder whose name clears the screen.
    let project = tmp.path().join("p\u{1b}[2Jq");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("lsm.toml"), "[llm]\nmodel = \"m\"\n").unwrap();
    let show: Vec<String> = ["config", "show"].map(String::from).into();
    let on_terminal = run(&mut lsm_e2e::lsm_on_a_terminal(&project, &show));
    let seen = String::from_utf8_lossy(&on_terminal.stdout);
    assert_eq!(on_terminal.status.code(), Some(0), "{seen}");
    assert!(
        seen.contains("p\u{fffd}[2Jq/lsm.toml:2") && !seen.contains('\u{1b}'),
        "{seen:?}"
    );
    // Into a pipe the path is written as it is.
    let piped = run(lsm(&project).args(["config", "show"]));
    let text = String::from_utf8_lossy(&piped.stdout);
    assert!(text.contains("p\u{1b}[2Jq/lsm.toml:2"), "{text:?}");

    // So does an empty list of its runs.
    let listed = run(lsm(&project).args(["runs", "list"]));
    let shown = String::from_utf8_lossy(&listed.stdout);
    assert!(
        shown.contains("no runs under ")
            && shown.contains("p\u{fffd}[2Jq/")
            && !shown.contains('\u{1b}'),
        "{shown:?}"
    );

    // A run's human summary names its records under that folder.
    lsm_test_support::script::write(
        &project,
        "answer.jsonl",
        &[lsm_test_support::script::text("done")],
    )
    .unwrap();
    let ran = run(&mut lsm_e2e::general_run(
        &project,
        "t",
        "scripted:answer.jsonl",
    ));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    assert_eq!(ran.status.code(), Some(0), "{all}");
    assert!(
        all.contains("p\u{fffd}[2Jq/") && all.contains("summary: ") && !all.contains('\u{1b}'),
        "{all:?}"
    );

    // `lsm mcp list` names the configuration file to add a server to.
    let listed = run(lsm(&project).args(["mcp", "list"]));
    let shown = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert!(
        shown.contains("p\u{fffd}[2Jq/lsm.toml") && !shown.contains('\u{1b}'),
        "{shown:?}"
    );
    // `lsm ingest`'s last line names its index, under that folder.
    std::fs::write(
        project.join("lsm.toml"),
        "[kb]\nindex_dir = \".lsm/kb\"\n\n[kb.embedder]\nkind = \"none\"\n",
    )
    .unwrap();
    std::fs::create_dir(project.join("notes")).unwrap();
    std::fs::write(project.join("notes/a.md"), "# A\n\nA note.\n").unwrap();
    let ingested = run(lsm(&project).args(["ingest", "notes"]));
    let shown = String::from_utf8_lossy(&ingested.stdout);
    assert_eq!(ingested.status.code(), Some(0), "{}", stderr(&ingested));
    assert!(
        shown.contains("index ") && shown.contains("p\u{fffd}[2Jq/") && !shown.contains('\u{1b}'),
        "{shown:?}"
    );
    // And an error about a broken one names it too, in `lsm tools list` as everywhere.
    std::fs::write(project.join("lsm.toml"), "[llm\n").unwrap();
    let listed = run(lsm(&project).args(["tools", "list"]));
    let err = stderr(&listed);
    assert_eq!(listed.status.code(), Some(2), "{err}");
    assert!(
        err.contains("p\u{fffd}[2Jq/lsm.toml") && !err.contains('\u{1b}'),
        "{err:?}"
    );
}

/// `lsm llm ping` shows the model and the URL it was given (settings a project's `lsm.toml`
/// can make) without obeying them.
#[tokio::test(flavor = "multi_thread")]
async fn a_model_name_or_a_url_from_the_settings_cannot_drive_the_terminal_through_ping() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "id": "c1",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "pong"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1}
        })))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let mut ping = lsm(dir.path());
    ping.args(["llm", "ping", "--provider", "compatible"])
        .args(["--model", "m\u{1b}]0;owned\u{7}"])
        .args(["--base-url", &format!("{}/v1?\u{1b}[2J", server.uri())]);
    let out = tokio::task::spawn_blocking(move || run(&mut ping))
        .await
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        shown.contains("model: m\u{fffd}]0;owned\u{fffd}") && shown.contains("base_url: http"),
        "{shown}"
    );
    assert!(!shown.contains(['\u{1b}', '\u{7}']), "{shown:?}");
}

/// JSON on stdout escapes what JSON leaves as it is in a string but a terminal acts on (a
/// bidirectional override, a C1 control, DEL), so `--json` and `stream-json` read on a
/// terminal show a model's answer without obeying it, and a parser reads the same text.
#[test]
fn a_models_answer_in_json_output_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let answer = "abc\u{202e}gpj.exe \u{9b}2J \u{7f} \u{2066}x";
    lsm_test_support::script::write(
        dir.path(),
        "answer.jsonl",
        &[lsm_test_support::script::text(answer)],
    )
    .unwrap();
    let raw = |c: char| {
        c == '\u{7f}' || ('\u{80}'..='\u{9f}').contains(&c) || "\u{202e}\u{2066}".contains(c)
    };
    for format in ["json", "stream-json"] {
        let out = run(
            lsm_e2e::general_run(dir.path(), "t", "scripted:answer.jsonl")
                .args(["--output-format", format]),
        );
        let shown = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(!shown.chars().any(raw), "{format}: {shown:?}");
        let texts: Vec<serde_json::Value> = if format == "json" {
            vec![serde_json::from_str(&shown).unwrap()]
        } else {
            shown
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        assert!(
            texts.iter().any(|v| v.to_string().contains("gpj.exe")
                && serde_json::to_string(v).unwrap().contains('\u{202e}')),
            "{format}: the answer reads back whole: {shown}"
        );
    }
}
