//! The driver's effects: the loop that carries out what the core decides — a model call
//! raced against the stop token with its progress events, a tool call through the sandbox,
//! the files a contract names.

use super::*;

/// Forwards a provider's progress events to the harness loop, which records them.
struct ForwardEvents(tokio::sync::mpsc::UnboundedSender<ProviderEvent>);

impl CallObserver for ForwardEvents {
    fn on_event(&self, event: ProviderEvent) {
        // The loop outlives the call; a closed channel only means the phase already ended.
        let _ = self.0.send(event);
    }
}

impl AgentHarness {
    /// Carry effects out until the phase ends.
    pub(super) async fn drive(&mut self, mut effect: Effect) -> PhaseResult {
        loop {
            let effect_now = match effect {
                Effect::Finish(result) => {
                    if result.stop_reason == StopReason::Error {
                        tracing::warn!(run_id = %self.run_id, "phase ended in error: {}", result.final_text);
                    }
                    return result;
                }
                other => other,
            };
            let input = match (self.out_of_time_before(), effect_now) {
                (Some(input), _) => input,
                (None, Effect::Finish(result)) => return result,
                (None, Effect::FetchStanding { topic }) => {
                    let standing = self.memory.standing_context(&self.identity.name, &topic);
                    self.until_deadline("standing", async { Input::Standing(standing.await) })
                        .await
                }
                (None, Effect::CallModel { request, grant }) => {
                    let answer = self.call_model(&request, grant).await;
                    // Its message list is the next request's to build on.
                    self.core.recycle(request);
                    match answer {
                        Ok(input) => input,
                        Err(e) => {
                            effect = self.record_failed(e);
                            continue;
                        }
                    }
                }
                (
                    None,
                    Effect::RunTool {
                        call_id: _,
                        tool,
                        arguments,
                    },
                ) => {
                    let before = self.budget.usage();
                    let work = async {
                        let run = self.execute_tool(&tool, &arguments).await;
                        let guidance = self.guidance_for(&run, &tool, &arguments).await;
                        Input::ToolDone {
                            run,
                            spend: self.spent_since(&before),
                            guidance,
                        }
                    };
                    self.until_deadline("tools", work).await
                }
                (None, Effect::RunTools(calls)) => {
                    self.until_deadline("tools", self.run_tools(calls)).await
                }
                (None, Effect::RunHooks(mut event)) => {
                    event.run_id.clone_from(&self.run_id);
                    let work = async {
                        let runs = run_hooks(&self.core.config().hooks, &event).await;
                        Input::HooksAnswered {
                            event: event.clone(),
                            runs,
                        }
                    };
                    self.until_deadline("hooks", work).await
                }
                (None, Effect::CheckFiles(paths)) => {
                    Input::FilesChecked(self.check_files(paths).await)
                }
            };
            effect = self.step_and_commit(input);
        }
    }

    /// Progress during a call: retries and chain resets are journaled, the rest goes to the
    /// event sink only.
    pub(super) fn provider_event(&mut self, event: ProviderEvent) -> Result<(), HarnessError> {
        let events = self.core.progress(&mut self.state, &event);
        if !events.is_empty() {
            return self.commit(events);
        }
        if let Some(sink) = &self.events {
            let data = match serde_json::to_value(&event) {
                Ok(Value::Object(map)) => map,
                _ => serde_json::Map::new(),
            };
            let label = self
                .state
                .current
                .as_ref()
                .map_or_else(String::new, |p| label_name(p.label()).to_string());
            let envelope = self
                .recorder()
                .envelope(RunEvent::LlmStream { label, data }, 0);
            sink.event(&envelope);
        }
        Ok(())
    }

    /// The model call, raced against the stop token; its progress events are recorded as
    /// they arrive. Dropping the call future aborts a request in flight.
    pub(super) async fn call_model(
        &mut self,
        request: &LlmRequest,
        grant: Grant,
    ) -> Result<Input, HarnessError> {
        let permit = self.budget.reserve(grant);
        let provider = Arc::clone(&self.provider);
        let stop = self.stop.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let observer = ForwardEvents(tx);
        let response = {
            let call = provider.complete_observed(request, &observer);
            tokio::pin!(call);
            loop {
                tokio::select! {
                    biased;
                    () = stop.cancelled() => {
                        while let Ok(ev) = rx.try_recv() {
                            self.provider_event(ev)?;
                        }
                        return Ok(Input::StoppedDuringCall);
                    }
                    out_of_time = self.deadline() => {
                        while let Ok(ev) = rx.try_recv() {
                            self.provider_event(ev)?;
                        }
                        return Ok(out_of_time);
                    }
                    Some(ev) = rx.recv() => self.provider_event(ev)?,
                    r = &mut call => break r,
                }
            }
        };
        while let Ok(ev) = rx.try_recv() {
            self.provider_event(ev)?;
        }
        Ok(match response {
            Ok(response) => {
                let cost = permit.charge(&response.usage);
                Input::Answered {
                    response,
                    cost,
                    totals: self.budget.usage(),
                }
            }
            Err(e) => {
                // Not charged: the phase ends here as an error.
                drop(permit);
                Input::ModelFailed {
                    // Redacted before it enters the state: a server may echo a key.
                    error: lsm_sandbox::redact_secrets(&e.to_string()).into_owned(),
                    chain_broken: e.breaks_chain(),
                }
            }
        })
    }

    /// The calls of a concurrent group, run at the same time (each raced against the stop
    /// token), answered in the group's order. What their own model calls spent is charged
    /// to the last one: they share the run's ledger, so no call's own share is known.
    pub(super) async fn run_tools(&self, calls: Vec<ToolInvocation>) -> Input {
        let before = self.budget.usage();
        let runs = futures::future::join_all(calls.iter().map(|call| async move {
            let run = self.execute_tool(&call.tool, &call.arguments).await;
            let guidance = self.guidance_for(&run, &call.tool, &call.arguments).await;
            (run, guidance)
        }))
        .await;
        let mut spend = self.spent_since(&before);
        let last = calls.len().saturating_sub(1);
        let done = calls
            .into_iter()
            .zip(runs)
            .enumerate()
            .map(|(i, (call, (run, guidance)))| ToolDone {
                call_id: call.call_id,
                run,
                spend: if i == last { spend.take() } else { None },
                guidance,
            })
            .collect();
        Input::ToolsDone(done)
    }

    /// What the tools' own LLM calls (through a BudgetedProvider) charged to the run since
    /// the ledger read `before`.
    fn spent_since(&self, before: &lsm_run::state::RunUsage) -> Option<ToolSpend> {
        let after = self.budget.usage();
        (after.llm_calls > before.llm_calls).then(|| ToolSpend {
            llm_calls: after.llm_calls - before.llm_calls,
            usage: lsm_providers::Usage {
                input_tokens: after.input_tokens.saturating_sub(before.input_tokens),
                output_tokens: after.output_tokens.saturating_sub(before.output_tokens),
                cached_tokens: after.cached_tokens.saturating_sub(before.cached_tokens),
                cache_creation_tokens: after
                    .cache_creation_tokens
                    .saturating_sub(before.cache_creation_tokens),
            },
            cost_usd: after
                .cost_usd
                .map(|total| total - before.cost_usd.unwrap_or(0.0)),
            totals: after,
        })
    }

    /// One tool call through the sandbox, raced against the stop token.
    pub(super) async fn execute_tool(&self, name: &str, arguments: &Value) -> ToolRun {
        let sandbox = Arc::clone(&self.sandbox);
        let stop = self.stop.clone();
        let caller = Caller::new(self.identity.name.clone(), self.run_id.clone());
        let execution = tokio::select! {
            biased;
            () = stop.cancelled() => None,
            e = sandbox.execute_as(&caller, name, arguments) => Some(e),
        };
        match execution {
            None => ToolRun::Interrupted,
            Some(execution) => {
                let now = now_stamp();
                ToolRun::Ran {
                    outcome: execution.outcome.map_err(|err| ToolFailure {
                        message: err.to_string(),
                        denial: err.is_denial(),
                    }),
                    artifacts: execution
                        .artifacts
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect(),
                    permission: execution.permission.map(|p| Decision {
                        tool_name: p.tool_name,
                        allowed: p.allowed,
                        reason: p.reason,
                        timestamp: now,
                    }),
                    events: execution
                        .events
                        .into_iter()
                        .map(|e| ToolEffect {
                            kind: e.kind.as_str().to_string(),
                            data: e.data,
                        })
                        .collect(),
                }
            }
        }
    }

    /// Look at the files a task contract names, through the sandbox's read confinement, off
    /// the async workers.
    pub(super) async fn check_files(&self, paths: Vec<String>) -> Vec<(String, FileFact)> {
        let sandbox = Arc::clone(&self.sandbox);
        let work = move || inspect_files(&sandbox, paths);
        match tokio::task::spawn_blocking(work).await {
            Ok(facts) => facts,
            Err(e) => {
                tracing::warn!(run_id = %self.run_id, "checking the contract's files failed: {e}");
                Vec::new()
            }
        }
    }
}
