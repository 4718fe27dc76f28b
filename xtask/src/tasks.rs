//! The subcommands: each runs cargo (found through `$CARGO`) from the workspace root with
//! inherited stdio, so output streams as it is produced.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use cargo_metadata::{CargoOpt, MetadataCommand};

use crate::cargo_build::{cargo, run_cargo};
use crate::graph::Graph;
use crate::{layers, purity};

/// The workspace root: the parent of this crate's directory.
pub fn workspace_root() -> Result<PathBuf> {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .with_context(|| format!("{} has no parent directory", manifest_dir.display()))
}

/// `cargo xtask check-layers`: the dependency rules of DESIGN.md over `cargo metadata`.
pub fn check_layers(root: &Path) -> Result<()> {
    eprintln!("xtask: [check-layers] crate layering rules over `cargo metadata`");
    let meta = MetadataCommand::new()
        .cargo_path(cargo())
        .manifest_path(root.join("Cargo.toml"))
        .features(CargoOpt::AllFeatures)
        .exec()
        .context("step `check-layers`: `cargo metadata` failed")?;
    let graph = Graph::from_metadata(&meta)?;
    let violations = layers::check(&graph);
    let sources = purity::check_pure(root, &root.join(purity::PURE_SOURCES))?;
    if violations.is_empty() && sources.is_empty() {
        eprintln!(
            "xtask: [check-layers] ok: {} workspace crates follow rules 1-8 and the layout \
             rule; lsm-run's sources do no I/O",
            graph.members().count(),
        );
        return Ok(());
    }
    for violation in &violations {
        eprintln!("{violation}");
    }
    for finding in &sources {
        eprintln!("{finding}");
    }
    bail!(
        "step `check-layers` failed: {} violation(s) of the dependency rules \
         (see \"Dependency rules\" in DESIGN.md and the table in xtask/src/layers.rs) and \
         {} of the source rules (xtask/src/purity.rs)",
        violations.len(),
        sources.len()
    )
}

/// Fails with install instructions unless `<cargo> deny --version` runs.
fn require_cargo_deny(cargo: &OsStr, root: &Path) -> Result<()> {
    let works = Command::new(cargo)
        .args(["deny", "--version"])
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        bail!(
            "step `deny` failed: cargo-deny is not installed; install it with \
             `cargo install cargo-deny --locked` (or run `bash .ci/run`, which does)"
        );
    }
    Ok(())
}

/// `cargo xtask check`: format, lints, layering, dependency policy. Stops at the first failure.
pub fn check(root: &Path) -> Result<()> {
    // rustfmt does not follow CARGO_TERM_COLOR (CI sets it to `never`): pass it on.
    let color = std::env::var("CARGO_TERM_COLOR").ok();
    let mut fmt = vec!["fmt", "--all", "--", "--check"];
    if let Some(color @ ("always" | "never" | "auto")) = color.as_deref() {
        fmt.extend(["--color", color]);
    }
    run_cargo(root, "fmt", &fmt)?;
    run_cargo(
        root,
        "clippy",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    check_layers(root)?;
    crate::docs::check_docs(root)?;
    crate::sources::check_sources(root)?;
    require_cargo_deny(&cargo(), root)?;
    run_cargo(
        root,
        "deny",
        &["deny", "check", "licenses", "bans", "sources"],
    )?;
    eprintln!(
        "xtask: [deny] advisories skipped: they need a network download of the RustSec \
         advisory database; run `cargo deny check advisories` on a machine with network access"
    );
    eprintln!("xtask: check passed");
    Ok(())
}

/// `cargo xtask eval-retrieval`: the `eval_retrieval` example of lsm-tools-kb, built in release
/// mode (the embedder is too slow unoptimized), with stdout passed through.
pub fn eval_retrieval(
    root: &Path,
    dir: &Path,
    profiles: &[String],
    json: bool,
    embedder: &str,
    llm: &[String],
) -> Result<()> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let dir = cwd.join(dir);
    let mut args: Vec<String> = [
        "run",
        "--quiet",
        "--release",
        "-p",
        "lsm-tools-kb",
        "--example",
        "eval_retrieval",
        "--",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(dir.display().to_string());
    for p in profiles {
        args.push("--profile".into());
        args.push(p.clone());
    }
    if json {
        args.push("--json".into());
    }
    args.push("--embedder".into());
    args.push(embedder.into());
    args.extend(llm.iter().cloned());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run_cargo(root, "eval-retrieval", &refs)
}

/// `cargo xtask ci [--local]`: everything CI runs once the tools are installed. With
/// `local`, also the local model provider (see [`local_checks`]); its tests count in the total.
pub fn ci(root: &Path, local: bool) -> Result<()> {
    check(root)?;
    // The MCP test server `cargo test --workspace` builds for lsm-mcp's tests, handed to the
    // end-to-end tests so that they need not build it again with lsm-mcp's own feature set
    // (nearly two minutes on two cores). `lsm` itself they do build apart, on purpose: with
    // the features a user's build has, not those the test build unifies (tokio's `test-util`,
    // serde_json's `unbounded_depth`, …). The variable is `LSM_TEST_*`: `lsm` reads every
    // other `LSM_*` variable as a setting and refuses one that names none, and some tests
    // start `lsm` with the test process's environment.
    let server = crate::cargo_build::target_dir(root)
        .join("debug")
        .join("lsm-mcp-test-server");
    let server = server.to_string_lossy();
    let mut totals = run_tests(
        root,
        &["test", "--workspace"],
        &[("LSM_TEST_MCP_SERVER", server.as_ref())],
    )?;
    if local {
        local_checks(root, &mut totals)?;
    }
    eprintln!("xtask: ci passed");
    // The last line is the whole suite's count, so a reader of the log need not add up the
    // per-binary `test result:` lines (the last of which is often an empty doc-test run).
    println!("{} passed, {} failed", totals.passed, totals.failed);
    Ok(())
}

/// The local model provider (feature `local`: candle and llguidance): fetch the models, lint
/// the feature-gated code, run its tests against the model (`LOCAL_MODEL_REQUIRED=1`: a
/// missing model fails them instead of skipping), run the demo, the README's first command,
/// and `eval-local --quick`, so that a regression of the local path shows in the log.
fn local_checks(root: &Path, totals: &mut TestTotals) -> Result<()> {
    crate::models::fetch_models(&[])?;
    // The native tool-call format's tests run against Qwen2.5 (`tests/local.rs`).
    let native = crate::models::ensure(&crate::models::QWEN25)?;
    run_cargo(
        root,
        "clippy-local",
        &[
            "clippy",
            "-p",
            "lsm-providers",
            "-p",
            "lsm-app",
            "-p",
            "lsm-cli",
            "--features",
            "lsm-providers/local,lsm-app/local,lsm-cli/local",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    let local = run_tests(
        root,
        &[
            "test",
            "-p",
            "lsm-providers",
            "-p",
            "lsm-app",
            "-p",
            "lsm-cli",
            "--features",
            "lsm-providers/local,lsm-app/local,lsm-cli/local",
            "--lib",
            "--bins",
            "--test",
            "local",
        ],
        &[
            ("LOCAL_MODEL_REQUIRED", "1"),
            ("LOCAL_NATIVE_MODEL_PATH", native.to_string_lossy().as_ref()),
        ],
    )?;
    totals.passed += local.passed;
    totals.failed += local.failed;
    crate::demo::demo(root, false)?;
    crate::eval_local::eval_local(
        root,
        &crate::eval_local::EvalOptions {
            quick: true,
            model: &crate::models::SMOLLM2,
            min: QUICK_EVAL_MIN,
            only: Vec::new(),
            held_out: false,
        },
    )
}

/// Tasks of `eval-local --quick` that must succeed for CI to pass. None: the count is printed
/// in the log for a reader to compare with PERFORMANCE.md, and CI fails when `lsm` itself
/// fails on a task (a crash or an error exit); a 135M model's success rate on a loaded
/// machine is too unsteady to gate on (see PERFORMANCE.md, "eval-local").
const QUICK_EVAL_MIN: usize = 0;

/// Counts summed over every `test result:` line of a `cargo test` run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct TestTotals {
    passed: u64,
    failed: u64,
}

impl TestTotals {
    /// Add one line's counts if it is a `test result:` line.
    fn add_line(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result: ") else {
            return;
        };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(label), Some(count)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(n) = count.parse::<u64>() else {
                continue;
            };
            match label {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                _ => {}
            }
        }
    }
}

/// `cargo <args>` (a test run), streaming its output while counting results.
fn run_tests(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<TestTotals> {
    use std::io::{BufRead, BufReader, Write};
    let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
    let shown = format!("{}cargo {}", vars.concat(), args.join(" "));
    eprintln!("xtask: [test] {shown}");
    let mut child = Command::new(cargo())
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root)
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("step `test`: could not start `{shown}`"))?;
    let mut totals = TestTotals::default();
    if let Some(stdout) = child.stdout.take() {
        let mut out = std::io::stdout().lock();
        for line in BufReader::new(stdout).lines() {
            let line = line.context("step `test`: reading the test output")?;
            totals.add_line(&line);
            writeln!(out, "{line}")?;
        }
    }
    let status = child
        .wait()
        .context("step `test`: waiting for cargo test")?;
    if !status.success() {
        println!("{} passed, {} failed", totals.passed, totals.failed.max(1));
        bail!("step `test` failed: `{shown}` exited with {status}");
    }
    Ok(totals)
}

/// `cargo xtask man`: build `lsm` and have it render its man pages (clap_mangen, from the
/// same clap definition as its `--help`) into `out` (relative to the workspace root).
pub fn man(root: &Path, out: &Path) -> Result<()> {
    run_cargo(root, "man", &["build", "-p", "lsm-cli", "--bin", "lsm"])?;
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let lsm = target.join("debug").join("lsm");
    let out = root.join(out);
    let status = Command::new(&lsm)
        .arg("man")
        .arg("--out")
        .arg(&out)
        .current_dir(root)
        .status()
        .with_context(|| format!("step `man`: cannot run {}", lsm.display()))?;
    if !status.success() {
        bail!("step `man` failed: `lsm man` exited with {status}");
    }
    eprintln!(
        "xtask: [man] pages in {} (man -l {}/lsm.1)",
        out.display(),
        out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_result_lines_are_summed_and_other_lines_ignored() {
        let mut t = TestTotals::default();
        t.add_line("test result: ok. 35 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.90s");
        t.add_line("test result: FAILED. 14 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 10.21s");
        t.add_line("test foo ... ok");
        t.add_line("running 3 tests");
        assert_eq!(
            t,
            TestTotals {
                passed: 49,
                failed: 1
            }
        );
    }

    #[test]
    fn a_missing_cargo_deny_is_reported_with_the_install_command() {
        let root = workspace_root().unwrap();
        let no_cargo = OsStr::new("/nonexistent/cargo-without-deny");
        let err = require_cargo_deny(no_cargo, &root).unwrap_err().to_string();
        assert!(err.contains("step `deny` failed"), "{err}");
        assert!(err.contains("cargo install cargo-deny --locked"), "{err}");
    }
}
