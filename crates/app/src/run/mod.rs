//! One agent run, from what a front end asks ([`RunRequest`]) to its end: [`prepare`] wires
//! it ([`PreparedRun`]) — every way a run starts goes through it, the conductor's workers
//! included — and [`PreparedRun::execute`] runs it through the agent layer. [`answer`]
//! answers a run's requests when nobody can; [`sinks`] are the event sinks every front end
//! may add to its own.

pub mod answer;
mod launch;
mod prepare;
mod request;
pub mod resume;
pub mod sinks;
mod workers;

pub use launch::{Finished, TracingAgentLog, objective, summary_json};
pub use prepare::{PreparedRun, Resumed, Start, Store, check, prepare};
pub use request::{RunRequest, RunSettings, StopModeArg};

#[cfg(test)]
mod tests;
