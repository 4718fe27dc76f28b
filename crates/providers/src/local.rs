//! [`LocalProvider`]: a GGUF model run in-process by llama.cpp (the `local` feature).
//!
//! # How it fits the strict-JSON path
//!
//! A local model has no native tool calling, so this provider speaks the strict-JSON protocol
//! itself — with the same two halves [`crate::StrictJsonProvider`] uses: the request is
//! rewritten by [`to_protocol_request`] (tools described in the system prompt, earlier calls
//! and results replayed as text) and the answer is read by [`from_protocol_answer`] into a tool
//! call or a final text. What it adds is that the answer is *generated under a grammar*
//! derived from [`decision_schema_text`]: a union over the offered tools, each with its own
//! argument schema, plus `DONE`. The model therefore cannot produce anything but one valid
//! decision (unless it is cut off by `max_output_tokens`, see below). It is not wrapped in
//! `StrictJsonProvider`: that wrapper hides the tools from the inner provider, and the grammar
//! needs them.
//!
//! # Threads and cancellation
//!
//! The model is loaded once; inference runs on one dedicated thread per provider, never on
//! the async runtime's workers. A call sends a job to that thread and awaits its reply;
//! generated text comes back piece by piece as [`ProviderEvent::TextDelta`] events through a
//! channel of capacity one, so the generator is never more than a token ahead of the caller.
//! Dropping the call's future (how the harness stops a run) sets the job's cancellation flag
//! and closes that channel: the generator checks both between tokens (and between prompt
//! chunks) and stops at once. Calls are served one at a time, in order.
//!
//! # Prompt cache
//!
//! The thread keeps the tokens of its last call in llama.cpp's KV cache. A call whose prompt
//! starts with the same tokens (the system prompt, the task, the earlier turns) only
//! evaluates the rest; the reused tokens are reported as `cached_tokens`.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::{mpsc, oneshot};

use crate::decision::decision_schema_text;
use crate::{
    CallObserver, LlmRequest, LlmResponse, Provider, ProviderError, ProviderEvent, Role, Usage,
    from_protocol_answer, to_protocol_request,
};

/// The provider name in records and messages.
const NAME: &str = "local";

/// Tokens evaluated per prompt batch; cancellation is checked between batches.
const PROMPT_CHUNK: usize = 256;

/// How a local model is run.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalSettings {
    /// Context window in tokens (prompt plus answer). `None`: the model's training context,
    /// at most 8192.
    pub context_size: Option<u32>,
    /// Most tokens one answer may have when the request sets no lower `max_output_tokens`.
    pub max_output_tokens: u32,
    /// CPU threads for inference. `None`: every available core.
    pub threads: Option<u32>,
    /// Sampling temperature; `0.0` picks the most likely token every time (greedy). Either
    /// way the grammar decides which tokens are allowed.
    pub temperature: f32,
    /// Seed of the sampler, so a run can be repeated.
    pub seed: u32,
}

impl Default for LocalSettings {
    fn default() -> Self {
        LocalSettings {
            context_size: None,
            max_output_tokens: 1024,
            threads: None,
            temperature: 0.0,
            seed: 42,
        }
    }
}

/// Why a call's generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalFinish {
    /// The model completed its answer (the grammar was satisfied and the model ended its turn).
    Done,
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
    /// Tokens in the prompt (reused ones included).
    pub prompt_tokens: u64,
    /// Prompt tokens reused from the previous call's KV cache.
    pub cached_prompt_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Why generation ended.
    pub finish: LocalFinish,
    /// Time spent evaluating the prompt (the tokens not reused).
    pub prompt_time: Duration,
    /// Time spent generating.
    pub generation_time: Duration,
}

impl LocalCallStats {
    /// Generated tokens per second (0 when nothing was generated).
    pub fn generation_tokens_per_second(&self) -> f64 {
        per_second(self.generated_tokens, self.generation_time)
    }

    /// Evaluated (not reused) prompt tokens per second (0 when none were evaluated).
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

/// The llama.cpp backend: initialized once per process, shared by every provider.
fn backend() -> Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let backend = LlamaBackend::init().map_err(|e| e.to_string())?;
            // llama.cpp's own log lines go to `tracing` (debug and below stay quiet by default).
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            Ok(backend)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// One call for the inference thread.
struct Job {
    /// The protocol conversation: (role, content).
    messages: Vec<(String, String)>,
    /// The decision schema the answer must satisfy.
    schema: String,
    /// Most tokens to generate.
    max_tokens: u32,
    /// Set when the caller gave up.
    cancel: Arc<AtomicBool>,
    /// Pieces of generated text.
    pieces: mpsc::Sender<String>,
    /// The result.
    reply: oneshot::Sender<Result<Generated, ProviderError>>,
}

enum Work {
    Generate(Job),
    /// Answered once every job sent before it is finished.
    Ping(oneshot::Sender<()>),
}

/// What a finished generation produced.
struct Generated {
    text: String,
    stats: LocalCallStats,
}

/// A GGUF model run in-process by llama.cpp, answering in the strict-JSON protocol under a
/// grammar (see the module documentation).
pub struct LocalProvider {
    model_name: String,
    path: PathBuf,
    model: Arc<LlamaModel>,
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
    /// is read (memory-mapped: well under a second for a small model).
    ///
    /// # Errors
    /// [`ProviderError::ModelFile`] when the file is missing or is not a model llama.cpp can
    /// load, or when its context cannot be created.
    pub fn load(path: &Path, settings: LocalSettings) -> Result<Self, ProviderError> {
        let model_error = |message: String| ProviderError::ModelFile {
            path: path.display().to_string(),
            message,
        };
        if !path.is_file() {
            return Err(model_error("no such file".into()));
        }
        let backend = backend().map_err(|e| model_error(format!("llama.cpp: {e}")))?;
        let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
            .map_err(|e| model_error(format!("llama.cpp cannot load it: {e}")))?;
        let model = Arc::new(model);
        let trained = model.n_ctx_train().max(1);
        let context_size = settings
            .context_size
            .unwrap_or(8192)
            .clamp(256, trained.max(256));
        let threads = settings.threads.map_or_else(
            || {
                std::thread::available_parallelism()
                    .map(|n| u32::try_from(n.get()).unwrap_or(1))
                    .unwrap_or(1)
            },
            |t| t.max(1),
        );
        let model_name = path
            .file_stem()
            .map_or_else(|| "local".to_string(), |s| s.to_string_lossy().into_owned());

        let (work_tx, work_rx) = std_mpsc::channel::<Work>();
        let (ready_tx, ready_rx) = std_mpsc::channel::<Result<(), String>>();
        let last = Arc::new(Mutex::new(None));
        let worker = Worker {
            model: Arc::clone(&model),
            context_size,
            threads: i32::try_from(threads).unwrap_or(1),
            settings: settings.clone(),
            last: Arc::clone(&last),
        };
        std::thread::Builder::new()
            .name(format!("lsm-local-{model_name}"))
            .spawn(move || worker.run(work_rx, ready_tx))
            .map_err(|e| model_error(format!("cannot start the inference thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(message)) => return Err(model_error(message)),
            Err(_) => return Err(model_error("the inference thread ended at start".into())),
        }
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
            model,
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

    /// The prompt text the model sees for `request` (chat template applied).
    fn prompt_text(&self, messages: &[(String, String)]) -> Result<String, ProviderError> {
        render_prompt(&self.model, messages)
    }
}

/// The strict-JSON conversation as (role, content) pairs for the chat template.
fn protocol_messages(request: &LlmRequest) -> Vec<(String, String)> {
    to_protocol_request(request)
        .messages
        .into_iter()
        .map(|m| {
            let role = match m.role {
                Role::System => "system",
                Role::Assistant => "assistant",
                Role::User | Role::Tool => "user",
            };
            (role.to_string(), m.content)
        })
        .collect()
}

/// Apply the model's chat template (ChatML when the file carries none) to `messages`.
fn render_prompt(
    model: &LlamaModel,
    messages: &[(String, String)],
) -> Result<String, ProviderError> {
    let malformed = |message: String| ProviderError::Call {
        provider: NAME.into(),
        message,
    };
    let template = match model.chat_template(None) {
        Ok(t) => t,
        Err(_) => LlamaChatTemplate::new("chatml")
            .map_err(|e| malformed(format!("chat template: {e}")))?,
    };
    let chat = messages
        .iter()
        .map(|(role, content)| {
            // A NUL byte cannot cross into C; nothing meaningful is lost by dropping it.
            LlamaChatMessage::new(role.clone(), content.replace('\0', ""))
                .map_err(|e| malformed(format!("chat message: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    model
        .apply_chat_template(&template, &chat, true)
        .map_err(|e| {
            malformed(format!(
                "the model's chat template could not be applied: {e}"
            ))
        })
}

/// The GBNF grammar of `schema` (a [`decision_schema_text`]), by llama.cpp's converter, with
/// whitespace between JSON tokens limited to one optional space: the converter allows
/// newlines and up to twenty spaces of indentation, which a small model spends tokens on (and
/// can loop in) without changing the decision.
fn decision_grammar(schema: &str) -> Result<String, ProviderError> {
    let gbnf = llama_cpp_2::json_schema_to_grammar(schema).map_err(|e| ProviderError::Call {
        provider: NAME.into(),
        message: format!(
            "the offered tools' argument schemas could not be turned into a grammar ({e}); simplify the tool schemas"
        ),
    })?;
    Ok(gbnf
        .lines()
        .map(|line| {
            if line.starts_with("space ::=") {
                "space ::= \" \"?"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n"))
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
        let messages = protocol_messages(request);
        match self.prompt_text(&messages) {
            Ok(text) => {
                let tokens = self.model.vocab().tokenize(text.as_bytes(), true, true);
                u64::try_from(tokens.len()).unwrap_or(u64::MAX)
            }
            Err(_) => crate::estimate_tokens_conservatively(request),
        }
    }

    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        self.complete_observed(request, &crate::NoObserver).await
    }

    async fn complete_observed(
        &self,
        request: &LlmRequest,
        observer: &dyn CallObserver,
    ) -> Result<LlmResponse, ProviderError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let max_tokens = request
            .options
            .max_output_tokens
            .map_or(u32::MAX, |m| u32::try_from(m).unwrap_or(u32::MAX));
        let cancel = Arc::new(AtomicBool::new(false));
        let _guard = CancelOnDrop(Arc::clone(&cancel));
        let (pieces_tx, mut pieces_rx) = mpsc::channel(1);
        let (reply_tx, reply_rx) = oneshot::channel();
        self.send(Work::Generate(Job {
            messages: protocol_messages(request),
            schema: decision_schema_text(&request.tools),
            max_tokens,
            cancel,
            pieces: pieces_tx,
            reply: reply_tx,
        }))?;
        while let Some(text) = pieces_rx.recv().await {
            observer.on_event(ProviderEvent::TextDelta { text });
            // Let a caller racing this call against a stop request see the stop between two
            // pieces: once this future is dropped the generator stops within a token or two.
            tokio::task::yield_now().await;
        }
        let generated = reply_rx.await.map_err(|_| self.thread_gone())??;
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
        Ok(from_protocol_answer(response, n))
    }
}

/// The inference thread's state: the model, its context (created on the thread, as it
/// borrows the model) and the tokens currently in the context's KV cache.
struct Worker {
    model: Arc<LlamaModel>,
    context_size: u32,
    threads: i32,
    settings: LocalSettings,
    last: Arc<Mutex<Option<LocalCallStats>>>,
}

impl Worker {
    fn run(self, work: std_mpsc::Receiver<Work>, ready: std_mpsc::Sender<Result<(), String>>) {
        let backend = match backend() {
            Ok(b) => b,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(self.context_size))
            .with_n_batch(self.context_size)
            .with_n_threads(self.threads)
            .with_n_threads_batch(self.threads);
        let mut ctx = match self.model.new_context(backend, params) {
            Ok(c) => c,
            Err(e) => {
                let _ = ready.send(Err(format!(
                    "cannot create a context of {} tokens: {e}",
                    self.context_size
                )));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        drop(ready);
        let mut cached: Vec<LlamaToken> = Vec::new();
        let mut grammar_cache: Option<(String, String)> = None;
        for item in work {
            match item {
                Work::Ping(done) => {
                    let _ = done.send(());
                }
                Work::Generate(job) => {
                    let Job {
                        messages,
                        schema,
                        max_tokens,
                        cancel,
                        pieces,
                        reply,
                    } = job;
                    let result = self.generate(
                        &mut ctx,
                        &mut cached,
                        &mut grammar_cache,
                        &messages,
                        &schema,
                        max_tokens,
                        &cancel,
                        &pieces,
                    );
                    drop(pieces);
                    if let Ok(g) = &result {
                        match self.last.lock() {
                            Ok(mut l) => *l = Some(g.stats),
                            Err(p) => *p.into_inner() = Some(g.stats),
                        }
                    }
                    let _ = reply.send(result);
                }
            }
        }
        tracing::debug!("local inference thread ends: its provider was dropped");
    }

    fn grammar(
        cache: &mut Option<(String, String)>,
        schema: &str,
    ) -> Result<String, ProviderError> {
        if let Some((s, g)) = cache.as_ref()
            && s == schema
        {
            return Ok(g.clone());
        }
        let gbnf = decision_grammar(schema)?;
        *cache = Some((schema.to_string(), gbnf.clone()));
        Ok(gbnf)
    }

    fn sampler(&self, gbnf: &str) -> Result<LlamaSampler, ProviderError> {
        let grammar =
            LlamaSampler::grammar(&self.model, gbnf, "root").map_err(|e| ProviderError::Call {
                provider: NAME.into(),
                message: format!("llama.cpp refused the decision grammar: {e}"),
            })?;
        let mut chain = vec![
            grammar,
            // Discourage the loops small models fall into inside long strings.
            LlamaSampler::penalties(self.model.n_vocab(), 64, 1.1, 0.0, 0.0),
        ];
        if self.settings.temperature > 0.0 {
            chain.push(LlamaSampler::top_k(40));
            chain.push(LlamaSampler::top_p(0.95, 1));
            chain.push(LlamaSampler::temp(self.settings.temperature));
            chain.push(LlamaSampler::dist(self.settings.seed));
        } else {
            chain.push(LlamaSampler::greedy());
        }
        Ok(LlamaSampler::chain_simple(chain))
    }

    #[allow(clippy::too_many_arguments)]
    fn generate(
        &self,
        ctx: &mut LlamaContext<'_>,
        cached: &mut Vec<LlamaToken>,
        grammar_cache: &mut Option<(String, String)>,
        messages: &[(String, String)],
        schema: &str,
        max_tokens: u32,
        cancel: &AtomicBool,
        pieces: &mpsc::Sender<String>,
    ) -> Result<Generated, ProviderError> {
        let failed = |message: String| ProviderError::Call {
            provider: NAME.into(),
            message,
        };
        let prompt = render_prompt(&self.model, messages)?;
        let vocab = self.model.vocab();
        let tokens = vocab.tokenize(prompt.as_bytes(), true, true);
        let n_ctx = usize::try_from(self.context_size).unwrap_or(usize::MAX);
        if tokens.len() + 1 >= n_ctx {
            return Err(ProviderError::ContextOverflow {
                provider: NAME.into(),
                prompt_tokens: u64::try_from(tokens.len()).unwrap_or(u64::MAX),
                context_size: u64::from(self.context_size),
            });
        }
        let gbnf = Self::grammar(grammar_cache, schema)?;
        let mut sampler = self.sampler(&gbnf)?;

        // Reuse the longest common prefix of the KV cache; at least one token is evaluated
        // so that there are logits to sample from.
        let mut common = cached
            .iter()
            .zip(tokens.iter())
            .take_while(|(a, b)| a == b)
            .count()
            .min(tokens.len().saturating_sub(1));
        let keep = u32::try_from(common).unwrap_or(0);
        let removed = ctx
            .clear_kv_cache_seq(Some(0), Some(keep), None)
            .unwrap_or(false);
        if !removed {
            ctx.clear_kv_cache();
            common = 0;
        }
        cached.truncate(common);

        let started = Instant::now();
        let mut batch = LlamaBatch::new(PROMPT_CHUNK.max(1), 1);
        let rest = &tokens[common..];
        let chunks = rest.chunks(PROMPT_CHUNK);
        let n_chunks = chunks.len();
        for (i, chunk) in chunks.enumerate() {
            if cancel.load(Ordering::SeqCst) {
                // What was evaluated so far stays in the cache for the next call.
                return Ok(Self::cancelled(&tokens, common, started));
            }
            batch.clear();
            for (j, token) in chunk.iter().enumerate() {
                let pos = i32::try_from(cached.len() + j).unwrap_or(i32::MAX);
                let last = i + 1 == n_chunks && j + 1 == chunk.len();
                batch
                    .add(*token, pos, &[0], last)
                    .map_err(|e| failed(format!("prompt batch: {e}")))?;
            }
            if let Err(e) = ctx.decode(&mut batch) {
                cached.clear();
                ctx.clear_kv_cache();
                return Err(failed(format!(
                    "llama.cpp could not evaluate the prompt: {e}"
                )));
            }
            cached.extend_from_slice(chunk);
        }
        let prompt_done = Instant::now();

        let room = u32::try_from(n_ctx.saturating_sub(tokens.len())).unwrap_or(0);
        let limit = max_tokens.min(self.settings.max_output_tokens);
        let mut text_bytes: Vec<u8> = Vec::new();
        let mut sent = 0usize;
        let mut generated: u64 = 0;
        let mut logits_at = batch.n_tokens() - 1;
        let finish = loop {
            if cancel.load(Ordering::SeqCst) {
                break LocalFinish::Cancelled;
            }
            if generated >= u64::from(limit) {
                break LocalFinish::MaxTokens;
            }
            if generated + 1 >= u64::from(room) {
                break LocalFinish::ContextFull;
            }
            let token = sampler.sample(ctx, logits_at);
            if vocab.is_eog(token) {
                break LocalFinish::Done;
            }
            generated += 1;
            text_bytes.extend(vocab.token_to_piece(token, false, None));
            // Send what is complete UTF-8 so far (a character may span tokens).
            let complete = match std::str::from_utf8(&text_bytes[sent..]) {
                Ok(s) => s.len(),
                Err(e) => e.valid_up_to(),
            };
            if complete > 0 {
                let piece =
                    String::from_utf8_lossy(&text_bytes[sent..sent + complete]).into_owned();
                sent += complete;
                if pieces.blocking_send(piece).is_err() {
                    // The caller is gone: nobody will read the answer.
                    break LocalFinish::Cancelled;
                }
            }
            batch.clear();
            let pos = i32::try_from(cached.len()).unwrap_or(i32::MAX);
            batch
                .add(token, pos, &[0], true)
                .map_err(|e| failed(format!("token batch: {e}")))?;
            if let Err(e) = ctx.decode(&mut batch) {
                cached.clear();
                ctx.clear_kv_cache();
                return Err(failed(format!("llama.cpp could not evaluate a token: {e}")));
            }
            cached.push(token);
            logits_at = 0;
        };
        let stats = LocalCallStats {
            prompt_tokens: u64::try_from(tokens.len()).unwrap_or(u64::MAX),
            cached_prompt_tokens: u64::try_from(common).unwrap_or(u64::MAX),
            generated_tokens: generated,
            finish,
            prompt_time: prompt_done.duration_since(started),
            generation_time: prompt_done.elapsed(),
        };
        tracing::debug!(
            prompt_tokens = stats.prompt_tokens,
            cached = stats.cached_prompt_tokens,
            generated = stats.generated_tokens,
            finish = ?stats.finish,
            prompt_tps = stats.prompt_tokens_per_second(),
            generation_tps = stats.generation_tokens_per_second(),
            "local generation"
        );
        Ok(Generated {
            text: String::from_utf8_lossy(&text_bytes).into_owned(),
            stats,
        })
    }

    fn cancelled(tokens: &[LlamaToken], common: usize, started: Instant) -> Generated {
        Generated {
            text: String::new(),
            stats: LocalCallStats {
                prompt_tokens: u64::try_from(tokens.len()).unwrap_or(u64::MAX),
                cached_prompt_tokens: u64::try_from(common).unwrap_or(u64::MAX),
                generated_tokens: 0,
                finish: LocalFinish::Cancelled,
                prompt_time: started.elapsed(),
                generation_time: Duration::ZERO,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolDefinition;
    use serde_json::json;

    #[test]
    fn the_decision_grammar_has_a_root_one_space_and_every_action() {
        let tools = [ToolDefinition {
            name: "read_file".into(),
            description: "Read.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }];
        let gbnf = decision_grammar(&decision_schema_text(&tools)).unwrap();
        assert!(gbnf.contains("root ::="), "{gbnf}");
        let space: Vec<&str> = gbnf
            .lines()
            .filter(|l| l.starts_with("space ::="))
            .collect();
        assert_eq!(space, ["space ::= \" \"?"], "{gbnf}");
        assert!(
            gbnf.contains("read_file") && gbnf.contains("DONE"),
            "{gbnf}"
        );
        assert!(
            gbnf.contains("response") && gbnf.contains("action_arguments"),
            "{gbnf}"
        );
    }
}
