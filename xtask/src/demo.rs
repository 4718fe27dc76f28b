//! `cargo xtask demo`: the README's first command. Offline after the first model download.
//!
//! 1. Checks that llama.cpp can be built (cmake, libclang) and says which Debian packages to
//!    install if not.
//! 2. Fetches the local model if it is not cached (`cargo xtask fetch-model smollm2`).
//! 3. Builds `lsm` with the `local` feature (dev profile: llama.cpp itself is always compiled
//!    optimized, and inference time is spent there).
//! 4. Copies `examples/file-task/` to a temporary folder, writes an `lsm.toml` that uses the
//!    local provider, and runs the general agent on a file task there with `--yes` (the
//!    sandbox confines every tool to that folder), streaming its progress.
//! 5. Prints what the agent wrote, the artifact and the run summary, and what the outcome
//!    means.
//! 6. The knowledge base, with the same model: `lsm ingest` of the repository's `docs/` into
//!    an index in the temporary folder (lexical: the embedder, unoptimized in this dev build,
//!    would take minutes), then `lsm query` — retrieval, a cited answer from the local model,
//!    the sources it was given.
//!
//! The run counts as completed when it ends by itself — the model said DONE (exit 0), blocked
//! (5), or used up its iterations (6) or budget (3): a 135-million-parameter model often
//! loops or answers nonsense, and the demo shows that honestly. It fails when `lsm` fails
//! (exit 1 or 2) or is stopped.
//!
//! `cargo xtask demo --scripted` runs the same example with its recorded script instead: no
//! model, no llama.cpp build.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::models;

const EXAMPLE: &str = "examples/file-task";
const TASK: &str = "Read notes.md, then write a one-line summary of it to summary.md.";
const SCRIPTED_TASK: &str = "Summarize notes.md into summary.md";
/// LLM calls the local run may make: enough to read, write and finish, few enough to end in
/// about a minute when the model loops instead.
const MAX_ITERATIONS: u32 = 4;
/// The question the knowledge-base part asks about the repository's own documentation.
const QUESTION: &str = "What happens when an agent runs out of its token budget?";

/// The Debian packages llama.cpp's build needs.
const BUILD_PACKAGES: &str = "cmake libclang-dev";

/// Run the demo: with the local model, or the recorded script when `scripted`.
pub fn demo(root: &Path, scripted: bool) -> Result<()> {
    let (features, config, task): (&[&str], String, &str) = if scripted {
        (&[], String::new(), SCRIPTED_TASK)
    } else {
        check_build_tools()?;
        let model = models::ensure(&models::SMOLLM2)?;
        (&["--features", "local"], local_config(&model), TASK)
    };
    let mut build = vec!["build", "-p", "lsm-cli", "--bin", "lsm"];
    build.extend_from_slice(features);
    crate::tasks::run_cargo(root, "build", &build)?;
    let lsm = target_dir(root).join("debug").join("lsm");
    if !lsm.is_file() {
        bail!("built lsm not found at {}", lsm.display());
    }

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
    Ok(())
}

/// Ingest the repository's `docs/` and ask [`QUESTION`] of it with the local model.
fn knowledge_base(root: &Path, lsm: &Path, work: &Path, config_path: &Path) -> Result<()> {
    let docs = root.join("docs");
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
        "\nxtask: [demo] the answer above is the 135M model's; the sources are what the index \
         retrieved for it. With a real provider and the local embedder (`cargo xtask \
         fetch-model`, a release build) the same commands give hybrid retrieval and real answers."
    );
    Ok(())
}

/// The configuration of the local run: tools confined to `workspace/`, writes allowed, the
/// `block` tool not offered (a very small model reaches for it at the first difficulty
/// instead of trying), and the model file from the cache.
fn local_config(model: &Path) -> String {
    format!(
        r#"# Written by `cargo xtask demo`. Relative paths resolve against this file's folder.
[agents]
agents_folder = "Agents"
max_tokens_budget = 100000
max_iterations = {MAX_ITERATIONS}
offer_block_tool = false

[sandbox]
allowed_read_paths = ["workspace"]
allowed_write_paths = ["workspace"]
require_user_permission = {{ write_file = false }}

[llm]
provider = "local"
model_path = {model}

# The knowledge-base part: an index in this folder, lexical retrieval, and a context small
# enough for the local model's 4096-token window.
[kb]
index_dir = "kb"
context_token_budget = 1200

[kb.embedder]
kind = "none"
"#,
        model = toml_string(&model.display().to_string())
    )
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What the exit code means, for a person.
fn outcome(code: Option<i32>, scripted: bool) -> String {
    let quality = if scripted {
        ""
    } else {
        " The model is SmolLM2-135M: it follows the protocol (the grammar sees to that) but \
          rarely does the task well. With a real provider the same command gives real \
          answers: see \"Switching to a real model\" in README.md."
    };
    match code {
        Some(0) => format!("the agent finished: the model said DONE.{quality}"),
        Some(6) => format!(
            "the run reached its iteration limit ({MAX_ITERATIONS} LLM calls) without the model saying DONE — a normal end for a model this small.{quality}"
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
    if let Some(summary) = latest_summary(&work.join("Agents").join("general").join("logs")) {
        eprintln!("\nxtask: [demo] run summary {}:", summary.display());
        if let Ok(text) = std::fs::read_to_string(&summary) {
            eprintln!("{text}");
        }
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

/// Fails, naming the Debian packages, when cmake or libclang (which llama.cpp's build needs)
/// is missing. It runs before every local demo build: cargo cannot say beforehand whether
/// llama.cpp will have to be compiled.
fn check_build_tools() -> Result<()> {
    let cmake = Command::new("cmake")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let libclang = !cfg!(target_os = "linux") || libclang_found();
    if cmake && libclang {
        return Ok(());
    }
    let mut missing = Vec::new();
    if !cmake {
        missing.push("cmake");
    }
    if !libclang {
        missing.push("libclang");
    }
    bail!(
        "the local model provider compiles llama.cpp, which needs {}; install them \
         (Debian/Ubuntu: `sudo apt-get install -y {BUILD_PACKAGES}`; `bash .ci/run` does this) \
         and run `cargo xtask demo` again. (`cargo xtask demo --scripted` runs the example \
         without a model.)",
        missing.join(" and ")
    )
}

/// Whether a libclang shared library is where bindgen looks on Linux.
fn libclang_found() -> bool {
    if std::env::var_os("LIBCLANG_PATH").is_some() {
        return true;
    }
    let dirs = [
        "/usr/lib",
        "/usr/lib64",
        "/usr/local/lib",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
    ];
    let has_libclang = |dir: &Path| {
        std::fs::read_dir(dir).is_ok_and(|entries| {
            entries.filter_map(Result::ok).any(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.starts_with("libclang") && name.contains(".so")
            })
        })
    };
    if dirs.iter().any(|d| has_libclang(Path::new(d))) {
        return true;
    }
    // Debian's versioned LLVM folders: /usr/lib/llvm-14/lib, ...
    std::fs::read_dir("/usr/lib").is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            e.file_name().to_string_lossy().starts_with("llvm-")
                && has_libclang(&e.path().join("lib"))
        })
    })
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_relative() { root.join(p) } else { p })
        .unwrap_or_else(|| root.join("target"))
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
        assert_eq!(table["kb"]["embedder"]["kind"].as_str(), Some("none"));
    }

    #[test]
    fn normal_ends_are_explained_and_failures_named() {
        assert!(outcome(Some(0), false).contains("DONE"));
        assert!(outcome(Some(6), false).contains("iteration limit"));
        assert!(outcome(Some(6), false).contains("real provider"));
        assert!(outcome(Some(7), false).contains("repeated the same step"));
        assert!(outcome(Some(1), false).contains("failed"));
        assert!(!outcome(Some(0), true).contains("SmolLM2"));
    }
}
