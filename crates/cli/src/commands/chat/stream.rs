//! The chat's view of a turn: the model's answer printed as it streams in (the text pieces a
//! provider sends), everything else as `lsm agent run` shows it on stderr.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use lsm_app::protocol::{EventEnvelope, EventSink, RunEvent};
use serde_json::Value;

use crate::terminal::text::terminal_text;

/// Streams answer text to `out` and hands the rest to `progress`.
pub struct Streaming<W> {
    progress: Option<Arc<dyn EventSink>>,
    out: Mutex<W>,
    /// Text is on the current line: a line break ends it before anything else is shown.
    open_line: AtomicBool,
    /// Whether any answer text was streamed in this turn (then the turn's answer is not
    /// printed again at its end).
    streamed: Arc<AtomicBool>,
}

impl<W: Write + Send> Streaming<W> {
    /// A streaming view over `progress`, writing answer text to `out`; `streamed` is set once
    /// text was shown.
    pub fn new(progress: Option<Arc<dyn EventSink>>, out: W, streamed: Arc<AtomicBool>) -> Self {
        Streaming {
            progress,
            out: Mutex::new(out),
            open_line: AtomicBool::new(false),
            streamed,
        }
    }

    fn write(&self, text: &str) {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        // A closed terminal must not stop the turn.
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }

    fn end_line(&self) {
        if self.open_line.swap(false, Ordering::SeqCst) {
            self.write("\n");
        }
    }
}

impl<W: Write + Send> EventSink for Streaming<W> {
    fn event(&self, event: &EventEnvelope) {
        if let RunEvent::LlmStream { data, .. } = &event.event
            && data.get("kind").and_then(Value::as_str) == Some("text_delta")
        {
            if let Some(text) = data.get("text").and_then(Value::as_str) {
                let text = lsm_app::secrets::clean(text);
                self.write(&terminal_text(&text));
                self.open_line
                    .store(!text.ends_with('\n'), Ordering::SeqCst);
                self.streamed.store(true, Ordering::SeqCst);
            }
            return;
        }
        self.end_line();
        if let Some(progress) = &self.progress {
            progress.event(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose bytes the test reads back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn envelope(event: RunEvent) -> EventEnvelope {
        EventEnvelope {
            seq: 0,
            ts: "t".into(),
            run_id: "r".into(),
            schema_version: 2,
            event,
        }
    }

    fn delta(text: &str) -> EventEnvelope {
        let mut data = serde_json::Map::new();
        data.insert("kind".into(), "text_delta".into());
        data.insert("text".into(), text.into());
        envelope(RunEvent::LlmStream {
            label: "main".into(),
            data,
        })
    }

    #[test]
    fn answer_text_streams_as_it_comes_and_a_line_ends_before_other_events() {
        let out = Shared::default();
        let streamed = Arc::new(AtomicBool::new(false));
        let sink = Streaming::new(None, out.clone(), Arc::clone(&streamed));
        sink.event(&envelope(RunEvent::Artifact { path: "x".into() }));
        assert!(!streamed.load(Ordering::SeqCst));
        sink.event(&delta("Par"));
        sink.event(&delta("is.\u{1b}[2J"));
        sink.event(&envelope(RunEvent::Artifact { path: "y".into() }));
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(text.starts_with("Paris."), "{text:?}");
        assert!(
            !text.contains('\u{1b}'),
            "nothing the terminal acts on: {text:?}"
        );
        assert!(text.ends_with('\n'), "{text:?}");
        assert!(streamed.load(Ordering::SeqCst));
    }
}
