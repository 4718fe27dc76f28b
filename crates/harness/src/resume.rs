//! [`ResumePoint`]: an interrupted run opened to be continued — its folder locked for this
//! process, its journal read (a torn last line cut off) and folded into a [`RunState`].
//!
//! The rules a resumed harness follows ([`crate::AgentHarness::resumed`]):
//! - phases whose `phase_ended` is recorded are replayed: `run_bounded` returns the recorded
//!   result without a model or tool call;
//! - the first phase not ended continues from its folded position: a model call already
//!   answered is never made again, a model call requested and not answered is made again
//!   (`run_resumed` forgets it), completed tool calls are never run again;
//! - a call started and not finished is repaired by the tool's declared idempotency
//!   ([`repair_for`]): `read_only` tools, and calls still waiting for a person's decision
//!   (their request is posted again), run again; any other gets a failed result saying it was
//!   interrupted and may or may not have taken effect;
//! - the journal continues: same transcript, `seq` continuing, the budget restored to what
//!   the journal records as spent.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lsm_sandbox::{RiskLevel, Sandbox};

use lsm_run::event::{EventEnvelope, RepairAction, RunEvent, RunLaunch};
use lsm_run::state::{PendingCall, RunState};

use crate::error::HarnessError;
use crate::store::{FileStore, JournalWriter, RunKey, RunStore};

/// What `run_started` says about a run: enough for its owner to build it again.
#[derive(Debug, Clone, PartialEq)]
pub struct StartedRun {
    /// The agent.
    pub agent: String,
    /// The task or topic.
    pub topic: String,
    /// The tools the agent may call.
    pub tool_allowlist: Vec<String>,
    /// Provider name.
    pub provider: String,
    /// Model.
    pub model: String,
    /// The run's token ceiling.
    pub max_tokens_budget: u64,
    /// The run's cost ceiling.
    pub max_cost_usd: Option<f64>,
    /// How the owner started it.
    pub launch: Option<RunLaunch>,
    /// When (RFC 3339).
    pub started_at: String,
}

impl StartedRun {
    /// The `run_started` line of `journal`, if it has one.
    pub fn of(journal: &[EventEnvelope]) -> Option<StartedRun> {
        journal.iter().find_map(|line| match &line.event {
            RunEvent::RunStarted(lsm_run::event::RunStarted {
                agent,
                topic,
                tool_allowlist,
                provider,
                model,
                max_tokens_budget,
                max_cost_usd,
                launch,
                ..
            }) => Some(StartedRun {
                agent: agent.clone(),
                topic: topic.clone(),
                tool_allowlist: tool_allowlist.clone(),
                provider: provider.clone(),
                model: model.clone(),
                max_tokens_budget: *max_tokens_budget,
                max_cost_usd: *max_cost_usd,
                launch: launch.clone(),
                started_at: line.ts.clone(),
            }),
            _ => None,
        })
    }
}

/// An interrupted run, locked for this process and folded, ready to be driven again.
#[derive(Debug)]
pub struct ResumePoint {
    pub(crate) run_dir: PathBuf,
    pub(crate) run_id: String,
    pub(crate) journal: Vec<EventEnvelope>,
    pub(crate) state: RunState,
    pub(crate) writer: Box<dyn JournalWriter>,
    pub(crate) started: StartedRun,
    warning: Option<String>,
    /// The result of the deferred call the run waits for, supplied from outside:
    /// `(call id, content)`.
    pub(crate) supplied: Option<(String, String)>,
}

impl ResumePoint {
    /// Lock the run in `run_dir` for this process, read its journal (cutting off a torn last
    /// line) and fold it (the file store; see [`ResumePoint::open_in`]).
    ///
    /// # Errors
    /// [`HarnessError::Locked`] when a live process drives it; [`HarnessError::Resume`] when
    /// it has no `run_started` or has already finished; a journal that cannot be read.
    pub fn open(run_dir: &Path) -> Result<ResumePoint, HarnessError> {
        if !run_dir.is_dir() {
            return Err(HarnessError::Resume {
                run_dir: run_dir.display().to_string(),
                reason: "there is no such run folder".into(),
            });
        }
        let run_id = run_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let agent = run_dir
            .parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let key = RunKey {
            run_id,
            agent,
            run_dir: run_dir.to_path_buf(),
        };
        ResumePoint::open_in(&(Arc::new(FileStore) as Arc<dyn RunStore>), &key)
    }

    /// Take the run `key` in `store` for this process, read its journal (a torn last line cut
    /// off) and fold it.
    ///
    /// # Errors
    /// [`HarnessError::Locked`] or [`HarnessError::Leased`] when another process drives it;
    /// [`HarnessError::Resume`] when it has no `run_started` or has already finished; a
    /// journal that cannot be read.
    pub fn open_in(store: &Arc<dyn RunStore>, key: &RunKey) -> Result<ResumePoint, HarnessError> {
        let refuse = |reason: String| HarnessError::Resume {
            run_dir: key.run_dir.display().to_string(),
            reason,
        };
        let (writer, mut journal) = store.reopen(key)?;
        let warning = journal.warning.take();
        let events = journal.events;
        let Some(started) = StartedRun::of(&events) else {
            writer.release();
            return Err(refuse(
                "its transcript has no run_started line; nothing ran".into(),
            ));
        };
        let state = RunState::fold(&events);
        if let Some(status) = &state.finished {
            writer.release();
            return Err(refuse(format!(
                "it has already finished ({status}); start a new run instead"
            )));
        }
        let run_id = events
            .last()
            .map_or_else(|| key.run_id.clone(), |e| e.run_id.clone());
        Ok(ResumePoint {
            run_dir: key.run_dir.clone(),
            run_id,
            journal: events,
            state,
            writer,
            started,
            warning,
            supplied: None,
        })
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The run folder.
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// What `run_started` recorded.
    pub fn started(&self) -> &StartedRun {
        &self.started
    }

    /// The folded state.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// The journal as read.
    pub fn journal(&self) -> &[EventEnvelope] {
        &self.journal
    }

    /// The call of a tool handled outside `lsm` (deferred) the run waits for, if it waits.
    pub fn waiting_for(&self) -> Option<&lsm_run::state::PendingCall> {
        lsm_run::core::Core::waiting_for(&self.state)
    }

    /// Supply `content` as the result of the deferred call `call_id` the run waits for.
    ///
    /// # Errors
    /// [`HarnessError::Resume`] when the run waits for no deferred call, or for another.
    pub fn with_tool_result(
        mut self,
        call_id: &str,
        content: String,
    ) -> Result<ResumePoint, HarnessError> {
        match self.waiting_for() {
            Some(p) if p.call_id == call_id => {
                self.supplied = Some((call_id.to_string(), content));
                Ok(self)
            }
            other => Err(HarnessError::Resume {
                run_dir: self.run_dir.display().to_string(),
                reason: match other {
                    Some(p) => format!(
                        "it waits for the result of call '{}' (tool {}), not of '{call_id}'",
                        p.call_id, p.tool
                    ),
                    None => format!(
                        "it waits for no deferred call; there is no call '{call_id}' to give a result to"
                    ),
                },
            }),
        }
    }

    /// Why the last line was cut off, if it was torn.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// The last `seq` written.
    pub fn last_seq(&self) -> u64 {
        self.journal.last().map_or(0, |e| e.seq)
    }

    /// Model calls the provider answered or failed so far, the loop's and the tools' (a
    /// replaying provider, such as a script, continues after them).
    pub fn model_calls_made(&self) -> u64 {
        self.journal
            .iter()
            .map(|line| match &line.event {
                RunEvent::LlmResponse { .. } | RunEvent::LlmError { .. } => 1,
                // The compaction's summary call, answered or failed.
                RunEvent::CompactionStep { usage: Some(_), .. }
                | RunEvent::CompactionSummaryFailed { called: true, .. } => 1,
                RunEvent::ToolUsage(lsm_run::event::ToolUsage { llm_calls, .. }) => *llm_calls,
                _ => 0,
            })
            .sum()
    }
}

/// How the call `pending`, started and not finished, is repaired: run again when its tool is
/// `read_only` or when the journal shows it still waiting for a person (the permission gate
/// comes before the tool runs, so it cannot have taken effect); otherwise reported as
/// interrupted.
pub fn repair_for(
    pending: &PendingCall,
    journal: &[EventEnvelope],
    sandbox: &Sandbox,
) -> RepairAction {
    let read_only = sandbox
        .registry()
        .get(&pending.tool)
        .is_some_and(|t| t.risk() == RiskLevel::ReadOnly);
    if read_only || waiting_for_person(pending, journal) {
        RepairAction::RunAgain
    } else {
        RepairAction::ReportInterrupted
    }
}

/// Whether the last interaction event after `pending`'s `tool_call_started` is an unanswered
/// request.
fn waiting_for_person(pending: &PendingCall, journal: &[EventEnvelope]) -> bool {
    let Some(start) = journal.iter().rposition(|line| {
        matches!(&line.event, RunEvent::ToolCallStarted { call_id, .. } if *call_id == pending.call_id)
    }) else {
        return false;
    };
    journal[start..]
        .iter()
        .rev()
        .find_map(|line| match line.event {
            RunEvent::InteractionRequest(_) => Some(true),
            RunEvent::InteractionResponse(_) | RunEvent::InteractionTimeout(_) => Some(false),
            _ => None,
        })
        .unwrap_or(false)
}
