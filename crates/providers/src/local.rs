//! [`LocalProvider`]: a GGUF model run in-process by candle (the `local` feature; pure Rust,
//! nothing to install).
//!
//! # Three kinds of answer
//!
//! - **Tools offered, a model trained to call them: its own format.** A model whose chat
//!   template calls tools with `<tool_call>` tokens (Qwen2.5) is given the tools and the
//!   conversation in that format (`native`), and answers in prose or with one call; from the
//!   call's first token on, the answer is generated under the call schema (llguidance): one
//!   offered tool with valid arguments.
//! - **Tools offered, any other model: one decision under a grammar.** A model with no
//!   tool-call format of its own is spoken to in the strict-JSON protocol, with the same two
//!   halves [`crate::StrictJsonProvider`] uses: the request is rewritten by
//!   [`to_protocol_request`] (tools listed in the system prompt with one concrete example,
//!   earlier calls and results replayed as text) and the answer is read by
//!   [`from_protocol_answer`]. The answer is *generated under a constraint* (llguidance)
//!   compiled from [`decision_schema_text`]: a union over the offered tools, each with its
//!   own argument schema, plus `DONE`. The model cannot produce anything but one valid
//!   decision (unless cut off by `max_output_tokens`).
//! - **No tools offered: plain text.** A synthesis or a plain answer is generated freely
//!   (no protocol, no JSON), with a stronger repetition penalty, and stops as soon as a run
//!   of tokens repeats (`sampling::LoopDetector`): small models otherwise loop until the
//!   token limit.
//!
//! # Threads and cancellation
//!
//! The model is loaded once; inference runs on one dedicated thread per provider, never on
//! the async runtime's workers (candle's matrix products use a rayon pool of
//! [`LocalSettings::threads`] threads). A call sends a job to that thread and awaits its
//! reply; generated text comes back piece by piece as [`ProviderEvent::TextDelta`] events
//! through a channel of capacity one, so the generator is never more than a token ahead of
//! the caller. Dropping the call's future (how the harness stops a run) sets the job's
//! cancellation flag and closes that channel: the generator checks both between tokens and
//! stops at once. Calls are served one at a time, in order.
//!
//! # No prompt cache
//!
//! Every call evaluates its whole prompt in one batch: candle's quantized llama cannot
//! continue a cached sequence with more than one token at a time, and for models this small
//! a full prompt costs about a second. `cached_tokens` is therefore always 0.

mod constrain;
mod copy_bias;
mod native;
mod requantize;
mod sampling;
mod tokenizer;
mod weights;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::decision::decision_schema_text;
use crate::{
    CallObserver, LlmRequest, LlmResponse, Provider, ProviderError, ProviderEvent, Role, Usage,
    from_protocol_answer, to_protocol_request,
};
use copy_bias::CopySource;
use weights::Chat;
use worker::{Generated, Job, Mode, Work, Worker};

/// The provider name in records and messages.
const NAME: &str = "local";

/// Repetition penalty of constrained answers (a decision): light, the grammar does the rest.
const DECISION_REPEAT_PENALTY: f32 = 1.1;

/// Repetition penalty of free text (no tools offered): small models loop without it.
const TEXT_REPEAT_PENALTY: f32 = 1.3;

/// Added to the logit of a likely token that opens an argument's value by copying a word
/// of the task or a tool's result (`copy_bias`). Chosen by `cargo xtask eval-local`
/// (docs/PERFORMANCE.md): SmolLM2 succeeds in 5 of its 10 tasks with 0, 7 with 2 or 3, 8
/// with 5 or 8 — and in 4 of the held-out set's 10 with 3 or 5, against 5 with 0: the gain
/// is on the tasks it was chosen on.
const COPY_BIAS: f32 = 5.0;

/// How a local model is run.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalSettings {
    /// Context window in tokens (prompt plus answer). `None`: the model's training context,
    /// at most 8192 (and at most what candle's implementation of the architecture supports:
    /// 4096 for llama).
    pub context_size: Option<u32>,
    /// Most tokens one answer may have when the request sets no lower `max_output_tokens`.
    pub max_output_tokens: u32,
    /// CPU threads for inference. `None`: every available core.
    pub threads: Option<u32>,
    /// Sampling temperature; `0.0` picks the most likely token every time (greedy). Either
    /// way the grammar decides which tokens are allowed when tools are offered.
    pub temperature: f32,
    /// Seed of the sampler, so a run can be repeated.
    pub seed: u32,
    /// Repetition penalty of free text (answers without tools); 1.0 turns it off.
    pub text_repeat_penalty: f32,
    /// Added to the logit of each likely token that opens an argument's string value with
    /// a word copied from the task or a tool's result (see `local/copy_bias.rs`); 0 turns
    /// it off.
    pub copy_bias: f32,
}

impl Default for LocalSettings {
    fn default() -> Self {
        LocalSettings {
            context_size: None,
            max_output_tokens: 1024,
            threads: None,
            temperature: 0.0,
            seed: 42,
            text_repeat_penalty: TEXT_REPEAT_PENALTY,
            copy_bias: COPY_BIAS,
        }
    }
}

/// Why a call's generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalFinish {
    /// The model completed its answer (the grammar was satisfied and the model ended its turn).
    Done,
    /// Free text started repeating itself (a run of tokens came a second time): generation
    /// stopped and the repetition was cut off.
    Repetition,
    /// The answer reached the call's `max_output_tokens` (or the provider's own cap) first.
    MaxTokens,
    /// The context window was full.
    ContextFull,
    /// The call was dropped (a stop request) and generation stopped.
    Cancelled,
}

/// What the last call did: counts and timings, for tests and measurements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LocalCallStats {
    /// Tokens in the prompt.
    pub prompt_tokens: u64,
    /// Prompt tokens reused from an earlier call (always 0: every call evaluates its whole
    /// prompt, see the module documentation).
    pub cached_prompt_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Why generation ended.
    pub finish: LocalFinish,
    /// Time spent evaluating the prompt.
    pub prompt_time: Duration,
    /// Time spent generating.
    pub generation_time: Duration,
}

impl LocalCallStats {
    /// Generated tokens per second (0 when nothing was generated).
    pub fn generation_tokens_per_second(&self) -> f64 {
        per_second(self.generated_tokens, self.generation_time)
    }

    /// Evaluated prompt tokens per second (0 when none were evaluated).
    pub fn prompt_tokens_per_second(&self) -> f64 {
        per_second(
            self.prompt_tokens.saturating_sub(self.cached_prompt_tokens),
            self.prompt_time,
        )
    }
}

#[allow(clippy::cast_precision_loss)] // token counts are far below 2^52
fn per_second(n: u64, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if n == 0 || s <= 0.0 {
        0.0
    } else {
        n as f64 / s
    }
}

/// A GGUF model run in-process by candle: one constrained decision when tools are offered,
/// plain text otherwise (see the module documentation).
pub struct LocalProvider {
    model_name: String,
    path: PathBuf,
    chat: Chat,
    work: Mutex<std_mpsc::Sender<Work>>,
    calls: AtomicUsize,
    last: Arc<Mutex<Option<LocalCallStats>>>,
    context_size: u32,
}

impl std::fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProvider")
            .field("model", &self.model_name)
            .field("path", &self.path)
            .field("context_size", &self.context_size)
            .finish_non_exhaustive()
    }
}

impl LocalProvider {
    /// Load the GGUF model at `path` and start its inference thread. Blocks while the model
    /// is read (about a second for a small model).
    ///
    /// # Errors
    /// [`ProviderError::ModelFile`] when the file is missing or is not a model this provider
    /// can run (architectures: qwen2, llama, gemma3).
    pub fn load(path: &Path, settings: LocalSettings) -> Result<Self, ProviderError> {
        let model_error = |message: String| ProviderError::ModelFile {
            path: path.display().to_string(),
            message,
        };
        if !path.is_file() {
            return Err(model_error("no such file".into()));
        }
        let threads = settings.threads.map_or_else(
            || std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            |t| usize::try_from(t.max(1)).unwrap_or(1),
        );
        let model_name = path
            .file_stem()
            .map_or_else(|| "local".to_string(), |s| s.to_string_lossy().into_owned());

        let (work_tx, work_rx) = std_mpsc::channel::<Work>();
        let (ready_tx, ready_rx) = std_mpsc::channel::<Result<(Chat, u32), weights::LoadError>>();
        let last = Arc::new(Mutex::new(None));
        let thread_last = Arc::clone(&last);
        let file = path.to_path_buf();
        let thread_settings = settings.clone();
        std::thread::Builder::new()
            .name(format!("lsm-local-{model_name}"))
            .spawn(move || {
                let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = ready_tx.send(Err(weights::LoadError::Threads(e)));
                        return;
                    }
                };
                pool.install(|| match Worker::load(&file, thread_settings, thread_last) {
                    Ok(worker) => {
                        let _ = ready_tx.send(Ok((worker.chat.clone(), worker.context_size)));
                        drop(ready_tx);
                        worker.run(work_rx);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                });
            })
            .map_err(|e| model_error(format!("cannot start the inference thread: {e}")))?;
        let (chat, context_size) = match ready_rx.recv() {
            Ok(Ok(ready)) => ready,
            Ok(Err(e)) => return Err(model_error(e.to_string())),
            Err(_) => return Err(model_error("the inference thread ended at start".into())),
        };
        tracing::info!(
            model = %model_name,
            path = %path.display(),
            context_size,
            threads,
            "local model loaded"
        );
        Ok(LocalProvider {
            model_name,
            path: path.to_path_buf(),
            chat,
            work: Mutex::new(work_tx),
            calls: AtomicUsize::new(0),
            last,
            context_size,
        })
    }

    /// The model file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The context window in tokens.
    pub fn context_size(&self) -> u32 {
        self.context_size
    }

    /// Counts and timings of the last call that reached the inference thread (a cancelled one
    /// included), once it has finished. See [`LocalProvider::wait_idle`].
    pub fn last_call_stats(&self) -> Option<LocalCallStats> {
        match self.last.lock() {
            Ok(g) => *g,
            Err(p) => *p.into_inner(),
        }
    }

    /// Wait until every call started so far has finished on the inference thread — also a
    /// call whose future was dropped, which finishes as soon as the thread sees it was
    /// cancelled.
    pub async fn wait_idle(&self) {
        let (tx, rx) = oneshot::channel();
        if self.send(Work::Ping(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    fn send(&self, work: Work) -> Result<(), ProviderError> {
        let sender = match self.work.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        };
        sender.send(work).map_err(|_| self.thread_gone())
    }

    fn thread_gone(&self) -> ProviderError {
        ProviderError::Call {
            provider: NAME.into(),
            message: format!(
                "the inference thread of {} has stopped (see the log for why); start the run again",
                self.model_name
            ),
        }
    }
}

/// Most tools a call offers the model (see [`small_model_request`]).
const MAX_TOOLS: usize = 4;

/// `request` with the tools a small model is offered: those the task names, then those
/// that already succeeded, at most [`MAX_TOOLS`], never a control tool
/// (`task_steps::narrow`), their `path` argument restricted to the files the task
/// names for their step ([`crate::task_steps::narrow_and_pin`]); when the task names its
/// steps, only the step due now, and no tool once every step has succeeded
/// ([`crate::task_steps::due_tools`]). A long tool list is what a 135M model handles
/// worst (it picks tools by their place in the list), and it invents paths. When no tool is
/// left the call is a plain-text answer.
fn small_model_request(request: &LlmRequest) -> LlmRequest {
    let task = request
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .map_or("", |m| m.content.as_str());
    let done = crate::strict_json::succeeded_tools(request);
    let tools = if request.tools.is_empty() {
        Vec::new()
    } else {
        let mut tools = crate::task_steps::narrow_and_pin(&request.tools, task, &done, MAX_TOOLS);
        match crate::task_steps::due_tools(&request.tools, task, &done) {
            // Every step the task names has succeeded: the model answers in text.
            Some(due) if due.is_empty() => tools.clear(),
            // The step due now, when it is among the tools kept (it is first: the task
            // names it).
            Some(due) if tools.iter().any(|t| due.contains(&t.name)) => {
                tools.retain(|t| due.contains(&t.name));
            }
            _ => {}
        }
        tools
    };
    if tools.len() < request.tools.len() {
        tracing::debug!(
            offered = request.tools.len(),
            kept = ?tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            "tools narrowed for the local model"
        );
    }
    LlmRequest {
        messages: request.messages.clone(),
        tools,
        options: request.options.clone(),
    }
}

/// The conversation the model sees, as (role, content) pairs for the chat template: the
/// model's own tool-call format if it has one (`native`); else, when tools are offered,
/// the strict-JSON protocol, and the messages as they are otherwise.
fn model_messages(request: &LlmRequest, native: bool) -> Vec<(String, String)> {
    if native {
        // Also without tools (the final answer): earlier calls and results stay in the
        // format the model knows.
        return native::native_messages(request);
    }
    let messages = if request.tools.is_empty() {
        request.messages.clone()
    } else {
        to_protocol_request(request).messages
    };
    messages
        .into_iter()
        .map(|m| {
            let role = match m.role {
                Role::System => "system",
                Role::Assistant => "assistant",
                Role::User | Role::Tool => "user",
            };
            (role.to_string(), m.content.clone())
        })
        .collect()
}

/// Sets the job's cancellation flag when the call's future is dropped.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl Provider for LocalProvider {
    fn name(&self) -> &str {
        NAME
    }

    fn model(&self) -> &str {
        &self.model_name
    }

    /// Exact: the prompt is templated and tokenized with the model's own tokenizer.
    fn estimate_prompt_tokens(&self, request: &LlmRequest) -> u64 {
        let tokens = self.chat.render(&model_messages(
            &small_model_request(request),
            self.chat.tool_call.is_some(),
        ));
        u64::try_from(tokens.len()).unwrap_or(u64::MAX)
    }

    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        self.complete_observed(request, &crate::NoObserver).await
    }

    async fn complete_observed(
        &self,
        request: &LlmRequest,
        observer: &dyn CallObserver,
    ) -> Result<LlmResponse, ProviderError> {
        let asked: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        let request = &small_model_request(request);
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let max_tokens = request
            .options
            .max_output_tokens
            .map_or(u32::MAX, |m| u32::try_from(m).unwrap_or(u32::MAX));
        let native = !request.tools.is_empty() && self.chat.tool_call.is_some();
        let decision = !request.tools.is_empty() && !native;
        let messages = model_messages(request, self.chat.tool_call.is_some());
        if tracing::enabled!(tracing::Level::TRACE) {
            for (role, content) in &messages {
                tracing::trace!(role = %role, "prompt turn:\n{content}");
            }
        }
        let mode = if native {
            Mode::Native(native::call_schema_text(&request.tools))
        } else if decision {
            Mode::Decision(decision_schema_text(&request.tools))
        } else {
            Mode::Text
        };
        let retry = matches!(mode, Mode::Text) && self.chat.tool_call.is_some();
        let copy_from = if matches!(mode, Mode::Text) {
            CopySource::default()
        } else {
            CopySource::of_request(request)
        };
        let mut generated = self
            .run_job(messages.clone(), mode, copy_from, max_tokens, observer)
            .await?;
        if retry && native::is_call_text(&generated.text, &asked) {
            // A final answer written as a tool call (no tool is offered now): asked again,
            // as prose. Both attempts count in the usage.
            tracing::debug!(answer = %generated.text, "a call written as the final answer; asking for prose");
            let first = generated.stats;
            generated = self
                .run_job(
                    messages,
                    Mode::Prose,
                    CopySource::default(),
                    max_tokens,
                    observer,
                )
                .await?;
            generated.stats.prompt_tokens += first.prompt_tokens;
            generated.stats.generated_tokens += first.generated_tokens;
        }
        let stats = generated.stats;
        if stats.finish == LocalFinish::MaxTokens || stats.finish == LocalFinish::ContextFull {
            tracing::warn!(
                tokens = stats.generated_tokens,
                finish = ?stats.finish,
                "the local model's answer was cut off before it was complete"
            );
        }
        let response = LlmResponse {
            text: generated.text,
            tool_calls: Vec::new(),
            usage: Usage {
                input_tokens: stats.prompt_tokens,
                output_tokens: stats.generated_tokens,
                cached_tokens: stats.cached_prompt_tokens,
                cache_creation_tokens: 0,
            },
            response_id: None,
        };
        Ok(if native {
            native::from_native_answer(response, n)
        } else if decision {
            from_protocol_answer(response, n)
        } else {
            response
        })
    }
}

impl LocalProvider {
    /// Send one generation to the inference thread and forward its text pieces to
    /// `observer` until it is done.
    async fn run_job(
        &self,
        messages: Vec<(String, String)>,
        mode: Mode,
        copy_from: CopySource,
        max_tokens: u32,
        observer: &dyn CallObserver,
    ) -> Result<Generated, ProviderError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let _guard = CancelOnDrop(Arc::clone(&cancel));
        let (pieces_tx, mut pieces_rx) = mpsc::channel(1);
        let (reply_tx, reply_rx) = oneshot::channel();
        self.send(Work::Generate(Box::new(Job {
            messages,
            mode,
            copy_from,
            max_tokens,
            cancel,
            pieces: pieces_tx,
            reply: reply_tx,
        })))?;
        while let Some(text) = pieces_rx.recv().await {
            observer.on_event(ProviderEvent::TextDelta { text });
            // Let a caller racing this call against a stop request see the stop between two
            // pieces: once this future is dropped the generator stops within a token or two.
            tokio::task::yield_now().await;
        }
        reply_rx.await.map_err(|_| self.thread_gone())?
    }
}

#[cfg(test)]
mod tests;
