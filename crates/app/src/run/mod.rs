//! One agent run, from what a front end asks to its end: [`prepare`] wires it
//! ([`PreparedRun`]), [`launch_agent`] runs it through the agent layer — the one function
//! every run goes through — and [`workers`] starts the conductor's worker runs the same way.
//! [`answer`] answers a run's requests when nobody can; [`sinks`] are the event sinks every
//! front end may add to its own.

pub mod answer;
mod launch;
mod prepare;
mod resume;
pub mod sinks;
mod workers;

pub use launch::{
    AgentLaunch, Finished, Launched, TracingAgentLog, execute, launch_agent, objective,
    summary_json,
};
pub use prepare::{PreparedRun, Resumed, RunRequest, StopModeArg, prepare, prepare_with};
pub use workers::WorkerRuns;
