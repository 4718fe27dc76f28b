//! `lsm tui`: a terminal UI over the [`AgentRuntimeManager`] — the runs and their status,
//! the selected run's live log, and an interaction panel to answer its requests. A request is
//! acknowledged the first time the panel shows it, so it does not time out while on screen.
//! Runs execute on the async runtime's workers; this loop only reads their state and redraws
//! every 100 ms or on a key, so the screen stays responsive while runs are busy.

mod app;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use lsm_app::run::RunRequest;
use ratatui::crossterm::event::{self, Event, KeyEventKind};

pub use app::{AgentChoice, App, Runs};

use crate::exit;
use lsm_app::runtime::{AgentRuntimeManager, HarnessLauncher, ManagerConfig};

/// Arguments of `lsm tui`.
#[derive(Debug, Args)]
pub struct TuiArgs {
    /// The LLM provider of the runs started here (default: [llm] provider).
    #[arg(long, value_name = "SPEC")]
    pub provider: Option<String>,

    /// Root of the agents' workspaces and run records (default: [agents] agents_folder).
    #[arg(long, value_name = "DIR")]
    pub agents_folder: Option<PathBuf>,
}

/// The agent a new run starts.
const AGENT: &str = "general";

/// Run the TUI until the person quits; returns the exit code.
pub fn run(cfg: &lsm_app::config::ConfigArgs, args: TuiArgs) -> u8 {
    let runtime = match exit::runtime(None) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return exit::ERROR;
        }
    };
    let (manager, agents, base) = match manager(cfg, args, runtime.handle().clone()) {
        Ok(m) => m,
        Err(e) => return exit::report(&e, |_| false),
    };
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot set up the terminal: {e}");
            return exit::ERROR;
        }
    };
    let result = event_loop(&mut terminal, &manager, agents, base);
    let _ = ratatui::try_restore();
    manager.shutdown("the TUI was closed");
    // Let stopped runs write their summaries before the process ends.
    runtime.block_on(async {
        let waits = manager.list().into_iter().map(|r| {
            let m = manager.clone();
            async move { m.wait(&r.run_id).await }
        });
        let _ = tokio::time::timeout(Duration::from_secs(10), wait_all(waits)).await;
    });
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("error: the terminal failed: {e}");
            exit::ERROR
        }
    }
}

async fn wait_all<F: std::future::Future>(futures: impl IntoIterator<Item = F>) {
    for f in futures {
        f.await;
    }
}

/// The manager of the TUI's runs, the agents it can start, and the request every run
/// starts from (the TUI's `--provider` and `--agents-folder`).
fn manager(
    cfg: &lsm_app::config::ConfigArgs,
    args: TuiArgs,
    handle: tokio::runtime::Handle,
) -> Result<(AgentRuntimeManager, Vec<AgentChoice>, RunRequest)> {
    let config = cfg.load()?;
    let cwd = std::env::current_dir()?;
    let base = RunRequest {
        llm: lsm_app::wiring::ProviderFlags {
            provider: args.provider,
            ..Default::default()
        },
        settings: lsm_app::run::RunSettings {
            agents_folder: args.agents_folder,
            ..Default::default()
        },
        ..RunRequest::default()
    };
    let folder = config.with_options(&base.options(), &cwd)?;
    // Fail now, not at the first run, when the provider cannot be built.
    let catalog = lsm_app::agent_defs::catalog(&folder)?;
    let llm = config.llm.resolve(lsm_phase::LlmTier::Normal)?;
    lsm_app::wiring::build_provider(&llm, &base.llm, &cwd, &config.source_name())?;
    let manager_config = ManagerConfig {
        max_concurrent: config.agents.max_concurrent,
        log_stream_queue_limit: config.agents.log_stream_queue_limit,
        interaction: config.agents.interaction.clone(),
        describe: crate::terminal::progress::describe,
    };
    let agents = AgentChoice::of(&catalog);
    let launcher = HarnessLauncher::new(config, catalog, cwd);
    Ok((
        AgentRuntimeManager::new(manager_config, Arc::new(launcher), handle),
        agents,
        base,
    ))
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    runs: &AgentRuntimeManager,
    agents: Vec<AgentChoice>,
    base: RunRequest,
) -> std::io::Result<()> {
    let mut app = App::new(AGENT).with_agents(agents).with_request(base);
    while !app.quit {
        app.tick(terminal, runs)?;
        if event::poll(Duration::from_millis(100))?
            && let Event::Key(key) = event::read()?
            && key.kind == KeyEventKind::Press
        {
            app.on_key(key, runs);
        }
    }
    Ok(())
}
