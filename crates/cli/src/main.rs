//! `lsm`: the command-line program — the terminal front end of the engine, `lsm-app` (the
//! composition root, where the concrete crates are wired together). Here: the commands
//! ([`commands`]), what they show on the terminal ([`terminal`]), the TUI ([`tui`]), exit
//! codes ([`exit`]) and the process's signals.
//!
//! # What this program must never do
//!
//! - Print anything but the final run summary on stdout under `--json`.
//! - Exit 0 when a run did not finish: exit codes say how it ended (see [`exit`]).
//! - Lose a run's records: the harness writes them, also when the run fails.

#![allow(clippy::print_stdout, clippy::print_stderr)]

/// The allocator: mimalloc, whose per-thread free lists take a sixth off the instructions of
/// one model call and a quarter off the cold start against glibc's malloc (measured in
/// docs/PERFORMANCE.md). Without transparent huge pages (`no_thp`), its peak resident memory
/// is 2 MB above glibc's for one agent, 5 MB for fifty in one process.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod broken_pipe;
mod commands;
mod exit;
mod signals;
mod terminal;
mod tui;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use lsm_app::{config, secrets};

use commands::{
    agent_run, agent_view, chat, init, kb, llm, mcp, memory, run_many, runs, tools, worker,
};

/// What `lsm` is for, first thing in `lsm -h`.
const ABOUT: &str = "lsm runs LLM agents on your tasks and answers questions from your own \
documents, with token budgets they cannot exceed, tools confined to the folders you allow, \
your approval before anything is changed, and a record of every run.";

/// `lsm --help`: what it is for, then three examples.
const LONG_ABOUT: &str = "lsm runs LLM agents on your tasks and answers questions from your own \
documents, with token budgets they cannot exceed, tools confined to the folders you allow, \
your approval before anything is changed, and a record of every run.

Examples:
  lsm init                                          set up a provider for this project
  lsm agent run general --task \"Summarize notes.md into summary.md\"
  lsm ingest ~/notes && lsm query \"what did I decide about the boundary layer?\"";

/// `lsm --version`: the version and the commit it was built from.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("LSM_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "lsm",
    version = VERSION,
    about = ABOUT,
    long_about = LONG_ABOUT,
    propagate_version = true
)]
struct Cli {
    /// A configuration file read on top of the user file and the project's lsm.toml
    /// (see `lsm config show`).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Set one configuration key for this run, over every file and LSM_* variable
    /// (repeatable): -c agents.max_tokens_budget=5000 -c llm.model=gpt-4o.
    #[arg(short = 'c', long = "set", global = true, value_name = "KEY=VALUE")]
    overrides: Vec<String>,

    /// More log output on stderr (-v info, -vv debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run and inspect agents.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// List recorded runs and resume interrupted ones.
    #[command(subcommand)]
    Runs(runs::RunsCommand),
    /// Drive queued runs from the PostgreSQL store ([store] url), and take over the runs of
    /// workers that died.
    Worker(worker::WorkerArgs),
    /// Inspect the tools agents can use.
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// Inspect, approve and remove what agents remember across runs.
    #[command(subcommand)]
    Memory(memory::MemoryCommand),
    /// A conversation with an agent in the terminal: each line a turn (a durable run),
    /// slash commands (/help), Ctrl-C stops the turn; `--continue` picks one up again.
    Chat(chat::ChatArgs),
    /// A terminal UI: start runs, follow their logs, answer their requests.
    Tui(tui::TuiArgs),
    /// Check the configured LLM provider.
    #[command(subcommand)]
    Llm(LlmCommand),
    /// Add folders of documents to the knowledge base (incremental).
    Ingest(kb::IngestArgs),
    /// Ask the knowledge base a question; the answer cites its sources.
    Query(kb::QueryArgs),
    /// Inspect and maintain the knowledge base.
    #[command(subcommand)]
    Kb(KbCommand),
    /// Write a commented lsm.toml here (provider, model, key variable; asked, or from flags)
    /// and ping the model.
    Init(init::InitArgs),
    /// Show the effective configuration and where each setting comes from.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print a shell completion script: `lsm completions bash > ~/.local/share/bash-completion/completions/lsm`.
    Completions(CompletionsArgs),
    /// Write the man pages (lsm.1 and one per subcommand) into a folder; `cargo xtask man`
    /// runs it.
    #[command(hide = true)]
    Man(ManArgs),
    /// Model Context Protocol: list the configured MCP servers and their tools, or serve
    /// lsm's own tools to other MCP clients.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
}

#[derive(Debug, Args)]
struct CompletionsArgs {
    /// The shell.
    shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
struct ManArgs {
    /// The folder to write the pages into (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Every effective setting with its source: file:line, environment variable, flag or
    /// default; with a run's options (`--max-tokens-budget 5000`, …), the configuration such
    /// a run gets, each option named as its setting's source.
    Show(commands::config::ShowArgs),
}

#[derive(Debug, Subcommand)]
enum LlmCommand {
    /// Make one tiny call and print provider, model, latency and usage (or why it failed).
    Ping(llm::PingArgs),
}

#[derive(Debug, Subcommand)]
enum KbCommand {
    /// Files, chunks, index size and embedder.
    Stats(kb::StatsArgs),
    /// Remove a file, or every file under a folder, from the index.
    Rm(kb::RmArgs),
}

#[derive(Debug, Subcommand)]
enum AgentCommand {
    /// Run an agent on a task or topic.
    Run(Box<agent_run::RunArgs>),
    /// Run the same agent on the same task several times at once, in one process (the
    /// runtime manager); nobody answers their requests (denied, or approved with --yes).
    RunMany(Box<run_many::RunManyArgs>),
    /// List the agents: name, tier, input, source (built-in, user or project definition
    /// file), description, and the tools their runs are offered under this configuration.
    List(ListArgs),
    /// Show one agent as its runs get it: source, tier or model, input, limits, tools (each
    /// with where it comes from), phases and system prompt.
    Show(ShowArgs),
    /// Check an agent definition file as a run would, without running it: exit 0 when it is
    /// valid under this configuration, 2 with the file and line of what is wrong.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
struct ShowArgs {
    /// The agent (see `lsm agent list`).
    name: String,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// The definition file (Markdown with TOML front matter; see docs/AGENTS.md).
    file: std::path::PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum ToolsCommand {
    /// List every tool a run can be offered: name, risk level, description, when it is
    /// offered (always, with memory on, with a knowledge base) and to which agents.
    List(ToolsListArgs),
}

#[derive(Debug, Args)]
struct ToolsListArgs {
    /// Only the tools this agent is offered (its allowlist).
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    // Before anything else (threads, logging): when started as the OS-sandbox helper of a
    // tool's program, confine this process and become that program.
    lsm_sandbox::confine::run_helper_if_requested();
    broken_pipe::install();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // Known before anything can print or record them.
    secrets::register_environment(std::env::vars());
    // Log lines on stderr would tear the TUI's screen: it logs nothing.
    if !matches!(cli.command, Command::Tui(_)) {
        init_logging(cli.verbose);
    }
    let cfg = config::ConfigArgs {
        file: cli.config,
        overrides: cli.overrides,
    };
    let cfg = &cfg;
    let code = match cli.command {
        Command::Tools(ToolsCommand::List(args)) => {
            tools::list(cfg, args.agent.as_deref(), args.json)
        }
        Command::Config(ConfigCommand::Show(args)) => commands::config::show(cfg, args),
        Command::Init(args) => init::run(cfg, args),
        Command::Completions(args) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut command, "lsm", &mut script);
            // A reader that went away (`| head`) is not an error.
            let _ = std::io::Write::write_all(&mut std::io::stdout(), &script);
            exit::OK
        }
        Command::Man(args) => match write_man_pages(&args.out) {
            Ok(n) => {
                eprintln!("wrote {n} man pages into {}", args.out.display());
                exit::OK
            }
            Err(e) => {
                eprintln!("error: cannot write the man pages: {e}");
                exit::ERROR
            }
        },
        // `--enqueue` stores the run for a worker instead of running it here.
        Command::Agent(AgentCommand::Run(args)) if args.enqueue => worker::submit(cfg, *args),
        Command::Agent(AgentCommand::Run(args)) => agent_run::run(cfg, *args),
        Command::Agent(AgentCommand::RunMany(args)) => run_many::run(cfg, *args),
        Command::Chat(args) => chat::run(cfg, args),
        Command::Agent(AgentCommand::List(args)) => agent_view::list(cfg, args.json),
        Command::Agent(AgentCommand::Show(args)) => agent_view::show(cfg, &args.name, args.json),
        Command::Agent(AgentCommand::Check(args)) => agent_view::check(cfg, &args.file, args.json),
        Command::Runs(command) => runs::run(cfg, command),
        Command::Worker(args) => worker::worker(cfg, args),
        Command::Memory(command) => memory::run(cfg, command),
        Command::Tui(args) => tui::run(cfg, args),
        Command::Llm(LlmCommand::Ping(args)) => llm::ping(cfg, args),
        Command::Ingest(args) => kb::ingest(cfg, args),
        Command::Query(args) => kb::query(cfg, args),
        Command::Kb(KbCommand::Stats(args)) => kb::stats(cfg, args),
        Command::Kb(KbCommand::Rm(args)) => kb::rm(cfg, args),
        Command::Mcp(command) => mcp::run(cfg, command),
    };
    ExitCode::from(code)
}

/// `lsm.1` and one page per subcommand (`lsm-agent-run.1`, …) into `dir`; returns how many.
fn write_man_pages(dir: &std::path::Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let mut command = <Cli as clap::CommandFactory>::command();
    command.build();
    let mut written = 0;
    let mut pending = vec![(String::from("lsm"), command)];
    while let Some((name, command)) = pending.pop() {
        if command.is_hide_set() {
            continue;
        }
        let mut page = Vec::new();
        clap_mangen::Man::new(command.clone())
            .title(name.clone())
            .render(&mut page)?;
        std::fs::write(dir.join(format!("{name}.1")), page)?;
        written += 1;
        for sub in command.get_subcommands() {
            if sub.get_name() != "help" {
                pending.push((format!("{name}-{}", sub.get_name()), sub.clone()));
            }
        }
    }
    Ok(written)
}

/// How a log line's fields are written: tracing-subscriber makes its `message` safe for a
/// terminal but writes every other field as it is, and fields carry outside text (a file's
/// name, a server's words). Each is shown the way `lsm` shows such text everywhere.
fn log_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> {
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        if field.name() == "message" {
            write!(
                w,
                "{}",
                terminal::text::terminal_text(&format!("{value:?}"))
            )
        } else {
            write!(
                w,
                "{}={}",
                field.name(),
                terminal::text::one_line(format!("{value:?}"))
            )
        }
    })
    .delimited(" ")
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        // The harness's "phase ended in error" warning is the run's error, which the command
        // prints itself (once); `-v` shows it too.
        0 => "warn,lsm_harness::harness=error",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env(config::LOG_ENV)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .fmt_fields(log_fields())
        .with_env_filter(filter)
        // Provider errors and agent log lines are logged: redact every line.
        .with_writer(|| secrets::RedactingWriter::new(std::io::stderr()))
        .with_ansi(use_color(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        ))
        .without_time()
        .try_init();
}

/// Colour (ANSI codes) only on a terminal, and never when `NO_COLOR` is set to anything but
/// the empty string (<https://no-color.org>).
fn use_color(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

#[cfg(test)]
mod color_tests {
    use super::use_color;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_color(true, None));
        assert!(use_color(true, Some(OsStr::new(""))));
        assert!(!use_color(true, Some(OsStr::new("1"))));
        assert!(!use_color(false, None));
    }
}
