//! How a run ends in the driver: the final contract coverage, the observing hooks, the
//! run's summary and report, and the records finished.

use super::*;

impl AgentHarness {
    /// The contract's coverage at the end of the run, for the summary (recorded as
    /// `contract_checked` with `at: run_end`).
    pub(super) fn final_coverage(&mut self) {
        let Some(contract) = self.state.contract.clone() else {
            return;
        };
        let files = inspect_files(&self.sandbox, contract.file_paths());
        let coverage = lsm_run::core::coverage(&self.state, &contract, &files);
        let _ = self.emit(RunEvent::ContractChecked {
            label: None,
            iteration: 0,
            at: "run_end".to_string(),
            coverage,
        });
    }

    /// Run the hooks that observe `point` (`run_start`, `run_end`) and record what they
    /// said. Best effort: they decide nothing.
    pub(super) async fn observe(&mut self, point: HookPoint, status: Option<&str>) {
        if !self.core.hooks_match(point, None) {
            return;
        }
        let event = HookEvent {
            hook: point,
            run_id: self.run_id.clone(),
            agent: self.identity.name.clone(),
            tool: None,
            call_id: None,
            arguments: None,
            result: None,
            success: None,
            final_text: None,
            status: status.map(str::to_string),
        };
        let runs = run_hooks(&self.core.config().hooks, &event).await;
        let record = self.core.observed(&event, runs);
        let _ = self.emit(record);
    }

    /// `run_end` hooks, before the run's summary is written (once).
    pub(super) async fn run_end_hooks(&mut self, outcome: RunOutcome) {
        if !self.finished && self.state.started {
            let (status, _) = self.status_of(outcome);
            self.observe(HookPoint::RunEnd, Some(status)).await;
        }
    }

    pub(super) fn status_of(&self, outcome: RunOutcome) -> (&'static str, &'static str) {
        let last = self.state.last_stop.map_or("done", StopReason::as_str);
        match outcome {
            RunOutcome::Completed => ("completed", last),
            RunOutcome::Stopped(StopReason::Error) => ("failed", "error"),
            RunOutcome::Stopped(StopReason::Deferred) => ("deferred", "deferred"),
            RunOutcome::Stopped(reason) => ("stopped", reason.as_str()),
            RunOutcome::Failed => ("failed", if last == "done" { "error" } else { last }),
        }
    }

    /// The summary as of now.
    pub fn summary(&self, status: &str, run_outcome: &str) -> RunSummary {
        let finished_at = Utc::now();
        let mut tracking = ContextTracking::default();
        for c in &self.state.contexts {
            let name = label_name(&c.label).to_string();
            tracking.context_labels_seen.push(name.clone());
            tracking.per_label.insert(
                name,
                LabelTracking {
                    compactions: c.context.compactions,
                    iterations: c.context.iterations,
                    conversation_id: Some(c.context.conversation_id.clone()),
                    response_id: c.context.last_response_id.clone(),
                },
            );
        }
        RunSummary {
            run_id: self.run_id.clone(),
            agent_name: self.identity.name.clone(),
            topic: self.identity.topic.clone(),
            status: status.to_string(),
            run_outcome: run_outcome.to_string(),
            error: self.state.last_error.clone(),
            schema_version: SCHEMA_VERSION,
            final_text: self
                .state
                .phases
                .last_key_value()
                .map(|(_, r)| r.final_text.clone())
                .unwrap_or_default(),
            started_at: timestamp(self.started_at),
            finished_at: timestamp(finished_at),
            duration_seconds: self.started.elapsed().as_secs_f64(),
            provider: self.provider.name().to_string(),
            model: self.provider.model().to_string(),
            tools_used: self.state.tools_used.clone(),
            tool_sequence: self.state.tool_sequence.clone(),
            approvals_denials: self.state.approvals.clone(),
            artifacts_created: self.state.artifacts.clone(),
            token_usage: {
                // This run's own: a continued conversation's earlier turns are theirs.
                let usage = self.budget.usage().minus(&self.state.earlier_usage);
                let limits = self.budget.limits();
                TokenUsage {
                    tokens_used: usage.tokens_used,
                    max_tokens_budget: limits.max_tokens,
                    iterations: self.state.llm_calls,
                    input_tokens: usage.input_tokens,
                    output_tokens: usage.output_tokens,
                    cached_tokens: usage.cached_tokens,
                    cache_creation_tokens: usage.cache_creation_tokens,
                    cost_usd: usage.cost_usd,
                    max_cost_usd: limits.max_cost_usd,
                    workers_tokens_used: self.state.worker_usage.tokens_used,
                }
            },
            constraints: extract_constraints(&self.identity.topic),
            context_tracking: tracking,
            memory: self.state.memory,
            stop_mode: self.state.stop_mode,
            work_items: self.state.work_items.clone(),
            deliverables: lsm_run::work_items::deliverables(&self.state.work_items),
            contract: self.state.contract.as_ref().map(|c| ContractReport {
                description: c.description.clone(),
                satisfied: self.state.coverage.as_ref().is_some_and(|v| v.satisfied),
                unmet: self
                    .state
                    .coverage
                    .as_ref()
                    .map(Coverage::unmet)
                    .unwrap_or_default(),
                coverage: self
                    .state
                    .coverage
                    .as_ref()
                    .map(|v| v.items.clone())
                    .unwrap_or_default(),
            }),
            unmet_checks: self.state.unmet_accepted.clone(),
            report: self.run_report(),
            continues: self.state.continues.clone(),
            deferred_call: Core::waiting_for(&self.state).map(|p| lsm_run::summary::DeferredCall {
                call_id: p.call_id.clone(),
                tool: p.tool.clone(),
                arguments: p.arguments.clone(),
            }),
        }
    }

    /// The run's report (see [`RunState::turn_report`]).
    pub fn run_report(&self) -> Option<lsm_phase::TurnReport> {
        self.state.turn_report()
    }

    /// Write the summary for `outcome` (once). Returns it, and why writing failed if it did.
    pub(super) fn finish_inner(&mut self, outcome: RunOutcome) -> (RunSummary, Option<String>) {
        let (status, run_outcome) = self.status_of(outcome);
        if self.finished {
            return (self.summary(status, run_outcome), None);
        }
        self.finished = true;
        // Out of time or waiting for a deferred call's result, the run pauses: its journal
        // stays open (no `run_finished`), for a resumed run to go on from where it is.
        let pauses = matches!(outcome, RunOutcome::Stopped(reason) if reason.pauses_run());
        if !pauses {
            self.final_coverage();
        }
        let summary = self.summary(status, run_outcome);
        if !pauses {
            let _ = self.emit(RunEvent::RunFinished {
                status: status.to_string(),
                run_outcome: run_outcome.to_string(),
                tokens_used: self.budget.usage().tokens_used,
            });
        }
        let error = self
            .recorder()
            .write_summary(&summary)
            .err()
            .map(|e| e.to_string());
        if let Some(e) = &error {
            tracing::error!(run_id = %self.run_id, "{e}");
        }
        self.recorder().release_lock();
        for handle in &self.handles {
            handle.finished(&summary, error.clone());
        }
        (summary, error)
    }
}
