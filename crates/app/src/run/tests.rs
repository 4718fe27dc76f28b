//! Every way a run starts goes through the one [`super::prepare`]: a source check over the
//! engine's and the binary's files, beside the type-level seam (`PreparedRun` has private
//! fields and is made only by `prepare`; `build_run`, `AgentLaunch` and the launch itself are
//! private to the engine).

use std::path::{Path, PathBuf};

/// The Rust files under `dir`, with their text before a trailing test module.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && !path.ends_with("tests.rs")
                && !path.components().any(|c| c.as_os_str() == "tests")
            {
                let text = std::fs::read_to_string(&path).unwrap();
                let cut = [
                    "#[cfg(test)]\nmod tests {",
                    "#[cfg(test)]\npub(crate) mod tests {",
                ]
                .iter()
                .filter_map(|marker| text.find(marker))
                .min();
                let code = match cut {
                    Some(at) => text[..at].to_string(),
                    None => text,
                };
                out.push((path, code));
            }
        }
    }
    out
}

fn crate_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

/// The files (relative to `crates/`) whose code holds `needle`.
fn files_with(files: &[(PathBuf, String)], needle: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found: Vec<String> = files
        .iter()
        .filter(|(_, code)| code.contains(needle))
        .map(|(path, _)| {
            path.strip_prefix(&root)
                .unwrap_or(path)
                .display()
                .to_string()
        })
        .collect();
    found.sort();
    found
}

#[test]
fn every_entry_point_starts_its_runs_through_the_one_prepare() {
    let mut files = sources(&crate_dir("app"));
    files.extend(sources(&crate_dir("cli")));
    assert!(files.len() > 30, "the sources were not found");
    // The entry points, each calling `prepare`: `lsm agent run` and `lsm runs resume`, the
    // queue's worker, `run_agent`, the runtime manager's launcher (`run-many`, the TUI) and
    // the conductor's workers.
    let entry_points = [
        "cli/src/commands/agent_run.rs",
        "app/src/queue.rs",
        "app/src/mcp_server.rs",
        "app/src/runtime/launcher.rs",
        "app/src/run/workers.rs",
    ];
    let calling = files_with(&files, "prepare(");
    for entry in entry_points {
        assert!(
            calling.iter().any(|f| f == entry),
            "{entry} does not call prepare: {calling:?}"
        );
    }
    // `lsm runs resume`, `run-many` and the TUI reach them.
    assert_eq!(
        files_with(&files, "agent_run::start("),
        ["cli/src/commands/runs.rs"]
    );
    assert_eq!(
        files_with(&files, "HarnessLauncher::new("),
        ["cli/src/commands/run_many.rs", "cli/src/tui/mod.rs"]
    );
    // Nothing else wires a run or launches an agent: the harness factory is built in
    // `build_run`, which only `prepare` calls; the launch is made only there too.
    assert_eq!(
        files_with(&files, "build_run(&"),
        ["app/src/run/prepare.rs"]
    );
    assert_eq!(
        files_with(&files, "HarnessFactory::new("),
        ["app/src/wiring/run.rs"]
    );
    assert_eq!(
        files_with(&files, "AgentLaunch {"),
        ["app/src/run/launch.rs", "app/src/run/prepare.rs"]
    );
    assert_eq!(
        files_with(&files, "PreparedRun {"),
        ["app/src/run/prepare.rs"]
    );
    assert_eq!(
        files_with(&files, "launch_agent("),
        ["app/src/run/launch.rs"]
    );
    // The old forms of a run's parameters are gone.
    for gone in ["QueuedRequest", "AgentRunOptions", "prepare_with("] {
        assert_eq!(files_with(&files, gone), Vec::<String>::new(), "{gone}");
    }
}
