//! Runs in PostgreSQL that a worker starts: what a queued run is ([`QueuedRequest`]),
//! `lsm runs submit` / `lsm agent run --enqueue`, and `lsm worker`, which claims queued runs
//! (and runs whose driver died) and drives them with the durable core.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::agent_run::{self, RunArgs, StopModeArg};
use crate::agents_cmd::{self, Output};
use crate::exit::{self, usage};
use crate::foreground::{self, Policy};

/// Everything a worker needs to start a submitted run as `lsm agent run` would have.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueuedRequest {
    /// The agent.
    pub agent: String,
    /// `--task`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// `--topic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// `--max-rounds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,
    /// `--provider` (a script's path made absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// `--model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `--base-url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// `--max-iterations`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// `--max-tokens-budget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_budget: Option<u64>,
    /// `--max-cost-usd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// `--allow-tool`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_tools: Vec<String>,
    /// `--stop-mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_mode: Option<String>,
    /// `--yes`: the worker approves its permission requests (else they are denied).
    #[serde(default)]
    pub yes: bool,
    /// The submitter's working directory (the worker works there when it exists on its
    /// machine, else in its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
}

impl QueuedRequest {
    /// The request `args` make, submitted from `cwd`.
    pub fn of(args: &RunArgs, cwd: &std::path::Path) -> QueuedRequest {
        QueuedRequest {
            agent: args.name.clone(),
            task: args.task.clone(),
            topic: args.topic.clone(),
            max_rounds: args.max_rounds,
            provider: args
                .llm
                .provider
                .as_ref()
                .map(|spec| match spec.strip_prefix("scripted:") {
                    Some(file) => format!("scripted:{}", cwd.join(file).display()),
                    None => spec.clone(),
                }),
            model: args.llm.model.clone(),
            base_url: args.llm.base_url.clone(),
            max_iterations: args.max_iterations,
            max_tokens_budget: args.max_tokens_budget,
            max_cost_usd: args.max_cost_usd,
            allow_tools: args.allow_tools.clone(),
            stop_mode: args.stop_mode.map(|m| match m {
                StopModeArg::Interactive => "interactive".into(),
                StopModeArg::StrictAutomation => "strict_automation".into(),
            }),
            yes: args.yes,
            working_dir: Some(cwd.display().to_string()),
        }
    }

    /// The arguments of `lsm agent run` it stands for.
    pub fn args(&self) -> RunArgs {
        RunArgs {
            name: self.agent.clone(),
            task: self.task.clone(),
            topic: self.topic.clone(),
            max_rounds: self.max_rounds,
            llm: crate::wiring::ProviderFlags {
                provider: self.provider.clone(),
                model: self.model.clone(),
                base_url: self.base_url.clone(),
                ..crate::wiring::ProviderFlags::default()
            },
            agents_folder: None,
            max_iterations: self.max_iterations,
            max_tokens_budget: self.max_tokens_budget,
            max_cost_usd: self.max_cost_usd,
            json: false,
            output_format: None,
            resume: None,
            yes: self.yes,
            allow_tools: self.allow_tools.clone(),
            stop_mode: match self.stop_mode.as_deref() {
                Some("strict_automation") => Some(StopModeArg::StrictAutomation),
                Some(_) => Some(StopModeArg::Interactive),
                None => None,
            },
            contract: None,
            max_workers: None,
            enqueue: false,
        }
    }
}

/// `lsm runs submit` and `lsm agent run --enqueue`: store the run for a worker and print its
/// id (`{"run_id": ..., "status": "queued"}` with `--json`).
pub fn submit(cfg: &crate::config::ConfigArgs, args: RunArgs) -> u8 {
    exit::block_on_command(async move {
        let config = cfg.load()?;
        let Some(pg) = crate::run_store::pg_runs(&config)? else {
            return Err(usage(
                "a queued run needs the PostgreSQL store: set [store] url (or LSM_STORE_URL) \
                 to postgres://USER@HOST:PORT/DATABASE",
            ));
        };
        let catalog = crate::agent_defs::catalog(&config)?;
        let definition = crate::agent_defs::find(&catalog, &args.name)?;
        let objective = agents_cmd::objective(
            definition,
            args.task.as_deref(),
            args.topic.as_deref(),
            args.max_rounds,
        )?;
        if args.resume.is_some() {
            return Err(usage("--enqueue starts a new run; it cannot take --resume"));
        }
        let cwd = std::env::current_dir()?;
        let request = QueuedRequest::of(&args, &cwd);
        let run_id = lsm_harness::new_run_id();
        pg.submit(
            &run_id,
            definition.name(),
            &objective,
            serde_json::to_value(&request)?,
        )
        .await
        .map_err(|e| usage(format!("[store] url: {e}")))?;
        if args.json {
            println!(
                "{}",
                serde_json::json!({"run_id": run_id, "status": "queued", "agent": definition.name()})
            );
        } else {
            println!("{run_id}");
        }
        Ok(exit::OK)
    })
}

/// `lsm worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Runs driven at once.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub concurrency: usize,
    /// Only runs of these agents (comma-separated or repeated; default: any).
    #[arg(long, value_name = "AGENT", value_delimiter = ',')]
    pub agents: Vec<String>,
    /// Exit once no run is queued or running (for batches and tests); otherwise wait for
    /// work until SIGINT/SIGTERM.
    #[arg(long)]
    pub exit_when_idle: bool,
    /// How often to look for work when there is none, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub poll_ms: u64,
    /// Root of the agents' workspaces on this machine (default: [agents] agents_folder).
    #[arg(long, value_name = "DIR")]
    pub agents_folder: Option<PathBuf>,
}

/// `lsm worker`: claim runs and drive them until stopped. SIGINT/SIGTERM: no new runs; the
/// runs in flight are dropped between two steps and handed back (their leases released),
/// so another worker resumes them from their journals at once.
pub fn worker(cfg: &crate::config::ConfigArgs, args: WorkerArgs) -> u8 {
    exit::block_on_command(worker_loop(cfg, args))
}

async fn worker_loop(cfg: &crate::config::ConfigArgs, args: WorkerArgs) -> Result<u8> {
    if args.concurrency == 0 {
        return Err(usage("--concurrency must be at least 1"));
    }
    let mut config = cfg.load()?;
    let catalog = crate::agent_defs::catalog(&config)?;
    for a in &args.agents {
        crate::agent_defs::find(&catalog, a)?;
    }
    if let Some(dir) = &args.agents_folder {
        config.agents.agents_folder = std::env::current_dir()?.join(dir);
    }
    let Some(pg) = crate::run_store::pg_runs(&config)? else {
        return Err(usage(
            "lsm worker needs the PostgreSQL store: set [store] url (or LSM_STORE_URL)",
        ));
    };
    let shutdown = CancellationToken::new();
    let _signals =
        crate::signals::on_stop("the worker's runs in flight stop at their next step", {
            let stop = shutdown.clone();
            move || stop.cancel()
        });
    eprintln!(
        "worker {} on {} (concurrency {})",
        pg.owner(),
        // From `[store] url`, a setting a project's lsm.toml can make.
        crate::text::one_line(pg.db().settings().target()),
        args.concurrency
    );
    let mut running: JoinSet<()> = JoinSet::new();
    let mut in_flight: Vec<(tokio::task::AbortHandle, String)> = Vec::new();
    let poll = Duration::from_millis(args.poll_ms.max(10));
    loop {
        while !shutdown.is_cancelled() && running.len() < args.concurrency {
            let claimed = match pg.claim(&args.agents).await {
                Ok(c) => c,
                Err(e) => {
                    say(format!("worker: cannot claim a run: {e}"));
                    None
                }
            };
            let Some(row) = claimed else { break };
            let run_id = row.run_id.clone();
            let (config, pg) = (config.clone(), pg.clone());
            let handle = running.spawn(async move { drive(config, pg, row).await });
            in_flight.push((handle, run_id));
        }
        if shutdown.is_cancelled() {
            // Dropped between two steps (a journal line is written whole, synchronously);
            // their journals say where they were, so the worker that takes them next
            // resumes them as after a crash.
            running.abort_all();
            while running.join_next().await.is_some() {}
            for (_, run_id) in &in_flight {
                if let Err(e) = pg.release(run_id) {
                    say(format!("worker: cannot hand run {run_id} back: {e}"));
                } else {
                    say(format!("worker: handed run {run_id} back"));
                }
            }
            return Ok(exit::OK);
        }
        if running.is_empty() && args.exit_when_idle && nothing_left(&pg, &args.agents).await {
            return Ok(exit::OK);
        }
        tokio::select! {
            Some(_) = running.join_next(), if !running.is_empty() => {}
            () = tokio::time::sleep(poll) => {}
            () = shutdown.cancelled() => {}
        }
        in_flight.retain(|(h, _)| !h.is_finished());
    }
}

/// Whether no run of `agents` is queued or running anywhere.
async fn nothing_left(pg: &lsm_store_pg::PgRuns, agents: &[String]) -> bool {
    let filter = lsm_store_pg::ListFilter {
        statuses: vec!["queued".into(), "running".into()],
        ..lsm_store_pg::ListFilter::default()
    };
    match pg.list(&filter).await {
        Ok(rows) => !rows
            .iter()
            .any(|r| agents.is_empty() || agents.contains(&r.agent)),
        Err(_) => false,
    }
}

/// A line on the worker's stderr that carries outside text (an error a server or a tool
/// wrote, a stored request, a queued row's id and agent): secrets masked as in every error
/// `lsm` prints, and shown on one line (a line break in a row's id cannot forge a line of
/// the worker's), never obeyed by a terminal.
fn say(line: String) {
    eprintln!("{}", crate::text::masked_line(&line));
}

/// Drive one claimed run to its end (a new run from its request, or a resume from its
/// journal).
async fn drive(config: crate::config::Config, pg: lsm_store_pg::PgRuns, row: lsm_store_pg::RunRow) {
    let run_id = row.run_id.clone();
    let request: QueuedRequest = match serde_json::from_value(row.request.clone()) {
        Ok(r) => r,
        Err(e) => {
            say(format!(
                "run {run_id}: its request cannot be read ({e}); ending it as failed"
            ));
            let _ = pg.finish(
                &run_id,
                "failed",
                serde_json::json!({"status": "failed", "error": e.to_string()}),
            );
            return;
        }
    };
    let mut args = request.args();
    let resuming = row.last_seq > 0;
    if resuming {
        args.resume = Some(run_id.clone());
        args.name = String::new();
    }
    // The submitter's working directory when this machine has it, else the worker's own.
    let cwd = request
        .working_dir
        .as_deref()
        .map(PathBuf::from)
        .filter(|d| d.is_dir());
    // The id and the agent are the row's: whoever can write to the database chose them.
    say(format!(
        "run {run_id} ({}): {}",
        row.agent,
        if resuming {
            format!(
                "resuming after line {} (attempt {})",
                row.last_seq, row.attempts
            )
        } else {
            "starting".to_string()
        }
    ));
    let prepared = agent_run::prepare_with(
        config,
        args,
        Output::Silent,
        Some(pg.clone()),
        Some(run_id.clone()),
        cwd,
        CancellationToken::new(),
    );
    let run = match prepared {
        Ok(run) => run,
        Err(e) => {
            say(format!("run {run_id}: cannot be started: {e:#}"));
            // Handed back: a run that cannot start here may start on another worker; a run
            // that cannot start anywhere is ended so it is not claimed for ever.
            let _ = pg.finish(
                &run_id,
                "failed",
                serde_json::json!({"status": "failed", "error": format!("{e:#}")}),
            );
            return;
        }
    };
    let answering = foreground::spawn(
        Arc::clone(&run.channel),
        Policy {
            auto_approve: request.yes,
            interactive: false,
        },
        None,
        std::io::sink(),
    );
    let channel = Arc::clone(&run.channel);
    let lease_done = run.lease_done.clone();
    let finished = agents_cmd::execute(run.definition, &run.objective, run.factory, run.opts).await;
    lease_done.cancel();
    channel.shutdown("the run ended");
    answering.abort();
    match finished {
        Ok(f) => say(format!(
            "run {run_id}: {}",
            f.summary
                .as_ref()
                .map_or_else(|| "ended without records".to_string(), |s| s.status.clone())
        )),
        // A server's or a tool's words may be in the error.
        Err(e) => say(format!("run {run_id}: failed: {e:#}")),
    }
}
