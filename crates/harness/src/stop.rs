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
//!    corrective message (the nudge), then end the phase `stalled`.
//! 3. **Done layers**, when the model signalled done (answered without a tool call), each of
//!    which may send it back to work:
//!    - work-complete enforcement — extension point, no behaviour yet ([`work_complete`]);
//!    - task-contract verification — extension point, no behaviour yet ([`contract`]);
//!    - work-item completion — extension point, no behaviour yet ([`work_items`]);
//!    - `agent_stop` hooks ([`agent_stop`]): a hook may block the stop with a reason, at most
//!      `max_blocks` times in a phase; after that the stop proceeds, recorded as forced.
//!
//! A layer that sends the model back to work continues the phase only if no hard stop
//! applies; otherwise the hard stop ends it.

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
}

/// Why a done layer sends the model back to work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Objection {
    /// An `agent_stop` hook blocked the stop.
    AgentStop(String),
}

/// How a phase ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Done (every done layer agreed).
    Done,
    /// Done although an `agent_stop` hook still blocked it: it had used its blocks.
    DoneForced(String),
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
    if let Some(verdict) = stall(facts) {
        return continue_unless(hard, verdict);
    }
    if facts.signal == Signal::Continue {
        return Verdict::Continue;
    }
    // The model signalled done: each done layer may send it back to work.
    if let Some(verdict) = work_complete(facts)
        .or_else(|| contract(facts))
        .or_else(|| work_items(facts))
        .or_else(|| agent_stop(facts))
    {
        return continue_unless(hard, verdict);
    }
    Verdict::Stop(Ending::Done)
}

/// A layer wants the phase to go on: it does, unless a hard stop applies.
fn continue_unless(hard: Option<HardStop>, verdict: Verdict) -> Verdict {
    match (hard, verdict) {
        (_, stop @ Verdict::Stop(_)) => stop,
        // Asking the hooks costs no model call: the hard stop applies to what they decide.
        (_, ask @ Verdict::AskAgentStopHooks) => ask,
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

/// Layer 3a: work-complete enforcement (the `work_complete` control tool of strict stop
/// mode). Extension point: no behaviour yet, never objects.
pub fn work_complete(_facts: &StopFacts<'_>) -> Option<Verdict> {
    None
}

/// Layer 3b: task-contract verification against the transcript. Extension point: no
/// behaviour yet, never objects.
pub fn contract(_facts: &StopFacts<'_>) -> Option<Verdict> {
    None
}

/// Layer 3c: work-item completion. Extension point: no behaviour yet, never objects.
pub fn work_items(_facts: &StopFacts<'_>) -> Option<Verdict> {
    None
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
        HookVerdict::Block(reason) => Some(Verdict::Stop(Ending::DoneForced(reason.clone()))),
    }
}

#[cfg(test)]
mod tests;
