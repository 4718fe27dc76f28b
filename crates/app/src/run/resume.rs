//! Resuming a run: find it under the agents folder, open (and lock) its journal, and fill
//! the run's arguments in from what it recorded.

use std::path::{Path, PathBuf};

use crate::error::Result;
use lsm_harness::{HarnessError, ResumePoint};

use super::RunRequest;
use crate::error::usage;
use crate::store::legacy;

/// Find the run `run_id` under `root` and open it to be resumed (locking it).
///
/// # Errors
/// A usage error when there is no such run, it is driven by a live process, or it has
/// finished.
pub fn open_run(root: &Path, run_id: &str) -> Result<ResumePoint> {
    let Some(run_dir) = crate::store::run_folder(root, run_id) else {
        return Err(usage(format!(
            "no run '{run_id}' under {}; `lsm runs list` shows the runs",
            root.display()
        )));
    };
    if legacy::schema_version(&run_dir.join("transcript.jsonl"))
        .is_some_and(|v| v < u64::from(lsm_harness::SCHEMA_VERSION))
    {
        return Err(usage(legacy::not_resumable(run_id)));
    }
    ResumePoint::open(&run_dir).map_err(|e| match e {
        HarnessError::Locked { pid, .. } => usage(format!(
            "run {run_id} is already being driven by process {}; a run is resumed by one process at a time",
            pid.map_or_else(|| "(unknown)".to_string(), |p| p.to_string())
        )),
        other => usage(other.to_string()),
    })
}

/// Find the run `run_id` in PostgreSQL and open it to be resumed (taking its lease); its
/// folder is `<root>/<agent>/logs/<run_id>` on this machine.
///
/// # Errors
/// A usage error when there is no such run, another process holds it, or it has finished.
pub fn open_pg_run(pg: &lsm_store_pg::PgRuns, root: &Path, run_id: &str) -> Result<ResumePoint> {
    let row = pg
        .get_blocking(run_id)
        .map_err(|e| usage(format!("[store] url: {e}")))?;
    let Some(row) = row else {
        return Err(usage(format!(
            "no run '{run_id}' in the PostgreSQL store; `lsm runs list` shows the runs"
        )));
    };
    let key = lsm_harness::RunKey {
        run_id: run_id.to_string(),
        agent: row.agent.clone(),
        run_dir: root.join(&row.agent).join("logs").join(run_id),
    };
    ResumePoint::open_in(&crate::store::store_of(pg), &key).map_err(|e| usage(e.to_string()))
}

/// Fill `args` in from what the run recorded (agent, task or topic, provider, limits);
/// returns the working directory the run was started in, when it was recorded.
///
/// # Errors
/// When `args` names another agent than the run's.
pub fn recorded(
    args: &mut RunRequest,
    point: &ResumePoint,
    catalog: &lsm_agents::Catalog,
) -> Result<Option<PathBuf>> {
    let started = point.started();
    if !args.name.is_empty() && args.name != started.agent {
        return Err(usage(format!(
            "run {} is a run of agent '{}', not '{}'",
            point.run_id(),
            started.agent,
            args.name
        )));
    }
    args.name.clone_from(&started.agent);
    let takes_topic = catalog
        .get(&started.agent)
        .is_some_and(|d| d.spec.input == lsm_agents::TaskInput::Topic);
    if takes_topic {
        args.topic = Some(started.topic.clone());
        args.task = None;
    } else {
        args.task = Some(started.topic.clone());
        args.topic = None;
    }
    let launch = started.launch.clone().unwrap_or_default();
    args.llm.provider = launch.provider_spec;
    args.llm.model = launch.model;
    args.llm.base_url = launch.base_url;
    args.settings.max_iterations = launch.max_iterations;
    args.max_rounds = launch.max_rounds;
    args.allow_tools = launch.extra_tools;
    args.settings.max_tokens_budget = Some(started.max_tokens_budget);
    args.settings.max_cost_usd = started.max_cost_usd;
    // A run paused by its wall-clock limit is resumed with a higher one.
    args.settings.max_wall_seconds = args.settings.max_wall_seconds.or(launch.max_wall_seconds);
    // The run's own folder decides where its records are, whatever the configuration says.
    args.settings.agents_folder = point
        .run_dir()
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    Ok(launch.working_dir.map(PathBuf::from))
}

/// `point` with the result of the deferred call it waits for, read from the file `results`
/// gives for it (relative to `cwd`).
///
/// # Errors
/// A usage error when the run waits for a call's result and `results` has none for it
/// (naming the call, its tool and arguments), when a result is for a call the run does not
/// wait for, or when its file cannot be read.
pub fn supply_results(
    point: ResumePoint,
    results: &[(String, PathBuf)],
    cwd: &Path,
) -> Result<ResumePoint> {
    let Some(waiting) = point.waiting_for() else {
        return match results.first() {
            Some((id, _)) => Err(usage(format!(
                "--tool-result {id}=…: run {} waits for no deferred call's result",
                point.run_id()
            ))),
            None => Ok(point),
        };
    };
    let (call_id, tool, arguments) = (
        waiting.call_id.clone(),
        waiting.tool.clone(),
        waiting.arguments.to_string(),
    );
    if let Some((other, _)) = results.iter().find(|(id, _)| *id != call_id) {
        return Err(usage(format!(
            "--tool-result {other}=…: run {} waits for the result of call '{call_id}' (tool {tool}), not of '{other}'",
            point.run_id()
        )));
    }
    let Some((_, file)) = results.first() else {
        return Err(usage(format!(
            "run {run} waits for the result of call '{call_id}' (tool {tool}, arguments {arguments}), \
             which is handled outside lsm: give it with `lsm runs resume {run} --tool-result {call_id}=FILE`",
            run = point.run_id()
        )));
    };
    let path = cwd.join(file);
    let content = std::fs::read_to_string(&path).map_err(|e| {
        usage(format!(
            "--tool-result {call_id}={}: cannot read the file: {e}",
            file.display()
        ))
    })?;
    point
        .with_tool_result(&call_id, content)
        .map_err(|e| usage(e.to_string()))
}

/// What a new turn of the finished run `run_id` (under `root`) starts from: that run's
/// contexts and what its conversation spent.
///
/// # Errors
/// A usage error when there is no such run, it is another agent's, it has not finished (an
/// interrupted, paused or deferred run is resumed, not continued), or its journal cannot be
/// read.
pub fn continuation(
    root: &Path,
    run_id: &str,
    agent: &str,
    pg: Option<&lsm_store_pg::PgRuns>,
) -> Result<lsm_harness::event::ConversationContinued> {
    let events = match pg {
        Some(pg) => {
            let key = lsm_harness::RunKey {
                run_id: run_id.to_string(),
                agent: agent.to_string(),
                run_dir: root.join(agent).join("logs").join(run_id),
            };
            crate::store::store_of(pg)
                .read(&key)
                .map_err(|e| usage(format!("--continue {run_id}: {e}")))?
                .ok_or_else(|| {
                    usage(format!(
                        "--continue {run_id}: no run of agent '{agent}' with that id in the \
                         PostgreSQL store; `lsm runs list` shows the runs"
                    ))
                })?
                .events
        }
        None => {
            let Some(run_dir) = crate::store::run_folder(root, run_id) else {
                return Err(usage(format!(
                    "--continue {run_id}: no run of that id under {}; `lsm runs list` shows the runs",
                    root.display()
                )));
            };
            lsm_harness::read_journal(&run_dir.join("transcript.jsonl"))
                .map_err(|e| usage(format!("--continue {run_id}: {e}")))?
                .events
        }
    };
    let started = lsm_harness::StartedRun::of(&events).ok_or_else(|| {
        usage(format!(
            "--continue {run_id}: its transcript has no run_started line; nothing ran"
        ))
    })?;
    if started.agent != agent {
        return Err(usage(format!(
            "--continue {run_id}: it is a run of agent '{}', not '{agent}'",
            started.agent
        )));
    }
    let state = lsm_harness::RunState::fold(&events);
    if state.finished.is_none() {
        return Err(usage(format!(
            "--continue {run_id}: the run has not finished; `lsm runs resume {run_id}` finishes it first"
        )));
    }
    let contexts = serde_json::to_value(&state.contexts)
        .map_err(|e| usage(format!("--continue {run_id}: {e}")))?;
    Ok(lsm_harness::event::ConversationContinued {
        from_run_id: run_id.to_string(),
        contexts,
        usage: state.conversation_usage(),
    })
}
