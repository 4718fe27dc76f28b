//! A small Server-Sent Events reader: bytes in, `(event, data)` pairs out.
//!
//! Only what the LLM APIs use: `event:` and `data:` fields (multi-line data joined with `\n`),
//! comments and other fields ignored, events dispatched on a blank line, `\n`, `\r\n` and `\r`
//! line endings.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field (empty when absent).
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// Incremental parser: feed bytes, take complete events.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
    event: String,
    data: Vec<String>,
    has_data: bool,
}

impl SseParser {
    /// Feed a chunk; returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|b| *b == b'\n' || *b == b'\r') {
            // A lone '\r' at the end of the buffer may be the first half of "\r\n".
            if self.buf[pos] == b'\r' && pos + 1 == self.buf.len() {
                break;
            }
            let skip = if self.buf[pos] == b'\r' && self.buf.get(pos + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
            let line: Vec<u8> = self.buf.drain(..pos + skip).take(pos).collect();
            let line = String::from_utf8_lossy(&line).into_owned();
            if let Some(event) = self.line(&line) {
                out.push(event);
            }
        }
        out
    }

    /// The stream ended: dispatch what is pending (a server that did not end its last event
    /// with a blank line).
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.buf.is_empty() {
            let rest = String::from_utf8_lossy(&std::mem::take(&mut self.buf)).into_owned();
            let rest = rest.trim_end_matches('\r').to_string();
            if let Some(e) = self.line(&rest) {
                return Some(e);
            }
        }
        self.dispatch()
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                self.data.push(value.to_string());
                self.has_data = true;
            }
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        if !self.has_data {
            self.event.clear();
            return None;
        }
        let event = SseEvent {
            event: std::mem::take(&mut self.event),
            data: std::mem::take(&mut self.data).join("\n"),
        };
        self.has_data = false;
        Some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_and_line_endings() {
        let mut p = SseParser::default();
        let mut got = p.feed(b"event: a\r\ndata: {\"x\"");
        assert!(got.is_empty());
        got.extend(p.feed(b": 1}\r"));
        got.extend(p.feed(b"\n\r\n: comment\ndata: two\ndata: lines\n\ndata: [DONE]\n\n"));
        assert_eq!(
            got,
            vec![
                SseEvent {
                    event: "a".into(),
                    data: "{\"x\": 1}".into()
                },
                SseEvent {
                    event: String::new(),
                    data: "two\nlines".into()
                },
                SseEvent {
                    event: String::new(),
                    data: "[DONE]".into()
                },
            ]
        );
    }

    #[test]
    fn an_unterminated_last_event_is_dispatched_at_the_end() {
        let mut p = SseParser::default();
        assert!(p.feed(b"data: last").is_empty());
        assert_eq!(p.finish().map(|e| e.data), Some("last".into()));
        assert_eq!(p.finish(), None);
    }
}
