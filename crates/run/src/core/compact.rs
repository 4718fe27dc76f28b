//! The core's side of compaction ([`crate::compaction`]): when the next call's prompt would
//! not fit the window, walk the ladder — elide, summarize (the one model call), drop — until
//! it fits below the target, recording each rung; then make the call ready as usual.
//!
//! Every decision is a function of the state and the estimator, so a resumed run (whose fold
//! holds the rungs applied so far and the rung to try next) takes the same steps.

use std::sync::Arc;

use crate::message::{CallOptions, LlmRequest, LlmResponse, Message};

use super::{Core, Effect, Env, current_label, emit};
use crate::budget::gate;
use crate::compaction::{
    Layout, Rung, SUMMARY_PROMPT, Step, apply, elidable, layout, oldest_run, transcript_of,
};
use crate::config::ContextStrategy;
use crate::event::RunEvent;
use crate::state::{RunState, RunUsage};

impl Core {
    /// Whether the call `iteration` must wait for a compaction: the `compact` strategy, a
    /// prompt over the limit, and no compaction made for this call yet.
    pub(super) fn needs_compaction(&self, st: &RunState, iteration: u32, estimate: u64) -> bool {
        self.config.strategy == ContextStrategy::Compact
            && estimate > self.config.window.limit
            && st
                .current
                .as_ref()
                .is_some_and(|p| p.compacted_at != Some(iteration) && p.compaction.is_none())
    }

    /// Record the start of a compaction, then walk the ladder.
    pub(super) fn start_compaction(
        &self,
        st: &mut RunState,
        iteration: u32,
        estimate: u64,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        let label = current_label(st);
        emit(
            st,
            out,
            RunEvent::CompactionStarted {
                label,
                iteration,
                tokens_before: estimate,
                window: self.config.window,
            },
        );
        self.ladder(st, env, out)
    }

    /// The estimate of the next call's prompt with the context's history as `history`.
    fn estimate_with(&self, st: &RunState, history: Option<&[Arc<Message>]>, env: &Env<'_>) -> u64 {
        let (request, _, _) = self.assemble_with(st, history);
        (env.estimate)(&request)
    }

    /// Go on down the ladder from the rung the state says, until the prompt fits below the
    /// target or nothing is left to compact; then the call is made ready.
    pub(super) fn ladder(
        &self,
        st: &mut RunState,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        let target = self.config.window.target;
        // The rung to try: the state's (moved on only by recorded rungs), then further here
        // when a rung finds nothing to do — which the same state finds again on resume.
        let mut rung = match st.current.as_ref().and_then(|p| p.compaction.as_ref()) {
            Some(c) => c.next,
            None => return self.ready_call(st, env, out),
        };
        loop {
            if st
                .current
                .as_ref()
                .and_then(|p| p.compaction.as_ref())
                .is_none()
            {
                return self.ready_call(st, env, out);
            }
            let now = self.estimate_with(st, None, env);
            if now <= target {
                return self.finish_compaction(st, now, env, out);
            }
            let history = current_history(st);
            let layout = current_layout(st, &history);
            let label = current_label(st);
            let recorded = st
                .current
                .as_ref()
                .and_then(|p| p.compaction.as_ref())
                .map(|c| c.next);
            if recorded.is_some_and(|r| r > rung) {
                rung = recorded.unwrap_or(rung);
            }
            match rung {
                Rung::Elide => {
                    // Every old result at once (headroom for the calls to come, so the history
                    // is not rewritten again at once); the recent turns' results only as far
                    // as needed.
                    let c = &self.config.compaction;
                    let recent_from = recent_turns_start(&history, &layout, c.keep_recent_turns);
                    let candidates = elidable(&history, &layout, c.elide_min_bytes);
                    let (old, recent): (Vec<_>, Vec<_>) =
                        candidates.into_iter().partition(|(i, _)| *i < recent_from);
                    let mut chosen: Vec<String> = old.into_iter().map(|(_, id)| id).collect();
                    let mut sim = history.clone();
                    apply(
                        &mut sim,
                        &Step::ElideToolResults {
                            call_ids: chosen.clone(),
                        },
                    );
                    let mut after = self.estimate_with(st, Some(&sim), env);
                    if after > target && !recent.is_empty() {
                        // The fewest of the recent results (oldest first) whose elision makes
                        // the prompt fit; all of them when none does.
                        let recent: Vec<String> = recent.into_iter().map(|(_, id)| id).collect();
                        let elided = |n: usize| {
                            let mut fewer = sim.clone();
                            apply(
                                &mut fewer,
                                &Step::ElideToolResults {
                                    call_ids: recent[..n].to_vec(),
                                },
                            );
                            fewer
                        };
                        let n = first_fitting(recent.len(), |n| {
                            self.estimate_with(st, Some(&elided(n)), env) <= target
                        })
                        .unwrap_or(recent.len());
                        after = self.estimate_with(st, Some(&elided(n)), env);
                        chosen.extend(recent.into_iter().take(n));
                    }
                    let step = if chosen.is_empty() {
                        None
                    } else {
                        Some(Step::ElideToolResults { call_ids: chosen })
                    };
                    match step {
                        Some(step) => emit(
                            st,
                            out,
                            RunEvent::CompactionStep {
                                label,
                                step,
                                tokens_after: after,
                                usage: None,
                                cost_usd: None,
                                tokens_used: None,
                            },
                        ),
                        None => rung = Rung::Summarize,
                    }
                }
                Rung::Summarize => match self.summary_call(st, &history, &layout, env) {
                    Some((from, to, request, grant)) => {
                        emit(
                            st,
                            out,
                            RunEvent::CompactionSummaryRequested {
                                label,
                                from,
                                to,
                                prompt_tokens_estimate: (env.estimate)(&request),
                                max_output_tokens: grant.cap,
                            },
                        );
                        let mut request = request;
                        request.options.max_output_tokens = Some(grant.cap);
                        return Effect::CallModel { request, grant };
                    }
                    None => rung = Rung::Drop,
                },
                Rung::Drop => match self.drop_range(st, &history, &layout, env) {
                    Some((from, to, after)) => emit(
                        st,
                        out,
                        RunEvent::CompactionStep {
                            label,
                            step: Step::DropOldest { from, to },
                            tokens_after: after,
                            usage: None,
                            cost_usd: None,
                            tokens_used: None,
                        },
                    ),
                    // Nothing more may go: the call is made as it is.
                    None => return self.finish_compaction(st, now, env, out),
                },
            }
        }
    }

    /// Rung (b)'s call: the oldest run of turns (all but the most recent
    /// `keep_recent_turns`), shortened until its request fits the window, and the budget's
    /// grant for it. `None` when there is nothing to summarize or the budget refuses.
    fn summary_call(
        &self,
        st: &RunState,
        history: &[Arc<Message>],
        layout: &Layout,
        env: &Env<'_>,
    ) -> Option<(usize, usize, LlmRequest, crate::budget::Grant)> {
        let c = &self.config.compaction;
        let (from, mut to) = oldest_run(history, layout, c.keep_recent_turns)?;
        let room = self
            .config
            .window
            .limit
            .saturating_sub(c.summary_max_tokens);
        let whole = summary_request(history, from, to);
        let request = if (env.estimate)(&whole) <= room {
            whole
        } else {
            // Fewer turns: the range may end before any later turn start in it.
            let ends: Vec<usize> = (from + 1..to)
                .filter(|&i| history[i].role != crate::message::Role::Tool)
                .collect();
            let fits = |end: usize| (env.estimate)(&summary_request(history, from, end)) <= room;
            to = last_fitting(&ends, fits)?;
            summary_request(history, from, to)
        };
        let _ = st;
        let estimate = (env.estimate)(&request);
        let grant = gate(
            &self.config.limits,
            &env.budget,
            estimate,
            env.pricing,
            Some(c.summary_max_tokens),
        )
        .ok()?;
        Some((from, to, request, grant))
    }

    /// Rung (c): the fewest oldest turns whose removal brings the prompt to the target (or
    /// the whole oldest run, when even that is not enough). `None` when nothing may go.
    fn drop_range(
        &self,
        st: &RunState,
        history: &[Arc<Message>],
        layout: &Layout,
        env: &Env<'_>,
    ) -> Option<(usize, usize, u64)> {
        let (from, stop) = oldest_run(history, layout, 0)?;
        // Do not drop a single note standing for earlier drops: nothing would be gained.
        let ends: Vec<usize> = (from + 1..=stop)
            .filter(|&i| i == stop || history[i].role != crate::message::Role::Tool)
            .collect();
        if ends.is_empty() || (stop == from + 1 && history[from].content.starts_with('[')) {
            return None;
        }
        let after = |to: usize| {
            let mut sim = history.to_vec();
            apply(&mut sim, &Step::DropOldest { from, to });
            self.estimate_with(st, Some(&sim), env)
        };
        // The fewest turns that fit (searched, not dropped one at a time); all when none do.
        let n = first_fitting(ends.len(), |n| {
            after(ends[n - 1]) <= self.config.window.target
        })
        .unwrap_or(ends.len());
        let to = ends[n - 1];
        Some((from, to, after(to)))
    }

    fn finish_compaction(
        &self,
        st: &mut RunState,
        tokens_after: u64,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        let Some(c) = st.current.as_ref().and_then(|p| p.compaction.clone()) else {
            return self.ready_call(st, env, out);
        };
        let label = current_label(st);
        emit(
            st,
            out,
            RunEvent::CompactionFinished {
                label,
                iteration: c.iteration,
                steps: c.steps,
                tokens_before: c.tokens_before,
                tokens_after,
            },
        );
        self.ready_call(st, env, out)
    }

    /// The summary call answered: apply it (an empty answer counts as a failure), go on.
    pub(super) fn summarized(
        &self,
        st: &mut RunState,
        response: LlmResponse,
        cost: Option<f64>,
        totals: RunUsage,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        let label = current_label(st);
        let range = st
            .current
            .as_ref()
            .and_then(|p| p.compaction.as_ref())
            .and_then(|c| c.awaiting_summary);
        let text = response.text.trim().to_string();
        match range {
            Some((from, to)) if !text.is_empty() => {
                let mut sim = current_history(st);
                let step = Step::Summarize { from, to, text };
                apply(&mut sim, &step);
                let after = self.estimate_with(st, Some(&sim), env);
                emit(
                    st,
                    out,
                    RunEvent::CompactionStep {
                        label,
                        step,
                        tokens_after: after,
                        usage: Some(response.usage),
                        cost_usd: cost,
                        tokens_used: Some(totals.tokens_used),
                    },
                );
            }
            _ => emit(
                st,
                out,
                RunEvent::CompactionSummaryFailed {
                    label,
                    error: "the summary call answered no text".to_string(),
                    called: true,
                },
            ),
        }
        self.ladder(st, env, out)
    }

    /// The summary call failed (`called`), or could not be made: record it, go on to
    /// dropping turns.
    pub(super) fn summary_failed(
        &self,
        st: &mut RunState,
        error: String,
        called: bool,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        let label = current_label(st);
        emit(
            st,
            out,
            RunEvent::CompactionSummaryFailed {
                label,
                error,
                called,
            },
        );
        self.ladder(st, env, out)
    }

    /// A resumed run whose summary call was asked for and not answered asks again (the same
    /// request: the range is recorded).
    pub(super) fn resume_compaction(
        &self,
        st: &mut RunState,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Option<Effect> {
        let c = st.current.as_ref()?.compaction.clone()?;
        let Some((from, to)) = c.awaiting_summary else {
            return Some(self.ladder(st, env, out));
        };
        let history = current_history(st);
        let mut request = summary_request(&history, from, to);
        let estimate = (env.estimate)(&request);
        match gate(
            &self.config.limits,
            &env.budget,
            estimate,
            env.pricing,
            Some(self.config.compaction.summary_max_tokens),
        ) {
            Ok(grant) => {
                request.options.max_output_tokens = Some(grant.cap);
                Some(Effect::CallModel { request, grant })
            }
            Err(e) => Some(self.summary_failed(st, e.reason, false, env, out)),
        }
    }

    /// Whether the model answer or failure in flight is the summary call's.
    pub(super) fn awaiting_summary(st: &RunState) -> bool {
        st.current
            .as_ref()
            .and_then(|p| p.compaction.as_ref())
            .is_some_and(|c| c.awaiting_summary.is_some())
    }
}

/// The summarization request of `history[from..to]`: the fixed instructions and the
/// messages as text; no tools.
/// The last of `ends` (ascending) for which `fits` holds, when it holds for a prefix of
/// them (a longer range never fits where a shorter one does not): [`first_fitting`] over how
/// many to give up from the longest, so a range that must lose `k` turns costs about
/// `2·log2(k)` transcripts, not one per turn.
fn last_fitting(ends: &[usize], mut fits: impl FnMut(usize) -> bool) -> Option<usize> {
    let len = ends.len();
    first_fitting(len, |given_up| fits(ends[len - given_up])).map(|given_up| ends[len - given_up])
}

/// The least `n` in `1..=count` for which `fits` holds, when it holds from some `n` on
/// (eliding more never makes a prompt longer). Searched from 1 by doubling steps, then by
/// halving: about `2·log2(n)` estimates of the whole prompt, not `n`.
fn first_fitting(count: usize, mut fits: impl FnMut(usize) -> bool) -> Option<usize> {
    // `1..=unfit` do not fit and `fit` does (`count + 1`: none known to).
    let mut unfit = 0;
    let mut fit = count + 1;
    let mut step = 1;
    while unfit + step <= count {
        if fits(unfit + step) {
            fit = unfit + step;
            break;
        }
        unfit += step;
        step *= 2;
    }
    // Halving what lies between.
    while unfit + 1 < fit {
        let mid = unfit + (fit - unfit) / 2;
        if fits(mid) {
            fit = mid;
        } else {
            unfit = mid;
        }
    }
    (fit <= count).then_some(fit)
}

fn summary_request(history: &[Arc<Message>], from: usize, to: usize) -> LlmRequest {
    LlmRequest {
        messages: vec![
            Message::system(SUMMARY_PROMPT).into(),
            Message::user(transcript_of(history, from, to)).into(),
        ],
        tools: Vec::new(),
        options: CallOptions::default(),
    }
}

/// Where the most recent `turns` turns before the tail begin (the tail itself when none).
fn recent_turns_start(history: &[Arc<Message>], layout: &Layout, turns: usize) -> usize {
    let starts: Vec<usize> = (0..layout.tail.min(history.len()))
        .filter(|&i| history[i].role == crate::message::Role::Assistant)
        .collect();
    if turns == 0 || starts.is_empty() {
        return layout.tail;
    }
    starts[starts.len().saturating_sub(turns)]
}

fn current_history(st: &RunState) -> Vec<Arc<Message>> {
    st.current
        .as_ref()
        .and_then(|p| st.context(p.label()))
        .map(|c| c.history.clone())
        .unwrap_or_default()
}

fn current_layout(st: &RunState, history: &[Arc<Message>]) -> Layout {
    let phase_start = st
        .current
        .as_ref()
        .and_then(|p| st.context(p.label()))
        .and_then(|c| c.phase_start);
    layout(history, phase_start)
}

#[cfg(test)]
mod tests {
    use super::{first_fitting, last_fitting};

    #[test]
    fn the_longest_range_that_fits_is_found_in_a_few_tries() {
        let ends: Vec<usize> = (1..=1000).map(|i| 3 * i).collect();
        // (the longest that may be summarized, the transcripts that may be built to find it)
        for (limit, most) in [
            (0, 21),
            (2, 21),
            (3, 21),
            (4, 21),
            (500, 21),
            (2990, 8),
            (2997, 3),
            (2999, 3),
            (3000, 1),
            (5000, 1),
        ] {
            let mut tries = 0;
            let found = last_fitting(&ends, |end| {
                tries += 1;
                end <= limit
            });
            // What a scan from the longest down finds, one transcript per turn.
            let scanned = ends.iter().rev().copied().find(|&end| end <= limit);
            assert_eq!(found, scanned, "limit {limit}");
            assert!(tries <= most, "{tries} transcripts for limit {limit}");
        }
        assert_eq!(last_fitting(&[], |_| true), None);
        assert_eq!(last_fitting(&[7], |_| false), None);
    }

    #[test]
    fn the_fewest_results_to_elide_are_found_in_a_few_estimates() {
        for least in [1, 2, 3, 5, 40, 511, 512, 999, 1000] {
            let mut tries = 0;
            let found = first_fitting(1000, |n| {
                tries += 1;
                n >= least
            });
            assert_eq!(found, Some(least));
            // About 2·log2(n) estimates, where eliding one at a time made n.
            let bits = (usize::BITS - least.leading_zeros()) as usize;
            assert!(tries <= 2 * bits + 1, "{tries} estimates for {least}");
        }
        let mut tries = 0;
        let none = first_fitting(1000, |_| {
            tries += 1;
            false
        });
        assert_eq!(none, None);
        assert!(tries <= 20, "{tries} estimates when nothing fits");
        assert_eq!(first_fitting(0, |_| true), None);
    }
}
