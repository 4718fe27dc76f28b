//! Runs in PostgreSQL that a worker starts: storing a [`RunRequest`] for a worker
//! ([`submit`]: `lsm runs submit`, `lsm agent run --enqueue`; the row's request is the
//! request itself), and the [`Worker`] of `lsm worker`, which claims queued runs (and runs
//! whose driver died) and drives them through the one [`run::prepare`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::error::usage;
use crate::notice::{Notice, Notify};
use crate::run::{self, RunRequest, Start, Store};

/// A run stored for a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    /// Its id.
    pub run_id: String,
    /// Its agent.
    pub agent: String,
}

/// Store the run `args` ask for in the PostgreSQL store for a worker (`lsm runs submit`,
/// `lsm agent run --enqueue`), submitted from the working directory.
///
/// # Errors
/// A usage error without `[store] url`, for an unknown agent, a missing task or topic, or
/// `--resume`; the store's errors.
pub async fn submit(config: &Config, args: &RunRequest) -> Result<Submitted> {
    let Some(pg) = crate::store::pg_runs(config)? else {
        return Err(usage(
            "a queued run needs the PostgreSQL store: set [store] url (or LSM_STORE_URL) \
             to postgres://USER@HOST:PORT/DATABASE",
        ));
    };
    let catalog = crate::agent_defs::catalog(config)?;
    let definition = crate::agent_defs::find(&catalog, &args.name)?;
    let objective = run::objective(
        definition,
        args.task.as_deref(),
        args.topic.as_deref(),
        args.max_rounds,
    )?;
    if args.resume.is_some() {
        return Err(usage("--enqueue starts a new run; it cannot take --resume"));
    }
    let cwd = std::env::current_dir()?;
    let request = args.clone().anchored(&cwd);
    let run_id = lsm_harness::new_run_id();
    pg.submit(
        &run_id,
        definition.name(),
        &objective,
        serde_json::to_value(&request)?,
    )
    .await
    .map_err(|e| usage(format!("[store] url: {e}")))?;
    Ok(Submitted {
        run_id,
        agent: definition.name().to_string(),
    })
}

/// What a [`Worker`] takes on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerOptions {
    /// Runs driven at once.
    pub concurrency: usize,
    /// Only runs of these agents (empty: any).
    pub agents: Vec<String>,
    /// Return once no run is queued or running (for batches and tests).
    pub exit_when_idle: bool,
    /// How often to look for work when there is none.
    pub poll: Duration,
    /// Root of the agents' workspaces on this machine (default: `[agents] agents_folder`).
    pub agents_folder: Option<PathBuf>,
}

/// `lsm worker`: claims runs from the PostgreSQL store and drives them.
pub struct Worker {
    config: Config,
    pg: lsm_store_pg::PgRuns,
    options: WorkerOptions,
}

impl Worker {
    /// A worker of the PostgreSQL store of the configuration `cfg` loads.
    ///
    /// # Errors
    /// A usage error for a concurrency of 0, a bad configuration, an unknown agent, or
    /// without `[store] url`.
    pub fn new(cfg: &crate::config::ConfigArgs, options: WorkerOptions) -> Result<Worker> {
        if options.concurrency == 0 {
            return Err(usage("--concurrency must be at least 1"));
        }
        let mut config = cfg.load()?;
        let catalog = crate::agent_defs::catalog(&config)?;
        for a in &options.agents {
            crate::agent_defs::find(&catalog, a)?;
        }
        if let Some(dir) = &options.agents_folder {
            let mut folder = crate::config::Options::new();
            folder.set(
                crate::config::Setting::AgentsFolder(dir.clone()),
                "--agents-folder",
            );
            config = config.with_options(&folder, &std::env::current_dir()?)?;
        }
        let Some(pg) = crate::store::pg_runs(&config)? else {
            return Err(usage(
                "lsm worker needs the PostgreSQL store: set [store] url (or LSM_STORE_URL)",
            ));
        };
        Ok(Worker {
            config,
            pg,
            options,
        })
    }

    /// Claim runs and drive them until `shutdown` is cancelled (or, with
    /// [`WorkerOptions::exit_when_idle`], until there is no work left). On shutdown no new
    /// run is claimed; the runs in flight are dropped between two steps and handed back
    /// (their leases released), so another worker resumes them from their journals at once.
    pub async fn run(self, shutdown: CancellationToken, notify: Notify) {
        let Worker {
            config,
            pg,
            options,
        } = self;
        notify(Notice::WorkerStarted {
            owner: pg.owner().to_string(),
            // From `[store] url`, a setting a project's lsm.toml can make.
            target: pg.db().settings().target(),
            concurrency: options.concurrency,
        });
        let mut running: JoinSet<()> = JoinSet::new();
        let mut in_flight: Vec<(tokio::task::AbortHandle, String)> = Vec::new();
        let poll = options.poll.max(Duration::from_millis(10));
        loop {
            while !shutdown.is_cancelled() && running.len() < options.concurrency {
                let claimed = match pg.claim(&options.agents).await {
                    Ok(c) => c,
                    Err(e) => {
                        notify(Notice::ClaimFailed(e.to_string()));
                        None
                    }
                };
                let Some(row) = claimed else { break };
                let run_id = row.run_id.clone();
                let (config, pg, notify) = (config.clone(), pg.clone(), Arc::clone(&notify));
                let handle = running.spawn(async move { drive(config, pg, row, notify).await });
                in_flight.push((handle, run_id));
            }
            if shutdown.is_cancelled() {
                // Dropped between two steps (a journal line is written whole, synchronously);
                // their journals say where they were, so the worker that takes them next
                // resumes them as after a crash.
                running.abort_all();
                while running.join_next().await.is_some() {}
                for (_, run_id) in &in_flight {
                    let run_id = run_id.clone();
                    match pg.release(&run_id) {
                        Err(e) => notify(Notice::HandBackFailed {
                            run_id,
                            error: e.to_string(),
                        }),
                        Ok(_) => notify(Notice::HandedBack { run_id }),
                    }
                }
                return;
            }
            if running.is_empty()
                && options.exit_when_idle
                && nothing_left(&pg, &options.agents).await
            {
                return;
            }
            tokio::select! {
                Some(_) = running.join_next(), if !running.is_empty() => {}
                () = tokio::time::sleep(poll) => {}
                () = shutdown.cancelled() => {}
            }
            in_flight.retain(|(h, _)| !h.is_finished());
        }
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

/// Drive one claimed run to its end (a new run from its request, or a resume from its
/// journal), telling `notify` how it goes.
async fn drive(
    config: Config,
    pg: lsm_store_pg::PgRuns,
    row: lsm_store_pg::RunRow,
    notify: Notify,
) {
    let run_id = row.run_id.clone();
    let mut request: RunRequest = match serde_json::from_value(row.request.clone()) {
        Ok(r) => r,
        Err(e) => {
            notify(Notice::UnreadableRequest {
                run_id: run_id.clone(),
                error: e.to_string(),
            });
            let _ = pg.finish(
                &run_id,
                "failed",
                serde_json::json!({"status": "failed", "error": e.to_string()}),
            );
            return;
        }
    };
    let resuming = row.last_seq > 0;
    if resuming {
        request.resume = Some(run_id.clone());
        request.name = String::new();
    }
    // The submitter's working directory when this machine has it, else the worker's own.
    let cwd = request
        .working_dir
        .as_deref()
        .map(PathBuf::from)
        .filter(|d| d.is_dir());
    // The id and the agent are the row's: whoever can write to the database chose them.
    notify(Notice::Driving {
        run_id: run_id.clone(),
        agent: row.agent.clone(),
        resuming: resuming.then_some((row.last_seq, row.attempts)),
    });
    let yes = request.yes;
    let mut start = Start::new(CancellationToken::new(), Arc::clone(&notify))
        .in_store(Store::Pg(pg.clone()))
        .with_run_id(run_id.clone());
    if let Some(dir) = cwd {
        start = start.in_dir(dir);
    }
    let prepared = run::prepare(request, &config, start);
    let prepared = match prepared {
        Ok(run) => run,
        Err(e) => {
            notify(Notice::CannotStart {
                run_id: run_id.clone(),
                error: format!("{e:#}"),
            });
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
    if let Some(warning) = prepared.resumed().and_then(|r| r.warning.clone()) {
        notify(Notice::ResumeWarning(warning));
    }
    let prepared = prepared
        .watched_by(None)
        .with_log_sink(Arc::new(run::TracingAgentLog));
    let answering = run::answer::spawn_unattended(Arc::clone(prepared.channel()), yes);
    let finished = prepared.execute().await;
    answering.abort();
    match finished {
        Ok(f) => notify(Notice::Ended {
            run_id,
            status: f.summary.as_ref().map(|s| s.status.clone()),
        }),
        // A server's or a tool's words may be in the error.
        Err(e) => notify(Notice::Failed {
            run_id,
            error: format!("{e:#}"),
        }),
    }
}
