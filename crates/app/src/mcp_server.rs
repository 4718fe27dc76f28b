//! `lsm mcp serve`'s server ([`server`]): the knowledge-base tools and `run_agent`, every call
//! through the sandbox.
//!
//! `run_agent` runs one of lsm's agents. It goes the same
//! way as `lsm agent run` ([`crate::run::prepare`], then [`crate::run::PreparedRun::execute`])
//! and answers with the run summary — `lsm agent run --output-format json`'s document.
//!
//! Nobody is at a terminal: the run's permission requests are denied at once (recorded as
//! `unattended`), exactly as in a headless `lsm agent run`. A client may lower the run's token
//! budget, never raise it above `[agents] max_tokens_budget`.

use serde::Deserialize;
use serde_json::{Value, json};

use std::sync::Arc;

use crate::error::Result;
pub use lsm_mcp::SandboxServer;
use lsm_sandbox::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};

use crate::config::Config;
use crate::error::ConfigError;
use crate::notice::Notify;
use crate::run::{self, RunRequest};

/// The tool's name.
pub const NAME: &str = "run_agent";

/// The `run_agent` tool over one configuration.
pub struct RunAgentTool {
    config: Config,
    provider: Option<String>,
    description: String,
    /// The agents it can run (the project's definitions included).
    names: Vec<String>,
    /// Where the runs' notices go (a cancel asked from elsewhere).
    notify: Notify,
}

impl RunAgentTool {
    /// Runs agents under `config`, with `provider` (a `--provider` spec) overriding `[llm]`;
    /// the runs' notices go to `notify`.
    pub fn new(config: Config, provider: Option<String>, notify: Notify) -> Self {
        // A definition file that does not load leaves the built-ins; running one says why.
        let catalog = crate::agent_defs::catalog(&config).unwrap_or_else(|e| {
            tracing::warn!("run_agent offers the built-in agents only: {e:#}");
            lsm_agents::Catalog::builtin()
        });
        let agents: Vec<String> = catalog
            .iter()
            .map(|a| {
                format!(
                    "{} ({}: {})",
                    a.name(),
                    a.spec.input.as_str(),
                    a.spec.description
                )
            })
            .collect();
        let names = catalog.names().into_iter().map(str::to_string).collect();
        let description = format!(
            "Run one of lsm's agents to its end and return its run summary (status, final_text, \
             artifacts, token usage). Agents that take a task need `task`, the others `topic`. \
             Agents: {}.",
            agents.join("; ")
        );
        RunAgentTool {
            config,
            provider,
            description,
            names,
            notify,
        }
    }
}

/// The tool's arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Arguments {
    agent: String,
    task: Option<String>,
    topic: Option<String>,
    max_tokens_budget: Option<u64>,
}

/// The run this call asks for: the provider of `lsm mcp serve`, a budget no larger than the
/// configured one.
fn run_args(args: Arguments, provider: Option<String>, configured_budget: u64) -> RunRequest {
    RunRequest {
        name: args.agent,
        task: args.task,
        topic: args.topic,
        llm: crate::wiring::ProviderFlags {
            provider,
            ..Default::default()
        },
        settings: run::RunSettings {
            max_tokens_budget: Some(
                args.max_tokens_budget
                    .map_or(configured_budget, |asked| asked.min(configured_budget)),
            ),
            ..run::RunSettings::default()
        },
        ..RunRequest::default()
    }
}

#[async_trait::async_trait]
impl Tool for RunAgentTool {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        let names = &self.names;
        json!({
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": names, "description": "The agent to run."},
                "task": {"type": "string", "description": "What the agent should do (agents that take a task)."},
                "topic": {"type": "string", "description": "What the agent should work on (research, synthesis, writing)."},
                "max_tokens_budget": {"type": "integer", "minimum": 1, "description": "Token ceiling of the run (at most the configured [agents] max_tokens_budget)."}
            },
            "required": ["agent"],
            "additionalProperties": false
        })
    }

    fn risk(&self) -> RiskLevel {
        // The agent's own tools run under the configured sandbox; the run spends tokens.
        RiskLevel::Exec
    }

    fn bounds_itself(&self) -> bool {
        // Bounded by the run's token budget and iteration limits, not the tool timeout.
        true
    }

    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Arguments = serde_json::from_value(ctx.args)
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        let args = run_args(
            args,
            self.provider.clone(),
            self.config.agents.max_tokens_budget,
        );
        let start = run::Start::new(
            tokio_util::sync::CancellationToken::new(),
            Arc::clone(&self.notify),
        );
        let run = run::prepare(args, &self.config, start)
            .map_err(|e| ToolError::InvalidArguments(format!("{e:#}")))?
            .watched_by(None)
            .with_log_sink(Arc::new(run::TracingAgentLog));
        // Nobody answers: permission requests are denied at once and recorded as unattended.
        let answering = run::answer::spawn_unattended(Arc::clone(run.channel()), false);
        // A call the client abandons (its future dropped) stops the run at its next step.
        let _stop_when_dropped = run.stop().clone().drop_guard();
        let finished = run.execute().await;
        answering.abort();
        let finished = finished.map_err(|e| ToolError::Failed(format!("{e:#}")))?;
        match &finished.summary {
            Some(summary) => run::summary_json(summary)
                .map(ToolOutput::text)
                .map_err(|e| ToolError::Failed(format!("{e:#}"))),
            None => Err(ToolError::Failed(format!(
                "the run has no summary: {}",
                finished
                    .records_problem
                    .as_deref()
                    .or(finished.output.error.as_deref())
                    .unwrap_or("it made no phase")
            ))),
        }
    }
}

/// The server of `lsm mcp serve`: `tools` and `run_agent` (its runs on `provider`, their
/// notices to `notify`), every call through the sandbox of `config`, with nobody to ask for
/// permission.
///
/// # Errors
/// A usage error when the `[sandbox]` settings cannot be used.
pub fn server(
    config: &Config,
    mut tools: ToolRegistry,
    provider: Option<String>,
    notify: Notify,
) -> Result<SandboxServer> {
    tools.register(Arc::new(RunAgentTool::new(
        config.clone(),
        provider,
        notify,
    )));
    let sandbox = lsm_sandbox::Sandbox::new(config.sandbox.clone(), tools, None)
        .map_err(|e| ConfigError(config.sandbox_error(&e)))?;
    Ok(SandboxServer::new(
        Arc::new(sandbox),
        "lsm: retrieval tools over the user's own documents (cite the sources they return), \
         and run_agent to run one of lsm's agents.",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_may_lower_the_budget_but_not_raise_it() {
        let args = |budget| Arguments {
            agent: "general".into(),
            task: Some("t".into()),
            topic: None,
            max_tokens_budget: budget,
        };
        assert_eq!(
            run_args(args(Some(500)), None, 1000)
                .settings
                .max_tokens_budget,
            Some(500)
        );
        assert_eq!(
            run_args(args(Some(5000)), None, 1000)
                .settings
                .max_tokens_budget,
            Some(1000)
        );
        assert_eq!(
            run_args(args(None), None, 1000).settings.max_tokens_budget,
            Some(1000)
        );
    }
}
