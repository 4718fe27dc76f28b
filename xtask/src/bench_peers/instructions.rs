//! `cargo xtask bench-peers --instructions`: `lsm` and its floors counted in user-space
//! instructions under valgrind's callgrind instead of timed.
//!
//! CPU time on a shared machine moves with the machine's speed from one hour to the next
//! (docs/PERFORMANCE.md has one build measured at 106 and at 272 µs per call); an instruction
//! count repeats for the same binary and inputs whatever else the machine is doing. So this is
//! the figure to compare across days, machines and commits. Each point is one run (a second
//! would count the same), and the cost of one call is the slope between the N asked for, as
//! for CPU time, so the start-up's instructions drop out.
//!
//! The peers are not counted (a Python agent under valgrind takes tens of minutes), nor the
//! concurrent part, nor the blocking socket's floor: what it measures is the kernel's work,
//! which user-space instructions leave out. The release binary has no symbols: callgrind's
//! totals are all this needs; `cargo build --profile profiling` keeps them for
//! `callgrind_annotate`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::report::{cold_start, fit, own_above, segment_slopes};
use super::{Bench, Options, Row, System, bodies_file};

/// Where callgrind writes the counts of one run.
fn out_file(work: &Path, label: &str) -> PathBuf {
    work.join("out").join(format!("{label}.callgrind"))
}

/// Fail with what to do unless valgrind can be started.
pub(super) fn check_valgrind() -> Result<()> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        _ => bail!(
            "--instructions counts with valgrind, which is not installed here: install it \
             (Debian: `apt-get install valgrind`) or measure CPU time without --instructions"
        ),
    }
}

/// `cmd` as it runs under callgrind, writing its counts to `out`.
fn under_callgrind(cmd: &Command, out: &Path) -> Command {
    let mut wrapped = Command::new("valgrind");
    wrapped
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    wrapped
}

/// The instructions a callgrind output file counts for the whole process (all threads): its
/// `summary:` line, or its `totals:` line when there is no summary.
pub(super) fn total_instructions(text: &str) -> Option<u64> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    field("summary:").or_else(|| field("totals:"))
}

/// Run `cmd` in `work` under callgrind; its output goes to `work/out/LABEL.log`.
fn count(cmd: &Command, work: &Path, label: &str) -> Result<u64> {
    let out = out_file(work, label);
    let log_path = work.join("out").join(format!("{label}.log"));
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("cannot create {}", log_path.display()))?;
    let status = under_callgrind(cmd, &out)
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()
        .context("cannot start valgrind")?;
    if !status.success() {
        bail!(
            "`{}` under callgrind failed ({status}); its output: {}",
            cmd.get_program().to_string_lossy(),
            log_path.display()
        );
    }
    let text = std::fs::read_to_string(&out)
        .with_context(|| format!("callgrind wrote no counts to {}", out.display()))?;
    total_instructions(&text)
        .with_context(|| format!("{} holds no instruction total", out.display()))
}

/// The numbers of the system calls a valgrind log says it does not implement
/// (`WARNING: unhandled amd64-linux syscall: 437`): the program saw them fail with `ENOSYS`
/// and took whatever it does without them, which a run outside valgrind does not.
fn unhandled_syscalls(log: &str) -> Vec<u32> {
    log.lines()
        .filter_map(|l| {
            l.split_once("unhandled ")?
                .1
                .split_once("syscall: ")?
                .1
                .trim()
                .parse()
                .ok()
        })
        .collect()
}

/// The system calls valgrind said it does not implement in any run counted in `work` (its
/// logs, `out/*-instructions.log`).
fn unhandled_in(work: &Path) -> std::collections::BTreeSet<u32> {
    let Ok(entries) = std::fs::read_dir(work.join("out")) else {
        return Default::default();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .ends_with("-instructions.log")
        })
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .flat_map(|log| unhandled_syscalls(&log))
        .collect()
}

/// What the table's reader must know when valgrind lacked system calls: the counts include
/// the fallbacks taken for them. Empty when it lacked none.
fn unhandled_note(unhandled: &std::collections::BTreeSet<u32>) -> String {
    if unhandled.is_empty() {
        return String::new();
    }
    let named: Vec<String> = unhandled
        .iter()
        .map(|n| match n {
            437 => "437 (openat2)".to_string(),
            n => n.to_string(),
        })
        .collect();
    format!(
        "\nNote: this valgrind does not implement system call(s) {}, so under it the runs took \
         their fallbacks (for openat2: file tools resolve paths by name and open files with \
         cap-std's walk over the components), whose user-space instructions a run outside \
         valgrind does not spend.\n",
        named.join(", ")
    )
}

impl Bench<'_> {
    /// Count one run of `system` (one agent, `n` calls) under callgrind.
    fn count(&self, system: System, n: u64) -> Result<u64> {
        let (cmd, started, before) = self.prepare(system, n, 1)?;
        let instructions = count(&cmd, self.work, &format!("{system:?}-{n}-instructions"))?;
        self.check_calls(system, n, 1, started, before)?;
        Ok(instructions)
    }

    /// Count `bare_exchange` replaying the `sent` bodies `lsm` sent at `n` (its own
    /// summarization calls among them, if it made any), as `lsm` reaches the mock.
    fn count_floor(&self, bare_exchange: &Path, n: u64, sent: usize) -> Result<u64> {
        let system = System::BareExchange;
        self.calls.store(n, std::sync::atomic::Ordering::SeqCst);
        let before = self.mock.requests();
        let mut cmd = Command::new(bare_exchange);
        cmd.args(["--client", system.client()])
            .arg(&self.mock.base_url)
            .arg(bodies_file(self.work, n));
        let instructions = count(&cmd, self.work, &format!("{system:?}-{n}-instructions"))?;
        let seen = self.mock.requests() - before;
        if seen != sent as u64 {
            bail!("bare_exchange made {seen} requests for {sent} bodies");
        }
        Ok(instructions)
    }
}

/// `cargo xtask bench-peers --instructions`: count `lsm` (with its default strategy, with the
/// whole history, and `--baseline`) at each N, then the bare exchange of the bodies `lsm`
/// sent; print the table (or JSON).
pub(super) fn bench(
    bench: &Bench<'_>,
    baseline: Option<&Bench<'_>>,
    bare_exchange: &Path,
    opts: &Options,
) -> Result<()> {
    check_valgrind()?;
    let mut lsm = Vec::new();
    let mut full = Vec::new();
    let mut before = Vec::new();
    let mut sent = Vec::new();
    for &n in &opts.calls {
        if let Some(b) = baseline {
            let counted = b.count(System::LsmBaseline, n)?;
            report(System::LsmBaseline, n, counted);
            before.push((n, counted as f64, 0));
        }
        bench.mock.record();
        let counted = bench.count(System::Lsm, n)?;
        let bodies = bench.mock.take_recorded();
        super::write_bodies(&bodies_file(bench.work, n), &bodies)?;
        sent.push(bodies.len());
        report(System::Lsm, n, counted);
        lsm.push((n, counted as f64, 0));
        let counted = bench.count(System::LsmFull, n)?;
        report(System::LsmFull, n, counted);
        full.push((n, counted as f64, 0));
    }
    let mut rows = vec![
        Row {
            system: System::Lsm,
            points: lsm,
        },
        Row {
            system: System::LsmFull,
            points: full,
        },
    ];
    if !before.is_empty() {
        rows.push(Row {
            system: System::LsmBaseline,
            points: before,
        });
    }
    // The blocking socket's floor is the kernel's, which user-space instructions do not
    // count: only the bare exchange's row is a floor here.
    let mut points = Vec::new();
    for (&n, &sent) in opts.calls.iter().zip(&sent) {
        let counted = bench.count_floor(bare_exchange, n, sent)?;
        report(System::BareExchange, n, counted);
        points.push((n, counted as f64, 0));
    }
    rows.push(Row {
        system: System::BareExchange,
        points,
    });
    if opts.json {
        println!("{}", to_json(&rows));
    } else {
        print!("{}", table(&rows, &opts.calls));
        print!("{}", unhandled_note(&unhandled_in(bench.work)));
    }
    Ok(())
}

fn report(system: System, n: u64, instructions: u64) {
    eprintln!(
        "xtask: [bench-peers] {:<20} N = {n:>5}: {} instructions",
        system.name(),
        thousands(instructions as f64)
    );
}

/// `x` rounded, with a comma between thousands (`1,234,567`).
fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if x < -0.5 { format!("-{out}") } else { out }
}

/// The Markdown table of the counts, and `lsm`'s own instructions per call above the bare
/// exchange.
fn table(rows: &[Row], calls: &[u64]) -> String {
    let mut out = "| system |".to_string();
    let mut rule = "|---|".to_string();
    for n in calls {
        out.push_str(&format!(" N = {n}: instructions |"));
        rule.push_str("---|");
    }
    out.push_str(" instructions per call | between N | start-up |\n");
    out.push_str(&rule);
    out.push_str("---|---|---|\n");
    for row in rows {
        out.push_str(&format!("| {} |", row.system.name()));
        for (_, counted, _) in &row.points {
            out.push_str(&format!(" {} |", thousands(*counted)));
        }
        let segments: Vec<String> = segment_slopes(&row.points)
            .iter()
            .map(|(a, b, s)| format!("{a}→{b}: {}", thousands(*s)))
            .collect();
        out.push_str(&format!(
            " {} | {} | {} |\n",
            thousands(fit(&row.points).0),
            segments.join(", "),
            thousands(cold_start(&row.points))
        ));
    }
    for system in [System::Lsm, System::LsmBaseline] {
        if let Some((own, lsm, floor)) = own_above(rows, system, System::BareExchange) {
            out.push_str(&format!(
                "\n{}'s own instructions per call, above the bare exchange of its bodies: {} \
                 ({} − {}).\n",
                system.name(),
                thousands(own),
                thousands(lsm),
                thousands(floor)
            ));
        }
    }
    out
}

fn to_json(rows: &[Row]) -> serde_json::Value {
    let sequential: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({
                "system": r.system.name(),
                "points": r.points.iter().map(|(n, counted, _)| json!({
                    "calls": n, "instructions": *counted as u64,
                })).collect::<Vec<_>>(),
                "instructions_per_call": fit(&r.points).0,
                "start_up_instructions": cold_start(&r.points),
            })
        })
        .collect();
    json!({
        "meter": "instructions",
        "lsm_own_instructions_per_call": own_above(rows, System::Lsm, System::BareExchange).map(|(own, _, _)| own),
        "baseline_own_instructions_per_call":
            own_above(rows, System::LsmBaseline, System::BareExchange).map(|(own, _, _)| own),
        "sequential": sequential,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_calls_valgrind_lacks_are_read_from_its_log_and_named_in_a_note() {
        let log = "==1== Callgrind\n--2474-- WARNING: unhandled amd64-linux syscall: 437\n\
                   --2474-- Read the file README_MISSING_SYSCALL_OR_IOCTL.\n\
                   --2474-- WARNING: unhandled amd64-linux syscall: 437\n\
                   --9-- WARNING: unhandled amd64-linux syscall: 999\n";
        assert_eq!(unhandled_syscalls(log), [437, 437, 999]);
        assert!(unhandled_syscalls("==1== no warnings\n").is_empty());
        let seen: std::collections::BTreeSet<u32> = [437, 999].into();
        let note = unhandled_note(&seen);
        assert!(note.contains("437 (openat2), 999"), "{note}");
        assert!(unhandled_note(&Default::default()).is_empty());
        // Read from the counted runs' logs in the work folder, and only from those.
        let work = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(work.path().join("out")).unwrap();
        std::fs::write(work.path().join("out/Lsm-50-instructions.log"), log).unwrap();
        std::fs::write(
            work.path().join("out/other.log"),
            "WARNING: unhandled amd64-linux syscall: 5\n",
        )
        .unwrap();
        assert_eq!(unhandled_in(work.path()), [437, 999].into());
        assert!(unhandled_in(&work.path().join("none")).is_empty());
    }

    #[test]
    fn the_total_is_the_summary_line_or_else_the_totals_line() {
        let header = "# callgrind format\nversion: 1\ncmd: lsm agent run\nevents: Ir\n";
        assert_eq!(
            total_instructions(&format!("{header}summary: 52925030\n\nfl=(1)\n")),
            Some(52_925_030)
        );
        assert_eq!(
            total_instructions(&format!("{header}fn=(2)\n16 3\ntotals: 19083171\n")),
            Some(19_083_171)
        );
        // Neither, or not a number: no total rather than a wrong one.
        assert_eq!(total_instructions(header), None);
        assert_eq!(total_instructions("summary: many\n"), None);
    }

    #[test]
    fn a_command_under_callgrind_keeps_its_arguments_and_environment() {
        let mut cmd = Command::new("/bin/lsm");
        cmd.args(["agent", "run", "general"])
            .env("XDG_CONFIG_HOME", "/w/xdg")
            .env_remove("LSM_CONFIG");
        let wrapped = under_callgrind(&cmd, Path::new("/w/out/x.callgrind"));
        assert_eq!(wrapped.get_program(), "valgrind");
        let args: Vec<_> = wrapped.get_args().map(|a| a.to_string_lossy()).collect();
        assert_eq!(
            args,
            [
                "--tool=callgrind",
                "--callgrind-out-file=/w/out/x.callgrind",
                "/bin/lsm",
                "agent",
                "run",
                "general"
            ]
        );
        let envs: Vec<_> = wrapped.get_envs().collect();
        assert!(envs.contains(&("XDG_CONFIG_HOME".as_ref(), Some("/w/xdg".as_ref()))));
        assert!(envs.contains(&("LSM_CONFIG".as_ref(), None)));
    }

    #[test]
    fn the_table_gives_the_slope_per_call_and_lsm_own_share() {
        let row = |system, start: f64, per_call: f64| Row {
            system,
            points: vec![
                (50, start + 50.0 * per_call, 0),
                (200, start + 200.0 * per_call, 0),
            ],
        };
        let rows = [
            row(System::Lsm, 8.0e6, 225_600.0),
            row(System::LsmBaseline, 9.0e6, 5_060_000.0),
            row(System::BareExchange, 1.0e6, 30_000.0),
        ];
        let text = table(&rows, &[50, 200]);
        assert!(
            text.contains(
                "| lsm | 19,280,000 | 53,120,000 | 225,600 | 50→200: 225,600 | 8,000,000 |"
            ),
            "{text}"
        );
        assert!(
            text.contains("lsm's own instructions per call, above the bare exchange of its bodies: 195,600 (225,600 − 30,000)"),
            "{text}"
        );
        assert!(
            text.contains("lsm (baseline)'s own instructions per call, above the bare exchange of its bodies: 5,030,000"),
            "{text}"
        );
        let v = to_json(&rows);
        assert_eq!(v["meter"], "instructions");
        let own = v["lsm_own_instructions_per_call"].as_f64().unwrap();
        assert!((own - 195_600.0).abs() < 1e-6, "{own}");
        assert_eq!(v["sequential"][0]["points"][1]["instructions"], 53_120_000);
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(52_925_030.0), "52,925,030");
        assert_eq!(thousands(-1234.0), "-1,234");
    }
}
