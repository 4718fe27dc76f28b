//! `lsm agent run <name>`: wire a provider, the sandbox and a harness, run, report.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use lsm_harness::{HarnessFactory, RunReport};
use lsm_sandbox::Sandbox;
use tokio_util::sync::CancellationToken;

use crate::config::{self, ConfigError};
use crate::exit;
use crate::progress::StderrProgress;
use crate::wiring;

/// Arguments of `lsm agent run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The agent to run (see `lsm agent list`; today: general).
    pub name: String,

    /// What the agent should do.
    #[arg(long)]
    pub task: Option<String>,

    /// The LLM provider: `scripted:<file.jsonl>` plays a recorded script.
    #[arg(long, value_name = "SPEC")]
    pub provider: Option<String>,

    /// Root of the agents' workspaces and run records (default: [agents] agents_folder).
    #[arg(long, value_name = "DIR")]
    pub agents_folder: Option<PathBuf>,

    /// Iteration limit of the run (default: [agents] max_iterations).
    #[arg(long, value_name = "N")]
    pub max_iterations: Option<u32>,

    /// Token ceiling of the run (default: [agents] max_tokens_budget).
    #[arg(long, value_name = "N")]
    pub max_tokens_budget: Option<u64>,

    /// Print only the final run summary, as JSON, on stdout.
    #[arg(long)]
    pub json: bool,

    /// Approve every permission request automatically (recorded as such in the transcript
    /// and the summary). Without it, a request that needs a person is denied.
    #[arg(long)]
    pub yes: bool,
}

/// Run; returns the exit code.
pub fn run(config_path: Option<&Path>, args: RunArgs) -> u8 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return exit::ERROR;
        }
    };
    match runtime.block_on(run_async(config_path, args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<ConfigError>().is_some() {
                exit::USAGE
            } else {
                exit::ERROR
            }
        }
    }
}

pub(crate) fn usage(msg: impl Into<String>) -> anyhow::Error {
    ConfigError(msg.into()).into()
}

async fn run_async(config_path: Option<&Path>, args: RunArgs) -> Result<u8> {
    let mut config = config::load(config_path, &config::lsm_env())?;
    let Some(spec) = lsm_agents::find(&args.name) else {
        let names: Vec<&str> = lsm_agents::BUILTIN.iter().map(|a| a.name).collect();
        return Err(usage(format!(
            "unknown agent '{}'; available: {}",
            args.name,
            names.join(", ")
        )));
    };
    let Some(task) = args.task.as_deref().filter(|t| !t.trim().is_empty()) else {
        return Err(usage(format!(
            "agent '{}' needs a task: pass --task \"...\"",
            spec.name
        )));
    };

    let cwd = std::env::current_dir()?;
    if let Some(dir) = args.agents_folder {
        config.agents.agents_folder = cwd.join(dir);
    }
    if let Some(n) = args.max_iterations {
        config.agents.max_iterations = n;
    }
    if let Some(n) = args.max_tokens_budget {
        config.agents.max_tokens_budget = n;
    }
    if config.sandbox.allowed_read_paths.is_empty() && config.sandbox.allowed_write_paths.is_empty()
    {
        // No policy configured: confine tools to the working directory.
        config.sandbox.allowed_read_paths = vec![cwd.clone()];
        config.sandbox.allowed_write_paths = vec![cwd.clone()];
    }

    let provider_spec = args
        .provider
        .clone()
        .or_else(|| config.llm.provider.clone())
        .ok_or_else(|| {
            usage("no LLM provider configured: pass --provider scripted:<file.jsonl> or set [llm] provider in lsm.toml")
        })?;
    let provider = wiring::build_provider(&provider_spec, &cwd)?;

    let kb = crate::kb_cmd::agent_tools(&config, Arc::clone(&provider))
        .map_err(|e| usage(format!("the knowledge base cannot be used: {e:#}")))?;
    let asker = wiring::permission_asker(args.yes);
    let sandbox = Sandbox::new(config.sandbox.clone(), kb.registry, asker)
        .map_err(|e| usage(format!("invalid [sandbox] configuration: {e}")))?;

    let stop = CancellationToken::new();
    let mut factory = HarnessFactory::new(config.agents.clone(), provider, Arc::new(sandbox))
        .with_stop_token(stop.clone());
    if let Some(guard) = kb.guard {
        factory = factory.with_call_guard(guard);
    }
    if let Some(meter) = kb.usage {
        factory = factory.with_external_usage(meter);
    }
    if !args.json {
        factory = factory.with_event_sink(Arc::new(StderrProgress));
    }
    let identity = spec.identity(task, false);
    let mut harness = factory.build(&identity, spec.system_prompt);

    let ctrl_c = stop.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("stop requested; finishing the current step…");
            ctrl_c.cancel();
        }
    });

    let report = harness.run(task).await;
    print_report(&report, args.json)?;
    if let Some(err) = &report.records_error {
        eprintln!("error: the run's records could not be written: {err}");
        return Ok(exit::ERROR);
    }
    Ok(exit::for_stop_reason(report.result.stop_reason))
}

fn print_report(report: &RunReport, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&report.summary)?);
        return Ok(());
    }
    let s = &report.summary;
    println!();
    if !report.result.final_text.is_empty() {
        println!("{}", report.result.final_text);
        println!();
    }
    println!(
        "run {} — {} ({}), {} LLM call(s), {} of {} tokens, {} tool call(s)",
        s.run_id,
        s.status,
        s.run_outcome,
        s.token_usage.iterations,
        s.token_usage.tokens_used,
        s.token_usage.max_tokens_budget,
        s.tool_sequence.len()
    );
    for a in &s.artifacts_created {
        println!("artifact: {a}");
    }
    println!("summary: {}", report.summary_path.display());
    println!("transcript: {}", report.transcript_path.display());
    Ok(())
}
