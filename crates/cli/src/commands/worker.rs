//! `lsm runs submit` / `lsm agent run --enqueue` (store a run for a worker, print its id) and
//! `lsm worker` (claim queued runs and drive them): the engine's queue
//! (`lsm_app::queue`) on the terminal.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use lsm_app::queue::{Worker, WorkerOptions};
use tokio_util::sync::CancellationToken;

use super::agent_run::RunArgs;
use crate::exit;
use crate::signals;
use crate::terminal::notices;

/// `lsm runs submit` and `lsm agent run --enqueue`: store the run for a worker and print its
/// id (`{"run_id": ..., "status": "queued"}` with `--json`).
pub fn submit(cfg: &lsm_app::config::ConfigArgs, args: RunArgs) -> u8 {
    exit::block_on_command(async move {
        let config = cfg.load()?;
        let submitted = lsm_app::queue::submit(&config, &args.request).await?;
        if args.json {
            println!(
                "{}",
                serde_json::json!({"run_id": submitted.run_id, "status": "queued", "agent": submitted.agent})
            );
        } else {
            println!("{}", submitted.run_id);
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
pub fn worker(cfg: &lsm_app::config::ConfigArgs, args: WorkerArgs) -> u8 {
    exit::block_on_command(async move {
        let options = WorkerOptions {
            concurrency: args.concurrency,
            agents: args.agents,
            exit_when_idle: args.exit_when_idle,
            poll: Duration::from_millis(args.poll_ms),
            agents_folder: args.agents_folder,
        };
        let worker = Worker::new(cfg, options)?;
        let shutdown = CancellationToken::new();
        let _signals = signals::on_stop("the worker's runs in flight stop at their next step", {
            let stop = shutdown.clone();
            move || stop.cancel()
        });
        worker.run(shutdown, notices::on_stderr()).await;
        Ok(exit::OK)
    })
}
