//! Figures of the running process, for benchmarks (Linux `/proc`; `NaN` elsewhere).

/// The process's peak resident set size so far (`VmHWM`), in MiB.
pub fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// User + system CPU seconds of this process so far.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat(5) (utime, stime) are the 12th and 13th after the name.
    let ticks: f64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|t| t.parse::<f64>().ok()).sum())
        .unwrap_or(f64::NAN);
    ticks / 100.0
}

/// Run the unit test `test` (its full path, `module::tests::name`) of this test binary again
/// in a child process, without the variable `unset`, with `env` set and `want_var` = `want`:
/// how a test checks a lookup that reads the process environment without changing its own.
/// The child sees `want_var` set and checks its answer against it.
///
/// # Panics
/// When the child cannot start or its test does not pass (naming `env` and its output).
#[allow(clippy::panic)]
pub fn rerun_test_with_env(
    test: &str,
    unset: &str,
    env: &[(&str, &str)],
    want_var: &str,
    want: &str,
) {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("no test binary: {e}"));
    let out = std::process::Command::new(exe)
        .args(["--exact", test])
        .env_remove(unset)
        .envs(env.iter().copied())
        .env(want_var, want)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {test} again: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{env:?}: {stdout}"
    );
}
