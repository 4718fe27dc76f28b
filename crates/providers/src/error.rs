//! [`ProviderError`]: why a model call failed, and what to do about it.

/// The shortest key [`ProviderError::without_secret`] removes; the same minimum as the
/// program's redactor (`lsm_sandbox::MIN_SECRET_LEN`), which this crate cannot name.
pub(crate) const MIN_SCRUBBED_SECRET_LEN: usize = 8;

/// Why a provider call failed. Each variant says how to recover.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The scripted provider has no response left for this call. Add lines to the script, or
    /// lower `--max-iterations`.
    #[error(
        "the script {source_name} has no response left for call {call} (it holds {available}); add a line to the script or lower --max-iterations"
    )]
    ScriptExhausted {
        /// Where the script came from.
        source_name: String,
        /// The 1-based number of the call that found nothing.
        call: usize,
        /// How many responses the script holds.
        available: usize,
    },
    /// A script line could not be parsed. Fix that line.
    #[error("{source_name}, line {line}: {message}")]
    ScriptMalformed {
        /// Where the script came from.
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// The script file could not be read. Check the path given to `--provider scripted:<file>`.
    #[error("cannot read the script {path}: {message}")]
    ScriptUnreadable {
        /// The path.
        path: String,
        /// The OS error.
        message: String,
    },
    /// Any other failure of the call, with the provider's explanation.
    #[error("{provider} call failed: {message}")]
    Call {
        /// Provider name.
        provider: String,
        /// What happened and what to do.
        message: String,
    },
    /// The provider configuration is incomplete or inconsistent (no model, a `compatible`
    /// provider without `base_url`, an unparsable URL). Fix the named setting.
    #[error("{provider}: {message}")]
    Config {
        /// Provider name.
        provider: String,
        /// What is wrong and which setting fixes it.
        message: String,
    },
    /// The API key's environment variable is not set (or empty). Export it: keys are only ever
    /// read from the environment.
    #[error(
        "{provider}: the API key variable {env_var} is not set; export {env_var}=<your key> (keys are read only from the environment)"
    )]
    MissingApiKey {
        /// Provider name.
        provider: String,
        /// The variable that should hold the key.
        env_var: String,
    },
    /// The server refused the request as malformed (HTTP 400). Its message says which field;
    /// usually a model that does not support an option, or a context that is too long.
    #[error("{provider}: the server rejected the request (400 Bad Request): {message}")]
    BadRequest {
        /// Provider name.
        provider: String,
        /// The server's own error message.
        message: String,
    },
    /// The key was refused (HTTP 401 or 403). Check the key in the named variable, and that it
    /// may use this model.
    #[error(
        "{provider}: the API key in {env_var} was refused ({status}): {message}; check the key and its access to this model"
    )]
    Auth {
        /// Provider name.
        provider: String,
        /// 401 or 403.
        status: u16,
        /// The variable the key came from (or a note that no key was sent).
        env_var: String,
        /// The server's message.
        message: String,
    },
    /// HTTP 404: the model is unknown to the server, or `base_url` does not point at the API.
    /// Check `[llm] model` and `[llm] base_url` (an OpenAI-compatible server usually ends in
    /// `/v1`).
    #[error(
        "{provider}: {url} answered 404 Not Found for model '{model}': {message}; the model is unknown to this server or base_url is wrong (OpenAI-compatible servers usually end in /v1)"
    )]
    NotFound {
        /// Provider name.
        provider: String,
        /// The model asked for.
        model: String,
        /// The URL that was called.
        url: String,
        /// The server's message.
        message: String,
    },
    /// The server answered an error status that retries did not cure (429 rate limit, 5xx), or
    /// another unexpected status. Wait and try again, lower the request rate, or check the
    /// provider's status page.
    #[error("{provider}: the server answered {status} after {attempts} attempt(s): {message}")]
    Status {
        /// Provider name.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// The server's message.
        message: String,
        /// How many requests were made.
        attempts: u32,
        /// Whether a later retry might succeed (429, 5xx).
        retryable: bool,
        /// The server's `Retry-After` / `retry-after-ms`, in milliseconds, if it sent one.
        retry_after_ms: Option<u64>,
    },
    /// The server could not be reached (refused, reset, DNS). Check `base_url` and that the
    /// server is running.
    #[error("{provider}: cannot reach {url} after {attempts} attempt(s): {message}")]
    Connect {
        /// Provider name.
        provider: String,
        /// The URL that was called.
        url: String,
        /// What the network layer said.
        message: String,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The server's host name could not be resolved (DNS). Not retried: a name that does not
    /// resolve now will not resolve in two seconds either, and a typo in `base_url` should
    /// be reported at once, not after every backoff.
    #[error(
        "{provider}: cannot resolve the host of {url} ({message}); check base_url and the network's DNS (not retried)"
    )]
    UnknownHost {
        /// Provider name.
        provider: String,
        /// The URL that was called.
        url: String,
        /// What the resolver said.
        message: String,
    },
    /// The server did not connect or answer in time. Raise `connect_timeout_seconds` /
    /// `read_timeout_seconds`, or check the server's load.
    #[error("{provider}: {url} timed out ({what}) after {attempts} attempt(s)")]
    Timeout {
        /// Provider name.
        provider: String,
        /// The URL that was called.
        url: String,
        /// Which timeout expired.
        what: String,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The server's answer could not be understood: not JSON, cut off before its end, or
    /// missing what the API promises. Usually a proxy or an incompatible server; check
    /// `base_url` and the provider kind.
    #[error("{provider}: malformed response: {message}")]
    Malformed {
        /// Provider name.
        provider: String,
        /// What was wrong with it.
        message: String,
    },
    /// The server no longer knows the `previous_response_id` the call chained from (OpenAI
    /// Responses). The client retries once with the full history; seeing this error means
    /// that retry failed too. Start the context afresh.
    #[error("{provider}: the previous response {response_id} is unknown to the server: {message}")]
    PreviousResponseNotFound {
        /// Provider name.
        provider: String,
        /// The id the call chained from.
        response_id: String,
        /// The server's message.
        message: String,
    },
    /// The local model file could not be used: missing, not a GGUF model this provider can run,
    /// or too large for memory. Check the path in `[llm] model_path` (or `--model`), or run
    /// `cargo xtask fetch-model` to download the default model.
    #[error("cannot use the model file {path}: {message}")]
    ModelFile {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The run's budget (tokens or `max_cost_usd`) has no room for this call, so it was not
    /// made. Not retryable: no further model call is possible in the run. Raise the run's
    /// budget (`--max-tokens-budget`, `[agents] max_tokens_budget`, `max_cost_usd`) to do more.
    #[error("budget exhausted: {reason}; no further model calls are possible in this run")]
    BudgetExhausted {
        /// Which ceiling is reached (with its value).
        reason: String,
    },
    /// The prompt does not fit in the local model's context window. Raise `[llm]
    /// context_size` (up to the model's training context), or keep the history shorter
    /// (`[agents] context_window_strategy = "compact"`, fewer iterations, smaller files).
    #[error(
        "{provider}: the prompt has {prompt_tokens} tokens and does not fit in the context window of {context_size}; raise [llm] context_size or shorten the history"
    )]
    ContextOverflow {
        /// Provider name.
        provider: String,
        /// Tokens in the prompt.
        prompt_tokens: u64,
        /// The context window.
        context_size: u64,
    },
}

/// The run's budget refused the call (no request was made): what a budgeted provider
/// returns.
impl From<lsm_run::BudgetExhausted> for ProviderError {
    fn from(e: lsm_run::BudgetExhausted) -> Self {
        ProviderError::BudgetExhausted { reason: e.reason }
    }
}

impl ProviderError {
    /// Whether retrying the same request later might succeed: rate limits, server errors,
    /// connection failures and timeouts.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Status { retryable, .. } => *retryable,
            ProviderError::Connect { .. } | ProviderError::Timeout { .. } => true,
            _ => false,
        }
    }

    /// Whether the conversation chain the call continued (`previous_response_id`) is gone, so
    /// the caller must forget the stored response id.
    pub fn breaks_chain(&self) -> bool {
        matches!(self, ProviderError::PreviousResponseNotFound { .. })
    }

    /// Whether the call was refused because the run's budget is spent (no call was made).
    pub fn is_budget_exhausted(&self) -> bool {
        matches!(self, ProviderError::BudgetExhausted { .. })
    }

    /// The server's requested wait before a retry, if it sent one.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            ProviderError::Status {
                retry_after_ms: Some(ms),
                ..
            } => Some(std::time::Duration::from_millis(*ms)),
            _ => None,
        }
    }

    /// This error with every occurrence of `secret` in its text replaced by `[REDACTED]`.
    ///
    /// Servers echo a refused key in their error bodies (OpenAI's 401 names the key it got),
    /// and the message of every error built from a response lands in logs, records and the
    /// terminal: the provider that knows its key removes it here, where the error is made.
    /// Values shorter than [`MIN_SCRUBBED_SECRET_LEN`] are left alone, so a test's one-letter
    /// key does not blank out that letter in every message.
    pub(crate) fn without_secret(mut self, secret: &str) -> Self {
        let secret = secret.trim();
        if secret.chars().count() < MIN_SCRUBBED_SECRET_LEN {
            return self;
        }
        for text in self.texts_mut() {
            if text.contains(secret) {
                *text = text.replace(secret, "[REDACTED]");
            }
        }
        self
    }

    /// Every free-text field of the error (names, URLs, messages).
    fn texts_mut(&mut self) -> Vec<&mut String> {
        match self {
            ProviderError::ScriptExhausted { source_name, .. } => vec![source_name],
            ProviderError::ScriptMalformed {
                source_name,
                message,
                ..
            } => vec![source_name, message],
            ProviderError::ScriptUnreadable { path, message }
            | ProviderError::ModelFile { path, message } => vec![path, message],
            ProviderError::Call { provider, message }
            | ProviderError::Config { provider, message }
            | ProviderError::BadRequest { provider, message }
            | ProviderError::Status {
                provider, message, ..
            }
            | ProviderError::Malformed { provider, message } => vec![provider, message],
            ProviderError::MissingApiKey { provider, env_var } => vec![provider, env_var],
            ProviderError::Auth {
                provider,
                env_var,
                message,
                ..
            } => vec![provider, env_var, message],
            ProviderError::NotFound {
                provider,
                model,
                url,
                message,
            } => vec![provider, model, url, message],
            ProviderError::Connect {
                provider,
                url,
                message,
                ..
            }
            | ProviderError::UnknownHost {
                provider,
                url,
                message,
            } => vec![provider, url, message],
            ProviderError::Timeout {
                provider,
                url,
                what,
                ..
            } => vec![provider, url, what],
            ProviderError::PreviousResponseNotFound {
                provider,
                response_id,
                message,
            } => vec![provider, response_id, message],
            ProviderError::ContextOverflow { provider, .. } => vec![provider],
            ProviderError::BudgetExhausted { reason } => vec![reason],
        }
    }

    /// Record how many attempts were made (retryable variants only).
    pub(crate) fn with_attempts(mut self, n: u32) -> Self {
        match &mut self {
            ProviderError::Status { attempts, .. }
            | ProviderError::Connect { attempts, .. }
            | ProviderError::Timeout { attempts, .. } => *attempts = n,
            _ => {}
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_refusal_is_not_retryable_and_says_no_further_calls_are_possible() {
        let e = ProviderError::BudgetExhausted {
            reason: "the run's token budget (300) is spent".into(),
        };
        assert!(!e.is_retryable());
        assert!(e.is_budget_exhausted());
        assert_eq!(
            e.to_string(),
            "budget exhausted: the run's token budget (300) is spent; no further model calls are possible in this run"
        );
    }

    #[test]
    fn the_runs_budget_refusal_is_a_budget_exhausted_error() {
        let e = ProviderError::from(lsm_run::BudgetExhausted {
            reason: "the run's token budget (300) is spent".into(),
        });
        assert!(e.is_budget_exhausted());
        assert!(!e.is_retryable());
        assert_eq!(
            e.to_string(),
            "budget exhausted: the run's token budget (300) is spent; no further model calls are possible in this run"
        );
    }
}
