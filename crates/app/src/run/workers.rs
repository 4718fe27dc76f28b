//! Worker runs of a delegating agent (the conductor): the composition root's
//! [`WorkerSpawner`]. A worker is an agent run of its own — its own harness, contexts,
//! sandbox policy and transcript — prepared like any run (the one [`prepare`]), on a child of
//! the parent's budget and stop token, reporting its progress to the parent's records.
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
use lsm_harness::{EventEnvelope, EventSink, WorkerJob, WorkerReporter, WorkerSpawner};
use lsm_phase::{StopReason, WorkerOutcome, WorkerRequest};

use super::answer;
use super::prepare::{Start, Store, WorkerOf, prepare};
use super::request::RunRequest;
use crate::config::Config;
use crate::wiring::ProviderFlags;

/// Starts the workers of one parent run, each through [`prepare`] like any run.
pub(super) struct WorkerRuns {
    /// The parent run's configuration.
    pub(super) config: Config,
    /// The parent's request: its provider flags (`--provider`, `--model`, `--base-url`) and
    /// `--yes` (approve the workers' permission requests) carry over.
    pub(super) request: RunRequest,
    /// The working directory.
    pub(super) cwd: PathBuf,
    /// The parent's PostgreSQL run store (`[store] url`): the workers' journals go there too.
    pub(super) pg: Option<crate::store::PgRuns>,
    /// The agents a worker can run (the project's definitions included).
    pub(super) catalog: lsm_agents::Catalog,
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
    /// The worker's run could not be prepared or did not finish (its settings, provider,
    /// channel, wiring or records).
    #[error("{0:#}")]
    Run(crate::error::AppError),
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
        // The capability's own limits and model (`[conductor.capabilities.NAME]`).
        let capability = self
            .config
            .conductor
            .capabilities
            .get(&request.capability)
            .cloned()
            .unwrap_or_default();
        let (definition, catalog) = self.with_tier(definition, &capability);
        let spec = &definition.spec;
        let resume = match (&job.resume, &self.pg) {
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
                match store.read(&key)? {
                    // A worker that ended on another machine: its end is in the database.
                    Some(journal) => match lsm_harness::workers::ended_outcome_of(
                        &request,
                        &journal.events,
                        &job.budget,
                    ) {
                        Some(outcome) => return Ok(outcome),
                        None => Some(key.run_id),
                    },
                    None => None,
                }
            }
            // A worker whose run never wrote a line (the parent died first) starts anew.
            (Some(dir), None) if dir.join("transcript.jsonl").is_file() => {
                if let Some(outcome) = ended_outcome(&request, dir, &job.budget) {
                    return Ok(outcome);
                }
                dir.file_name().map(|n| n.to_string_lossy().into_owned())
            }
            _ => None,
        };
        let mut sandbox = self.config.run_sandbox();
        let mut objective = request.objective.clone();
        if spec.name == "researcher" {
            // Its notes go into its own artifacts folder, nowhere else; it reads where the
            // run reads (relative paths still resolve against the run's working directory).
            let artifacts = self
                .config
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
            let agents = self.config.agents.agents_folder.clone();
            sandbox.protected_paths.retain(|p| p != &agents);
            objective.push_str(&format!(
                "\n(Write any notes under {}; nowhere else is writable.)",
                artifacts.display()
            ));
        }
        let llm = crate::agent_defs::resolve_llm(&self.config, &definition)
            .map_err(WorkerJobError::Run)?;
        let mut llm_flags = ProviderFlags {
            provider: self.request.llm.provider.clone(),
            model: worker_model(&capability, self.request.llm.model.as_ref()),
            base_url: self.request.llm.base_url.clone(),
            ..ProviderFlags::default()
        };
        let spec_of_parent = llm_flags.provider.clone().or_else(|| llm.provider.clone());
        if let Some(script) = spec_of_parent
            .as_deref()
            .and_then(|s| worker_script(s, &request.item_id))
        {
            llm_flags.provider = Some(script);
        }
        let mut allow_tools = Vec::new();
        if spec.name == "terminal"
            && !self
                .config
                .agents
                .extra_tools_of(&spec.name)
                .iter()
                .any(|t| t == "bash")
        {
            allow_tools.push("bash".to_string());
        }
        let worker_request = RunRequest {
            settings: crate::run::RunSettings {
                max_iterations: capability.max_iterations,
                max_wall_seconds: capability.timeout_seconds,
                ..crate::run::RunSettings::default()
            },
            llm: llm_flags,
            yes: self.request.yes,
            allow_tools,
            resume,
            ..RunRequest::default()
        }
        .of_agent(&spec.name, spec.input.as_str(), &objective);
        let store = match &self.pg {
            Some(pg) => Store::Pg(pg.clone()),
            None => Store::Files,
        };
        let start = Start::new(job.stop.clone(), crate::notice::to_log())
            .in_store(store)
            .in_dir(self.cwd.clone())
            .with_catalog(catalog)
            .for_worker(WorkerOf {
                budget: job.budget.clone(),
                sandbox,
            });
        let prepared = prepare(worker_request, &self.config, start).map_err(WorkerJobError::Run)?;
        let reporter = job.reporter.clone();
        let agent = prepared.agent().to_string();
        let recorded_objective = prepared.request().objective().to_string();
        let prepared = prepared
            .with_event_sink(Arc::new(ToParent(job.reporter.clone())))
            .on_start(move |h| {
                reporter.started(h.run_id(), &agent, &h.run_dir(), &recorded_objective);
            });
        let answering = answer::spawn_unattended(Arc::clone(prepared.channel()), self.request.yes);
        let finished = prepared.execute().await;
        answering.abort();
        let finished = finished.map_err(WorkerJobError::Run)?;
        let output = finished.output;
        Ok(WorkerOutcome {
            item_id: request.item_id,
            capability: request.capability,
            worker_run_id: finished.summary.map(|s| s.run_id),
            stop_reason: output.stop_reason.unwrap_or(StopReason::Error),
            report: output.report.unwrap_or_default(),
            error: output.error,
        })
    }
}

/// The model flag of a worker of `capability`: the capability's model or tier decides over
/// the parent's `--model` (a tier: the model `[llm.tiers]` names for it).
fn worker_model(capability: &crate::config::Capability, parent: Option<&String>) -> Option<String> {
    match (&capability.model, capability.tier) {
        (Some(model), _) => Some(model.clone()),
        (None, Some(_)) => None,
        (None, None) => parent.cloned(),
    }
}

impl WorkerRuns {
    /// `definition` as a worker of `capability` runs it (its tier, when the capability
    /// names one, with the agent's own model dropped), and the catalog that holds it so.
    fn with_tier(
        &self,
        mut definition: lsm_agents::AgentDefinition,
        capability: &crate::config::Capability,
    ) -> (lsm_agents::AgentDefinition, lsm_agents::Catalog) {
        let Some(tier) = capability.tier else {
            return (definition, self.catalog.clone());
        };
        definition.spec.tier = tier;
        definition.settings.model = None;
        // One definition in a layer cannot clash with another of its layer.
        match self.catalog.clone().with_layer(vec![definition.clone()]) {
            Ok(catalog) => (definition, catalog),
            Err(e) => {
                tracing::warn!("worker tier not applied: {e}");
                (definition, self.catalog.clone())
            }
        }
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
    fn a_capabilitys_tier_or_model_decides_its_workers_model() {
        use crate::config::Capability;
        use lsm_phase::LlmTier;
        let runs = WorkerRuns {
            config: Config::default(),
            request: RunRequest::default(),
            cwd: PathBuf::from("."),
            pg: None,
            catalog: lsm_agents::Catalog::builtin(),
        };
        let researcher = runs.catalog.get("researcher").unwrap().clone();
        assert_ne!(researcher.spec.tier, LlmTier::Complex);
        let quick = Capability {
            tier: Some(LlmTier::Complex),
            ..Capability::default()
        };
        let (definition, catalog) = runs.with_tier(researcher.clone(), &quick);
        assert_eq!(definition.spec.tier, LlmTier::Complex);
        assert!(definition.settings.model.is_none());
        assert_eq!(
            catalog.get("researcher").unwrap().spec.tier,
            LlmTier::Complex
        );
        // No tier: the agent as it is.
        let (same, _) = runs.with_tier(researcher.clone(), &Capability::default());
        assert_eq!(same.spec.tier, researcher.spec.tier);

        let parent = Some("parent-model".to_string());
        assert_eq!(worker_model(&quick, parent.as_ref()), None);
        let small = Capability {
            model: Some("small".into()),
            ..Capability::default()
        };
        assert_eq!(
            worker_model(&small, parent.as_ref()).as_deref(),
            Some("small")
        );
        assert_eq!(
            worker_model(&Capability::default(), parent.as_ref()).as_deref(),
            Some("parent-model")
        );
    }

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
