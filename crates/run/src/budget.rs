//! [`RunBudget`]: one run's token and cost ceilings, and the one place its LLM calls are
//! metered. The harness loop gates and charges its own calls with it; tools that call a model
//! themselves (knowledge-base synthesis, re-ranking, `query_llm`) get their provider wrapped
//! in lsm-harness's `BudgetedProvider` over the same budget, so their calls pass the same
//! gate — no call once the budget is spent, output capped to what is left — and are charged
//! in tokens and cost alike.
//!
//! The bound this keeps: a run exceeds its token ceiling by at most the prompt of one call
//! (the output of every call is capped to what is left when it starts). A call in flight
//! holds its prompt estimate and output cap as a reservation until it is charged, so calls
//! made at the same time cannot each spend the same remainder.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::config::HarnessConfig;
use crate::message::{Pricing, Usage};
use crate::usage::RunUsage;

/// The ceilings of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetLimits {
    /// Input + output tokens over every LLM call of the run.
    pub max_tokens: u64,
    /// US dollars over every LLM call of the run; enforced for calls whose provider has
    /// prices.
    pub max_cost_usd: Option<f64>,
    /// Upper bound on one call's generated tokens (a call asking for more gets this).
    pub max_output_tokens: Option<u64>,
    /// Reserve the prompt estimate before a call: a call whose estimated prompt does not fit
    /// in what is left is refused, and its output cap is what is left after the prompt.
    pub reserve_prompt_estimate: bool,
}

impl BudgetLimits {
    /// The limits `config` sets (`max_tokens_budget`, `max_cost_usd`, `max_output_tokens`,
    /// `reserve_prompt_estimate`).
    pub fn from_config(config: &HarnessConfig) -> Self {
        BudgetLimits {
            max_tokens: config.max_tokens_budget,
            max_cost_usd: config.max_cost_usd,
            max_output_tokens: config.max_output_tokens,
            reserve_prompt_estimate: config.reserve_prompt_estimate,
        }
    }
}

/// Why an LLM call was refused: the run's budget has no room for it. Its text is what the
/// model sees when a tool's call is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("budget exhausted: {reason}; no further model calls are possible in this run")]
pub struct BudgetExhausted {
    /// Which ceiling is reached, with its value (recorded in the transcript's
    /// `budget_exhausted` event).
    pub reason: String,
}

/// What has been spent and what calls in flight hold.
#[derive(Debug, Default)]
struct Ledger {
    spent: RunUsage,
    reserved_tokens: u64,
    reserved_cost: f64,
    open_permits: u64,
}

/// One run's budget: its ceilings and what its calls spent. Cheap to clone; every clone is
/// the same budget. Create one per run and hand it to the harness
/// (lsm-harness's `RunSeams::budget`) and to every `BudgetedProvider` given to that run's
/// tools.
///
/// A run's worker runs draw on the same ceiling through a [`RunBudget::child`]: one ledger
/// for the whole tree (a call of any run is gated by what all of them spent and hold), and
/// each child also counting what its own run spent.
#[derive(Debug, Clone)]
pub struct RunBudget {
    limits: BudgetLimits,
    ledger: Arc<Mutex<Ledger>>,
    /// A child's own spending (`None` for the tree's root).
    own: Option<Arc<Mutex<RunUsage>>>,
}

impl RunBudget {
    /// A fresh budget with nothing spent.
    pub fn new(limits: BudgetLimits) -> Self {
        RunBudget {
            limits,
            ledger: Arc::new(Mutex::new(Ledger::default())),
            own: None,
        }
    }

    /// A budget for a worker run of this one: the same ceilings and the same ledger (every
    /// call of the tree is gated by, and charged to, it), with the child's own spending
    /// counted apart ([`RunBudget::usage`]).
    pub fn child(&self) -> RunBudget {
        RunBudget {
            limits: self.limits,
            ledger: Arc::clone(&self.ledger),
            own: Some(Arc::new(Mutex::new(RunUsage::default()))),
        }
    }

    /// What the whole tree spent (the root's [`RunBudget::usage`]).
    pub fn tree_usage(&self) -> RunUsage {
        self.lock().spent
    }

    /// The ceilings.
    pub fn limits(&self) -> BudgetLimits {
        self.limits
    }

    /// What every call charged so far spent (`llm_calls` counts the harness's calls and
    /// those made inside tools): the whole tree's for a root budget, the run's own for a
    /// [`RunBudget::child`].
    pub fn usage(&self) -> RunUsage {
        match &self.own {
            Some(own) => *own.lock().unwrap_or_else(PoisonError::into_inner),
            None => self.lock().spent,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Ledger> {
        // The ledger is a handful of numbers updated in one step each: a panic elsewhere
        // cannot leave it half-written.
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn snapshot_of(ledger: &Ledger) -> BudgetSnapshot {
        BudgetSnapshot {
            spent_tokens: ledger.spent.tokens_used,
            spent_cost: ledger.spent.cost_usd,
            reserved_tokens: ledger.reserved_tokens,
            reserved_cost: ledger.reserved_cost,
        }
    }

    /// What is spent and held right now (the input of the pure [`gate`]).
    pub fn snapshot(&self) -> BudgetSnapshot {
        Self::snapshot_of(&self.lock())
    }

    /// Why no further call may be made at all, if that is so.
    pub fn exhausted(&self) -> Option<BudgetExhausted> {
        exhausted(&self.limits, &self.snapshot())
    }

    /// Gate one call whose prompt is estimated at `estimate` tokens, on a model with
    /// `pricing`, asking for at most `requested` output tokens (`None`: no limit of its own):
    /// [`gate`] over the ledger as it is, and the grant reserved in the same step.
    ///
    /// Until it is charged or dropped, the permit holds its prompt estimate and output cap
    /// out of what is left.
    ///
    /// # Errors
    /// [`BudgetExhausted`] when the budget or the cost ceiling is spent, or (reserving the
    /// estimate) the prompt does not fit in what is left.
    pub fn begin(
        &self,
        estimate: u64,
        pricing: Option<Pricing>,
        requested: Option<u64>,
    ) -> Result<CallPermit, BudgetExhausted> {
        let mut ledger = self.lock();
        let grant = gate(
            &self.limits,
            &Self::snapshot_of(&ledger),
            estimate,
            pricing,
            requested,
        )?;
        Ok(self.reserve_in(&mut ledger, grant))
    }

    /// Reserve what [`gate`] granted on a [`RunBudget::snapshot`] taken with no other call
    /// of the run in between (the harness loop: its core decides, this holds the share).
    pub fn reserve(&self, grant: Grant) -> CallPermit {
        let mut ledger = self.lock();
        self.reserve_in(&mut ledger, grant)
    }

    fn reserve_in(&self, ledger: &mut Ledger, grant: Grant) -> CallPermit {
        ledger.reserved_tokens = ledger.reserved_tokens.saturating_add(grant.reserved_tokens);
        ledger.reserved_cost += grant.reserved_cost;
        ledger.open_permits += 1;
        CallPermit {
            budget: self.clone(),
            estimate: grant.estimate,
            cap: grant.cap,
            pricing: grant.pricing,
            reserved_tokens: grant.reserved_tokens,
            reserved_cost: grant.reserved_cost,
            open: true,
        }
    }

    /// Make what an earlier process of this run spent part of this ledger (a resumed run
    /// continues with the usage its journal records): a root budget's spending becomes
    /// `spent`; a child's own becomes `spent`, added to the tree's ledger.
    pub fn restore(&self, spent: RunUsage) {
        let mut ledger = self.lock();
        match &self.own {
            Some(own) => {
                let mut own = own.lock().unwrap_or_else(PoisonError::into_inner);
                ledger.spent.absorb(&spent.minus(&own));
                *own = spent;
            }
            None => ledger.spent = spent,
        }
    }

    fn release(ledger: &mut Ledger, tokens: u64, cost: f64) {
        ledger.reserved_tokens = ledger.reserved_tokens.saturating_sub(tokens);
        ledger.open_permits = ledger.open_permits.saturating_sub(1);
        // Floating-point subtraction drifts; with no call in flight nothing is reserved.
        ledger.reserved_cost = if ledger.open_permits == 0 {
            0.0
        } else {
            (ledger.reserved_cost - cost).max(0.0)
        };
    }
}

/// What a budget has spent and what calls in flight hold: all [`gate`] needs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BudgetSnapshot {
    /// Tokens charged.
    pub spent_tokens: u64,
    /// Dollars charged (`None` while no call had a price).
    pub spent_cost: Option<f64>,
    /// Tokens held by calls in flight.
    pub reserved_tokens: u64,
    /// Dollars held by calls in flight.
    pub reserved_cost: f64,
}

/// What [`gate`] lets one call have.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grant {
    /// The prompt estimate the decision used.
    pub estimate: u64,
    /// The call's `max_output_tokens`.
    pub cap: u64,
    /// The model's prices, when known.
    pub pricing: Option<Pricing>,
    /// Tokens held until the call is charged: the estimate and the cap.
    pub reserved_tokens: u64,
    /// Dollars held until the call is charged.
    pub reserved_cost: f64,
}

fn tokens_left(limits: &BudgetLimits, s: &BudgetSnapshot) -> u64 {
    limits
        .max_tokens
        .saturating_sub(s.spent_tokens.saturating_add(s.reserved_tokens))
}

fn cost_left(limits: &BudgetLimits, s: &BudgetSnapshot) -> Option<f64> {
    limits
        .max_cost_usd
        .map(|max| (max - s.spent_cost.unwrap_or(0.0) - s.reserved_cost).max(0.0))
}

/// Why no further call may be made at all under `limits` after `snapshot`, if that is so.
pub fn exhausted(limits: &BudgetLimits, snapshot: &BudgetSnapshot) -> Option<BudgetExhausted> {
    if tokens_left(limits, snapshot) == 0 {
        return Some(BudgetExhausted {
            reason: format!("the run's token budget ({}) is spent", limits.max_tokens),
        });
    }
    if let (Some(max), Some(left)) = (limits.max_cost_usd, cost_left(limits, snapshot))
        && left <= 0.0
    {
        return Some(BudgetExhausted {
            reason: format!("the run's cost ceiling (max_cost_usd ${max}) is reached"),
        });
    }
    None
}

/// The budget gate, as a pure function: may a call whose prompt is estimated at `estimate`
/// tokens, on a model with `pricing`, asking for at most `requested` output tokens, be made
/// under `limits` after `snapshot`, and with what output cap?
///
/// The cap is at most `requested`, at most the limits' `max_output_tokens`, at most what is
/// left of the token budget, and at most what is left of the cost ceiling buys at the
/// model's output price; with `reserve_prompt_estimate`, the prompt estimate is taken out of
/// both first.
///
/// # Errors
/// [`BudgetExhausted`] when the budget or the cost ceiling is spent, or (reserving the
/// estimate) the prompt does not fit in what is left.
pub fn gate(
    limits: &BudgetLimits,
    snapshot: &BudgetSnapshot,
    estimate: u64,
    pricing: Option<Pricing>,
    requested: Option<u64>,
) -> Result<Grant, BudgetExhausted> {
    if let Some(e) = exhausted(limits, snapshot) {
        return Err(e);
    }
    let left = tokens_left(limits, snapshot);
    let reserve = limits.reserve_prompt_estimate;
    let mut cap = left;
    for limit in [requested, limits.max_output_tokens].into_iter().flatten() {
        cap = cap.min(limit);
    }
    if reserve {
        if estimate >= left {
            return Err(BudgetExhausted {
                reason: format!(
                    "the next prompt (about {estimate} tokens) does not fit in the {left} tokens left of the run's token budget ({})",
                    limits.max_tokens
                ),
            });
        }
        cap = cap.min(left - estimate);
    }
    if let Some(cost_left) = cost_left(limits, snapshot) {
        match pricing {
            Some(p) => {
                let mut dollars = cost_left;
                if reserve {
                    let prompt = p.input_cost(estimate);
                    if prompt >= dollars {
                        return Err(BudgetExhausted {
                            reason: format!(
                                "the next prompt (about {estimate} tokens, ${prompt:.6}) costs more than the ${dollars:.6} left of max_cost_usd"
                            ),
                        });
                    }
                    dollars -= prompt;
                }
                let affordable = p.output_tokens_for(dollars);
                if affordable == 0 {
                    return Err(BudgetExhausted {
                        reason: format!(
                            "the ${dollars:.6} left of max_cost_usd buys no output token"
                        ),
                    });
                }
                cap = cap.min(affordable);
            }
            None => tracing::warn!(
                "max_cost_usd is set but the provider has no prices: the cost ceiling cannot be enforced for this call"
            ),
        }
    }
    let reserved_cost = pricing.map_or(0.0, |p| {
        p.cost(&Usage {
            input_tokens: estimate,
            output_tokens: cap,
            ..Usage::default()
        })
    });
    Ok(Grant {
        estimate,
        cap,
        pricing,
        reserved_tokens: estimate.saturating_add(cap),
        reserved_cost,
    })
}

/// Leave to make one LLM call, from [`RunBudget::begin`]. Charge it with what the call
/// spent; dropped uncharged (a call abandoned on a stop request), it only gives its
/// reservation back.
#[derive(Debug)]
#[must_use = "a permit holds part of the budget until it is charged or dropped"]
pub struct CallPermit {
    budget: RunBudget,
    estimate: u64,
    cap: u64,
    pricing: Option<Pricing>,
    reserved_tokens: u64,
    reserved_cost: f64,
    open: bool,
}

impl CallPermit {
    /// The call's `max_output_tokens`.
    pub fn max_output_tokens(&self) -> u64 {
        self.cap
    }

    /// Charge the call's reported usage (and its cost, when the model has prices) to the
    /// run. Returns the call's cost.
    pub fn charge(mut self, usage: &Usage) -> Option<f64> {
        let cost = self.pricing.map(|p| p.cost(usage));
        let mut ledger = self.budget.lock();
        RunBudget::release(&mut ledger, self.reserved_tokens, self.reserved_cost);
        self.open = false;
        ledger.spent.add(usage, 1, cost);
        if let Some(own) = &self.budget.own {
            own.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .add(usage, 1, cost);
        }
        cost
    }

    /// Charge a failed call its prompt estimate (as input tokens): it may have cost that much.
    pub fn charge_failed(self) -> Option<f64> {
        let usage = Usage {
            input_tokens: self.estimate,
            ..Usage::default()
        };
        self.charge(&usage)
    }
}

impl Drop for CallPermit {
    fn drop(&mut self) {
        if self.open {
            let mut ledger = self.budget.lock();
            RunBudget::release(&mut ledger, self.reserved_tokens, self.reserved_cost);
        }
    }
}

#[cfg(test)]
mod tests;
