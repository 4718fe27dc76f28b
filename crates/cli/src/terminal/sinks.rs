//! Where a run's events go besides its transcript, as the output format says: the human
//! progress printer (stderr) or the `--output-format stream-json` printer (stdout).

use std::io::Write;
use std::sync::Arc;

use lsm_app::protocol::{EventEnvelope, EventSink};

use super::output::OutputFormat;
use super::progress::StderrProgress;

/// The sink for `format` (the human progress says how many retries a call gets:
/// `max_retries`); `None` for `json`, which prints only the summary.
pub fn for_output(format: OutputFormat, max_retries: u32) -> Option<Arc<dyn EventSink>> {
    match format {
        OutputFormat::Text => Some(Arc::new(StderrProgress::new(Some(max_retries)))),
        OutputFormat::StreamJson => Some(Arc::new(StreamJson)),
        OutputFormat::Json => None,
    }
}

/// Every event as one JSON line on stdout, flushed at once (a script reads them as they come).
struct StreamJson;

impl EventSink for StreamJson {
    fn event(&self, event: &EventEnvelope) {
        self.events(std::slice::from_ref(event));
    }

    /// A step's lines in one `write`.
    fn events(&self, batch: &[EventEnvelope]) {
        let mut lines = String::new();
        for event in batch {
            // The envelope is the transcript's line, already redacted; a model's bidirectional
            // override or C1 control in it is escaped ([`super::text::json_line`]). A line
            // that fails to serialize is left out whole, so no torn line reaches the reader.
            if let Ok(line) = serde_json::to_string(event) {
                lines.push_str(&super::text::json_line(&line));
                lines.push('\n');
            }
        }
        if lines.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        // A closed stdout (the reader went away) must not stop the run.
        let _ = out.write_all(lines.as_bytes()).and_then(|()| out.flush());
    }
}
