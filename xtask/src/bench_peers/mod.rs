//! `cargo xtask bench-peers`: `lsm` beside pydantic-ai and openai-agents on the same loopback
//! mock of Chat Completions (see [`mock`]), measured as the client process's CPU time
//! (user + system) and peak RSS.
//!
//! Each system runs an agent that calls `read_file` N times and then answers, at every N
//! asked for (default 10, 200, 1000), a few times each (the median counts). From the CPU at
//! the different N comes the cost of one model call (the least-squares slope) and the cold
//! start (the intercept). `lsm` runs twice: with its default context strategy and with
//! `context_window_strategy = "full"` (the whole history every call, as the peers send it).
//! Then many agents at once in one process: the peers with `asyncio.gather`, `lsm` with
//! `lsm agent run-many` (its runtime manager).
//!
//! Under `lsm` the table puts its floor: the bodies `lsm` sent at each N, replayed by a bare
//! HTTP client (`lsm-providers`' example `bare_exchange`: hyper's HTTP/1.1 connection, as `lsm`
//! reaches a plain `http://` server, on the same runtime and allocator, and nothing else), and
//! the same bodies over a blocking socket. `lsm`'s CPU per call less a floor's is the
//! harness's own above it.
//!
//! The peers live in a private virtual environment under `target/bench-peers/venv`, made by
//! `--install` (pip, from PyPI); without it they are skipped and the table says so.
//!
//! With `--instructions` the same `lsm` runs and the bare exchange are counted in user-space
//! instructions under valgrind's callgrind instead of timed (see [`instructions`]).

mod instructions;
mod mock;
mod peers;
mod report;
mod workspace;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, bail};
use serde_json::json;

use report::{median, print_tables, spread, to_json};
use workspace::{
    bodies_file, check_file_bytes, check_no_denials, prepare_workspace, write_bodies, write_files,
};

/// What `cargo xtask bench-peers` was asked for.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// First create the peers' virtual environment (target/bench-peers/venv) with pip.
    #[arg(long)]
    pub install: bool,
    /// Tool calls per run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10,200,1000")]
    pub calls: Vec<u64>,
    /// Runs per point; the median CPU counts.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Agents run at once in one process (0: skip that part).
    #[arg(long, default_value_t = 50)]
    pub agents: usize,
    /// Tool calls of each of those agents.
    #[arg(long, default_value_t = 20)]
    pub agent_calls: u64,
    /// Measure lsm only, even when the peers are installed.
    #[arg(long)]
    pub lsm_only: bool,
    /// Print the figures as one JSON document.
    #[arg(long)]
    pub json: bool,
    /// An earlier build of `lsm` to compare with: its row ("lsm (baseline)") is measured
    /// at each N, alternated run by run with the current build's, so both see the same
    /// machine.
    #[arg(long, value_name = "LSM_BINARY")]
    pub baseline: Option<PathBuf>,
    /// Count user-space instructions under valgrind's callgrind instead of timing: one run
    /// per point (`--runs` is not used), `lsm` (also with the whole history, and
    /// `--baseline`) and the bare exchange only. Repeatable whatever else the machine is
    /// doing; try `--calls 50,200`.
    #[arg(long)]
    pub instructions: bool,
    /// Keep the work folder (the runs' records, the request bodies, callgrind's counts
    /// under `out/` for `callgrind_annotate`) and print where it is.
    #[arg(long)]
    pub keep_work: bool,
    /// The size of each file the agents read, in bytes (lines of prose of 82 bytes);
    /// without it, the small file (257 bytes) of the tables in docs/PERFORMANCE.md.
    #[arg(long, value_name = "BYTES")]
    pub file_bytes: Option<usize>,
}

/// A system under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Lsm,
    LsmFull,
    /// `lsm` from the `--baseline` binary, with the default strategy.
    LsmBaseline,
    PydanticAi,
    OpenAiAgents,
    /// The floor: `lsm`'s request bodies sent by a bare HTTP client (hyper's connection, as
    /// `lsm` reaches the loopback mock).
    BareExchange,
    /// The kernel's floor: the same bodies over a blocking socket, no HTTP library, no
    /// async runtime (`bare_exchange --client blocking`).
    BareSocket,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Lsm => "lsm",
            System::LsmFull => "lsm (full history)",
            System::LsmBaseline => "lsm (baseline)",
            System::PydanticAi => "pydantic-ai",
            System::OpenAiAgents => "openai-agents",
            System::BareExchange => "bare HTTP exchange of lsm's bodies",
            System::BareSocket => "the same over a blocking socket",
        }
    }

    /// A floor row: `lsm`'s bodies replayed, no agent (no peak RSS: it holds the bodies).
    fn is_floor(self) -> bool {
        matches!(self, System::BareExchange | System::BareSocket)
    }

    /// The client `bare_exchange` replays the bodies with, for a floor row.
    fn client(self) -> &'static str {
        match self {
            System::BareSocket => "blocking",
            _ => "hyper",
        }
    }
}

/// What one measured process used.
#[derive(Debug, Clone, Copy)]
struct Usage {
    cpu_s: f64,
    max_rss_kb: u64,
}

/// One row of the sequential table.
struct Row {
    system: System,
    /// (N, median CPU seconds, peak RSS kB) per N.
    points: Vec<(u64, f64, u64)>,
}

/// `cargo xtask bench-peers`.
pub fn bench_peers(root: &Path, opts: &Options) -> Result<()> {
    if opts.calls.is_empty() || opts.runs == 0 {
        bail!("nothing to measure: give at least one --calls value and --runs ≥ 1");
    }
    check_file_bytes(opts.file_bytes)?;
    let venv = crate::cargo_build::target_dir(root)
        .join("bench-peers")
        .join("venv");
    if opts.install {
        peers::install(&venv)?;
    }
    let python = venv.join("bin").join("python");
    let with_peers = !opts.lsm_only && !opts.instructions && peers::installed(&python);
    if !opts.lsm_only && !opts.instructions && !with_peers {
        eprintln!(
            "xtask: the peers are not installed in {}; run `cargo xtask bench-peers --install` \
             to compare with them (pip, from PyPI). Measuring lsm only.",
            venv.display()
        );
    }
    if opts.instructions {
        instructions::check_valgrind()?;
    }
    crate::cargo_build::run_cargo(
        root,
        "build",
        &["build", "--release", "-p", "lsm-cli", "--bin", "lsm"],
    )?;
    crate::cargo_build::run_cargo(
        root,
        "build",
        &[
            "build",
            "--release",
            "-p",
            "lsm-providers",
            "--example",
            "bare_exchange",
        ],
    )?;
    let release = crate::cargo_build::target_dir(root).join("release");
    let lsm = release.join("lsm");
    let bare_exchange = release.join("examples").join("bare_exchange");
    let mut work = tempfile::tempdir().context("cannot create a temporary folder")?;
    if opts.keep_work {
        work.disable_cleanup(true);
        eprintln!(
            "xtask: [bench-peers] work folder (kept): {}",
            work.path().display()
        );
    }
    let scripts = prepare_workspace(work.path(), opts.file_bytes)?;
    let calls = Arc::new(AtomicU64::new(0));
    let mock = mock::Mock::start(Arc::clone(&calls))?;

    let mut systems = vec![System::Lsm, System::LsmFull];
    if with_peers {
        systems.extend([System::PydanticAi, System::OpenAiAgents]);
    }
    if let Some(b) = &opts.baseline
        && !b.is_file()
    {
        bail!(
            "--baseline {}: no such file; give the path of an `lsm` binary (e.g. a copy of \
             target/release/lsm built from an earlier commit)",
            b.display()
        );
    }
    let bench = Bench {
        lsm: &lsm,
        python: &python,
        scripts: &scripts,
        work: work.path(),
        mock: &mock,
        calls: &calls,
    };
    let baseline = opts.baseline.as_deref().map(|b| Bench { lsm: b, ..bench });
    if opts.instructions {
        return instructions::bench(&bench, baseline.as_ref(), &bare_exchange, opts);
    }
    let mut rows = Vec::new();
    for &system in &systems {
        let mut points = Vec::new();
        let mut baseline_points = Vec::new();
        for &n in &opts.calls {
            let mut cpu = Vec::new();
            let mut rss = 0;
            let mut baseline_cpu = Vec::new();
            let mut baseline_rss = 0;
            for _ in 0..opts.runs {
                if system == System::Lsm
                    && let Some(b) = &baseline
                {
                    // Before the current build's run, whose bodies are recorded.
                    let used = b.run(System::LsmBaseline, n, 1)?;
                    baseline_cpu.push(used.cpu_s);
                    baseline_rss = baseline_rss.max(used.max_rss_kb);
                }
                if system == System::Lsm {
                    mock.record();
                }
                let used = bench.run(system, n, 1)?;
                cpu.push(used.cpu_s);
                rss = rss.max(used.max_rss_kb);
            }
            if system == System::Lsm {
                write_bodies(&bodies_file(work.path(), n), &mock.take_recorded())?;
            }
            let median = median(&mut cpu);
            eprintln!(
                "xtask: [bench-peers] {:<20} N = {n:>5}: {median:.3} s CPU{}, {} MB",
                system.name(),
                spread(&cpu),
                rss / 1024
            );
            points.push((n, median, rss));
            if !baseline_cpu.is_empty() {
                let baseline_median = self::median(&mut baseline_cpu);
                eprintln!(
                    "xtask: [bench-peers] {:<20} N = {n:>5}: {baseline_median:.3} s CPU{}, {} MB",
                    System::LsmBaseline.name(),
                    spread(&baseline_cpu),
                    baseline_rss / 1024
                );
                baseline_points.push((n, baseline_median, baseline_rss));
            }
        }
        rows.push(Row { system, points });
        if !baseline_points.is_empty() {
            rows.push(Row {
                system: System::LsmBaseline,
                points: baseline_points,
            });
        }
        if system == System::Lsm {
            rows.push(bench.floor(&bare_exchange, opts, System::BareExchange)?);
            rows.push(bench.floor(&bare_exchange, opts, System::BareSocket)?);
        }
    }
    let mut concurrent = Vec::new();
    if opts.agents > 0 {
        for &system in &systems {
            if system == System::LsmFull {
                continue;
            }
            let used = bench.run(system, opts.agent_calls, opts.agents)?;
            eprintln!(
                "xtask: [bench-peers] {:<20} {} agents × {} calls: {:.3} s CPU, {} MB",
                system.name(),
                opts.agents,
                opts.agent_calls,
                used.cpu_s,
                used.max_rss_kb / 1024
            );
            concurrent.push((system, used));
        }
    }
    if opts.json {
        println!("{}", to_json(&rows, &concurrent, opts));
    } else {
        print_tables(&rows, &concurrent, opts);
    }
    Ok(())
}

/// Everything one measured run needs.
struct Bench<'a> {
    lsm: &'a Path,
    python: &'a Path,
    scripts: &'a peers::Scripts,
    work: &'a Path,
    mock: &'a mock::Mock,
    calls: &'a AtomicU64,
}

/// The task every agent gets (the mock decides what it does).
const TASK: &str = "Read the files the tool calls name, one after the other, then say how many \
                    you read.";

impl Bench<'_> {
    /// Run `system` with `agents` agents of `n` calls each; check the mock saw every call.
    fn run(&self, system: System, n: u64, agents: usize) -> Result<Usage> {
        let (mut cmd, started, before) = self.prepare(system, n, agents)?;
        let used = measure(&mut cmd, self.work, &format!("{system:?}-{n}-{agents}"))?;
        self.check_calls(system, n, agents, started, before)?;
        Ok(used)
    }

    /// The command that runs `system` with `agents` agents of `n` calls each, with the mock
    /// set for `n` calls; also the time and the mock's request count before it runs.
    fn prepare(
        &self,
        system: System,
        n: u64,
        agents: usize,
    ) -> Result<(Command, std::time::SystemTime, u64)> {
        self.calls.store(n, Ordering::SeqCst);
        let before = self.mock.requests();
        let cmd = match system {
            System::Lsm | System::LsmFull | System::LsmBaseline => {
                self.lsm_command(system, n, agents)
            }
            System::PydanticAi | System::OpenAiAgents => {
                let script = if system == System::PydanticAi {
                    &self.scripts.pydantic_ai
                } else {
                    &self.scripts.openai_agents
                };
                let mut cmd = Command::new(self.python);
                cmd.arg(script)
                    .arg(&self.mock.base_url)
                    .arg(n.to_string())
                    .arg(agents.to_string())
                    .arg(TASK);
                cmd
            }
            System::BareExchange | System::BareSocket => {
                bail!("the bare exchange runs no agent (see Bench::floor)")
            }
        };
        Ok((cmd, std::time::SystemTime::now(), before))
    }

    /// Check a finished run of `system`: every `lsm` run wrote its summary with no call
    /// denied, and the mock saw at least the conversation's calls.
    fn check_calls(
        &self,
        system: System,
        n: u64,
        agents: usize,
        started: std::time::SystemTime,
        before: u64,
    ) -> Result<()> {
        if matches!(system, System::Lsm | System::LsmFull | System::LsmBaseline) {
            check_no_denials(self.work, started, agents)?;
        }
        let expected = (n + 1) * agents as u64;
        let seen = self.mock.requests() - before;
        // lsm's default strategy may add its own summarization calls once the history
        // outgrows the window; every system makes at least the conversation's calls.
        let extra_allowed = matches!(system, System::Lsm | System::LsmBaseline);
        if seen < expected || (seen != expected && !extra_allowed) {
            bail!(
                "{} made {seen} model calls for {agents} agent(s) × {n} tool calls; {expected} \
                 expected (its output is in {})",
                system.name(),
                self.work.display()
            );
        }
        if seen != expected {
            eprintln!(
                "xtask: [bench-peers] {} made {} summarization call(s) of its own at N = {n}",
                system.name(),
                seen - expected
            );
        }
        Ok(())
    }

    /// A floor row: at each N, the bodies of `lsm`'s last run there replayed by
    /// `bare_exchange` with `system`'s client (its CPU for the exchanges alone).
    fn floor(&self, bare_exchange: &Path, opts: &Options, system: System) -> Result<Row> {
        let mut points = Vec::new();
        for &n in &opts.calls {
            let bodies = bodies_file(self.work, n);
            let mut cpu = Vec::new();
            for _ in 0..opts.runs {
                self.calls.store(n, Ordering::SeqCst);
                let before = self.mock.requests();
                let out = Command::new(bare_exchange)
                    .args(["--client", system.client()])
                    .arg(&self.mock.base_url)
                    .arg(&bodies)
                    .stdin(Stdio::null())
                    .output()
                    .with_context(|| format!("cannot start {}", bare_exchange.display()))?;
                if !out.status.success() {
                    bail!(
                        "{} failed ({}): {}",
                        bare_exchange.display(),
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                let report: serde_json::Value = serde_json::from_slice(&out.stdout)
                    .context("bare_exchange printed no JSON report")?;
                let sent = report["requests"].as_u64().unwrap_or(0);
                let seen = self.mock.requests() - before;
                if sent == 0 || seen != sent {
                    bail!("bare_exchange sent {sent} requests but the mock answered {seen}");
                }
                cpu.push(report["cpu_s"].as_f64().unwrap_or(0.0));
            }
            let median = median(&mut cpu);
            eprintln!(
                "xtask: [bench-peers] {:<20} N = {n:>5}: {median:.3} s CPU{}",
                system.name(),
                spread(&cpu)
            );
            points.push((n, median, 0));
        }
        Ok(Row { system, points })
    }

    fn lsm_command(&self, system: System, n: u64, agents: usize) -> Command {
        let mut cmd = Command::new(self.lsm);
        cmd.arg("agent");
        if agents > 1 {
            cmd.args(["run-many", "general", "--count", &agents.to_string()])
                .args(["--max-concurrent", &agents.to_string()]);
        } else {
            cmd.args(["run", "general"]);
        }
        cmd.args([
            "--task",
            TASK,
            "--provider",
            "compatible",
            "--model",
            "mock",
        ])
        .args(["--base-url", &self.mock.base_url])
        .args(["--max-iterations", &(n + 10).to_string()])
        .args(["--max-tokens-budget", "1000000000000"])
        // The defaults of a fresh install, not this machine's user configuration.
        .env("XDG_CONFIG_HOME", self.work.join("xdg"))
        .env_remove("LSM_CONFIG")
        // Every call reads its file, as the peers' do: the default rate limit (120 calls of
        // a tool per minute) would deny the later ones, which then cost less.
        .args([
            "-c",
            "sandbox.rate_limit={ calls = 1000000, per_seconds = 60 }",
        ]);
        if system == System::LsmFull {
            cmd.args(["-c", "agents.context_window_strategy=full"]);
        }
        cmd
    }
}

/// Run `cmd` in `work` under `cargo xtask measure-child` (a fresh process whose only child
/// it is, so its `RUSAGE_CHILDREN` is the command's own), its output into `work/out/`.
fn measure(cmd: &mut Command, work: &Path, label: &str) -> Result<Usage> {
    let out = work.join("out");
    let usage_file = out.join(format!("{label}.usage.json"));
    let log = std::fs::File::create(out.join(format!("{label}.log")))?;
    let mut wrapper = Command::new(std::env::current_exe()?);
    wrapper
        .arg("measure-child")
        .arg("--out")
        .arg(&usage_file)
        .arg("--")
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapper.env(k, v),
            None => wrapper.env_remove(k),
        };
    }
    let status = wrapper.status().context("cannot start measure-child")?;
    if !status.success() {
        bail!(
            "`{}` failed ({status}); its output: {}",
            cmd.get_program().to_string_lossy(),
            out.join(format!("{label}.log")).display()
        );
    }
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&usage_file)?)?;
    Ok(Usage {
        cpu_s: v["cpu_s"].as_f64().unwrap_or(0.0),
        max_rss_kb: v["max_rss_kb"].as_u64().unwrap_or(0),
    })
}

/// `cargo xtask measure-child --out FILE -- PROGRAM ARGS...`: run the program, then write its
/// CPU time and peak RSS as JSON to FILE; fails as the program failed.
pub fn measure_child(out: &Path, command: &[String]) -> Result<()> {
    use nix::sys::resource::{UsageWho, getrusage};
    let Some((program, args)) = command.split_first() else {
        bail!("measure-child needs a program to run after `--`");
    };
    let status = Command::new(program)
        .args(args)
        .status()
        .with_context(|| format!("cannot start {program}"))?;
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).context("getrusage")?;
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    let cpu_s = seconds(usage.user_time()) + seconds(usage.system_time());
    std::fs::write(
        out,
        json!({"cpu_s": cpu_s, "max_rss_kb": usage.max_rss(), "exit": status.code()}).to_string(),
    )?;
    if !status.success() {
        bail!("{program} exited with {status}");
    }
    Ok(())
}

/// `cargo xtask serve-mock --calls N [--file-bytes B]`: the mock alone, until the process is
/// killed; the files it names are written under the current folder's `files/`.
pub fn serve_mock(calls: u64, file_bytes: Option<usize>) -> Result<()> {
    check_file_bytes(file_bytes)?;
    write_files(&std::env::current_dir()?, file_bytes)?;
    let mock = mock::Mock::start(Arc::new(AtomicU64::new(calls)))?;
    println!("{}", mock.base_url);
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests;
