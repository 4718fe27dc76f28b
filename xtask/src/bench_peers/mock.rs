//! A loopback mock of OpenAI Chat Completions for `bench-peers`: every agent under test is
//! told to read files; the mock answers with one `read_file` call per request until the
//! conversation holds `calls` results, then with a final text.
//!
//! It is stateless, so any number of concurrent agents can share it: the number of the next
//! call is read off the request itself (the id of the last tool result, `call_<k>`, which every
//! client echoes back). Each response is written with one `write` (headers and body in one
//! buffer), so no Nagle or delayed-ACK pause lands between them and the client's CPU time is
//! all the client's own.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// The files the mock asks for, in turn (consecutive calls differ, as real work does; the
/// agents' stall detection would rightly stop identical ones).
pub const FILES: usize = 10;

/// The path of the `k`-th file the mock asks for.
pub fn file_for(k: u64) -> String {
    format!("files/f{}.txt", k % FILES as u64)
}

/// A running mock.
pub struct Mock {
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    requests: Arc<AtomicU64>,
    recorded: Recorded,
}

/// The request bodies received while recording (`None`: not recording).
type Recorded = Arc<Mutex<Option<Vec<Vec<u8>>>>>;

impl Mock {
    /// Listen on an ephemeral loopback port; answer `calls` tool calls per conversation.
    pub fn start(calls: Arc<AtomicU64>) -> Result<Mock> {
        let listener = TcpListener::bind("127.0.0.1:0").context("cannot bind the mock")?;
        let port = listener.local_addr()?.port();
        let requests = Arc::new(AtomicU64::new(0));
        let recorded = Recorded::default();
        let counter = Arc::clone(&requests);
        let recorder = Arc::clone(&recorded);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let calls = Arc::clone(&calls);
                let counter = Arc::clone(&counter);
                let recorder = Arc::clone(&recorder);
                std::thread::spawn(move || serve(stream, &calls, &counter, &recorder));
            }
        });
        Ok(Mock {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            requests,
            recorded,
        })
    }

    /// Keep every request body from now on (those kept before are dropped).
    pub fn record(&self) {
        *self.recorded.lock().unwrap_or_else(PoisonError::into_inner) = Some(Vec::new());
    }

    /// The bodies kept since [`Mock::record`], in the order they came; recording stops.
    pub fn take_recorded(&self) -> Vec<Vec<u8>> {
        self.recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or_default()
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Serve one keep-alive connection until the client closes it.
fn serve(stream: TcpStream, calls: &AtomicU64, requests: &AtomicU64, recorded: &Recorded) {
    let _ = stream.set_nodelay(true);
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Ok(Some(body)) = read_request(&mut reader) {
        requests.fetch_add(1, Ordering::SeqCst);
        if let Some(kept) = recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            kept.push(body.clone());
        }
        let (status, payload) = match respond(&body, calls.load(Ordering::SeqCst)) {
            Ok(p) => ("200 OK", p),
            Err(e) => (
                "400 Bad Request",
                json!({"error": {"message": e.to_string()}}).to_string(),
            ),
        };
        let content_type = if payload.starts_with("data:") {
            "text/event-stream"
        } else {
            "application/json"
        };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
             connection: keep-alive\r\n\r\n{payload}",
            payload.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// One request's body; `None` when the client closed the connection.
fn read_request(reader: &mut impl BufRead) -> Result<Option<Vec<u8>>> {
    let mut length = 0usize;
    let mut first = true;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let line = line.trim_end();
        if line.is_empty() {
            if first {
                continue; // stray CRLF between requests
            }
            break;
        }
        first = false;
        if let Some((name, value)) = line.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().context("bad content-length")?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(Some(body))
}

/// The response to one request body: the next `read_file` call, or the final answer once
/// `calls` results are in the conversation. Streamed (SSE) when the request asks for it.
pub fn respond(body: &[u8], calls: u64) -> Result<String> {
    let request: Value = serde_json::from_slice(body).context("the request is not JSON")?;
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        bail!("the request has no messages");
    };
    let done = messages
        .iter()
        .rev()
        .find_map(|m| m.get("tool_call_id").and_then(Value::as_str))
        .map_or(Ok(0), |id| {
            id.strip_prefix("call_")
                .and_then(|k| k.parse::<u64>().ok())
                .map(|k| k + 1)
                .with_context(|| format!("a tool result answers an unknown call id {id:?}"))
        })?;
    let prompt_tokens = (body.len() / 4) as u64;
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    // A request that offers no tools (a harness's own summarization call) gets a text answer.
    let offers_tools = request
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let (message, finish) = if !offers_tools {
        (
            json!({"role": "assistant", "content": "Summary: files were read, one by one."}),
            "stop",
        )
    } else if done < calls {
        let arguments = json!({"path": file_for(done)}).to_string();
        (
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": format!("call_{done}"), "type": "function",
                "function": {"name": "read_file", "arguments": arguments},
            }]}),
            "tool_calls",
        )
    } else {
        (
            json!({"role": "assistant", "content": format!("Read {calls} files.")}),
            "stop",
        )
    };
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": 12,
                       "total_tokens": prompt_tokens + 12});
    if !stream {
        return Ok(json!({
            "id": format!("chatcmpl-{done}"), "object": "chat.completion", "created": 0,
            "model": "mock", "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        })
        .to_string());
    }
    let mut delta = message;
    if let Some(calls) = delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
        for (i, c) in calls.iter_mut().enumerate() {
            c["index"] = json!(i);
        }
    }
    let chunk = |choices: Value, usage: Value| {
        json!({"id": format!("chatcmpl-{done}"), "object": "chat.completion.chunk",
               "created": 0, "model": "mock", "choices": choices, "usage": usage})
    };
    Ok(format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(
            json!([{"index": 0, "delta": delta, "finish_reason": finish}]),
            Value::Null
        ),
        chunk(json!([]), usage),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(messages: Value, calls: u64) -> Value {
        let body = json!({"model": "m", "messages": messages,
                          "tools": [{"type": "function", "function": {"name": "read_file"}}]})
        .to_string();
        serde_json::from_str(&respond(body.as_bytes(), calls).unwrap()).unwrap()
    }

    #[test]
    fn the_mock_counts_calls_from_the_last_tool_result_and_then_answers() {
        let first = answer(json!([{"role": "user", "content": "go"}]), 2);
        let call = &first["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["id"], "call_0");
        assert_eq!(call["function"]["arguments"], r#"{"path":"files/f0.txt"}"#);

        let after_one = answer(
            json!([{"role": "user", "content": "go"},
                   {"role": "tool", "tool_call_id": "call_0", "content": "x"}]),
            2,
        );
        let call = &after_one["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["id"], "call_1");
        assert_eq!(call["function"]["arguments"], r#"{"path":"files/f1.txt"}"#);

        let last = answer(
            json!([{"role": "tool", "tool_call_id": "call_0", "content": "x"},
                   {"role": "tool", "tool_call_id": "call_1", "content": "x"}]),
            2,
        );
        assert_eq!(last["choices"][0]["message"]["content"], "Read 2 files.");
        assert_eq!(last["choices"][0]["finish_reason"], "stop");
    }

    #[test]
    fn a_request_without_tools_gets_a_text_answer() {
        let body = json!({"messages": [{"role": "tool", "tool_call_id": "call_0", "content": ""}]});
        let v: Value =
            serde_json::from_str(&respond(body.to_string().as_bytes(), 5).unwrap()).unwrap();
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert!(v["choices"][0]["message"]["tool_calls"].is_null());
    }

    #[test]
    fn a_foreign_call_id_is_an_error_not_a_silent_restart() {
        let body = json!({"messages": [{"role": "tool", "tool_call_id": "xyz", "content": ""}],
                          "tools": [{"type": "function"}]});
        let err = respond(body.to_string().as_bytes(), 3).unwrap_err();
        assert!(err.to_string().contains("xyz"), "{err}");
    }

    /// POST `body` to the mock on a fresh connection; the status line of its answer.
    fn post(mock: &Mock, body: &str) -> String {
        let addr = mock
            .base_url
            .trim_start_matches("http://")
            .trim_end_matches("/v1");
        let mut stream = TcpStream::connect(addr).unwrap();
        write!(
            stream,
            "POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut status = String::new();
        BufReader::new(stream).read_line(&mut status).unwrap();
        status
    }

    #[test]
    fn the_mock_keeps_the_bodies_it_is_sent_only_while_recording() {
        let mock = Mock::start(Arc::new(AtomicU64::new(1))).unwrap();
        let first = r#"{"messages":[{"role":"user","content":"one"}]}"#;
        let second = r#"{"messages":[{"role":"user","content":"two"}]}"#;
        assert!(post(&mock, first).contains("200"));
        mock.record();
        assert!(post(&mock, first).contains("200"));
        assert!(post(&mock, second).contains("200"));
        assert_eq!(
            mock.take_recorded(),
            vec![first.as_bytes().to_vec(), second.as_bytes().to_vec()]
        );
        assert!(post(&mock, second).contains("200"));
        assert!(
            mock.take_recorded().is_empty(),
            "recording stops when taken"
        );
        assert_eq!(mock.requests(), 4);
    }

    #[test]
    fn one_request_is_read_from_a_keep_alive_stream() {
        let raw = b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}\
                    POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 3\r\n\r\n[1]";
        let mut reader = BufReader::new(&raw[..]);
        assert_eq!(read_request(&mut reader).unwrap().unwrap(), b"{}");
        assert_eq!(read_request(&mut reader).unwrap().unwrap(), b"[1]");
        assert!(read_request(&mut reader).unwrap().is_none());
    }
}
