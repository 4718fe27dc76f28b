//! `lsm chat [AGENT]`: a conversation in the terminal. Each line is one turn: a run of the
//! agent on that line, continuing the previous turn's conversation (`--continue`), so every
//! turn is a durable run of its own. Line editing and history (rustyline), progress and
//! permission prompts as `lsm agent run` shows them, slash commands, and Ctrl-C that stops
//! the current turn, not the session. `lsm chat --continue` picks the agent's last
//! conversation up — resuming its last turn first when a killed session left it unfinished.

use std::path::Path;

use anyhow::{Context as _, Result};
use clap::Args;
use lsm_app::run::{RunRequest, RunSettings, Start};
use lsm_app::store::list::{self, Status};
use lsm_app::wiring::ProviderFlags;
use rustyline::error::ReadlineError;
use tokio_util::sync::CancellationToken;

mod stream;

use crate::exit;
use crate::terminal::output::OutputFormat;
use crate::terminal::{foreground, notices, report, sinks};

/// Arguments of `lsm chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The agent to talk to (default: `general`).
    pub agent: Option<String>,

    /// Go on with a conversation: the run RUN_ID's, or without it the agent's latest run's
    /// (resumed first when it did not finish).
    #[arg(long = "continue", value_name = "RUN_ID", num_args = 0..=1, default_missing_value = "")]
    pub continue_run: Option<String>,

    /// `--provider`, `--model`, `--base-url`.
    #[command(flatten)]
    pub llm: ProviderFlags,

    /// The options that are settings (limits, agents folder).
    #[command(flatten)]
    pub settings: RunSettings,

    /// Approve every permission request automatically.
    #[arg(long)]
    pub yes: bool,
}

/// What a finished turn left: its run, the tokens it spent, its model.
struct Turn {
    run_id: String,
    tokens_used: u64,
    model: String,
}

/// The conversation so far.
struct Session {
    agent: String,
    llm: ProviderFlags,
    settings: RunSettings,
    yes: bool,
    /// The last turn's run: the next turn continues it.
    last: Option<String>,
    /// The turns of this session: run id and its status.
    turns: Vec<(String, String)>,
    /// Tokens the conversation spent (its earlier turns included) and the ceiling.
    used: u64,
    budget: u64,
    /// Provider and model of the last turn.
    model: Option<String>,
}

const HELP: &str = "/tokens  tokens used and left in this conversation\n\
/model [NAME]  the model (NAME: use it from the next turn)\n\
/tools  the tools the agent is offered\n\
/runs  this session's turns (each a run: `lsm runs show RUN`)\n\
/continue RUN  go on with the conversation of run RUN\n\
/exit  leave (Ctrl-D too); Ctrl-C stops the current turn";

/// Run the chat; returns the exit code.
pub fn run(cfg: &lsm_app::config::ConfigArgs, args: ChatArgs) -> u8 {
    exit::finish(chat(cfg, args))
}

fn chat(cfg: &lsm_app::config::ConfigArgs, args: ChatArgs) -> Result<u8> {
    let runtime = exit::runtime(None).context("cannot start the async runtime")?;
    let config = cfg.load()?;
    let cwd = std::env::current_dir()?;
    let config = config.with_options(&args.settings.options(), &cwd)?;
    let root = config.agents.agents_folder.clone();
    let pg = lsm_app::store::pg_runs(&config)?;
    let mut session = Session {
        agent: args.agent.unwrap_or_else(|| "general".into()),
        llm: args.llm,
        settings: args.settings,
        yes: args.yes,
        last: None,
        turns: Vec::new(),
        used: 0,
        budget: config.agents.max_tokens_budget,
        model: None,
    };
    let mut editor = rustyline::DefaultEditor::new()?;
    if let Some(wanted) = args.continue_run {
        let id = if wanted.is_empty() {
            latest_run(&root, &session.agent)?
        } else {
            wanted
        };
        if let Some(row) = list::scan(&root).into_iter().find(|r| r.run_id == id)
            && row.status == Status::Interrupted
        {
            eprintln!("run {id} did not finish: resuming it first");
            let request = RunRequest {
                resume: Some(id.clone()),
                yes: session.yes,
                ..RunRequest::default()
            };
            let (_, status) = turn(&runtime, &mut editor, cfg, request);
            session.turns.push((id.clone(), status));
        }
        session.continue_from(&root, &id, pg.as_ref())?;
    }
    let history = root.join(&session.agent).join("chat_history.txt");
    // A first chat has no history yet.
    let _ = editor.load_history(&history);
    eprintln!(
        "lsm chat with {} — /help lists the commands, /exit leaves",
        session.agent
    );
    loop {
        match editor.readline("you> ") {
            Ok(line) => {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let _ = editor.add_history_entry(line);
                if let Some(command) = line.strip_prefix('/') {
                    if !session.command(cfg, &root, pg.as_ref(), command) {
                        break;
                    }
                    continue;
                }
                let request = session.request(line);
                let (summary, status) = turn(&runtime, &mut editor, cfg, request);
                session.took(summary, status);
            }
            Err(ReadlineError::Interrupted) => eprintln!("(/exit leaves the chat)"),
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(dir) = history.parent()
        && std::fs::create_dir_all(dir).is_ok()
    {
        let _ = editor.save_history(&history);
    }
    Ok(exit::OK)
}

impl Session {
    /// The run of one turn on `line`.
    fn request(&self, line: &str) -> RunRequest {
        RunRequest {
            llm: self.llm.clone(),
            settings: self.settings.clone(),
            yes: self.yes,
            continue_run: self.last.clone(),
            ..RunRequest::default()
        }
        .of_agent(&self.agent, "task", line)
    }

    /// Take a finished turn in: the next continues it.
    fn took(&mut self, summary: Option<Turn>, status: String) {
        if let Some(s) = summary {
            self.used = self.used.saturating_add(s.tokens_used);
            self.model = Some(s.model);
            self.turns.push((s.run_id.clone(), status));
            self.last = Some(s.run_id);
        }
    }

    /// Go on with the conversation of run `id`.
    fn continue_from(
        &mut self,
        root: &Path,
        id: &str,
        pg: Option<&lsm_app::store::PgRuns>,
    ) -> Result<()> {
        let earlier = lsm_app::run::resume::continuation(root, id, &self.agent, pg)?;
        self.used = earlier.usage.tokens_used;
        self.last = Some(id.to_string());
        eprintln!(
            "going on with the conversation of run {id} ({} tokens spent so far)",
            self.used
        );
        Ok(())
    }

    /// Carry out a slash command; `false` to leave.
    fn command(
        &mut self,
        cfg: &lsm_app::config::ConfigArgs,
        root: &Path,
        pg: Option<&lsm_app::store::PgRuns>,
        command: &str,
    ) -> bool {
        let (name, rest) = command
            .split_once(char::is_whitespace)
            .map_or((command, ""), |(n, r)| (n, r.trim()));
        match name {
            "exit" | "quit" => return false,
            "help" => println!("{HELP}"),
            "tokens" => println!(
                "tokens: {} used of {} in this conversation, {} left",
                self.used,
                self.budget,
                self.budget.saturating_sub(self.used)
            ),
            "model" if !rest.is_empty() => {
                self.llm.model = Some(rest.to_string());
                println!("model: {rest} from the next turn");
            }
            "model" => match (&self.llm.model, &self.model) {
                (Some(m), _) | (None, Some(m)) => println!("model: {m}"),
                (None, None) => println!("model: the configured one (see `lsm config show`)"),
            },
            "tools" => {
                crate::commands::tools::list(cfg, Some(&self.agent), false);
            }
            "runs" if self.turns.is_empty() => println!("no turn yet in this session"),
            "runs" => {
                for (i, (run, status)) in self.turns.iter().enumerate() {
                    println!("{}. run {run} — {status}", i + 1);
                }
            }
            "continue" if rest.is_empty() => println!("/continue RUN: which run?"),
            "continue" => {
                if let Err(e) = self.continue_from(root, rest, pg) {
                    eprintln!("error: {e:#}");
                }
            }
            other => println!("unknown command /{other}; /help lists them"),
        }
        true
    }
}

/// The agent's latest run under `root`.
fn latest_run(root: &Path, agent: &str) -> Result<String> {
    list::scan(root)
        .into_iter()
        .filter(|r| r.agent == agent)
        .max_by(|a, b| a.started_at.cmp(&b.started_at))
        .map(|r| r.run_id)
        .ok_or_else(|| {
            exit::usage(format!(
                "--continue: agent '{agent}' has no run under {} to go on with",
                root.display()
            ))
        })
}

/// One turn: the run of `request` on the runtime, shown as `lsm agent run` shows it, while
/// this thread keeps the terminal: it reads the answer to a permission request or question
/// (the prompt, with its diff, is printed by the run's answerer), and Ctrl-C stops the
/// turn, not the chat. Its result and status; an error is printed, and the chat goes on.
fn turn(
    runtime: &tokio::runtime::Runtime,
    editor: &mut rustyline::DefaultEditor,
    cfg: &lsm_app::config::ConfigArgs,
    request: RunRequest,
) -> (Option<Turn>, String) {
    let stop = CancellationToken::new();
    let (lines, typed) = tokio::sync::mpsc::unbounded_channel::<String>();
    let (channel_tx, channel_rx) = std::sync::mpsc::channel();
    let task = runtime.spawn(run_turn(
        cfg.clone(),
        request,
        stop.clone(),
        typed,
        channel_tx,
    ));
    let ctrl_c = runtime.spawn({
        let stop = stop.clone();
        async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("Ctrl-C: stopping this turn (the chat goes on)…");
                stop.cancel();
            }
        }
    });
    let mut channel: Option<std::sync::Arc<lsm_interaction::InteractionChannel>> = None;
    while !task.is_finished() {
        if channel.is_none() {
            channel = channel_rx.try_recv().ok();
        }
        let asking = channel
            .as_ref()
            .and_then(|c| c.pending())
            .is_some_and(|p| p.acknowledged_at.is_some());
        if !asking {
            std::thread::sleep(std::time::Duration::from_millis(30));
            continue;
        }
        match editor.readline("answer> ") {
            Ok(line) => {
                let _ = lines.send(line);
                // The answerer takes it before the request is looked at again.
                std::thread::sleep(std::time::Duration::from_millis(150));
            }
            Err(ReadlineError::Interrupted | ReadlineError::Eof) => {
                eprintln!("stopping this turn (the chat goes on)…");
                stop.cancel();
                drop(channel.take());
                break;
            }
            Err(e) => {
                eprintln!("error: {e}");
                stop.cancel();
                break;
            }
        }
    }
    let done = runtime.block_on(task);
    ctrl_c.abort();
    match done {
        Ok(Ok(done)) => done,
        Ok(Err(e)) => {
            exit::report(&e, |_| false);
            (None, "failed to start".into())
        }
        Err(e) => {
            eprintln!("error: the turn ended abnormally: {e}");
            (None, "failed".into())
        }
    }
}

async fn run_turn(
    cfg: lsm_app::config::ConfigArgs,
    request: RunRequest,
    stop: CancellationToken,
    typed: tokio::sync::mpsc::UnboundedReceiver<String>,
    channel_tx: std::sync::mpsc::Sender<std::sync::Arc<lsm_interaction::InteractionChannel>>,
) -> Result<(Option<Turn>, String)> {
    let config = cfg.load()?;
    let yes = request.yes;
    let run = lsm_app::run::prepare(request, &config, Start::new(stop, notices::on_stderr()))?;
    let streamed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sink: std::sync::Arc<dyn lsm_app::protocol::EventSink> =
        std::sync::Arc::new(stream::Streaming::new(
            sinks::for_output(OutputFormat::Text, run.max_retries()),
            std::io::stdout(),
            std::sync::Arc::clone(&streamed),
        ));
    let run = run
        .watched_by(Some(sink))
        .with_log_sink(report::agent_log());
    let _ = channel_tx.send(std::sync::Arc::clone(run.channel()));
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let answering = foreground::spawn(
        std::sync::Arc::clone(run.channel()),
        foreground::Policy {
            auto_approve: yes,
            interactive,
        },
        interactive.then_some(typed),
        std::io::stderr(),
    );
    let finished = run.execute().await;
    answering.abort();
    let finished = finished?;
    let code = exit::of_run(&finished);
    match &finished.summary {
        // The answer is on screen already: only how the turn ended.
        Some(s)
            if streamed.load(std::sync::atomic::Ordering::SeqCst)
                && finished.output.error.is_none()
                && finished.records_problem.is_none() =>
        {
            eprintln!(
                "run {} — {} ({}), {} of {} tokens",
                s.run_id,
                s.status,
                s.run_outcome,
                s.token_usage.tokens_used,
                s.token_usage.max_tokens_budget
            );
        }
        _ => report::report(&finished, OutputFormat::Text, code)?,
    }
    let summary = finished.summary.as_ref().map(|s| Turn {
        run_id: s.run_id.clone(),
        tokens_used: s.token_usage.tokens_used,
        model: s.model.clone(),
    });
    let status = finished.summary.as_ref().map_or_else(
        || "no records".into(),
        |s| format!("{} ({})", s.status, s.run_outcome),
    );
    Ok((summary, status))
}
