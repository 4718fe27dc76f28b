//! The layered stop decision: whether a phase continues after an iteration, and if not, why
//! it stops. The one owner of that decision; the core ([`crate::core`]) gathers the facts,
//! asks [`decide`], and records what it says.
//!
//! The layers, in the order of seed 004 §3.4:
//!
//! 0. **The model's own block** (the `block` control tool): the phase ends `blocked`; nothing
//!    else is asked.
//! 1. **Hard stops** — max iterations, budget, stop requested (in that order of precedence):
//!    the phase cannot make another model call. They end a phase that would continue; a
//!    model that answered without a tool call has finished, and is not cut off by them unless
//!    a later layer wants it to continue.
//! 2. **Stall** ([`crate::stall`]): `threshold` identical consecutive iterations get one
//!    corrective message (the nudge), then end the phase `stalled` — except for a stop the
//!    model attempts after the completion checks have used their retries: that one is
//!    theirs to decide.
//! 3. **Done layers**, when the model signalled done (answered without a tool call, or called
//!    `work_complete`), each of which may send it back to work. The first three are the
//!    *completion checks*; they apply only in a phase that completes the task
//!    (`PhaseRequest::completes_task`):
//!    - work-complete enforcement ([`work_complete`]): the model must have declared the task
//!      complete with `work_complete` in this iteration — in the `strict_automation` stop
//!      mode always, in `interactive` whenever `work_complete` is offered (a text answer then
//!      gets a bounded continuation prompt before it is accepted);
//!    - task-contract verification ([`contract`]): the contract's coverage ledger, checked
//!      against the run's evidence (asked for once per attempted stop);
//!    - work-item completion ([`work_items`]): no work item left unfinished;
//!    - `agent_stop` hooks ([`agent_stop`]): a hook may block the stop with a reason, at most
//!      `max_blocks` times in a phase; after that the stop proceeds, recorded as forced.
//!
//!    A completion check that is unmet sends the model back with what is unmet, at most
//!    `completion_retries` times in a phase (all three checks together). After that the stop
//!    mode decides: `interactive` accepts the stop (the phase ends `done`, with what was
//!    unmet recorded), `strict_automation` ends the phase `contract_unmet`.
//!
//! A layer that sends the model back to work continues the phase only if no hard stop
//! applies; otherwise the hard stop ends it.

use crate::config::StopMode;
use crate::stall::{StallConfig, StallState};

/// What the model's last iteration signalled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// It asked for tool calls (all carried out): the loop would call the model again.
    Continue,
    /// It answered without a tool call: it considers the phase done.
    Done,
    /// It called the `block` control tool with this reason.
    Blocked(String),
}

/// A stop that does not depend on what the model did: the phase cannot call it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HardStop {
    /// The phase used its `max_iterations` model calls.
    MaxIterations,
    /// The run's budget is spent (which ceiling).
    Budget(String),
    /// Someone asked the run to stop.
    StopRequested,
}

/// What the `agent_stop` hooks said about this iteration's stop, once asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookVerdict {
    /// Not asked yet: there are hooks to ask.
    Pending,
    /// No hook to ask, or the hooks allowed the stop.
    Allow,
    /// A hook blocked the stop with this reason.
    Block(String),
}

/// Where the task contract stands for the attempted stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContractState {
    /// The run has no contract.
    Absent,
    /// Not checked yet for this stop.
    Pending,
    /// Checked: the unmet conditions, one line each (empty: satisfied).
    Checked(Vec<String>),
}

/// The completion checks' facts, in a phase that completes the task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The stop mode.
    pub mode: StopMode,
    /// The model declared the task complete (`work_complete`) in this iteration.
    pub declared: bool,
    /// `work_complete` is offered in this phase (always under `strict_automation`; under
    /// `interactive` when the allowlist names it).
    pub offered: bool,
    /// The task contract.
    pub contract: ContractState,
    /// The work items not finished, one line each.
    pub unfinished_items: Vec<String>,
    /// How often the completion checks sent the model back in this phase.
    pub objections: u32,
    /// How often they may.
    pub retries: u32,
}

/// Everything the decision looks at.
#[derive(Debug, Clone)]
pub struct StopFacts<'a> {
    /// What the iteration signalled.
    pub signal: Signal,
    /// Model calls made in the phase.
    pub iteration: u32,
    /// The phase's limit.
    pub max_iterations: u32,
    /// Why the budget allows no further call, if it does not.
    pub budget_exhausted: Option<String>,
    /// A stop was requested.
    pub stop_requested: bool,
    /// Stall detection's settings.
    pub stall_config: StallConfig,
    /// The phase's streak of identical iterations.
    pub stall: &'a StallState,
    /// What the `agent_stop` hooks said.
    pub agent_stop: HookVerdict,
    /// How often the `agent_stop` hooks blocked a stop in this phase so far.
    pub agent_stop_blocks: u32,
    /// How often they may.
    pub agent_stop_max_blocks: u32,
    /// The completion checks' facts; `None` in a phase that does not complete the task.
    pub completion: Option<Completion>,
}

/// Why a done layer sends the model back to work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Objection {
    /// The model did not declare the task complete with `work_complete` (strict mode).
    WorkComplete,
    /// Conditions of the task contract are unmet (one line each).
    Contract(Vec<String>),
    /// Work items are unfinished (one line each).
    WorkItems(Vec<String>),
    /// An `agent_stop` hook blocked the stop.
    AgentStop(String),
}

/// How a phase ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Done: every done layer agreed, or (`interactive`) the completion checks had used
    /// their retries — what they still found unmet is listed.
    Done(Vec<String>),
    /// Done although an `agent_stop` hook still blocked it: it had used its blocks (and what
    /// the completion checks accepted unmet).
    DoneForced(String, Vec<String>),
    /// The completion checks were unmet after their retries (`strict_automation`).
    ContractUnmet(Vec<String>),
    /// The model's block.
    Blocked(String),
    /// A hard stop.
    Hard(HardStop),
    /// Stall detection, after the nudge.
    Stalled,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Call the model again.
    Continue,
    /// Call the model again after the stall nudge (recorded once per phase).
    Nudge,
    /// Call the model again with the objection as the reason to continue.
    Object(Objection),
    /// Run the `agent_stop` hooks, then decide again with their verdict.
    AskAgentStopHooks,
    /// Check the task contract (record its coverage), then decide again.
    CheckContract,
    /// End the phase.
    Stop(Ending),
}

/// The decision for `facts`. See the module documentation for the layers and their order.
pub fn decide(facts: &StopFacts<'_>) -> Verdict {
    if let Signal::Blocked(reason) = &facts.signal {
        return Verdict::Stop(Ending::Blocked(reason.clone()));
    }
    let hard = hard_stop(facts);
    if facts.signal == Signal::Continue
        && let Some(h) = hard.clone()
    {
        return Verdict::Stop(Ending::Hard(h));
    }
    // A stop attempted once the completion checks have used their retries is theirs to
    // decide (the phase ends): telling the model to try something else would contradict it.
    let checks_have_the_last_word = facts.signal == Signal::Done
        && facts
            .completion
            .as_ref()
            .is_some_and(|c| c.objections >= c.retries);
    if !checks_have_the_last_word && let Some(verdict) = stall(facts) {
        return continue_unless(hard, verdict);
    }
    if facts.signal == Signal::Continue {
        return Verdict::Continue;
    }
    // The model signalled done: each done layer may send it back to work.
    let mut accepted = Vec::new();
    if let Some(c) = &facts.completion {
        for layer in [work_complete, contract, work_items] {
            match layer(c) {
                Check::Met => {}
                Check::Ask(verdict) => return continue_unless(hard, verdict),
                Check::Unmet(objection, unmet) => {
                    if c.objections < c.retries {
                        return continue_unless(hard, Verdict::Object(objection));
                    }
                    accepted.extend(unmet);
                    if c.mode == StopMode::StrictAutomation {
                        return Verdict::Stop(Ending::ContractUnmet(accepted));
                    }
                }
            }
        }
    }
    match agent_stop(facts) {
        Some(Verdict::Stop(Ending::DoneForced(reason, _))) => {
            Verdict::Stop(Ending::DoneForced(reason, accepted))
        }
        Some(verdict) => continue_unless(hard, verdict),
        None => Verdict::Stop(Ending::Done(accepted)),
    }
}

/// What one completion check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Nothing to object to.
    Met,
    /// It needs a fact first (the contract's coverage).
    Ask(Verdict),
    /// Unmet: the objection, and the unmet lines.
    Unmet(Objection, Vec<String>),
}

/// A layer wants the phase to go on: it does, unless a hard stop applies.
fn continue_unless(hard: Option<HardStop>, verdict: Verdict) -> Verdict {
    match (hard, verdict) {
        (_, stop @ Verdict::Stop(_)) => stop,
        // Asking the hooks or checking the contract costs no model call: the hard stop
        // applies to what they decide.
        (_, ask @ (Verdict::AskAgentStopHooks | Verdict::CheckContract)) => ask,
        (Some(h), _) => Verdict::Stop(Ending::Hard(h)),
        (None, go_on) => go_on,
    }
}

/// Layer 1: whether the phase can make another model call.
pub fn hard_stop(facts: &StopFacts<'_>) -> Option<HardStop> {
    if facts.iteration >= facts.max_iterations {
        Some(HardStop::MaxIterations)
    } else if let Some(reason) = &facts.budget_exhausted {
        Some(HardStop::Budget(reason.clone()))
    } else if facts.stop_requested {
        Some(HardStop::StopRequested)
    } else {
        None
    }
}

/// Layer 2: the nudge once the streak reaches the threshold, `stalled` when it goes on after
/// the nudge (the nudge is given once per phase).
pub fn stall(facts: &StopFacts<'_>) -> Option<Verdict> {
    let c = facts.stall_config;
    let s = facts.stall;
    if !c.enabled || s.repeats < c.threshold.max(2) {
        return None;
    }
    match s.nudged_at {
        None => Some(Verdict::Nudge),
        // Decided already for this iteration (a resumed run): the model gets its next call.
        Some(at) if at == facts.iteration => None,
        Some(_) => Some(Verdict::Stop(Ending::Stalled)),
    }
}

/// Layer 3a: work-complete enforcement — the model must have called `work_complete` in the
/// iteration that ends the phase: always in `strict_automation`, and in `interactive`
/// whenever the tool is offered. A model that answers in text instead is sent back with a
/// continuation prompt, at most `completion_retries` times in the phase (seed 004 §3.3's
/// bounded continuation loop); then `interactive` accepts the answer.
pub fn work_complete(c: &Completion) -> Check {
    let required = c.mode == StopMode::StrictAutomation || c.offered;
    if !required || c.declared {
        Check::Met
    } else {
        Check::Unmet(
            Objection::WorkComplete,
            vec!["work_complete: the task was not declared complete".to_string()],
        )
    }
}

/// Layer 3b: task-contract verification — its coverage ledger for this stop (asked for once).
pub fn contract(c: &Completion) -> Check {
    match &c.contract {
        ContractState::Absent => Check::Met,
        ContractState::Pending => Check::Ask(Verdict::CheckContract),
        ContractState::Checked(unmet) if unmet.is_empty() => Check::Met,
        ContractState::Checked(unmet) => {
            Check::Unmet(Objection::Contract(unmet.clone()), unmet.clone())
        }
    }
}

/// Layer 3c: work-item completion — no item may be left unfinished.
pub fn work_items(c: &Completion) -> Check {
    if c.unfinished_items.is_empty() {
        Check::Met
    } else {
        Check::Unmet(
            Objection::WorkItems(c.unfinished_items.clone()),
            c.unfinished_items.clone(),
        )
    }
}

/// Layer 3d: the `agent_stop` hooks — asked once per stop; a block sends the model back with
/// the hook's reason until the hooks have blocked `max_blocks` times, then the stop is forced.
pub fn agent_stop(facts: &StopFacts<'_>) -> Option<Verdict> {
    match &facts.agent_stop {
        HookVerdict::Allow => None,
        HookVerdict::Pending => Some(Verdict::AskAgentStopHooks),
        HookVerdict::Block(reason) if facts.agent_stop_blocks < facts.agent_stop_max_blocks => {
            Some(Verdict::Object(Objection::AgentStop(reason.clone())))
        }
        HookVerdict::Block(reason) => Some(Verdict::Stop(Ending::DoneForced(
            reason.clone(),
            Vec::new(),
        ))),
    }
}

#[cfg(test)]
mod tests;
