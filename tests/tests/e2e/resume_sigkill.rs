//! The crash matrix with real kills: runs of the general and research agents, whose model
//! answers and tools take a moment, are killed with SIGKILL after a random number of events of
//! their `--output-format stream-json` stream — inside a model call, between
//! `tool_call_started` and `tool_result`, between two journal lines — or while a permission
//! request waits for a person; each is finished by `lsm runs resume` with nothing repeated.
//!
//! The kill points come from a seeded generator; the seed is printed, and
//! `LSM_TEST_KILL_SEED=<seed>` repeats the same choices.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use lsm_e2e::lsm_on_a_terminal;
use serde_json::{Value, json};

use super::resume::{Ws, general_script, journal, research_script, tokens};
use super::{stderr, stdout_json};

/// Killed-and-resumed runs the matrix must reach.
const RUNS: usize = 100;
/// Parallel kills (the machine this runs on may have 2 cores; the runs mostly wait).
const WORKERS: usize = 4;
/// A file the general agent hashes (a read-only tool that takes a moment).
const BIG_FILE: &str = "big.bin";
/// The end of a permission request's prompt on the terminal.
const PROMPT: &str = "approve for the rest of the run > ";

/// splitmix64: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `general`, killed after k events.
    General,
    /// `research`, killed after k events.
    Research,
    /// `general` on a terminal without `--yes`: the first `approved` permission requests are
    /// approved by typing `y`, then the run is killed while the next one waits.
    Permission { approved: usize },
}

impl Kind {
    fn agent(self) -> &'static str {
        match self {
            Kind::Research => "research",
            Kind::General | Kind::Permission { .. } => "general",
        }
    }
}

/// Every model answer takes a moment, so kills land inside model calls.
fn slow(mut lines: Vec<Value>, delay_ms: u64) -> Vec<Value> {
    for l in &mut lines {
        l["delay_ms"] = json!(delay_ms);
    }
    lines
}

fn general_slow_script() -> Vec<Value> {
    let mut lines = general_script();
    // The batch gains a hash of a large file: a tool call that takes a moment.
    lines[1]["tool_calls"].as_array_mut().unwrap().insert(
        1,
        json!({"name": "hash_file", "arguments": {"path": BIG_FILE}}),
    );
    slow(lines, 15)
}

fn script_of(kind: Kind) -> Vec<Value> {
    match kind {
        Kind::Research => slow(research_script(), 15),
        Kind::General | Kind::Permission { .. } => general_slow_script(),
    }
}

fn workspace(kind: Kind) -> Ws {
    let ws = Ws::new(&script_of(kind));
    if kind != Kind::Research {
        std::fs::write(ws.path().join(BIG_FILE), vec![7u8; 1 << 20]).unwrap();
    }
    ws
}

fn agent_args(agent: &str) -> Vec<String> {
    let mut args: Vec<String> = vec!["agent".into(), "run".into(), agent.into()];
    if agent == "research" {
        args.extend(["--topic", "soil carbon", "--max-rounds", "1"].map(String::from));
    } else {
        args.extend(["--task", "append the lines"].map(String::from));
    }
    args.extend(
        [
            "--agents-folder",
            "Agents",
            "--output-format",
            "stream-json",
        ]
        .map(String::from),
    );
    args
}

/// What an uninterrupted run of `kind` leaves: its summary, journal and side-effect files.
struct Reference {
    summary: Value,
    lines: Vec<Value>,
    files: BTreeMap<&'static str, usize>,
}

const SIDE_EFFECT_FILES: [&str; 2] = ["log.txt", "out.txt"];

fn reference(kind: Kind) -> Reference {
    let ws = workspace(kind);
    let out = ws.start(kind.agent(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    Reference {
        summary: stdout_json(&out),
        lines: journal(&ws.run_dir(kind.agent())),
        files: SIDE_EFFECT_FILES
            .iter()
            .map(|f| (*f, ws.file_lines(f)))
            .collect(),
    }
}

fn count(lines: &[Value], event: &str) -> usize {
    lines.iter().filter(|l| l["event"] == event).count()
}

/// The journal as the killed process left it: a torn last line is skipped.
fn journal_at_kill(run_dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(run_dir.join("transcript.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn sigkill(pid: &str) {
    let status = Command::new("kill").args(["-KILL", pid]).status().unwrap();
    assert!(status.success(), "kill -KILL {pid}");
}

/// Start `kind`'s run and kill it after `k` events (for `Permission`, at its pending
/// request). Returns false when the run finished before the kill landed.
fn start_and_kill(ws: &Ws, kind: Kind, k: u64) -> bool {
    let agent = kind.agent();
    let provider = format!("scripted:{}", ws.script.display());
    match kind {
        Kind::General | Kind::Research => {
            let mut child = ws
                .cmd()
                .args(agent_args(agent))
                .args(["--yes", "--provider", &provider])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            // Synchronised on the run's own stream: k events are out, the run goes on.
            let _ = lines.by_ref().take(k as usize).count();
            child.kill().unwrap();
            match child.wait().unwrap().code() {
                None => true,
                // The run ended before the kill landed.
                Some(0) => false,
                Some(code) => panic!("{agent} exited with {code} before the kill"),
            }
        }
        Kind::Permission { approved } => {
            // `script` gives the run a terminal for stdin, so its permission requests wait for
            // a person, who answers `y` to the first `approved` of them.
            let mut cmdline: Vec<String> = agent_args(agent);
            cmdline.extend(["--provider".to_string(), provider]);
            let mut child = lsm_on_a_terminal(ws.path(), &cmdline)
                .env("LSM_TEST_SCRIPTED_SERVED_LOG", ws.path().join("served.log"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut person = child.stdin.take().unwrap();
            let mut terminal = child.stdout.take().unwrap();
            // Synchronised on the prompt, which is shown after the request is posted and after
            // earlier typing is discarded; it ends without a newline, so bytes are read.
            let mut shown = String::new();
            let mut answered = 0;
            let mut killed = false;
            let mut chunk = [0u8; 4096];
            while !killed {
                let n = terminal.read(&mut chunk).unwrap();
                if n == 0 {
                    break;
                }
                shown.push_str(&String::from_utf8_lossy(&chunk[..n]));
                while !killed && answered < shown.matches(PROMPT).count() {
                    if answered == approved {
                        // The request waits for an answer that will not come: kill the run.
                        let pid =
                            std::fs::read_to_string(ws.run_dir(agent).join("run.lock")).unwrap();
                        sigkill(pid.trim());
                        killed = true;
                    } else {
                        answered += 1;
                        person.write_all(b"y\n").unwrap();
                        person.flush().unwrap();
                    }
                }
            }
            drop(person);
            let status = child.wait().unwrap();
            // What the terminal showed last says why (an error, the run's end).
            let tail: String = {
                let chars: Vec<char> = shown.chars().collect();
                chars[chars.len().saturating_sub(3000)..].iter().collect()
            };
            assert!(
                killed,
                "{agent}: permission request {approved} was never posted ({} prompt(s) seen; \
                 `script` ended with {status}); the terminal showed, at its end:\n{tail}",
                shown.matches(PROMPT).count()
            );
            true
        }
    }
}

/// Kill one run of `kind` after `k` events, resume it, and check nothing was repeated.
/// Returns false when the kill came too late (the run had finished).
fn kill_and_resume(kind: Kind, k: u64, reference: &Reference, case: &str) -> Option<String> {
    let agent = kind.agent();
    let ws = workspace(kind);
    if !start_and_kill(&ws, kind, k) {
        return None;
    }
    let run_dir = ws.run_dir(agent);
    let at_kill = journal_at_kill(&run_dir);
    if at_kill.last().is_some_and(|l| l["event"] == "run_finished") {
        return None;
    }
    // Where the kill landed: the last event journaled before it.
    let landed = at_kill
        .last()
        .and_then(|l| l["event"].as_str())
        .unwrap_or("nothing")
        .to_string();
    let answered_at_kill = count(&at_kill, "llm_response") as u64;
    let run_id = run_dir.file_name().unwrap().to_str().unwrap().to_string();
    let resumed = ws.resume(&run_id, &["--json"]);
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "{case}: the resume completes: {}",
        stderr(&resumed)
    );
    let summary = stdout_json(&resumed);
    assert_eq!(
        tokens(&summary),
        tokens(&reference.summary),
        "{case}: token totals"
    );
    // Every line served; a line served twice can only be the model call in flight at the
    // kill, answered by the script but not yet journaled.
    let served = ws.served();
    let mut times: BTreeMap<u64, usize> = BTreeMap::new();
    for n in &served {
        *times.entry(*n).or_default() += 1;
    }
    let script_len = script_of(kind).len() as u64;
    assert_eq!(
        times.keys().copied().collect::<Vec<_>>(),
        (1..=script_len).collect::<Vec<_>>(),
        "{case}: every script line served: {served:?}"
    );
    for (n, t) in &times {
        assert!(
            *t == 1 || (*t == 2 && *n == answered_at_kill + 1),
            "{case}: script line {n} served {t} times ({answered_at_kill} answers journaled at the kill): {served:?}"
        );
    }
    for (f, max) in &reference.files {
        let now = ws.file_lines(f);
        assert!(now <= *max, "{case}: {f} written more than once");
        if matches!(kind, Kind::Permission { .. }) {
            // The permission gate comes before the tool: nothing was lost either.
            assert_eq!(now, *max, "{case}: {f}");
        }
    }
    let lines = journal(&run_dir);
    assert_eq!(lines.last().unwrap()["event"], "run_finished", "{case}");
    assert_eq!(
        count(&lines, "llm_response"),
        count(&reference.lines, "llm_response"),
        "{case}: every answer recorded once"
    );
    if matches!(kind, Kind::Permission { .. }) {
        assert!(
            lines
                .iter()
                .any(|l| l["event"] == "tool_call_repaired" && l["action"] == "run_again"),
            "{case}: the pending call is run again, its request posted again"
        );
        assert_eq!(
            count(&lines, "interaction_request"),
            count(&reference.lines, "interaction_request") + 1,
            "{case}: the pending request is posted once more"
        );
    }
    Some(landed)
}

#[test]
fn sigkill_matrix_runs_killed_at_random_points_resume_with_nothing_repeated() {
    let seed = std::env::var("LSM_TEST_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("sigkill matrix seed {seed} (LSM_TEST_KILL_SEED={seed} repeats its choices)");
    // The permission runs play the general script: they share its reference.
    let references = [reference(Kind::General), reference(Kind::Research)];
    let requests = count(&references[0].lines, "interaction_request") as u64;
    assert_eq!(requests, 3, "the general script asks three permissions");
    // Each case: what to run and after how many events to kill. A kill that comes too late
    // (the run finished) is replaced, so the matrix always reaches RUNS resumed runs.
    let mut rng = Rng(seed);
    let cases: Vec<(Kind, u64, usize)> = (0..RUNS * 3 / 2)
        .map(|i| {
            let (kind, reference) = match i % 5 {
                0 | 2 => (Kind::General, 0),
                1 | 3 => (Kind::Research, 1),
                _ => (
                    Kind::Permission {
                        approved: rng.below(requests) as usize,
                    },
                    0,
                ),
            };
            // The stream holds the journal's lines (and a few more): kill within them.
            let k = 1 + rng.below(references[reference].lines.len() as u64 - 1);
            (kind, k, reference)
        })
        .collect();
    let next = AtomicUsize::new(0);
    let resumed = AtomicUsize::new(0);
    let tried = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                loop {
                    if resumed.load(Ordering::SeqCst) >= RUNS {
                        return;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some((kind, k, r)) = cases.get(i) else {
                        return;
                    };
                    let case = format!("seed {seed} case {i}: {kind:?} killed after {k} events");
                    let landed = kill_and_resume(*kind, *k, &references[*r], &case);
                    if landed.is_some() {
                        resumed.fetch_add(1, Ordering::SeqCst);
                    }
                    tried.lock().unwrap().push((*kind, landed));
                }
            });
        }
    });
    let tried = tried.into_inner().unwrap();
    let mut landed: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, l) in &tried {
        *landed
            .entry(l.as_deref().unwrap_or("(finished first)"))
            .or_default() += 1;
    }
    eprintln!("killed after: {landed:?}");
    // Kills landed inside model calls, inside tool calls, and at pending requests.
    for inside in [
        "llm_request",
        "tool_call_started",
        "interaction_acknowledged",
    ] {
        assert!(
            landed.contains_key(inside),
            "seed {seed}: no kill landed right after {inside}: {landed:?}"
        );
    }
    let resumed = resumed.into_inner();
    assert!(
        resumed >= RUNS,
        "seed {seed}: only {resumed} of {} kills landed before the run finished",
        tried.len()
    );
    for agent in ["general", "research"] {
        assert!(
            tried.iter().any(|(k, l)| l.is_some() && k.agent() == agent),
            "seed {seed}: no {agent} run killed and resumed"
        );
    }
    assert!(
        tried
            .iter()
            .any(|(k, l)| l.is_some() && matches!(k, Kind::Permission { .. })),
        "seed {seed}: no run killed during a pending permission request"
    );
}
