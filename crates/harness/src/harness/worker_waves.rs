//! The driver's side of worker runs: one wave of `run_workers`, journaled and replayed.

use super::*;

impl AgentHarness {
    /// `run_workers`: see [`crate::workers`].
    pub(super) async fn run_workers_inner(
        &mut self,
        requests: Vec<lsm_phase::WorkerRequest>,
        max_concurrent: usize,
    ) -> Vec<lsm_phase::WorkerOutcome> {
        use futures::StreamExt;
        use lsm_phase::WorkerOutcome;

        let wave = self.waves_requested;
        self.waves_requested = self.waves_requested.saturating_add(1);
        let fail_all = |reason: &str| -> Vec<WorkerOutcome> {
            requests
                .iter()
                .map(|r| WorkerOutcome::failed(r, reason))
                .collect()
        };
        if let Err(e) = self.take_over() {
            return fail_all(&format!("the run's records could not be written: {e}"));
        }
        if let Some(done) = self.state.waves.get(&wave).and_then(|w| w.finished.clone()) {
            // Replay: this wave ended before the run was resumed.
            return done;
        }
        let Some(spawner) = self.spawner.clone() else {
            return fail_all("this run cannot start worker runs (no worker spawner is configured)");
        };
        if let Err(e) = self.load_run_context().await {
            return fail_all(&e.to_string());
        }
        if !self.state.started {
            let mut out = Vec::new();
            self.core.ensure_started(&mut self.state, &mut out);
            if let Err(e) = self.commit(out) {
                return fail_all(&format!("the run's records could not be written: {e}"));
            }
            self.observe(HookPoint::RunStart, None).await;
        }
        if !self.state.waves.contains_key(&wave) {
            let requested = RunEvent::WorkersRequested {
                wave,
                requests: requests.clone(),
                max_concurrent,
            };
            if let Err(e) = self.emit(requested) {
                return fail_all(&format!("the run's records could not be written: {e}"));
            }
        }
        let known = self.state.waves.get(&wave).cloned().unwrap_or_default();
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let record = self.record_handle();
        let parent = self.run_id.clone();
        type Job =
            std::pin::Pin<Box<dyn std::future::Future<Output = (usize, WorkerOutcome)> + Send>>;
        let jobs: Vec<Job> = requests
            .iter()
            .enumerate()
            .map(|(index, request)| {
                let prior = known.outcomes.get(&request.item_id).cloned();
                let reporter = WorkerReporter {
                    record: record.clone(),
                    wave,
                    item_id: request.item_id.clone(),
                    capability: request.capability.clone(),
                    parent_run_id: parent.clone(),
                    recorded: Arc::clone(&recorded),
                    worker_run_id: Arc::new(Mutex::new(
                        known
                            .started
                            .get(&request.item_id)
                            .map(|s| s.worker_run_id.clone()),
                    )),
                };
                let job = WorkerJob {
                    request: request.clone(),
                    parent_run_id: parent.clone(),
                    budget: self.budget.child(),
                    stop: self.stop.child_token(),
                    resume: known
                        .started
                        .get(&request.item_id)
                        .map(|s| PathBuf::from(&s.run_dir)),
                    reporter,
                };
                let spawner = Arc::clone(&spawner);
                let parent = parent.clone();
                Box::pin(async move {
                    if let Some(outcome) = prior {
                        return (index, outcome);
                    }
                    let budget = job.budget.clone();
                    let reporter = job.reporter.clone();
                    let mut outcome = spawner.run(job).await;
                    if outcome.worker_run_id.is_none() {
                        outcome.worker_run_id = reporter.worker_run_id();
                    }
                    for event in
                        crate::workers::ending_events(wave, &parent, &outcome, budget.usage())
                    {
                        reporter.record(event);
                    }
                    (index, outcome)
                }) as Job
            })
            .collect();
        // At most `max_concurrent` at once, each started as soon as another ends.
        let mut outcomes: Vec<(usize, WorkerOutcome)> = futures::stream::iter(jobs)
            .buffer_unordered(max_concurrent.max(1))
            .collect()
            .await;
        outcomes.sort_by_key(|(index, _)| *index);
        let outcomes: Vec<WorkerOutcome> = outcomes.into_iter().map(|(_, o)| o).collect();
        // What the workers recorded in this journal while they ran, applied to the state in
        // the journal's order: the state is the fold of the journal again.
        let mut lines =
            std::mem::take(&mut *recorded.lock().unwrap_or_else(PoisonError::into_inner));
        lines.sort_by_key(|l| l.seq);
        for line in &lines {
            self.state.apply(&line.event);
        }
        let _ = self.emit(RunEvent::WorkersFinished {
            wave,
            outcomes: outcomes.clone(),
        });
        outcomes
    }
}
