//! [`AgentRuntimeManager`]: runs agents concurrently (up to `max_concurrent`, the rest
//! queued), lists them with their status, stops them, and routes a person's answers to each
//! run's interaction channel. Front ends (the TUI) talk only to this.

mod launcher;
mod log_stream;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lsm_interaction::{
    Decision, InteractionChannel, InteractionConfig, InteractionError, PendingView,
};
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::run::RunRequest;

pub use launcher::HarnessLauncher;
pub use log_stream::{Describe, LogLine, LogSnapshot, LogStream, WorkerLine};

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// Waiting for a free slot (`max_concurrent` runs are busy).
    Queued,
    /// Running.
    Running,
    /// Running, and waiting for a person to answer a request.
    WaitingUser,
    /// Finished: the agent completed its task.
    Completed,
    /// Finished early: a stop, the budget, the iteration limit, or the model blocked.
    Stopped,
    /// Finished with an error.
    Failed,
}

impl RunStatus {
    /// The wire name (`waiting_user`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::WaitingUser => "waiting_user",
            RunStatus::Completed => "completed",
            RunStatus::Stopped => "stopped",
            RunStatus::Failed => "failed",
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a run ended, as its launcher reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEnd {
    /// `Completed`, `Stopped` or `Failed`.
    pub status: RunStatus,
    /// The last stop reason (`done`, `stop_requested`, …) or `error`.
    pub outcome: String,
    /// The agent's final text, or what went wrong.
    pub final_text: String,
}

/// Everything a launcher gets for one run.
#[derive(Debug, Clone)]
pub struct LaunchContext {
    /// The manager's id of the run.
    pub run_id: String,
    /// The run to start.
    pub request: RunRequest,
    /// The run's interaction channel (the sandbox's permission asker, `ask_user`'s channel).
    pub channel: Arc<InteractionChannel>,
    /// Cancelled when the run is to stop.
    pub stop: CancellationToken,
    /// The run's live log (an event sink for the harness).
    pub log: Arc<LogStream>,
    records: Arc<Mutex<Option<String>>>,
}

impl LaunchContext {
    /// A setter for the record id that can outlive this context (called when the run's
    /// harness is built).
    pub fn clone_record_setter(&self) -> impl Fn(&str) + Send + Sync + 'static {
        let records = Arc::clone(&self.records);
        move |id: &str| *lock(&records) = Some(id.to_string())
    }
}

/// Runs one agent to its end. The manager's seam: [`HarnessLauncher`] is the real one.
#[async_trait::async_trait]
pub trait RunLauncher: Send + Sync {
    /// Run `ctx.request`, watching `ctx.stop`; always return how it ended.
    async fn launch(&self, ctx: LaunchContext) -> RunEnd;
}

/// A run as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunInfo {
    /// The manager's id (`r1`, `r2`, …).
    pub run_id: String,
    /// The agent.
    pub agent: String,
    /// The task.
    pub task: String,
    /// Status now.
    pub status: RunStatus,
    /// The harness's run id (its log folder), once it started.
    pub record_id: Option<String>,
    /// How it ended, once it did.
    pub end: Option<RunEnd>,
    /// Its worker runs (a conductor's), with their status.
    pub workers: Vec<WorkerLine>,
}

/// Why the manager refused a call. Each says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ManagerError {
    /// No run has this id. List the runs and use one of their ids.
    #[error("no run with id '{0}'; list the runs to see their ids")]
    UnknownRun(String),
    /// The run's channel refused (wrong or stale request id, a decision that does not fit).
    #[error("run {run_id}: {source}")]
    Interaction {
        /// The run.
        run_id: String,
        /// What the channel said.
        source: InteractionError,
    },
    /// The manager is shutting down; start no more runs.
    #[error("the runtime is shutting down; no new run can start")]
    ShuttingDown,
    /// The run's settings are invalid. Fix `[agents.interaction]`.
    #[error("cannot start a run: {0}")]
    Config(String),
}

/// The manager's settings: `[agents] max_concurrent`, `log_stream_queue_limit` and
/// `[agents.interaction]`, and how the front end shows an event in a run's log.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    /// Runs at once; the rest queue.
    pub max_concurrent: usize,
    /// Log lines kept per run.
    pub log_stream_queue_limit: usize,
    /// Each run's channel settings.
    pub interaction: InteractionConfig,
    /// An event as a line of a run's log.
    pub describe: Describe,
}

struct Run {
    agent: String,
    task: String,
    channel: Arc<InteractionChannel>,
    stop: CancellationToken,
    log: Arc<LogStream>,
    records: Arc<Mutex<Option<String>>>,
    phase: watch::Sender<Phase>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Queued,
    Running,
    Finished(RunEnd),
}

#[derive(Default)]
struct Runs {
    by_id: BTreeMap<u64, (String, Run)>,
    next: u64,
    closed: bool,
}

/// Starts, lists, stops and answers agent runs. Cheap to clone; every method but
/// [`AgentRuntimeManager::wait`] is synchronous and quick, so a UI thread may call them.
#[derive(Clone)]
pub struct AgentRuntimeManager {
    config: ManagerConfig,
    launcher: Arc<dyn RunLauncher>,
    runtime: tokio::runtime::Handle,
    slots: Arc<Semaphore>,
    runs: Arc<Mutex<Runs>>,
}

impl std::fmt::Debug for AgentRuntimeManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRuntimeManager")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AgentRuntimeManager {
    /// A manager that runs agents with `launcher` on `runtime`.
    pub fn new(
        config: ManagerConfig,
        launcher: Arc<dyn RunLauncher>,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        AgentRuntimeManager {
            slots: Arc::new(Semaphore::new(config.max_concurrent.max(1))),
            config,
            launcher,
            runtime,
            runs: Arc::new(Mutex::new(Runs::default())),
        }
    }

    /// Start the run `request` asks for: it runs at once if fewer than `max_concurrent` runs
    /// are busy, otherwise it queues. Returns the run's id.
    ///
    /// # Errors
    /// [`ManagerError::ShuttingDown`] after [`AgentRuntimeManager::shutdown`];
    /// [`ManagerError::Config`] when the interaction settings are invalid.
    pub fn start(&self, request: RunRequest) -> Result<String, ManagerError> {
        let (agent, task) = (request.name.clone(), request.objective().to_string());
        let channel = InteractionChannel::new(&self.config.interaction)
            .map(Arc::new)
            .map_err(|e| ManagerError::Config(e.to_string()))?;
        let stop = CancellationToken::new();
        let log = Arc::new(LogStream::new(
            self.config.log_stream_queue_limit,
            self.config.describe,
        ));
        let records = Arc::new(Mutex::new(None));
        let (phase_tx, _) = watch::channel(Phase::Queued);
        let run_id = {
            let mut runs = lock(&self.runs);
            if runs.closed {
                return Err(ManagerError::ShuttingDown);
            }
            runs.next += 1;
            let n = runs.next;
            let run_id = format!("r{n}");
            runs.by_id.insert(
                n,
                (
                    run_id.clone(),
                    Run {
                        agent: agent.clone(),
                        task,
                        channel: Arc::clone(&channel),
                        stop: stop.clone(),
                        log: Arc::clone(&log),
                        records: Arc::clone(&records),
                        phase: phase_tx.clone(),
                    },
                ),
            );
            run_id
        };
        let ctx = LaunchContext {
            run_id: run_id.clone(),
            request,
            channel,
            stop,
            log,
            records,
        };
        let slots = Arc::clone(&self.slots);
        let launcher = Arc::clone(&self.launcher);
        tracing::info!(run_id = %run_id, agent = %agent, "run queued");
        self.runtime.spawn(async move {
            let permit = tokio::select! {
                biased;
                () = ctx.stop.cancelled() => None,
                permit = slots.acquire_owned() => permit.ok(),
            };
            let Some(permit) = permit else {
                ctx.channel
                    .shutdown("the run was stopped before it started");
                phase_tx.send_replace(Phase::Finished(RunEnd {
                    status: RunStatus::Stopped,
                    outcome: "stop_requested".into(),
                    final_text: "stopped before it started".into(),
                }));
                return;
            };
            phase_tx.send_replace(Phase::Running);
            let channel = Arc::clone(&ctx.channel);
            let end = launcher.launch(ctx).await;
            channel.shutdown("the run ended");
            drop(permit);
            phase_tx.send_replace(Phase::Finished(end));
        });
        Ok(run_id)
    }

    fn with_run<T>(&self, run_id: &str, f: impl FnOnce(&Run) -> T) -> Result<T, ManagerError> {
        let runs = lock(&self.runs);
        runs.by_id
            .values()
            .find(|(id, _)| id == run_id)
            .map(|(_, run)| f(run))
            .ok_or_else(|| ManagerError::UnknownRun(run_id.to_string()))
    }

    fn info(run_id: &str, run: &Run) -> RunInfo {
        let phase = run.phase.borrow().clone();
        let (status, end) = match phase {
            Phase::Queued => (RunStatus::Queued, None),
            Phase::Running if run.channel.pending().is_some() => (RunStatus::WaitingUser, None),
            Phase::Running => (RunStatus::Running, None),
            Phase::Finished(end) => (end.status, Some(end)),
        };
        RunInfo {
            run_id: run_id.to_string(),
            agent: run.agent.clone(),
            task: run.task.clone(),
            status,
            record_id: lock(&run.records).clone(),
            end,
            workers: run.log.workers(),
        }
    }

    /// Every run, oldest first, with its status now.
    pub fn list(&self) -> Vec<RunInfo> {
        let runs = lock(&self.runs);
        runs.by_id
            .values()
            .map(|(id, run)| Self::info(id, run))
            .collect()
    }

    /// One run.
    ///
    /// # Errors
    /// [`ManagerError::UnknownRun`].
    pub fn get(&self, run_id: &str) -> Result<RunInfo, ManagerError> {
        self.with_run(run_id, |run| Self::info(run_id, run))
    }

    /// Stop a run: its stop token is cancelled and its pending request (if any) released
    /// with a denial. A queued run never starts.
    ///
    /// # Errors
    /// [`ManagerError::UnknownRun`].
    pub fn stop(&self, run_id: &str) -> Result<(), ManagerError> {
        self.with_run(run_id, |run| {
            run.stop.cancel();
            run.channel.cancel_pending("a stop was requested");
        })
    }

    /// The run's pending request, if any.
    ///
    /// # Errors
    /// [`ManagerError::UnknownRun`].
    pub fn pending(&self, run_id: &str) -> Result<Option<PendingView>, ManagerError> {
        self.with_run(run_id, |run| run.channel.pending())
    }

    /// Changes to the run's pending request (to wait for one; the TUI refreshes on a timer
    /// instead, so only tests use it).
    ///
    /// # Errors
    /// [`ManagerError::UnknownRun`].
    #[cfg(test)]
    pub fn subscribe_pending(
        &self,
        run_id: &str,
    ) -> Result<watch::Receiver<Option<lsm_interaction::InteractionRequest>>, ManagerError> {
        self.with_run(run_id, |run| run.channel.subscribe())
    }

    /// A front end showed the run's request `request_id`: it stops timing out under the
    /// first-phase limit. Returns whether this call acknowledged it.
    ///
    /// # Errors
    /// [`ManagerError::UnknownRun`]; [`ManagerError::Interaction`] for a wrong or stale id.
    pub fn acknowledge_interaction(
        &self,
        run_id: &str,
        request_id: &str,
    ) -> Result<bool, ManagerError> {
        self.with_run(run_id, |run| run.channel.acknowledge_request(request_id))?
            .map_err(|source| ManagerError::Interaction {
                run_id: run_id.to_string(),
                source,
            })
    }

    /// The run's interaction channel, for a front end that answers its requests itself
    /// (`lsm agent run-many` answers them without a person).
    ///
    /// # Errors
    /// [`ManagerError::UnknownRun`].
    pub fn channel(&self, run_id: &str) -> Result<Arc<InteractionChannel>, ManagerError> {
        self.with_run(run_id, |run| Arc::clone(&run.channel))
    }

    /// A person's answer to the run's request `request_id`.
    ///
    /// # Errors
    /// [`ManagerError::UnknownRun`]; [`ManagerError::Interaction`] for a wrong or stale id,
    /// or a decision that does not fit the request.
    pub fn respond(
        &self,
        run_id: &str,
        request_id: &str,
        decision: Decision,
        message: &str,
    ) -> Result<(), ManagerError> {
        self.with_run(run_id, |run| {
            run.channel.respond(request_id, decision, message)
        })?
        .map_err(|source| ManagerError::Interaction {
            run_id: run_id.to_string(),
            source,
        })
    }

    /// The run's live log: the last `log_stream_queue_limit` lines and the dropped count.
    ///
    /// # Errors
    /// [`ManagerError::UnknownRun`].
    pub fn logs(&self, run_id: &str) -> Result<LogSnapshot, ManagerError> {
        self.with_run(run_id, |run| run.log.snapshot())
    }

    /// The run's log stream itself.
    ///
    /// # Errors
    /// [`ManagerError::UnknownRun`].
    #[cfg(test)]
    pub fn log_stream(&self, run_id: &str) -> Result<Arc<LogStream>, ManagerError> {
        self.with_run(run_id, |run| Arc::clone(&run.log))
    }

    /// Wait until the run has finished; its final info.
    ///
    /// # Errors
    /// [`ManagerError::UnknownRun`].
    pub async fn wait(&self, run_id: &str) -> Result<RunInfo, ManagerError> {
        let mut phase = self.with_run(run_id, |run| run.phase.subscribe())?;
        // The sender lives in the run's entry, which is never removed: this cannot fail.
        let _ = phase.wait_for(|p| matches!(p, Phase::Finished(_))).await;
        self.get(run_id)
    }

    /// Stop every run and refuse new ones.
    pub fn shutdown(&self, reason: &str) {
        let mut runs = lock(&self.runs);
        runs.closed = true;
        for (_, run) in runs.by_id.values() {
            run.stop.cancel();
            run.channel.shutdown(reason);
        }
    }
}

#[cfg(test)]
mod tests;
