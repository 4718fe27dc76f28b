//! [`AgentCore`]: the one place an agent's phases, workspace, artifacts and log go through.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use lsm_phase::{
    ExecutorFactory, LlmTier, PhaseExecutor, PhaseRequest, PhaseResult, RunOutcome, StopReason,
    TurnReport, WorkerOutcome, WorkerRequest,
};
use serde::Serialize;

use crate::AgentSpec;
use crate::artifacts::artifact_filename_at;

/// Default iteration limit of an agent's long phases.
pub const DEFAULT_MAX_ITERATIONS: u32 = 25;

/// Default number of refinement rounds of an agent that refines its work (research).
pub const DEFAULT_MAX_ROUNDS: u32 = 2;

/// Default number of worker runs an agent that delegates runs at once.
pub const DEFAULT_MAX_WORKERS: usize = 3;

/// Receives every line an agent logs (the CLI prints them).
pub trait AgentLogSink: Send + Sync {
    /// One log message of `agent` (it may span several lines).
    fn line(&self, agent: &str, message: &str);
}

/// What an agent is given by whoever runs it: how to get an executor, where its workspace
/// lives, and a few limits. The composition root builds it; the agent layer never learns what
/// is behind the factory.
#[derive(Clone)]
pub struct AgentContext {
    /// Creates the run's executor on its first phase.
    pub factory: Arc<dyn ExecutorFactory>,
    /// Root of the agents' workspaces: an agent's files live under
    /// `<agents_folder>/<agent_name>/`.
    pub agents_folder: PathBuf,
    /// Iteration limit of an agent's long phases (the whole run of a single-phase agent).
    pub max_iterations: u32,
    /// Refinement rounds of an agent that refines its work (research).
    pub max_rounds: u32,
    /// Whether an `ask_user` tool is registered, so that it joins every allowlist.
    pub ask_user_available: bool,
    /// Tools the person running the agent added to its allowlist (configuration's
    /// `[agents.extra_tools]`, `lsm agent run --allow-tool`); offered only when registered.
    pub extra_tools: Vec<String>,
    /// Where log lines go besides the agent's log file and `tracing`.
    pub log_sink: Option<Arc<dyn AgentLogSink>>,
    /// How many worker runs an agent that delegates (the conductor) runs at once.
    pub max_workers: usize,
}

impl std::fmt::Debug for AgentContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentContext")
            .field("agents_folder", &self.agents_folder)
            .field("max_iterations", &self.max_iterations)
            .field("max_rounds", &self.max_rounds)
            .field("ask_user_available", &self.ask_user_available)
            .field("extra_tools", &self.extra_tools)
            .field("max_workers", &self.max_workers)
            .finish_non_exhaustive()
    }
}

impl AgentContext {
    /// A context with the default limits, no `ask_user` and no log sink.
    pub fn new(factory: Arc<dyn ExecutorFactory>, agents_folder: impl Into<PathBuf>) -> Self {
        AgentContext {
            factory,
            agents_folder: agents_folder.into(),
            max_iterations: DEFAULT_MAX_ITERATIONS,
            max_rounds: DEFAULT_MAX_ROUNDS,
            ask_user_available: false,
            extra_tools: Vec::new(),
            log_sink: None,
            max_workers: DEFAULT_MAX_WORKERS,
        }
    }

    /// Set `max_workers` (at least 1).
    pub fn with_max_workers(mut self, n: usize) -> Self {
        self.max_workers = n.max(1);
        self
    }

    /// Set `max_iterations`.
    pub fn with_max_iterations(mut self, n: u32) -> Self {
        self.max_iterations = n;
        self
    }

    /// Set `max_rounds`.
    pub fn with_max_rounds(mut self, n: u32) -> Self {
        self.max_rounds = n;
        self
    }

    /// Set `ask_user_available`.
    pub fn with_ask_user(mut self, available: bool) -> Self {
        self.ask_user_available = available;
        self
    }

    /// Add `tools` to the allowlist of every run made with this context.
    pub fn with_extra_tools(mut self, tools: impl IntoIterator<Item = String>) -> Self {
        for tool in tools {
            if !self.extra_tools.contains(&tool) {
                self.extra_tools.push(tool);
            }
        }
        self
    }

    /// Set the log sink.
    pub fn with_log_sink(mut self, sink: Arc<dyn AgentLogSink>) -> Self {
        self.log_sink = Some(sink);
        self
    }
}

/// Why an agent could not do its own part of a run (its phases never fail: they stop).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The workspace folder could not be created.
    #[error(
        "cannot create the agent workspace folder {path}: {source}; check that the agents folder is writable"
    )]
    Workspace {
        /// The folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An artifact could not be written.
    #[error("cannot write the artifact {path}: {source}")]
    Artifact {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The agent's log file could not be written (reported as a warning, never fatal).
    #[error("cannot write the agent log {path}: {source}")]
    Log {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// What one agent run leaves its caller. Operational output only: there is no token, cost or
/// budget figure here, as there is none in a [`PhaseResult`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentOutput {
    /// How the run ended, as reported to the executor: `completed` when the last phase was
    /// done, `stopped` with the last phase's stop reason otherwise, `failed` when the agent
    /// itself failed.
    pub outcome: RunOutcome,
    /// The last phase's stop reason (`None` when no phase ran).
    pub stop_reason: Option<StopReason>,
    /// The agent's answer or report (what it saved, or a one-line account of it).
    pub text: String,
    /// The artifacts this run saved, in order.
    pub artifacts: Vec<PathBuf>,
    /// This run's log file, when anything was logged and it could be written.
    pub log_file: Option<PathBuf>,
    /// Why the run failed: the agent's own error, or the last phase's message when that
    /// phase ended in `error`.
    pub error: Option<String>,
    /// What the run reported (the model's `complete` report, or its last answer); `None`
    /// when no phase ran. No accounting in it.
    pub report: Option<TurnReport>,
}

/// State of the current run.
struct RunState {
    topic: String,
    executor: Option<Box<dyn PhaseExecutor>>,
    system_prompt: Option<String>,
    artifacts: Vec<PathBuf>,
    log_file: Option<PathBuf>,
    log_failed: bool,
    last_stop: Option<StopReason>,
    last_error: Option<String>,
    started_at: DateTime<Utc>,
}

impl RunState {
    fn new(topic: &str) -> Self {
        RunState {
            topic: topic.to_string(),
            executor: None,
            system_prompt: None,
            artifacts: Vec::new(),
            log_file: None,
            log_failed: false,
            last_stop: None,
            last_error: None,
            started_at: Utc::now(),
        }
    }
}

/// What every agent is built on: its capability card, its context, and the current run.
///
/// - [`AgentCore::run_phase`] is the only way an agent makes an LLM call or runs a tool. The
///   run's executor is created by the factory on the run's first phase, reused by every later
///   phase (so contexts, budget and records span the whole run), finished by
///   [`AgentCore::end_run`], and replaced when the next run begins.
/// - The workspace accessors return folders under `<agents_folder>/<agent_name>/`, created
///   on first access, never at construction.
/// - [`AgentCore::save_artifact`] is the only way an agent writes a file of its own, and
///   [`AgentCore::log`] the only way it logs.
pub struct AgentCore {
    spec: AgentSpec,
    ctx: AgentContext,
    run: RunState,
}

impl std::fmt::Debug for AgentCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentCore")
            .field("agent", &self.spec.name)
            .field("ctx", &self.ctx)
            .field("in_run", &self.run.executor.is_some())
            .finish_non_exhaustive()
    }
}

impl AgentCore {
    /// A core for `spec`. Touches nothing on disk and creates no executor.
    pub fn new(spec: AgentSpec, ctx: AgentContext) -> Self {
        AgentCore {
            spec,
            ctx,
            run: RunState::new(""),
        }
    }

    /// The agent's capability card.
    pub fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The agent's one-line description.
    pub fn description(&self) -> &str {
        &self.spec.description
    }

    /// The agent's LLM tier.
    pub fn tier(&self) -> LlmTier {
        self.spec.tier
    }

    /// The tools the agent may call: its card's list, plus `ask_user` when registered, plus
    /// the tools its context adds.
    pub fn tool_allowlist(&self) -> Vec<String> {
        self.identity("").tool_allowlist
    }

    /// The identity of a run about `topic`: the card's, with the context's extra tools.
    fn identity(&self, topic: &str) -> lsm_phase::AgentIdentity {
        let mut identity = self.spec.identity(topic, self.ctx.ask_user_available);
        for tool in &self.ctx.extra_tools {
            if !identity.tool_allowlist.contains(tool) {
                identity.tool_allowlist.push(tool.clone());
            }
        }
        identity
    }

    /// Iteration limit of the agent's long phases.
    pub fn max_iterations(&self) -> u32 {
        self.ctx.max_iterations
    }

    /// Refinement rounds of an agent that refines its work.
    pub fn max_rounds(&self) -> u32 {
        self.ctx.max_rounds
    }

    /// Start a run about `topic`: the previous run's executor, if any is left, is dropped
    /// (its records say it did not finish), and the next phase creates a fresh one.
    pub fn begin_run(&mut self, topic: &str) {
        if self.run.executor.is_some() {
            tracing::debug!(
                agent = %self.spec.name,
                "a new run begins; the previous run's executor is dropped"
            );
        }
        self.run = RunState::new(topic);
    }

    /// Run one bounded phase of LLM + tool work through the run's executor.
    ///
    /// `request` carries the phase's `user_message`, `tool_names`, `max_iterations`,
    /// `continue_context`, `context_label` and `direct_tool_calls`, and is forwarded as it
    /// is. The first phase of a run creates the executor with `system_prompt`; later phases
    /// reuse it, and a different `system_prompt` is ignored (logged at debug level). A
    /// tool-only phase (`direct_tool_calls`) also creates or reuses the executor: its calls go
    /// through the same allowlist and sandbox as the model's.
    pub async fn run_phase(&mut self, system_prompt: &str, request: PhaseRequest) -> PhaseResult {
        let label = request.context_label.clone();
        let executor = self.executor(system_prompt);
        let result = executor.run_bounded(request).await;
        tracing::debug!(
            agent = %self.spec.name,
            label = label.as_deref().unwrap_or("primary"),
            stop_reason = %result.stop_reason,
            tool_calls = result.tool_calls.len(),
            "phase ended"
        );
        self.run.last_stop = Some(result.stop_reason);
        self.run.last_error =
            (result.stop_reason == StopReason::Error).then(|| result.final_text.clone());
        result
    }

    /// The run's executor: created with `system_prompt` on the first call of the run, then
    /// reused (a different prompt is ignored, logged at debug level).
    fn executor(&mut self, system_prompt: &str) -> &mut Box<dyn PhaseExecutor> {
        let identity = self.identity(&self.run.topic);
        let RunState {
            executor,
            system_prompt: first_prompt,
            ..
        } = &mut self.run;
        match executor {
            Some(existing) => {
                if first_prompt.as_deref() != Some(system_prompt) {
                    tracing::debug!(
                        agent = %self.spec.name,
                        "system prompt differs from the run's first phase; ignored: the run's \
                         executor keeps the first one"
                    );
                }
                existing
            }
            slot @ None => {
                tracing::debug!(agent = %self.spec.name, "creating the run's executor");
                *first_prompt = Some(system_prompt.to_string());
                slot.insert(self.ctx.factory.create(&identity, system_prompt))
            }
        }
    }

    /// Run worker agent runs for `requests` through the run's executor, at most
    /// [`AgentContext::max_workers`] at once; their outcomes, in the order asked. The only
    /// way an agent delegates: it never names what runs the workers.
    pub async fn run_workers(
        &mut self,
        system_prompt: &str,
        requests: Vec<WorkerRequest>,
    ) -> Vec<WorkerOutcome> {
        let max = self.ctx.max_workers.max(1);
        let outcomes = self
            .executor(system_prompt)
            .run_workers(requests, max)
            .await;
        for o in &outcomes {
            tracing::debug!(
                agent = %self.spec.name,
                item = %o.item_id,
                stop_reason = %o.stop_reason,
                "worker ended"
            );
        }
        outcomes
    }

    /// The last phase's stop reason in this run (`None` before the first phase).
    pub fn last_stop_reason(&self) -> Option<StopReason> {
        self.run.last_stop
    }

    /// End the run: report its outcome to the executor (which writes the run's summary),
    /// drop the executor, and return what the run produced. `result` is the agent's own
    /// account: its answer text, or the error that made it give up.
    pub async fn end_run(&mut self, result: Result<String, AgentError>) -> AgentOutput {
        let last = self.run.last_stop;
        let (outcome, text, error) = match result {
            Ok(text) => {
                let outcome = match last {
                    None | Some(StopReason::Done) => RunOutcome::Completed,
                    Some(reason) => RunOutcome::Stopped(reason),
                };
                (outcome, text, self.run.last_error.clone())
            }
            Err(e) => (RunOutcome::Failed, String::new(), Some(e.to_string())),
        };
        let ended = match (outcome, &error) {
            (RunOutcome::Completed, _) => "Run completed.".to_string(),
            (RunOutcome::Stopped(reason), _) => format!("Run stopped ({reason})."),
            (RunOutcome::Failed, Some(message)) => format!("Run failed: {message}"),
            (RunOutcome::Failed, None) => "Run failed.".to_string(),
        };
        self.log(&ended);
        let mut report = None;
        if let Some(mut executor) = self.run.executor.take() {
            report = executor.report();
            executor.finish(outcome).await;
        }
        AgentOutput {
            outcome,
            stop_reason: last,
            text,
            artifacts: self.run.artifacts.clone(),
            log_file: self.run.log_file.clone(),
            error,
            report,
        }
    }

    /// `<agents_folder>/<agent_name>/`, with its `logs/`, `artifacts/` and `memory/` folders
    /// created if they do not exist yet.
    ///
    /// # Errors
    /// [`AgentError::Workspace`] when a folder cannot be created.
    pub fn workspace_root(&self) -> Result<PathBuf, AgentError> {
        let root = self.ctx.agents_folder.join(&self.spec.name);
        for sub in ["logs", "artifacts", "memory"] {
            let dir = root.join(sub);
            std::fs::create_dir_all(&dir)
                .map_err(|source| AgentError::Workspace { path: dir, source })?;
        }
        Ok(root)
    }

    /// `<agents_folder>/<agent_name>/artifacts/`, created on first access.
    ///
    /// # Errors
    /// [`AgentError::Workspace`] when it cannot be created.
    pub fn artifacts_dir(&self) -> Result<PathBuf, AgentError> {
        Ok(self.workspace_root()?.join("artifacts"))
    }

    /// `<agents_folder>/<agent_name>/logs/`, created on first access. The harness keeps its
    /// per-run records in `logs/<run_id>/`; the agent's own log files sit beside them.
    ///
    /// # Errors
    /// [`AgentError::Workspace`] when it cannot be created.
    pub fn logs_dir(&self) -> Result<PathBuf, AgentError> {
        Ok(self.workspace_root()?.join("logs"))
    }

    /// `<agents_folder>/<agent_name>/memory/`, created on first access.
    ///
    /// # Errors
    /// [`AgentError::Workspace`] when it cannot be created.
    pub fn memory_dir(&self) -> Result<PathBuf, AgentError> {
        Ok(self.workspace_root()?.join("memory"))
    }

    /// `<sanitized name>_<YYYYMMDD_HHMMSS><suffix>`, UTC now. See [`artifact_filename_at`].
    pub fn artifact_filename(&self, name: &str, suffix: &str) -> String {
        artifact_filename_at(name, suffix, Utc::now())
    }

    /// Write `contents` to `artifacts_dir() / artifact_filename(name, suffix)`, tell the run's
    /// executor (so the run summary lists it), log it, and return the path. An existing file
    /// is never overwritten: a second artifact of the same name within the same second gets
    /// `_2`, `_3`, … before its suffix.
    ///
    /// # Errors
    /// [`AgentError::Workspace`] or [`AgentError::Artifact`] when it cannot be written.
    pub fn save_artifact(
        &mut self,
        name: &str,
        suffix: &str,
        contents: &str,
    ) -> Result<PathBuf, AgentError> {
        let dir = self.artifacts_dir()?;
        let filename = self.artifact_filename(name, suffix);
        let (path, mut file) = create_unique(&dir, &filename, suffix)
            .map_err(|(path, source)| AgentError::Artifact { path, source })?;
        file.write_all(contents.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|source| AgentError::Artifact {
                path: path.clone(),
                source,
            })?;
        if let Some(executor) = self.run.executor.as_mut() {
            executor.record_artifact(&path);
        }
        self.run.artifacts.push(path.clone());
        self.log(&format!("Saved artifact: {}", path.display()));
        Ok(path)
    }

    /// The artifacts saved in this run so far.
    pub fn artifacts(&self) -> &[PathBuf] {
        &self.run.artifacts
    }

    /// Log `message`: to `tracing` (target `lsm_agents::log`, level info), to the log sink,
    /// and to this run's log file `<logs_dir>/<agent>_<YYYYMMDD_HHMMSS>.log` (run start, UTC;
    /// `_2`, `_3`, … before `.log` when another run already owns that name, so concurrent runs
    /// never share a log), one timestamped entry per call. Logging never fails the run: a log file that cannot be
    /// written is reported once as a warning.
    pub fn log(&mut self, message: &str) {
        tracing::info!(target: "lsm_agents::log", agent = %self.spec.name, "{message}");
        if let Some(sink) = &self.ctx.log_sink {
            sink.line(&self.spec.name, message);
        }
        if self.run.log_failed {
            return;
        }
        if let Err(e) = self.append_log(message) {
            self.run.log_failed = true;
            tracing::warn!(agent = %self.spec.name, "{e}");
        }
    }

    /// This run's log file, once something was logged.
    pub fn log_file(&self) -> Option<&Path> {
        self.run.log_file.as_deref()
    }

    fn append_log(&mut self, message: &str) -> Result<(), AgentError> {
        let line = format!(
            "{} {message}\n",
            Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
        );
        let (path, mut file) =
            match &self.run.log_file {
                Some(p) => {
                    let file = OpenOptions::new().append(true).open(p).map_err(|source| {
                        AgentError::Log {
                            path: p.clone(),
                            source,
                        }
                    })?;
                    (p.clone(), file)
                }
                None => {
                    // The run's own file, created new: a concurrent run of the same agent that
                    // started in the same second gets `_2`, never this run's file.
                    let name = artifact_filename_at(&self.spec.name, ".log", self.run.started_at);
                    let (p, file) = create_unique(&self.logs_dir()?, &name, ".log")
                        .map_err(|(path, source)| AgentError::Log { path, source })?;
                    self.run.log_file = Some(p.clone());
                    (p, file)
                }
            };
        file.write_all(line.as_bytes())
            .map_err(|source| AgentError::Log { path, source })
    }
}

/// Create `dir/filename`, which must not exist yet; when it does, `<stem>_2<suffix>`,
/// `<stem>_3<suffix>`, … (`create_new` is atomic, so two runs — even in two processes — never
/// get the same file). Err: the path tried last and why it failed.
fn create_unique(
    dir: &Path,
    filename: &str,
    suffix: &str,
) -> Result<(PathBuf, std::fs::File), (PathBuf, std::io::Error)> {
    let stem = filename.strip_suffix(suffix).unwrap_or(filename);
    let mut path = dir.join(filename);
    let mut n = 1;
    loop {
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => {
                n += 1;
                path = dir.join(format!("{stem}_{n}{suffix}"));
            }
            Err(e) => return Err((path, e)),
        }
    }
}
