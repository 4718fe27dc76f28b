//! Worker runs of a delegating agent (the conductor): the composition root's
//! [`WorkerSpawner`]. A worker is an agent run of its own — its own harness, contexts,
//! sandbox policy and transcript — built like any `lsm agent run` (the same wiring and launch
//! path), on a child of the parent's budget and stop token, reporting its progress to the
//! parent's records.
//!
//! - A capability names an agent: `researcher` and `terminal` by default, more in
//!   `[conductor.capabilities]`.
//! - The researcher writes only into its own artifacts folder; the terminal worker works in
//!   the run's sandbox, with `bash` offered.
//! - Workers answer permission requests as a headless run does: denied at once, or approved
//!   with `--yes` — never a prompt on the terminal while several run.
//! - With `--provider scripted:run.jsonl`, the worker of agenda item ID plays `run.ID.jsonl`
//!   (beside it): one script per worker, for tests and demonstrations.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lsm_harness::workers::ended_outcome;
use lsm_harness::{
    EventEnvelope, EventSink, ResumePoint, WorkerJob, WorkerReporter, WorkerSpawner,
};
use lsm_phase::{StopReason, WorkerOutcome, WorkerRequest};

use super::answer;
use super::launch::{AgentLaunch, launch_agent};
use crate::config::Config;
use crate::wiring::{self, interaction as interaction_wiring, run as run_wiring};

/// Starts the workers of one parent run.
pub struct WorkerRuns {
    /// The parent run's configuration.
    pub config: Config,
    /// The parent's provider flags (`--provider`, `--model`, `--base-url`).
    pub flags: wiring::ProviderFlags,
    /// The working directory.
    pub cwd: PathBuf,
    /// `--yes`: approve the workers' permission requests.
    pub auto_approve: bool,
    /// The parent's PostgreSQL run store (`[store] url`): the workers' journals go there too.
    pub pg: Option<lsm_store_pg::PgRuns>,
    /// The agents a worker can run (the project's definitions included).
    pub catalog: lsm_agents::Catalog,
}

/// A worker's events, passed on to its parent's watchers.
struct ToParent(WorkerReporter);

impl EventSink for ToParent {
    fn event(&self, event: &EventEnvelope) {
        self.0.progress(event);
    }
}

/// The script of a worker: `run.ID.jsonl` beside the parent's `run.jsonl`.
fn worker_script(spec: &str, item_id: &str) -> Option<String> {
    let file = spec.strip_prefix("scripted:")?;
    let path = Path::new(file);
    let stem = path.file_stem()?.to_string_lossy();
    let ext = path
        .extension()
        .map_or_else(String::new, |e| format!(".{}", e.to_string_lossy()));
    let name = format!("{stem}.{item_id}{ext}");
    Some(format!("scripted:{}", path.with_file_name(name).display()))
}

/// Why a conductor's worker could not run: its outcome is then `failed` with this reason,
/// and the conductor decides what to do about the item.
#[derive(Debug, thiserror::Error)]
enum WorkerJobError {
    /// No worker has the capability the conductor asked for.
    #[error(
        "no worker has the capability '{capability}' (known: {known}; [conductor.capabilities] maps more)"
    )]
    UnknownCapability {
        /// The capability asked for.
        capability: String,
        /// The capabilities there are, comma-separated.
        known: String,
    },
    /// The worker's earlier journal could not be read to resume it.
    #[error("{0}")]
    Resume(#[from] lsm_harness::HarnessError),
    /// The researcher's notes folder could not be made.
    #[error("cannot create {}: {source}", .path.display())]
    Notes {
        /// The folder.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The worker's run could not be prepared (its settings, provider, channel or wiring).
    #[error("{0:#}")]
    Prepare(anyhow::Error),
}

impl WorkerRuns {
    async fn run_job(&self, job: WorkerJob) -> Result<WorkerOutcome, WorkerJobError> {
        let request = job.request.clone();
        let definition = self
            .config
            .conductor
            .agent_for(&request.capability)
            .and_then(|name| self.catalog.get(name))
            .cloned()
            .ok_or_else(|| {
                let mut known: Vec<String> = ["researcher", "terminal"]
                    .into_iter()
                    .map(String::from)
                    .chain(self.config.conductor.capabilities.keys().cloned())
                    .collect();
                known.dedup();
                WorkerJobError::UnknownCapability {
                    capability: request.capability.clone(),
                    known: known.join(", "),
                }
            })?;
        let spec = definition.spec.clone();
        let point = match (&job.resume, &self.pg) {
            // In PostgreSQL: a worker whose journal has lines is continued from it.
            (Some(dir), Some(pg)) => {
                let store = crate::store::store_of(pg);
                let key = lsm_harness::RunKey {
                    run_id: dir
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    agent: spec.name.clone(),
                    run_dir: dir.clone(),
                };
                if let Some(journal) = store.read(&key)? {
                    // A worker that ended on another machine: its end is in the database.
                    if let Some(outcome) = lsm_harness::workers::ended_outcome_of(
                        &request,
                        &journal.events,
                        &job.budget,
                    ) {
                        return Ok(outcome);
                    }
                    Some(ResumePoint::open_in(&store, &key)?)
                } else {
                    None
                }
            }
            // A worker whose run never wrote a line (the parent died first) starts anew.
            (Some(dir), None) if dir.join("transcript.jsonl").is_file() => {
                if let Some(outcome) = ended_outcome(&request, dir, &job.budget) {
                    return Ok(outcome);
                }
                Some(ResumePoint::open(dir)?)
            }
            _ => None,
        };
        let mut config = self.config.clone();
        crate::agent_defs::apply_settings(&definition, &mut config)
            .map_err(WorkerJobError::Prepare)?;
        let mut sandbox = config.run_sandbox();
        let mut objective = request.objective.clone();
        if spec.name == "researcher" {
            // Its notes go into its own artifacts folder, nowhere else; it reads where the
            // run reads (relative paths still resolve against the run's working directory).
            let artifacts = config
                .agents
                .agents_folder
                .join(&spec.name)
                .join("artifacts");
            std::fs::create_dir_all(&artifacts).map_err(|source| WorkerJobError::Notes {
                path: artifacts.clone(),
                source,
            })?;
            if sandbox.working_dir.is_none() {
                sandbox.working_dir = sandbox
                    .allowed_write_paths
                    .first()
                    .or(sandbox.allowed_read_paths.first())
                    .cloned();
            }
            sandbox.allowed_write_paths = vec![artifacts.clone()];
            if !sandbox.allowed_read_paths.is_empty() {
                sandbox.allowed_read_paths.push(artifacts.clone());
            }
            // The agents folder holds the write root; the rest of it stays out of reach
            // because nothing outside the root is writable.
            let agents = config.agents.agents_folder.clone();
            sandbox.protected_paths.retain(|p| p != &agents);
            objective.push_str(&format!(
                "\n(Write any notes under {}; nowhere else is writable.)",
                artifacts.display()
            ));
        }
        config.sandbox = sandbox;
        let llm = crate::agent_defs::resolve_llm(&config, &definition)
            .map_err(WorkerJobError::Prepare)?;
        let mut flags = self.flags.clone();
        let spec_of_parent = flags.provider.clone().or_else(|| llm.provider.clone());
        if let Some(script) = spec_of_parent
            .as_deref()
            .and_then(|s| worker_script(s, &request.item_id))
        {
            flags.provider = Some(script);
        }
        flags.script_start = point.as_ref().map_or(0, |p| {
            usize::try_from(p.model_calls_made()).unwrap_or(usize::MAX)
        });
        let provider = wiring::build_provider(&llm, &flags, &self.cwd, &config.source_name())
            .map_err(WorkerJobError::Prepare)?
            .provider;
        if config.agents.compaction.context_window.is_none() {
            config.agents.compaction.context_window = llm.context_window_for(provider.model());
        }
        let channel = interaction_wiring::run_channel(&config.agents.interaction)
            .map_err(WorkerJobError::Prepare)?;
        let answering = answer::spawn_unattended(Arc::clone(&channel), self.auto_approve);
        let mut extra_tools = config.agents.extra_tools_of(&spec.name);
        if spec.name == "terminal" && !extra_tools.iter().any(|t| t == "bash") {
            extra_tools.push("bash".into());
        }
        let parts = run_wiring::build_run_with(
            &config,
            provider,
            &channel,
            job.stop.clone(),
            Some(job.budget.clone()),
        )
        .map_err(WorkerJobError::Prepare)?;
        let extra_tools = parts.expand_allowlist(extra_tools);
        let reporter = job.reporter.clone();
        let recorded_objective = objective.clone();
        let agent = spec.name.clone();
        let mut factory = parts
            .factory
            .with_event_sink(Arc::new(ToParent(job.reporter.clone())))
            .with_on_build(move |h| {
                reporter.started(h.run_id(), &agent, &h.run_dir(), &recorded_objective);
            });
        if let Some(contract) = config.agents.contract_of(&spec.name) {
            factory = factory.with_contract(contract);
        }
        if let Some(pg) = &self.pg {
            factory = factory.with_store(crate::store::store_of(pg));
        }
        if let Some(point) = point {
            factory = factory.resuming(point);
        }
        let max_rounds = definition.settings.max_rounds;
        let launched = launch_agent(AgentLaunch {
            definition,
            objective,
            factory,
            agents_folder: config.agents.agents_folder.clone(),
            max_iterations: config.agents.max_iterations,
            max_rounds,
            max_workers: config.conductor.max_workers,
            ask_user_available: parts.ask_user_available,
            extra_tools,
            log_sink: None,
            interactions: Some(Arc::clone(&channel)),
        })
        .await;
        channel.shutdown("the worker run ended");
        answering.abort();
        let launched = launched.map_err(WorkerJobError::Prepare)?;
        let output = launched.output;
        Ok(WorkerOutcome {
            item_id: request.item_id,
            capability: request.capability,
            worker_run_id: launched.summary.map(|s| s.run_id),
            stop_reason: output.stop_reason.unwrap_or(StopReason::Error),
            report: output.report.unwrap_or_default(),
            error: output.error,
        })
    }
}

#[async_trait::async_trait]
impl WorkerSpawner for WorkerRuns {
    async fn run(&self, job: WorkerJob) -> WorkerOutcome {
        let request: WorkerRequest = job.request.clone();
        match self.run_job(job).await {
            Ok(outcome) => outcome,
            Err(reason) => WorkerOutcome::failed(&request, reason.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_plays_the_script_named_after_its_item() {
        assert_eq!(
            worker_script("scripted:/tmp/run.jsonl", "a1").as_deref(),
            Some("scripted:/tmp/run.a1.jsonl")
        );
        assert_eq!(
            worker_script("scripted:plan", "b").as_deref(),
            Some("scripted:plan.b")
        );
        assert_eq!(worker_script("openai", "a1"), None);
    }
}
