//! The budget's tests: the gate, reservations, charges.

use super::*;

fn limits(max_tokens: u64) -> BudgetLimits {
    BudgetLimits {
        max_tokens,
        max_cost_usd: None,
        max_output_tokens: None,
        reserve_prompt_estimate: false,
    }
}

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        ..Usage::default()
    }
}

#[test]
fn a_call_in_flight_holds_its_share_until_charged_or_dropped() {
    let budget = RunBudget::new(limits(1000));
    let first = budget.begin(100, None, Some(300)).unwrap();
    assert_eq!(first.max_output_tokens(), 300);
    // 1000 - (100 + 300) reserved.
    let second = budget.begin(50, None, None).unwrap();
    assert_eq!(second.max_output_tokens(), 600);
    let refused = budget.begin(10, None, None).unwrap_err();
    assert!(refused.reason.contains("(1000) is spent"), "{refused}");
    drop(second);
    assert_eq!(first.charge(&usage(100, 20)), None);
    let u = budget.usage();
    assert_eq!((u.tokens_used, u.llm_calls), (120, 1));
    assert_eq!(
        budget.begin(0, None, None).unwrap().max_output_tokens(),
        880
    );
}

#[test]
fn a_failed_call_is_charged_its_prompt_estimate() {
    let budget = RunBudget::new(limits(1000));
    budget.begin(70, None, None).unwrap().charge_failed();
    assert_eq!(budget.usage().tokens_used, 70);
    assert_eq!(budget.usage().input_tokens, 70);
}

#[test]
fn the_refusal_names_the_ceiling_and_says_no_further_calls_are_possible() {
    let budget = RunBudget::new(limits(300));
    budget.begin(0, None, None).unwrap().charge(&usage(250, 60));
    let e = budget.begin(10, None, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "budget exhausted: the run's token budget (300) is spent; no further model calls are possible in this run"
    );
    assert_eq!(budget.exhausted(), Some(e));
}

/// One step of the simulated tree: worker `w` either asks for a call (prompt estimate,
/// output wanted) or, holding one, finishes it (the prompt's error over its estimate,
/// the share of its cap it generated).
#[derive(Debug, Clone)]
struct Op {
    worker: usize,
    estimate: u64,
    wanted: u64,
    prompt_error: u64,
    used: f64,
}

fn ops() -> impl proptest::strategy::Strategy<Value = Vec<Op>> {
    use proptest::prelude::*;
    proptest::collection::vec(
        (0usize..6, 1u64..400, 1u64..600, 0u64..30, 0.0f64..=1.0).prop_map(
            |(worker, estimate, wanted, prompt_error, used)| Op {
                worker,
                estimate,
                wanted,
                prompt_error,
                used,
            },
        ),
        1..300,
    )
}

proptest::proptest! {
    /// Workers share one budget through children of it, calling at random moments: no
    /// call starts once the tree's budget is spent, and the tree overshoots its ceiling
    /// by no more than one call's prompt estimate plus what the prompts of the calls made
    /// exceeded their estimates.
    #[test]
    fn concurrent_workers_never_start_a_call_after_the_shared_budget_is_spent(
        ops in ops(),
        max_tokens in 100u64..5_000,
    ) {
        let root = RunBudget::new(limits(max_tokens));
        let children: Vec<RunBudget> = (0..6).map(|_| root.child()).collect();
        let mut held: Vec<Option<(CallPermit, u64)>> = (0..6).map(|_| None).collect();
        let mut largest_estimate = 0;
        let mut errors = 0;
        for op in ops {
            match held[op.worker].take() {
                None => {
                    let before = root.snapshot();
                    let spent_out = before.spent_tokens + before.reserved_tokens >= max_tokens;
                    match children[op.worker].begin(op.estimate, None, Some(op.wanted)) {
                        Ok(permit) => {
                            proptest::prop_assert!(!spent_out, "a call started after the budget was spent");
                            largest_estimate = largest_estimate.max(op.estimate);
                            held[op.worker] = Some((permit, op.estimate));
                        }
                        Err(_) => proptest::prop_assert!(spent_out),
                    }
                }
                Some((permit, estimate)) => {
                    let cap = permit.max_output_tokens();
                    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                    let output = ((cap as f64) * op.used) as u64;
                    errors += op.prompt_error;
                    permit.charge(&Usage {
                        input_tokens: estimate + op.prompt_error,
                        output_tokens: output,
                        ..Usage::default()
                    });
                }
            }
        }
        // Calls still in flight end, using all they were granted.
        for (permit, estimate) in held.into_iter().flatten() {
            let cap = permit.max_output_tokens();
            permit.charge(&Usage {
                input_tokens: estimate,
                output_tokens: cap,
                ..Usage::default()
            });
        }
        let spent = root.tree_usage().tokens_used;
        proptest::prop_assert!(
            spent <= max_tokens + largest_estimate + errors,
            "spent {spent} > {max_tokens} + {largest_estimate} + {errors}"
        );
        let own: u64 = children.iter().map(|c| c.usage().tokens_used).sum();
        proptest::prop_assert_eq!(own, spent, "every call is its worker's");
    }
}
