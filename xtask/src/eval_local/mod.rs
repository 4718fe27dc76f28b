//! `cargo xtask eval-local [--quick] [--model NAME] [--held-out]`: how often the local model
//! gets small, checkable tasks right.
//!
//! A fixed set of [`TASKS`], each run in a fresh temporary folder by the `lsm` binary built
//! with the local provider (the build `cargo xtask demo` uses): an agent task runs the
//! general agent (`lsm agent run general --yes --json`), a query task runs `lsm query` over
//! a small knowledge base the eval writes and ingests itself ([`KB_DOCS`]). Each task's
//! checker looks only at the outcome — the exit code, the final answer, the files left in
//! the workspace, the tools used — so it can be tested on made-up outcomes (the unit tests
//! below, good and bad). Sampling is greedy: the same binary and model give the same
//! answers. [`HELD_OUT`] (`--held-out`) is one task like each of [`TASKS`] with other words,
//! files and facts: the local provider's settings are chosen on [`TASKS`], and the held-out
//! figure says how far such a choice carries.
//!
//! Prints one line per task and `eval-local: N/M tasks succeeded in S s (model)`. It fails
//! only when `lsm` itself fails (a crash, an error exit) or fewer than `--min` tasks succeed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::models::ModelSpec;

mod set;

pub use set::*;

/// Most time one task may take before it is stopped (and fails): six calls of well under
/// a minute each on a quiet two-core machine, with room to spare; it keeps a looping model
/// from holding CI up.
const TASK_TIME_LIMIT: Duration = Duration::from_secs(300);

/// LLM calls an agent task may make.
pub const MAX_ITERATIONS: u32 = 6;

/// Options of one eval.
pub struct EvalOptions {
    /// Only the [`QUICK`] tasks.
    pub quick: bool,
    /// The model to run.
    pub model: &'static ModelSpec,
    /// Fail when fewer tasks than this succeed.
    pub min: usize,
    /// Only the tasks of these names (all when empty).
    pub only: Vec<String>,
    /// Run [`HELD_OUT`] instead of [`TASKS`].
    pub held_out: bool,
}

/// `cargo xtask eval-local`.
pub fn eval_local(root: &Path, opts: &EvalOptions) -> Result<()> {
    let (set, set_name) = if opts.held_out {
        (HELD_OUT, "held-out set")
    } else {
        (TASKS, "tasks")
    };
    if let Some(unknown) = opts
        .only
        .iter()
        .find(|n| !set.iter().any(|t| t.name == n.as_str()))
    {
        let known: Vec<&str> = set.iter().map(|t| t.name).collect();
        bail!(
            "--only {unknown}: no such task; the {set_name} are {}",
            known.join(", ")
        );
    }
    let model = crate::models::ensure(opts.model)?;
    let lsm = crate::cargo_build::build_lsm(root)?;
    let tasks: Vec<&Task> = set
        .iter()
        .filter(|t| opts.held_out || !opts.quick || QUICK.contains(&t.name))
        .filter(|t| opts.only.is_empty() || opts.only.iter().any(|n| n == t.name))
        .collect();
    eprintln!(
        "xtask: [eval-local] {} tasks with {} ({})",
        tasks.len(),
        opts.model.name,
        model.display()
    );
    let dir = tempfile::Builder::new()
        .prefix("lsm-eval-")
        .tempdir()
        .context("cannot create a temporary folder")?;
    let started = Instant::now();
    let mut passed = 0usize;
    for task in &tasks {
        let t0 = Instant::now();
        let outcome = run_task(&lsm, &model, task, dir.path())?;
        let verdict = (task.check)(&outcome);
        let secs = t0.elapsed().as_secs_f64();
        match &verdict {
            Ok(()) => {
                passed += 1;
                println!("ok   {:<18} {secs:6.1} s", task.name);
            }
            Err(why) => println!("FAIL {:<18} {secs:6.1} s  {why}", task.name),
        }
    }
    let total = started.elapsed().as_secs_f64();
    let which = if opts.held_out { ", held-out set" } else { "" };
    println!(
        "eval-local: {passed}/{} tasks succeeded in {total:.0} s ({}{which})",
        tasks.len(),
        opts.model.name
    );
    if passed < tasks.len() {
        // Keep the runs' folders (workspaces, transcripts) for a look at what went wrong.
        let kept = dir.keep();
        eprintln!(
            "xtask: [eval-local] the tasks' folders (workspace, transcripts) are kept in {}",
            kept.display()
        );
    }
    if passed < opts.min {
        bail!(
            "{passed} of {} tasks succeeded, fewer than --min {}",
            tasks.len(),
            opts.min
        );
    }
    Ok(())
}

/// The configuration of a task's folder: tools confined to `workspace/`, writes allowed,
/// no `block` tool, the knowledge base lexical (retrieval is not what is measured here).
pub fn task_config(model: &Path, max_iterations: u32) -> String {
    format!(
        r#"# Written by `cargo xtask`. Relative paths resolve against this file's folder.
[agents]
agents_folder = "Agents"
max_tokens_budget = 100000
max_iterations = {max_iterations}
offer_block_tool = false

[sandbox]
allowed_read_paths = ["workspace"]
allowed_write_paths = ["workspace"]
require_user_permission = {{ write_file = false, append_file = false, edit_file = false, create_folder = false }}

[llm]
provider = "local"
model_path = {model}

[kb]
index_dir = "kb"
context_token_budget = 1200

[kb.embedder]
kind = "none"
"#,
        model = crate::cargo_build::toml_string(&model.display().to_string())
    )
}

/// Run `task` in a fresh folder under `dir`.
fn run_task(lsm: &Path, model: &Path, task: &Task, dir: &Path) -> Result<Outcome> {
    let work = &dir.join(task.name);
    let workspace = work.join("workspace");
    std::fs::create_dir_all(&workspace)?;
    for (name, text) in task.files {
        std::fs::write(workspace.join(name), text)?;
    }
    let config = work.join("lsm.toml");
    std::fs::write(&config, task_config(model, MAX_ITERATIONS))?;
    if matches!(task.kind, Kind::AgentWithKb | Kind::Query) {
        let docs = work.join("docs");
        std::fs::create_dir_all(&docs)?;
        for (name, text) in KB_DOCS {
            std::fs::write(docs.join(name), text)?;
        }
        let status = Command::new(lsm)
            .arg("ingest")
            .arg(&docs)
            .arg("--config")
            .arg(&config)
            .current_dir(work)
            .stdout(Stdio::null())
            .status()
            .context("cannot run lsm ingest")?;
        if !status.success() {
            bail!("`lsm ingest` failed ({status}) for task {}", task.name);
        }
    }
    let mut cmd = Command::new(lsm);
    match task.kind {
        Kind::Agent | Kind::AgentWithKb => {
            cmd.args([
                "agent",
                "run",
                "general",
                "--yes",
                "--json",
                "--task",
                task.prompt,
            ]);
        }
        Kind::Query => {
            cmd.args(["query", task.prompt]);
        }
    }
    cmd.arg("--config")
        .arg(&config)
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (exit_code, stdout) = run_limited(cmd, TASK_TIME_LIMIT)?;
    if matches!(exit_code, Some(1 | 2)) {
        bail!(
            "lsm failed on task {} (exit {exit_code:?}): {}",
            task.name,
            stdout.lines().last().unwrap_or("")
        );
    }
    let mut outcome = Outcome {
        exit_code,
        files: read_files(&workspace),
        ..Outcome::default()
    };
    match task.kind {
        Kind::Agent | Kind::AgentWithKb => {
            let summary: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
            outcome.answer = summary["final_text"].as_str().unwrap_or("").to_string();
            outcome.tools = summary["tool_sequence"]
                .as_array()
                .map(|calls| {
                    calls
                        .iter()
                        .filter_map(|c| c.as_str().or_else(|| c["tool"].as_str()))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
        }
        Kind::Query => {
            // `lsm query` prints the answer, then "Sources:" (cited) or "Sources given to
            // the model (none cited):".
            let (answer, sources) = stdout
                .split_once("\nSources:\n")
                .or_else(|| {
                    stdout
                        .split_once("\nSources given to the model")
                        .map(|(a, _)| (a, ""))
                })
                .unwrap_or((stdout.as_str(), ""));
            outcome.answer = answer.trim().to_string();
            outcome.cited = !sources.trim().is_empty();
        }
    }
    Ok(outcome)
}

/// Run `cmd`, killing it after `limit`; its exit code and stdout. Its stderr (progress)
/// is discarded.
fn run_limited(mut cmd: Command, limit: Duration) -> Result<(Option<i32>, String)> {
    use std::io::Read;
    let mut child = cmd.spawn().context("cannot start lsm")?;
    let mut stdout = child.stdout.take().context("no stdout")?;
    let mut stderr = child.stderr.take().context("no stderr")?;
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = out.join().unwrap_or_default();
    let _ = err.join();
    Ok((status.and_then(|s| s.code()), stdout))
}

/// Every regular file under `dir` (recursively), by its path relative to `dir`.
fn read_files(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(dir) {
                let text = std::fs::read(&p).unwrap_or_default();
                out.insert(
                    rel.display().to_string(),
                    String::from_utf8_lossy(&text).into_owned(),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
