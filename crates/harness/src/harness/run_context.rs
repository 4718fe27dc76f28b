//! The driver's side of the context providers ([`crate::context`]): the project instructions
//! and the environment block read when a new run starts, and the nested instruction files
//! looked up after a tool call touched a path.
//!
//! It must never load the providers' texts for a run that has started (a resumed run folds
//! them back from its journal), nor read a nested file except through the sandbox.

use super::*;
use crate::context::{EnvironmentFacts, RunContext, environment_block, guidance};

impl AgentHarness {
    /// Give this run the context providers of the project at `root` (`[agents.context]` says
    /// which): its `AGENTS.md` / `LSM.md`, the environment block, the nested `AGENTS.md`
    /// files just in time. Without a root, a run has none of them.
    pub fn with_project_root(mut self, root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        // The sandbox resolves paths to canonical ones: compare like with like.
        self.project_root = Some(std::fs::canonicalize(&root).unwrap_or(root));
        self
    }

    /// Before a new run's first event: read what its context providers give, for the core
    /// to record after `run_started`. Nothing for a run that has started.
    pub(super) async fn load_run_context(&mut self) -> Result<(), HarnessError> {
        if self.state.started {
            return Ok(());
        }
        let Some(root) = self.project_root.clone() else {
            return Ok(());
        };
        let settings = self.config.context;
        let mut context = RunContext::default();
        if settings.project_instructions {
            let max = settings.max_instruction_bytes;
            let shown = root.clone();
            context.instructions = tokio::task::spawn_blocking(move || {
                crate::context::project_instructions(&root, max)
            })
            .await
            .map_err(|e| crate::context::ContextError::Read {
                path: shown,
                reason: e.to_string(),
            })??;
        }
        if settings.environment {
            context.environment = Some(environment_block(&self.environment_facts()));
        }
        self.core.config_mut().run_context = context;
        Ok(())
    }

    /// What the environment block says of this run, today.
    fn environment_facts(&self) -> EnvironmentFacts {
        let sandbox = self.sandbox.config();
        EnvironmentFacts {
            tools: self.core.allowed_tool_names(),
            read_roots: sandbox.allowed_read_paths.clone(),
            write_roots: sandbox.allowed_write_paths.clone(),
            network: sandbox.allow_url_access,
            max_iterations: self.config.max_iterations,
            ..EnvironmentFacts::on(
                Utc::now().format("%Y-%m-%d").to_string(),
                self.sandbox.working_dir().to_path_buf(),
            )
        }
    }

    /// The nested instruction files that apply to the paths the call of `tool` with
    /// `arguments` touched, when the run has nested instructions and the call ran (`run`:
    /// not refused, not interrupted) in a model phase.
    pub(super) async fn guidance_for(
        &self,
        run: &ToolRun,
        tool: &str,
        arguments: &Value,
    ) -> Vec<lsm_run::context::InstructionFile> {
        let ran = matches!(run, ToolRun::Ran { outcome, .. } if outcome.as_ref().err().is_none_or(|f| !f.denial));
        let model_phase = self
            .state
            .current
            .as_ref()
            .is_some_and(|p| p.mode == lsm_run::event::PhaseMode::Llm);
        let paths: Vec<String> = match (&self.project_root, self.sandbox.registry().get(tool)) {
            (Some(_), Some(t)) if ran && model_phase && self.config.context.nested_instructions => {
                t.path_args()
                    .iter()
                    .filter_map(|a| arguments.get(a.name).and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            }
            _ => Vec::new(),
        };
        match (&self.project_root, paths.is_empty()) {
            (Some(root), false) => {
                let sandbox = Arc::clone(&self.sandbox);
                let root = root.clone();
                let seen = self.state.guidance.clone();
                let max = self.config.context.max_instruction_bytes;
                tokio::task::spawn_blocking(move || {
                    guidance::find(&sandbox, &root, &paths, &seen, max)
                })
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(run_id = %self.run_id, "looking for nested instructions failed: {e}");
                    Vec::new()
                })
            }
            _ => Vec::new(),
        }
    }
}
