//! A provider that plays recorded responses: the test double every layer above runs on.

use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use crate::{
    LlmRequest, LlmResponse, Pricing, Provider, ProviderError, ToolCall, Usage,
    estimate_tokens_conservatively,
};

/// One scripted tool call; `id` is generated when absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// Call id (default `call_<response>_<index>`).
    #[serde(default)]
    pub id: Option<String>,
    /// Tool name.
    pub name: String,
    /// Arguments.
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// One scripted response: a line of a JSONL script.
///
/// `{"text": "...", "tool_calls": [{"name": "...", "arguments": {...}}], "usage": {"input_tokens": 10, "output_tokens": 5}}`
/// — every field is optional. Without `usage`, the usage is estimated (one token per three
/// bytes of prompt and of answer), so budgets still bite on scripts that do not say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedResponse {
    /// The model's text.
    #[serde(default)]
    pub text: String,
    /// Tool calls.
    #[serde(default)]
    pub tool_calls: Vec<ScriptedToolCall>,
    /// Reported usage.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Response id (default `scripted-<n>`).
    #[serde(default)]
    pub response_id: Option<String>,
    /// Wait this long before answering, like a slow model (for stop and timeout tests).
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// Fail the call with this message instead of answering (a provider error that is not
    /// retried), like a model that cannot be reached.
    #[serde(default)]
    pub error: Option<String>,
}

impl ScriptedResponse {
    /// A plain text answer (the model is done).
    pub fn text(text: impl Into<String>) -> Self {
        ScriptedResponse {
            text: text.into(),
            ..Default::default()
        }
    }

    /// A single tool call.
    pub fn tool(name: impl Into<String>, arguments: serde_json::Value) -> Self {
        ScriptedResponse {
            tool_calls: vec![ScriptedToolCall {
                id: None,
                name: name.into(),
                arguments,
            }],
            ..Default::default()
        }
    }

    /// Set the reported usage.
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some(Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        });
        self
    }
}

/// Plays scripted responses in order, one per call, and records every request.
///
/// When the script runs out, or the line for a call is malformed, the call fails with a
/// [`ProviderError`] naming the script and the line — the harness turns that into an
/// `error` stop, never a panic. Reported output tokens are capped at the request's
/// `max_output_tokens`, as a real server truncates its answer.
#[derive(Debug)]
pub struct ScriptedProvider {
    source_name: String,
    model: String,
    script: Arc<[Result<ScriptedResponse, ProviderError>]>,
    next: AtomicUsize,
    record: bool,
    requests: Mutex<Vec<LlmRequest>>,
    pricing: Option<Pricing>,
    served_log: Option<std::path::PathBuf>,
    context_window: Option<u64>,
}

impl ScriptedProvider {
    /// Play these responses.
    pub fn new(responses: Vec<ScriptedResponse>) -> Self {
        Self::from_script("inline script", responses.into_iter().map(Ok).collect())
    }

    /// Parse a JSONL script. Blank lines and lines starting with `#` are skipped. A malformed
    /// line does not fail here: the call that reaches it fails, naming the line.
    pub fn from_jsonl(source_name: impl Into<String>, text: &str) -> Self {
        let source_name = source_name.into();
        let mut script = Vec::new();
        for (idx, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            script.push(
                serde_json::from_str::<ScriptedResponse>(trimmed).map_err(|e| {
                    ProviderError::ScriptMalformed {
                        source_name: source_name.clone(),
                        line: idx + 1,
                        message: format!(
                            "not a scripted response ({e}); expected {{\"text\": \"...\", \"tool_calls\": [{{\"name\": \"...\", \"arguments\": {{}}}}], \"usage\": {{\"input_tokens\": 1, \"output_tokens\": 1}}}}"
                        ),
                    }
                }),
            );
        }
        Self::from_script(source_name, script)
    }

    /// Read and parse a JSONL script file.
    ///
    /// # Errors
    /// [`ProviderError::ScriptUnreadable`] when the file cannot be read.
    pub fn from_file(path: &Path) -> Result<Self, ProviderError> {
        let text = std::fs::read_to_string(path).map_err(|e| ProviderError::ScriptUnreadable {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Ok(Self::from_jsonl(path.display().to_string(), &text))
    }

    fn from_script(
        source_name: impl Into<String>,
        script: Vec<Result<ScriptedResponse, ProviderError>>,
    ) -> Self {
        ScriptedProvider {
            source_name: source_name.into(),
            model: "scripted".into(),
            script: script.into(),
            next: AtomicUsize::new(0),
            record: true,
            requests: Mutex::new(Vec::new()),
            pricing: None,
            served_log: None,
            context_window: None,
        }
    }

    /// Continue the script after its first `served` responses (a resumed run whose journal
    /// records that many model calls already made).
    pub fn starting_at(self, served: usize) -> Self {
        self.next.store(served, Ordering::SeqCst);
        self
    }

    /// Append the number (from 1) of every response served, one per line, to `path` — so
    /// that a test can check across processes that no response was served twice.
    pub fn with_served_log(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.served_log = Some(path.into());
        self
    }

    /// A fresh player of the same script (shares the parsed lines, not the position).
    pub fn replay(&self) -> Self {
        ScriptedProvider {
            source_name: self.source_name.clone(),
            model: self.model.clone(),
            script: Arc::clone(&self.script),
            next: AtomicUsize::new(0),
            record: self.record,
            requests: Mutex::new(Vec::new()),
            pricing: self.pricing,
            served_log: self.served_log.clone(),
            context_window: self.context_window,
        }
    }

    /// Report this context window, as a real model's table entry would.
    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Report these prices, so the harness accounts cost as with a real model.
    pub fn with_pricing(mut self, pricing: Pricing) -> Self {
        self.pricing = Some(pricing);
        self
    }

    /// Do not keep copies of requests (for benchmarks).
    pub fn without_recording(mut self) -> Self {
        self.record = false;
        self
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<LlmRequest> {
        match self.requests.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// How many calls were made.
    pub fn calls(&self) -> usize {
        self.next.load(Ordering::SeqCst)
    }

    /// How many responses the script holds.
    pub fn len(&self) -> usize {
        self.script.len()
    }

    /// Whether the script is empty.
    pub fn is_empty(&self) -> bool {
        self.script.is_empty()
    }
}

#[async_trait::async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn pricing(&self) -> Option<Pricing> {
        self.pricing
    }

    fn context_window(&self) -> Option<u64> {
        self.context_window
    }

    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        if self.record {
            match self.requests.lock() {
                Ok(mut g) => g.push(request.clone()),
                Err(poisoned) => poisoned.into_inner().push(request.clone()),
            }
        }
        let scripted = match self.script.get(n) {
            None => {
                return Err(ProviderError::ScriptExhausted {
                    source_name: self.source_name.clone(),
                    call: n + 1,
                    available: self.script.len(),
                });
            }
            Some(Err(e)) => return Err(e.clone()),
            Some(Ok(r)) => r,
        };
        if let Some(ms) = scripted.delay_ms {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        if let Some(message) = &scripted.error {
            return Err(ProviderError::Call {
                provider: "scripted".into(),
                message: format!("{message} (line {} of {})", n + 1, self.source_name),
            });
        }
        let tool_calls: Vec<ToolCall> = scripted
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: c
                    .id
                    .clone()
                    .unwrap_or_else(|| format!("call_{}_{}", n + 1, i)),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect();
        let mut usage = scripted.usage.unwrap_or_else(|| {
            let answer_bytes = scripted.text.len()
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>();
            Usage {
                input_tokens: estimate_tokens_conservatively(request),
                output_tokens: (answer_bytes as u64).div_ceil(3),
                ..Usage::default()
            }
        });
        if let Some(cap) = request.options.max_output_tokens {
            usage.output_tokens = usage.output_tokens.min(cap);
        }
        if let Some(path) = &self.served_log {
            use std::io::Write;
            // Best effort, once the answer is ready: the log is a test's observation.
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(format!("{}\n", n + 1).as_bytes()));
        }
        Ok(LlmResponse {
            text: scripted.text.clone(),
            tool_calls,
            usage,
            response_id: Some(
                scripted
                    .response_id
                    .clone()
                    .unwrap_or_else(|| format!("scripted-{}", n + 1)),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallOptions, Message};
    use serde_json::json;

    fn req(text: &str) -> LlmRequest {
        LlmRequest {
            messages: vec![Message::user(text).into()],
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn plays_in_order_and_records_requests() {
        let p = ScriptedProvider::new(vec![
            ScriptedResponse::tool("read_file", json!({"path": "a"})).with_usage(10, 5),
            ScriptedResponse::text("done").with_usage(3, 2),
        ]);
        let r1 = p.complete(&req("one")).await.unwrap();
        assert_eq!(r1.tool_calls[0].name, "read_file");
        assert_eq!(r1.tool_calls[0].id, "call_1_0");
        assert_eq!(r1.usage.total(), 15);
        assert_eq!(r1.response_id.as_deref(), Some("scripted-1"));
        let r2 = p.complete(&req("two")).await.unwrap();
        assert_eq!(r2.text, "done");
        let seen = p.requests();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1].messages[0].content, "two");
    }

    #[tokio::test]
    async fn exhausted_script_is_an_error_not_a_panic() {
        let p = ScriptedProvider::new(vec![ScriptedResponse::text("only")]);
        p.complete(&req("a")).await.unwrap();
        let err = p.complete(&req("b")).await.unwrap_err();
        assert!(matches!(
            err,
            ProviderError::ScriptExhausted {
                call: 2,
                available: 1,
                ..
            }
        ));
        assert!(err.to_string().contains("no response left for call 2"));
    }

    #[tokio::test]
    async fn malformed_line_names_its_line_number() {
        let script = "# a comment\n{\"text\": \"ok\"}\n\n{\"text\": oops}\n{\"txt\": \"typo\"}\n";
        let p = ScriptedProvider::from_jsonl("s.jsonl", script);
        assert_eq!(p.len(), 3);
        assert_eq!(p.complete(&req("a")).await.unwrap().text, "ok");
        let e = p.complete(&req("b")).await.unwrap_err().to_string();
        assert!(e.starts_with("s.jsonl, line 4:"), "{e}");
        let e = p.complete(&req("c")).await.unwrap_err().to_string();
        assert!(e.starts_with("s.jsonl, line 5:"), "{e}");
        assert!(e.contains("txt"), "{e}");
    }

    #[tokio::test]
    async fn output_tokens_are_capped_by_max_output_tokens() {
        let p = ScriptedProvider::new(vec![ScriptedResponse::text("x").with_usage(10, 500)]);
        let mut r = req("a");
        r.options = CallOptions {
            max_output_tokens: Some(40),
            ..Default::default()
        };
        assert_eq!(p.complete(&r).await.unwrap().usage.output_tokens, 40);
    }

    #[tokio::test]
    async fn missing_usage_is_estimated_not_zero() {
        let p = ScriptedProvider::new(vec![ScriptedResponse::text("twelve bytes")]);
        let u = p.complete(&req("some prompt text")).await.unwrap().usage;
        assert!(u.input_tokens > 0);
        assert_eq!(u.output_tokens, 4);
    }

    #[test]
    fn unreadable_file_names_the_path() {
        let e = ScriptedProvider::from_file(Path::new("/no/such/script.jsonl")).unwrap_err();
        assert!(e.to_string().contains("/no/such/script.jsonl"));
    }

    #[tokio::test(start_paused = true)]
    async fn delay_ms_holds_the_answer_back() {
        let p = ScriptedProvider::from_jsonl("s", "{\"text\": \"slow\", \"delay_ms\": 5000}");
        let start = tokio::time::Instant::now();
        assert_eq!(p.complete(&req("x")).await.unwrap().text, "slow");
        assert!(start.elapsed() >= std::time::Duration::from_millis(5000));
    }

    #[tokio::test]
    async fn replay_starts_over_on_shared_lines() {
        let p = ScriptedProvider::new(vec![ScriptedResponse::text("a")]);
        p.complete(&req("x")).await.unwrap();
        let q = p.replay();
        assert_eq!(q.complete(&req("y")).await.unwrap().text, "a");
    }
}
