//! A spy [`ExecutorFactory`] / [`PhaseExecutor`]: records every executor it creates, every
//! phase request, every finish and every artifact note, and answers each phase with a
//! scripted [`PhaseResult`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use lsm_phase::{
    AgentIdentity, ExecutorFactory, PhaseExecutor, PhaseRequest, PhaseResult, RunOutcome,
    StopReason, ToolCallRecord, ToolOutcome,
};
use serde_json::json;

use crate::AgentContext;

type Responder = Box<dyn Fn(&PhaseRequest) -> PhaseResult + Send + Sync>;

/// What the spy saw.
pub struct Spy {
    /// Every executor created: who for, and with which system prompt.
    pub created: Mutex<Vec<(AgentIdentity, String)>>,
    /// Every phase: the index of the executor that ran it, and the request.
    pub requests: Mutex<Vec<(usize, PhaseRequest)>>,
    /// Every finish: executor index and outcome.
    pub finished: Mutex<Vec<(usize, RunOutcome)>>,
    /// Every artifact note: executor index and path.
    pub artifacts: Mutex<Vec<(usize, PathBuf)>>,
    responder: Responder,
}

impl Spy {
    pub fn new(
        responder: impl Fn(&PhaseRequest) -> PhaseResult + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Spy {
            created: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
            finished: Mutex::new(Vec::new()),
            artifacts: Mutex::new(Vec::new()),
            responder: Box::new(responder),
        })
    }

    pub fn created_count(&self) -> usize {
        self.created.lock().unwrap().len()
    }

    pub fn requests(&self) -> Vec<PhaseRequest> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// The phase names of every request, in order (`DECOMPOSE`, `RESEARCH`, …).
    pub fn phases(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| phase_of(r).to_string())
            .collect()
    }

    /// The requests of one phase.
    pub fn of_phase(&self, phase: &str) -> Vec<PhaseRequest> {
        self.requests()
            .into_iter()
            .filter(|r| phase_of(r) == phase)
            .collect()
    }

    pub fn finished(&self) -> Vec<(usize, RunOutcome)> {
        self.finished.lock().unwrap().clone()
    }

    /// The factory to hand to an agent.
    pub fn factory(self: &Arc<Self>) -> Arc<dyn ExecutorFactory> {
        Arc::new(SpyFactory(Arc::clone(self)))
    }
}

/// `RESEARCH` for a user message `Phase: RESEARCH. …`; `TOOL_ONLY` for a tool-only phase.
pub fn phase_of(r: &PhaseRequest) -> &str {
    if r.direct_tool_calls.is_some() {
        return "TOOL_ONLY";
    }
    r.user_message
        .strip_prefix("Phase: ")
        .and_then(|rest| rest.split('.').next())
        .unwrap_or("?")
}

struct SpyFactory(Arc<Spy>);

impl ExecutorFactory for SpyFactory {
    fn create(&self, agent: &AgentIdentity, system_prompt: &str) -> Box<dyn PhaseExecutor> {
        let mut created = self.0.created.lock().unwrap();
        created.push((agent.clone(), system_prompt.to_string()));
        Box::new(SpyExecutor {
            spy: Arc::clone(&self.0),
            index: created.len() - 1,
        })
    }
}

struct SpyExecutor {
    spy: Arc<Spy>,
    index: usize,
}

#[async_trait::async_trait]
impl PhaseExecutor for SpyExecutor {
    async fn run_bounded(&mut self, request: PhaseRequest) -> PhaseResult {
        let result = (self.spy.responder)(&request);
        self.spy
            .requests
            .lock()
            .unwrap()
            .push((self.index, request));
        result
    }

    async fn finish(&mut self, outcome: RunOutcome) {
        self.spy
            .finished
            .lock()
            .unwrap()
            .push((self.index, outcome));
    }

    fn record_artifact(&mut self, path: &std::path::Path) {
        self.spy
            .artifacts
            .lock()
            .unwrap()
            .push((self.index, path.to_path_buf()));
    }
}

/// A phase that finished with `text`.
pub fn done(text: &str) -> PhaseResult {
    PhaseResult {
        final_text: text.to_string(),
        tool_calls: Vec::new(),
        stop_reason: StopReason::Done,
    }
}

/// A phase that stopped for `reason` with no text.
pub fn stopped(reason: StopReason) -> PhaseResult {
    PhaseResult::empty(reason)
}

/// A phase that finished with `text` after one successful call of `tool`.
pub fn done_with_tool(text: &str, tool: &str, output: &str) -> PhaseResult {
    PhaseResult {
        final_text: text.to_string(),
        tool_calls: vec![ToolCallRecord {
            name: tool.to_string(),
            arguments: json!({"query": "q"}),
            outcome: ToolOutcome::Result(output.to_string()),
        }],
        stop_reason: StopReason::Done,
    }
}

/// A temp agents folder and a context on `spy`.
pub fn context(spy: &Arc<Spy>) -> (tempfile::TempDir, AgentContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = AgentContext::new(spy.factory(), dir.path().join("Agents"));
    (dir, ctx)
}

/// `true` when `name` is `<stem>_<YYYYMMDD_HHMMSS><suffix>`.
pub fn is_artifact_name(name: &str, stem: &str, suffix: &str) -> bool {
    let Some(rest) = name.strip_prefix(stem).and_then(|r| r.strip_prefix('_')) else {
        return false;
    };
    let Some(ts) = rest.strip_suffix(suffix) else {
        return false;
    };
    let b = ts.as_bytes();
    b.len() == 15
        && b[8] == b'_'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 8 || c.is_ascii_digit())
}

/// The lines of a run's log file.
pub fn log_lines(out: &crate::AgentOutput) -> Vec<String> {
    let path = out.log_file.as_ref().expect("the run logged something");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The built-in definition `name`'s card.
pub fn spec(name: &str) -> crate::AgentSpec {
    crate::find(name).unwrap().spec.clone()
}

/// The built-in agent `name`, run from its definition, on `ctx`.
pub fn builtin(name: &str, ctx: AgentContext) -> crate::DefinedAgent {
    crate::DefinedAgent::new(crate::find(name).unwrap().clone(), ctx)
}
