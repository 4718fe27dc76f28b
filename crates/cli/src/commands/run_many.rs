//! `lsm agent run-many`: the same agent on the same task several times at once, in one
//! process, through the [`AgentRuntimeManager`] the TUI uses (at most `--max-concurrent`
//! running, the rest queued). Nobody answers the runs' requests: permission requests are
//! denied, or approved with `--yes`. Each run keeps its own records, as `lsm agent run`'s.

use std::sync::Arc;

use crate::exit::usage;
use anyhow::Result;
use clap::Args;
use lsm_app::run::RunRequest;
use lsm_app::runtime::{AgentRuntimeManager, HarnessLauncher, ManagerConfig, RunInfo, RunStatus};

use crate::exit;
use crate::terminal::text::masked_line;

/// `lsm agent run-many`.
#[derive(Debug, Args)]
pub struct RunManyArgs {
    /// The run, started `--count` times.
    #[command(flatten)]
    pub request: RunRequest,

    /// How many runs.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub count: usize,

    /// Runs at once; the rest wait for a free slot (default: [agents] max_concurrent).
    #[arg(long, value_name = "N")]
    pub max_concurrent: Option<usize>,

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
    if args.request.resume.is_some() {
        return Err(usage("run-many starts new runs; it cannot take --resume"));
    }
    let config = cfg.load()?;
    // Fail now, once, rather than in every run.
    let catalog = lsm_app::run::check(&args.request, &config)?;
    let cwd = std::env::current_dir()?;
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
        Arc::new(HarnessLauncher::new(config, catalog, cwd)),
        tokio::runtime::Handle::current(),
    );
    let mut ids = Vec::with_capacity(args.count);
    let mut answerers = Vec::with_capacity(args.count);
    for _ in 0..args.count {
        let id = manager.start(args.request.clone())?;
        answerers.push(lsm_app::run::answer::spawn_unattended(
            manager.channel(&id)?,
            args.request.yes,
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
