//! The inference thread: one [`Worker`] per provider owns the weights and serves [`Job`]s in
//! order, generating each answer token by token (the grammar's mask, the copy bias, the
//! repetition penalty, the native format's first-token rule, the loop detector), sending
//! text pieces as they are complete and the stats when done.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use super::constrain::Grammars;
use super::copy_bias::{self, CopySource};
use super::native;
use super::sampling::{self, LoopDetector, PENALTY_WINDOW, Rng, Sampling};
use super::weights::{Chat, LoadError, Weights};
use super::{DECISION_REPEAT_PENALTY, LocalCallStats, LocalFinish, LocalSettings, NAME};
use crate::ProviderError;

/// What an answer may be.
pub(super) enum Mode {
    /// Free text (no tools offered).
    Text,
    /// Free text that opens with a letter or digit: the retry of a final answer the model
    /// wrote as a tool call (see [`native::is_call_text`]).
    Prose,
    /// One strict-JSON decision valid under this schema (the whole answer is constrained).
    Decision(String),
    /// The model's own tool-call format (`native`): free text, or a `<tool_call>` token
    /// followed by one call valid under this schema.
    Native(String),
}

/// One call for the inference thread.
pub(super) struct Job {
    /// The conversation: (role, content).
    pub(super) messages: Vec<(String, String)>,
    /// What the answer may be.
    pub(super) mode: Mode,
    /// The text argument values are copied from.
    pub(super) copy_from: CopySource,
    /// Most tokens to generate.
    pub(super) max_tokens: u32,
    /// Set when the caller gave up.
    pub(super) cancel: Arc<AtomicBool>,
    /// Pieces of generated text.
    pub(super) pieces: mpsc::Sender<String>,
    /// The result.
    pub(super) reply: oneshot::Sender<Result<Generated, ProviderError>>,
}

pub(super) enum Work {
    Generate(Box<Job>),
    /// Answered once every job sent before it is finished.
    Ping(oneshot::Sender<()>),
}

/// What a finished generation produced.
pub(super) struct Generated {
    pub(super) text: String,
    pub(super) stats: LocalCallStats,
}

/// The inference thread's state.
pub(super) struct Worker {
    weights: Weights,
    /// The model's chat format and tokenizer (a copy goes to the provider).
    pub(super) chat: Chat,
    grammars: Grammars,
    /// The context window in tokens.
    pub(super) context_size: u32,
    settings: LocalSettings,
    last: Arc<Mutex<Option<LocalCallStats>>>,
}

/// Why a generation loop ended, before the stats are made.
struct Outcome {
    tokens: Vec<u32>,
    finish: LocalFinish,
}

impl Worker {
    pub(super) fn load(
        path: &Path,
        settings: LocalSettings,
        last: Arc<Mutex<Option<LocalCallStats>>>,
    ) -> Result<Self, LoadError> {
        let weights = Weights::load(path)?;
        let chat = weights.chat.clone();
        let grammars = Grammars::new(Arc::clone(&chat.tokenizer), chat.end_of_turn)
            .map_err(LoadError::Grammars)?;
        let wanted = settings.context_size.unwrap_or(8192).max(256);
        let context_size = wanted.min(
            u32::try_from(weights.max_positions)
                .unwrap_or(u32::MAX)
                .max(256),
        );
        Ok(Worker {
            weights,
            chat,
            grammars,
            context_size,
            settings,
            last,
        })
    }

    pub(super) fn run(mut self, work: std_mpsc::Receiver<Work>) {
        for item in work {
            match item {
                Work::Ping(done) => {
                    let _ = done.send(());
                }
                Work::Generate(job) => {
                    let Job {
                        messages,
                        mode,
                        copy_from,
                        max_tokens,
                        cancel,
                        pieces,
                        reply,
                    } = *job;
                    let result =
                        self.generate(&messages, &mode, &copy_from, max_tokens, &cancel, &pieces);
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

    fn generate(
        &mut self,
        messages: &[(String, String)],
        mode: &Mode,
        copy_from: &CopySource,
        max_tokens: u32,
        cancel: &AtomicBool,
        pieces: &mpsc::Sender<String>,
    ) -> Result<Generated, ProviderError> {
        let failed = |message: String| ProviderError::Call {
            provider: NAME.into(),
            message,
        };
        let prompt = self.chat.render(messages);
        let n_ctx = usize::try_from(self.context_size).unwrap_or(usize::MAX);
        if prompt.len() + 1 >= n_ctx {
            return Err(ProviderError::ContextOverflow {
                provider: NAME.into(),
                prompt_tokens: u64::try_from(prompt.len()).unwrap_or(u64::MAX),
                context_size: u64::from(self.context_size),
            });
        }
        let compile = |schema: &str| {
            self.grammars.constraint(schema).map_err(|e| {
                failed(format!(
                    "the offered tools' argument schemas could not be turned into a grammar ({e}); simplify the tool schemas"
                ))
            })
        };
        let mut constraint = match mode {
            Mode::Decision(s) => Some(compile(s)?),
            Mode::Text | Mode::Prose | Mode::Native(_) => None,
        };
        // Native calls: the grammar starts at the `<tool_call>` token (compiled now, so a bad
        // schema fails before any work).
        let mut call_grammar = match (mode, self.chat.tool_call) {
            (Mode::Native(s), Some((open, _))) => Some((open, compile(s)?)),
            _ => None,
        };
        let prose_answer = matches!(mode, Mode::Prose);
        let started = Instant::now();
        let stats = |tokens: u64, finish, prompt_done: Instant| LocalCallStats {
            prompt_tokens: u64::try_from(prompt.len()).unwrap_or(u64::MAX),
            cached_prompt_tokens: 0,
            generated_tokens: tokens,
            finish,
            prompt_time: prompt_done.duration_since(started),
            generation_time: prompt_done.elapsed(),
        };
        if cancel.load(Ordering::SeqCst) {
            return Ok(Generated {
                text: String::new(),
                stats: stats(0, LocalFinish::Cancelled, Instant::now()),
            });
        }
        let mut logits = self
            .weights
            .forward(&prompt, 0)
            .map_err(|e| failed(format!("candle could not evaluate the prompt: {e}")))?;
        let prompt_done = Instant::now();

        let mut sampling = Sampling {
            temperature: self.settings.temperature,
            repeat_penalty: if constraint.is_some() {
                DECISION_REPEAT_PENALTY
            } else {
                self.settings.text_repeat_penalty
            },
        };
        let mut rng = Rng::new(self.settings.seed);
        let room = n_ctx.saturating_sub(prompt.len());
        let limit =
            usize::try_from(max_tokens.min(self.settings.max_output_tokens)).unwrap_or(usize::MAX);
        let mut loops = LoopDetector::default();
        let mut out: Vec<u32> = Vec::new();
        let mut text_bytes: Vec<u8> = Vec::new();
        let mut sent = 0usize;
        let tokenizer = Arc::clone(&self.chat.tokenizer);
        let ends = [self.chat.end_of_turn, tokenizer.eos];
        let outcome = loop {
            if cancel.load(Ordering::SeqCst) {
                break Outcome {
                    tokens: out,
                    finish: LocalFinish::Cancelled,
                };
            }
            if out.len() >= limit {
                break Outcome {
                    tokens: out,
                    finish: LocalFinish::MaxTokens,
                };
            }
            if out.len() + 1 >= room {
                break Outcome {
                    tokens: out,
                    finish: LocalFinish::ContextFull,
                };
            }
            let recent = &out[out.len().saturating_sub(PENALTY_WINDOW)..];
            sampling::penalize(&mut logits, recent, sampling.repeat_penalty);
            let token = match constraint.as_mut() {
                Some(c) => {
                    let step = c
                        .compute_mask()
                        .map_err(|e| failed(format!("constrained decoding failed: {e}")))?;
                    if step.is_stop() {
                        break Outcome {
                            tokens: out,
                            finish: LocalFinish::Done,
                        };
                    }
                    let mask = step.sample_mask.clone();
                    let allowed = |t: u32| mask.as_ref().is_none_or(|m| m.is_allowed(t));
                    if self.settings.copy_bias != 0.0 && copy_bias::at_argument_value(&text_bytes) {
                        let text_of = |t: u32| tokenizer.text_bytes_of(t);
                        copy_bias::favour_copies(
                            &mut logits,
                            &allowed,
                            &text_of,
                            copy_from,
                            self.settings.copy_bias,
                        );
                    }
                    let Some(token) = sampling::choose(&logits, Some(&allowed), sampling, &mut rng)
                    else {
                        break Outcome {
                            tokens: out,
                            finish: LocalFinish::Done,
                        };
                    };
                    let commit = c
                        .commit_token(Some(token))
                        .map_err(|e| failed(format!("constrained decoding failed: {e}")))?;
                    if ends.contains(&token) || tokenizer.is_control(token) {
                        break Outcome {
                            tokens: out,
                            finish: LocalFinish::Done,
                        };
                    }
                    if commit.stop {
                        out.push(token);
                        text_bytes.extend_from_slice(tokenizer.text_bytes_of(token));
                        break Outcome {
                            tokens: out,
                            finish: LocalFinish::Done,
                        };
                    }
                    token
                }
                None => {
                    // A native answer opens with the call token, with the call's JSON itself
                    // (what a model does that writes its calls without the token), or with
                    // prose: never with a code fence or other markup.
                    let mut json_start = None;
                    let opening = match call_grammar.as_mut() {
                        Some((open, grammar)) if out.is_empty() => {
                            let step = grammar
                                .compute_mask()
                                .map_err(|e| failed(format!("constrained decoding failed: {e}")))?;
                            json_start = step.sample_mask.clone();
                            Some(*open)
                        }
                        _ => None,
                    };
                    let starts_call = |t: u32| json_start.as_ref().is_some_and(|m| m.is_allowed(t));
                    let starts_answer = |t: u32| {
                        Some(t) == opening
                            || starts_call(t)
                            || native::opens_prose(tokenizer.text_bytes_of(t))
                    };
                    // A final answer of a model that calls tools in its own format (no tool
                    // offered now) is prose too: not a call written out as text.
                    let starts_prose = |t: u32| native::opens_prose(tokenizer.text_bytes_of(t));
                    let allowed: Option<&dyn Fn(u32) -> bool> = match opening {
                        Some(_) => Some(&starts_answer),
                        None if prose_answer && out.is_empty() => Some(&starts_prose),
                        None => None,
                    };
                    let Some(token) = sampling::choose(&logits, allowed, sampling, &mut rng) else {
                        break Outcome {
                            tokens: out,
                            finish: LocalFinish::Done,
                        };
                    };
                    if ends.contains(&token) || tokenizer.is_control(token) {
                        break Outcome {
                            tokens: out,
                            finish: LocalFinish::Done,
                        };
                    }
                    if Some(token) != opening
                        && starts_call(token)
                        && let Some((_, mut grammar)) = call_grammar.take()
                    {
                        // The call without its token: the grammar holds the rest of it.
                        grammar
                            .commit_token(Some(token))
                            .map_err(|e| failed(format!("constrained decoding failed: {e}")))?;
                        constraint = Some(grammar);
                        sampling.repeat_penalty = DECISION_REPEAT_PENALTY;
                    }
                    token
                }
            };
            let opens_call = call_grammar
                .as_ref()
                .is_some_and(|(open, _)| *open == token);
            out.push(token);
            if opens_call {
                let mut marker = [0u8; 4];
                text_bytes.extend_from_slice(native::CALL_OPEN.encode_utf8(&mut marker).as_bytes());
            } else {
                text_bytes.extend_from_slice(tokenizer.text_bytes_of(token));
            }
            if constraint.is_none()
                && let Some(keep) = loops.check(&out)
            {
                out.truncate(keep);
                break Outcome {
                    tokens: out,
                    finish: LocalFinish::Repetition,
                };
            }
            // Send what is complete UTF-8 so far (a character may span tokens).
            let complete = match std::str::from_utf8(&text_bytes[sent..]) {
                Ok(s) => s.len(),
                Err(e) => e.valid_up_to(),
            };
            if complete > 0 {
                let piece = String::from_utf8_lossy(&text_bytes[sent..sent + complete])
                    .replace(native::CALL_OPEN, "<tool_call>");
                sent += complete;
                if pieces.blocking_send(piece).is_err() {
                    // The caller is gone: nobody will read the answer.
                    break Outcome {
                        tokens: out,
                        finish: LocalFinish::Cancelled,
                    };
                }
            }
            let pos = prompt.len() + out.len() - 1;
            logits = self
                .weights
                .forward(&[token], pos)
                .map_err(|e| failed(format!("candle could not evaluate a token: {e}")))?;
            if opens_call && let Some((_, grammar)) = call_grammar.take() {
                // The trained layout puts the call's JSON on the next line: that newline is
                // written for the model, then the grammar holds the rest.
                for nl in tokenizer.encode("\n") {
                    out.push(nl);
                    text_bytes.extend_from_slice(tokenizer.text_bytes_of(nl));
                    let pos = prompt.len() + out.len() - 1;
                    logits = self
                        .weights
                        .forward(&[nl], pos)
                        .map_err(|e| failed(format!("candle could not evaluate a token: {e}")))?;
                }
                constraint = Some(grammar);
                sampling.repeat_penalty = DECISION_REPEAT_PENALTY;
            }
        };
        let text: Vec<u8> = outcome
            .tokens
            .iter()
            .flat_map(|t| tokenizer.text_bytes_of(*t).iter().copied())
            .collect();
        let stats = stats(
            u64::try_from(outcome.tokens.len()).unwrap_or(u64::MAX),
            outcome.finish,
            prompt_done,
        );
        tracing::debug!(
            prompt_tokens = stats.prompt_tokens,
            generated = stats.generated_tokens,
            finish = ?stats.finish,
            prompt_tps = stats.prompt_tokens_per_second(),
            generation_tps = stats.generation_tokens_per_second(),
            "local generation"
        );
        let mut text = String::from_utf8_lossy(&text).into_owned();
        if outcome.finish == LocalFinish::Repetition {
            text.truncate(text.trim_end().len());
        }
        Ok(Generated { text, stats })
    }
}
