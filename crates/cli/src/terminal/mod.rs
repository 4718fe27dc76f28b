//! What `lsm` shows a person on the terminal: text made safe to show ([`text`]), the JSON
//! documents and streams ([`output`]), a run's progress ([`progress`]) and result
//! ([`report`]), its requests answered at the terminal ([`foreground`]), and notices and
//! retries from the engine ([`notices`], [`retry_notice`]). Nothing here wires a run.

pub mod foreground;
pub mod notices;
pub mod output;
pub mod progress;
pub mod report;
pub mod retry_notice;
pub mod sinks;
pub mod text;
