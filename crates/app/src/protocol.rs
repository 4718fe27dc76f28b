//! What a run says to a front end: its events, one typed [`RunEvent`] each in an
//! [`EventEnvelope`] (the journal's line, the progress printer's and the TUI's input, the
//! `stream-json` line), delivered to an [`EventSink`] the front end attaches, and the
//! [`RunSummary`] it ends with. Front ends name these types from here, not from the crates
//! that define them; the payload structs of the larger events are in [`event`].

pub use lsm_harness::event;
pub use lsm_harness::{EventEnvelope, EventSink, RunEvent, RunSummary};
