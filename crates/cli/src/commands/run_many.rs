//! `lsm agent run-many`: the same agent on the same task several times at once, in one
//! process, through the [`AgentRuntimeManager`] the TUI uses (at most `--max-concurrent`
//! running, the rest queued). Nobody answers the runs' requests: permission requests are
//! denied, or approved with `--yes`. Each run keeps its own records, as `lsm agent run`'s.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use clap::Args;

use lsm_app::error::usage;
use lsm_app::runtime::{AgentRuntimeManager, HarnessLauncher, ManagerConfig, RunInfo, RunStatus};

use crate::exit;
use crate::terminal::text::masked_line;

/// `lsm agent run-many`.
#[derive(Debug, Args)]
pub struct RunManyArgs {
    /// The agent to run (see `lsm agent list`).
    pub name: String,

    /// What each run should do (agents that take a task).
    #[arg(long)]
    pub task: Option<String>,

    /// What each run should work on (agents that take a topic).
    #[arg(long)]
    pub topic: Option<String>,

    /// How many runs.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub count: usize,

    /// Runs at once; the rest wait for a free slot (default: [agents] max_concurrent).
    #[arg(long, value_name = "N")]
    pub max_concurrent: Option<usize>,

    #[command(flatten)]
    pub provider: lsm_app::wiring::ProviderFlags,

    /// Root of the agents' workspaces and run records (default: [agents] agents_folder).
    #[arg(long, value_name = "DIR")]
    pub agents_folder: Option<PathBuf>,

    /// Iteration limit of each run (default: [agents] max_iterations).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_iterations: Option<u32>,

    /// Token ceiling of each run (default: [agents] max_tokens_budget).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tokens_budget: Option<u64>,

    /// Approve every permission request (otherwise they are denied: nobody is asked).
    #[arg(long)]
    pub yes: bool,

    /// Print the runs' results as one JSON array on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Run; returns the exit code: 0 when every run completed, else the code of the first run
/// (in start order) that did not, as `lsm agent run` would have returned it.
pub fn run(cfg: &lsm_app::config::ConfigArgs, args: RunManyArgs) -> u8 {
    exit::block_on_command(run_async(cfg, args))
}

async fn run_async(cfg: &lsm_app::config::ConfigArgs, args: RunManyArgs) -> Result<u8> {
    if args.count == 0 {
        return Err(usage("--count must be at least 1"));
    }
    let mut config = cfg.load()?;
    let catalog = lsm_app::agent_defs::catalog(&config)?;
    let definition = lsm_app::agent_defs::find(&catalog, &args.name)?;
    let objective = lsm_app::run::objective(
        definition,
        args.task.as_deref(),
        args.topic.as_deref(),
        None,
    )?;
    let cwd = std::env::current_dir()?;
    if let Some(dir) = &args.agents_folder {
        config.agents.agents_folder = cwd.join(dir);
    }
    if let Some(n) = args.max_iterations {
        config.agents.max_iterations = n;
    }
    if let Some(n) = args.max_tokens_budget {
        config.agents.max_tokens_budget = n;
    }
    config.confine_to_working_dir_by_default(&cwd);
    let flags = args.provider.clone();
    // Fail now, once, rather than in every run.
    let llm = lsm_app::agent_defs::resolve_llm(&config, definition)?;
    lsm_app::wiring::build_provider(&llm, &flags, &cwd, &config.source_name())?;
    let max_concurrent = args.max_concurrent.unwrap_or(config.agents.max_concurrent);
    if max_concurrent == 0 {
        return Err(usage("--max-concurrent must be at least 1"));
    }
    let manager = AgentRuntimeManager::new(
        ManagerConfig {
            max_concurrent,
            log_stream_queue_limit: config.agents.log_stream_queue_limit,
            interaction: config.agents.interaction.clone(),
            describe: crate::terminal::progress::describe,
        },
        Arc::new(HarnessLauncher::new(config, catalog.clone(), flags, cwd)),
        tokio::runtime::Handle::current(),
    );
    let mut ids = Vec::with_capacity(args.count);
    let mut answerers = Vec::with_capacity(args.count);
    for _ in 0..args.count {
        let id = manager.start(definition.name(), &objective)?;
        answerers.push(lsm_app::run::answer::spawn_unattended(
            manager.channel(&id)?,
            args.yes,
        ));
        ids.push(id);
    }
    let stop = manager.clone();
    let signals = crate::signals::on_stop("the runs stop at their next step", move || {
        stop.shutdown("interrupted");
    });
    let mut ended = Vec::with_capacity(ids.len());
    for id in &ids {
        ended.push(manager.wait(id).await?);
    }
    signals.abort();
    for a in answerers {
        a.abort();
    }
    report(&ended, args.json);
    Ok(exit_code(&ended))
}

fn report(runs: &[RunInfo], json: bool) {
    if json {
        let runs: Vec<serde_json::Value> = runs
            .iter()
            .map(|r| {
                let end = r.end.as_ref();
                serde_json::json!({
                    "run_id": r.run_id,
                    "record_id": r.record_id,
                    "agent": r.agent,
                    "status": r.status.as_str(),
                    "outcome": end.map(|e| e.outcome.as_str()),
                    "final_text": end.map(|e| lsm_app::secrets::clean(&e.final_text)),
                })
            })
            .collect();
        crate::terminal::output::print_json(&serde_json::Value::Array(runs).to_string());
        return;
    }
    for r in runs {
        let end = r.end.as_ref();
        let first_line = end
            .and_then(|e| e.final_text.lines().next())
            .unwrap_or_default();
        println!(
            "{} {} {} ({}): {}",
            r.run_id,
            r.record_id.as_deref().unwrap_or("-"),
            r.status,
            end.map_or("-", |e| e.outcome.as_str()),
            masked_line(first_line)
        );
    }
    let completed = runs
        .iter()
        .filter(|r| r.status == RunStatus::Completed)
        .count();
    eprintln!("{completed} of {} runs completed", runs.len());
}

fn exit_code(runs: &[RunInfo]) -> u8 {
    runs.iter()
        .find(|r| r.status != RunStatus::Completed)
        .map_or(exit::OK, |r| {
            let outcome = r.end.as_ref().map_or("error", |e| e.outcome.as_str());
            lsm_phase::StopReason::ALL
                .iter()
                .find(|s| s.as_str() == outcome)
                .map_or(exit::ERROR, |s| exit::for_stop_reason(*s))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsm_app::runtime::RunEnd;

    fn info(status: RunStatus, outcome: &str) -> RunInfo {
        RunInfo {
            run_id: "r1".into(),
            agent: "general".into(),
            task: "t".into(),
            status,
            record_id: None,
            end: Some(RunEnd {
                status,
                outcome: outcome.into(),
                final_text: String::new(),
            }),
            workers: Vec::new(),
        }
    }

    #[test]
    fn the_exit_code_is_the_first_unfinished_runs() {
        let done = info(RunStatus::Completed, "done");
        assert_eq!(exit_code(&[done.clone(), done.clone()]), exit::OK);
        let stalled = info(RunStatus::Stopped, "stalled");
        let failed = info(RunStatus::Failed, "error");
        assert_eq!(
            exit_code(&[done.clone(), stalled, failed.clone()]),
            exit::STALLED
        );
        assert_eq!(exit_code(&[failed, done]), exit::ERROR);
    }
}
