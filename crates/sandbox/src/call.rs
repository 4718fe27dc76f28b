//! What a tool call is made of, below every other module: the tool's risk, its path
//! arguments and the access each needs, who calls it, what it returns and the side effects
//! it reports.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How much harm a tool can do; drives the permission gate and the network policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskLevel {
    /// Reads only.
    ReadOnly,
    /// Writes inside the workspace.
    WritesWorkspace,
    /// Reaches the network.
    Network,
    /// Executes programs.
    Exec,
}

impl RiskLevel {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RiskLevel::ReadOnly => "read_only",
            RiskLevel::WritesWorkspace => "writes_workspace",
            RiskLevel::Network => "network",
            RiskLevel::Exec => "exec",
        }
    }
}

impl std::fmt::Display for RiskLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a path argument is read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathAccess {
    /// Checked against the read allowlist.
    Read,
    /// Checked against the write allowlist.
    Write,
}

/// A path-valued argument of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathArg {
    /// The argument's name in the JSON object.
    pub name: &'static str,
    /// How the tool uses it.
    pub access: PathAccess,
}

impl PathArg {
    /// A path the tool reads.
    pub const fn read(name: &'static str) -> Self {
        PathArg {
            name,
            access: PathAccess::Read,
        }
    }
    /// A path the tool writes.
    pub const fn write(name: &'static str) -> Self {
        PathArg {
            name,
            access: PathAccess::Write,
        }
    }
}

/// What kind of side effect a [`ToolEvent`] reports. The wire name (`memory_written`, …) is
/// the transcript event the harness writes for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolEventKind {
    /// A memory was stored (as a candidate or approved).
    MemoryWritten,
    /// A memory became approved.
    MemoryApproved,
    /// A memory was removed.
    MemoryRemoved,
}

impl ToolEventKind {
    /// The wire name, also the transcript event's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolEventKind::MemoryWritten => "memory_written",
            ToolEventKind::MemoryApproved => "memory_approved",
            ToolEventKind::MemoryRemoved => "memory_removed",
        }
    }
}

impl std::fmt::Display for ToolEventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A side effect of a tool call that belongs in the run's records: the harness appends each
/// one to the transcript (as an event named after its [`ToolEventKind`]) and counts it in the
/// run summary. Tools report them in [`ToolOutput::events`]; the model never sees them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolEvent {
    /// What happened.
    pub kind: ToolEventKind,
    /// Details (a JSON object; its keys become the transcript event's fields).
    pub data: serde_json::Value,
}

impl ToolEvent {
    /// An event of `kind` with `data`.
    pub fn new(kind: ToolEventKind, data: serde_json::Value) -> Self {
        ToolEvent { kind, data }
    }
}

/// What a successful tool call produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text for the model (the sandbox caps and redacts it).
    pub text: String,
    /// Files the call wrote (reported as the run's artifacts).
    pub artifacts: Vec<PathBuf>,
    /// Side effects for the run's records (memories written, …), in order.
    pub events: Vec<ToolEvent>,
}

impl ToolOutput {
    /// Output with text only.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            ..ToolOutput::default()
        }
    }

    /// Output that wrote `path`.
    pub fn wrote(text: impl Into<String>, path: PathBuf) -> Self {
        ToolOutput {
            text: text.into(),
            artifacts: vec![path],
            ..ToolOutput::default()
        }
    }

    /// This output, also reporting `event` for the run's records.
    #[must_use]
    pub fn with_event(mut self, event: ToolEvent) -> Self {
        self.events.push(event);
        self
    }
}

/// Who a call is made for: the agent and its run. The harness passes it with every call
/// ([`crate::Sandbox::execute_as`]); tools that keep per-agent state (memory) read it from
/// [`ToolContext::caller`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    /// The agent's name.
    pub agent: String,
    /// The run's id.
    pub run_id: String,
}

impl Caller {
    /// `agent`'s run `run_id`.
    pub fn new(agent: impl Into<String>, run_id: impl Into<String>) -> Self {
        Caller {
            agent: agent.into(),
            run_id: run_id.into(),
        }
    }
}
