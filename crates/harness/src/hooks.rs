//! Hooks: code outside the loop that is told of a run's moments and may weigh in on some.
//!
//! - `pre_tool` — before a permitted call runs; may deny it with a reason the model sees.
//! - `post_tool` — after a call's result is recorded; observes, may add a note to the result.
//! - `agent_stop` — when the model answers without a tool call; may block the stop with a
//!   reason (the model continues), at most `agent_stop_max_blocks` times in a phase — then
//!   the stop proceeds and the transcript records it as forced.
//! - `run_start`, `run_end` — observe.
//!
//! Two ways in: the [`Hook`] trait (`AgentHarness::with_hook`, [`crate::RunSeams::hooks`])
//! and external commands ([`CommandHook`], `[[hooks.<point>]]` in `lsm.toml`). The driver
//! runs the hooks ([`run_hooks`], here); the pure core decides on their answers and records
//! them as one `hook_decision` event, so a resumed run replays a decision and never runs its
//! hooks again. The data of both sides ([`HookEvent`], [`HookRun`], …) is lsm-run's
//! ([`lsm_run::hooks`]).
//! A hook cannot touch the budget or the sandbox: it sees a JSON description of the moment
//! and answers allow, deny (block), a note, or fails.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lsm_run::SettingError;
use lsm_sandbox::{Confinement, Sandbox};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

pub use lsm_run::hooks::{
    DEFAULT_AGENT_STOP_MAX_BLOCKS, Hook, HookAnswer, HookEvent, HookPoint, HookRun,
};

/// Run the hooks of `hooks` that match `event` in order; stop at the first that refuses (at
/// a point that decides).
pub async fn run_hooks(hooks: &[Arc<dyn Hook>], event: &HookEvent) -> Vec<HookRun> {
    let mut runs = Vec::new();
    for hook in hooks
        .iter()
        .filter(|h| h.matches(event.hook, event.tool.as_deref()))
    {
        let run = HookRun::of(hook.as_ref(), hook.call(event).await);
        let refused = run.refusal(event.hook).is_some();
        if run.outcome == "failed" {
            tracing::warn!(hook = %run.name, point = event.hook.as_str(), "hook failed: {}", run.message.as_deref().unwrap_or(""));
        }
        runs.push(run);
        if refused {
            break;
        }
    }
    runs
}

/// Default time limit of a command hook.
pub const DEFAULT_HOOK_TIMEOUT_SECONDS: f64 = 30.0;

/// One `[[hooks.<point>]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandHookConfig {
    /// The program and its arguments (no shell). A program given by a relative path is
    /// found from the sandbox's working directory; a bare name on `PATH`.
    pub command: Vec<String>,
    /// Only for calls of these tools (`pre_tool`, `post_tool`); all when absent.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Time limit in seconds (default 30); a hook that takes longer is killed and failed.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: f64,
    /// A failure lets the run go on instead of refusing (default `false`).
    #[serde(default)]
    pub fail_open: bool,
}

fn default_timeout() -> f64 {
    DEFAULT_HOOK_TIMEOUT_SECONDS
}

fn default_max_blocks() -> u32 {
    DEFAULT_AGENT_STOP_MAX_BLOCKS
}

/// `[hooks]` in `lsm.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HooksConfig {
    /// How often `agent_stop` hooks may block a stop in one phase before it is forced.
    #[serde(default = "default_max_blocks")]
    pub agent_stop_max_blocks: u32,
    /// `[[hooks.pre_tool]]`.
    pub pre_tool: Vec<CommandHookConfig>,
    /// `[[hooks.post_tool]]`.
    pub post_tool: Vec<CommandHookConfig>,
    /// `[[hooks.agent_stop]]`.
    pub agent_stop: Vec<CommandHookConfig>,
    /// `[[hooks.run_start]]`.
    pub run_start: Vec<CommandHookConfig>,
    /// `[[hooks.run_end]]`.
    pub run_end: Vec<CommandHookConfig>,
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            agent_stop_max_blocks: DEFAULT_AGENT_STOP_MAX_BLOCKS,
            pre_tool: Vec::new(),
            post_tool: Vec::new(),
            agent_stop: Vec::new(),
            run_start: Vec::new(),
            run_end: Vec::new(),
        }
    }
}

impl HooksConfig {
    /// Every entry, with the moment it belongs to.
    fn entries(&self) -> impl Iterator<Item = (HookPoint, usize, &CommandHookConfig)> {
        [
            (HookPoint::PreTool, &self.pre_tool),
            (HookPoint::PostTool, &self.post_tool),
            (HookPoint::AgentStop, &self.agent_stop),
            (HookPoint::RunStart, &self.run_start),
            (HookPoint::RunEnd, &self.run_end),
        ]
        .into_iter()
        .flat_map(|(point, entries)| {
            entries
                .iter()
                .enumerate()
                .map(move |(i, entry)| (point, i, entry))
        })
    }

    /// Check every entry: a program named, a positive timeout. Done when the configuration
    /// is loaded, so a mistake is reported before anything runs.
    ///
    /// # Errors
    /// The first bad entry, named (`[[hooks.pre_tool]] entry 2: ...`).
    pub fn validate(&self) -> Result<(), SettingError> {
        for (point, i, entry) in self.entries() {
            let at = format!("[[hooks.{}]] entry {}", point.as_str(), i + 1);
            if entry.command.first().is_none_or(|p| p.trim().is_empty()) {
                return Err(SettingError::HookWithoutProgram { at });
            }
            if !(entry.timeout_seconds.is_finite() && entry.timeout_seconds > 0.0) {
                return Err(SettingError::HookTimeout { at });
            }
        }
        Ok(())
    }

    /// Every configured command hook, run inside `sandbox`'s OS confinement.
    ///
    /// # Errors
    /// As [`HooksConfig::validate`].
    pub fn command_hooks(
        &self,
        sandbox: &Arc<Sandbox>,
    ) -> Result<Vec<Arc<dyn Hook>>, SettingError> {
        self.validate()?;
        Ok(self
            .entries()
            .map(|(point, _, entry)| {
                Arc::new(CommandHook {
                    point,
                    config: entry.clone(),
                    sandbox: Arc::clone(sandbox),
                }) as Arc<dyn Hook>
            })
            .collect())
    }
}

/// An external command as a hook: the event as JSON on stdin; exit code 0 allows (stdout
/// may hold `{"note": "..."}` for `post_tool`), 2 denies or blocks (the reason is stdout's
/// `{"reason": "..."}` or else stderr), anything else is a failure. Run without a shell,
/// inside the sandbox's OS confinement, with a clean environment (`PATH` only) and a
/// time limit.
pub struct CommandHook {
    point: HookPoint,
    config: CommandHookConfig,
    sandbox: Arc<Sandbox>,
}

impl std::fmt::Debug for CommandHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandHook")
            .field("point", &self.point)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What a hook may print on stdout.
#[derive(Debug, Default, Deserialize)]
struct HookOutput {
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// Longest reason or note taken from a hook, in characters.
const MAX_HOOK_TEXT: usize = 2000;

fn bounded(text: &str) -> String {
    lsm_phase::text::truncate_chars(text.trim(), MAX_HOOK_TEXT)
}

impl CommandHook {
    /// The file that will run: a path (relative to the working directory) or a name on PATH.
    fn program(&self, argv0: &str) -> Option<PathBuf> {
        if argv0.contains('/') {
            let p = Path::new(argv0);
            let p = if p.is_absolute() {
                p.to_path_buf()
            } else {
                self.sandbox.working_dir().join(p)
            };
            return p.is_file().then_some(p);
        }
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(argv0))
                .find(|p| p.is_file())
        })
    }

    async fn run(&self, event: &HookEvent) -> Result<HookAnswer, HookFailure> {
        let Some((argv0, args)) = self.config.command.split_first() else {
            return Err(HookFailure::NoCommand);
        };
        let program = self.program(argv0).ok_or_else(|| HookFailure::NotFound {
            program: argv0.clone(),
        })?;
        let program_str = program
            .to_str()
            .ok_or_else(|| HookFailure::NonUtf8 {
                program: argv0.clone(),
            })?
            .to_string();
        let timeout = Duration::from_secs_f64(self.config.timeout_seconds);
        let mut command = match self
            .sandbox
            .confinement_for(&program)
            .map_err(|e| HookFailure::Unconfinable(e.to_string()))?
        {
            Confinement::Confined(confined) => tokio::process::Command::from(confined.command(
                &program_str,
                args,
                timeout,
                self.sandbox.config().max_write_bytes,
            )),
            Confinement::Unconfined(reason) => {
                tracing::warn!(hook = %self.name(), "hook runs unconfined: {reason}");
                let mut c = tokio::process::Command::new(&program);
                c.args(args);
                c
            }
        };
        command.env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        command
            .current_dir(self.sandbox.working_dir())
            .kill_on_drop(true)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn().map_err(|source| HookFailure::Start {
            program: argv0.clone(),
            source: Arc::new(source),
        })?;
        let input = serde_json::to_vec(event).map_err(|e| HookFailure::Encode(Arc::new(e)))?;
        let output = tokio::time::timeout(timeout, async move {
            if let Some(mut stdin) = child.stdin.take() {
                // A hook that does not read its stdin is not a failure.
                let _ = stdin.write_all(&input).await;
                drop(stdin);
            }
            child.wait_with_output().await
        })
        .await
        .map_err(|_| HookFailure::TimedOut {
            seconds: self.config.timeout_seconds,
        })?
        .map_err(|e| HookFailure::Wait(Arc::new(e)))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let parsed: HookOutput = if stdout.trim().is_empty() {
            HookOutput::default()
        } else {
            serde_json::from_str(stdout.trim()).unwrap_or_default()
        };
        match output.status.code() {
            Some(0) => Ok(match parsed.note {
                Some(note) if self.point == HookPoint::PostTool => HookAnswer::Note(bounded(&note)),
                _ => HookAnswer::Allow,
            }),
            Some(2) => {
                let reason = parsed
                    .reason
                    .filter(|r| !r.trim().is_empty())
                    .unwrap_or_else(|| stderr.to_string());
                Ok(HookAnswer::Deny(bounded(&reason)))
            }
            Some(code) => Err(HookFailure::Exited {
                code,
                stderr: bounded(&stderr),
            }),
            None => Err(HookFailure::Killed {
                stderr: bounded(&stderr),
            }),
        }
    }
}

/// Why a command hook gave no answer. The run records it as the hook's failure (`hook '…'
/// <reason>`) and goes on as `fail_open` says: fix the command, or its settings in
/// `[[hooks.…]]`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HookFailure {
    /// `command = []`.
    #[error("has no command")]
    NoCommand,
    /// The program is neither a path to a file nor on `PATH`.
    #[error("names the program '{program}', which was not found")]
    NotFound {
        /// The program as configured.
        program: String,
    },
    /// The program's path is not UTF-8, so the sandbox helper cannot be given it.
    #[error("names the program '{program}', whose path is not UTF-8")]
    NonUtf8 {
        /// The program as configured.
        program: String,
    },
    /// The OS sandbox hooks run in is unavailable, and running unconfined is not accepted.
    #[error("cannot run: {0}")]
    Unconfinable(String),
    /// The program did not start.
    #[error("could not start '{program}': {source}")]
    Start {
        /// The program as configured.
        program: String,
        /// Why.
        source: Arc<std::io::Error>,
    },
    /// The event could not be written as JSON (a bug, not a property of the hook).
    #[error("could not be given its event: {0}")]
    Encode(Arc<serde_json::Error>),
    /// The hook ran past `timeout_seconds`.
    #[error("timed out after {seconds} seconds (timeout_seconds) and was killed")]
    TimedOut {
        /// The limit.
        seconds: f64,
    },
    /// Waiting for the hook failed.
    #[error("could not be waited for: {0}")]
    Wait(Arc<std::io::Error>),
    /// The hook exited with a status other than 0 (allow) or 2 (deny).
    #[error("exited with status {code}: {stderr}")]
    Exited {
        /// Its exit status.
        code: i32,
        /// The start of its stderr.
        stderr: String,
    },
    /// The hook was killed by a signal.
    #[error("was killed by a signal: {stderr}")]
    Killed {
        /// The start of its stderr.
        stderr: String,
    },
}

#[async_trait::async_trait]
impl Hook for CommandHook {
    fn name(&self) -> String {
        self.config.command.join(" ")
    }

    fn matches(&self, point: HookPoint, tool: Option<&str>) -> bool {
        point == self.point
            && match (&self.config.tools, tool) {
                (Some(tools), Some(tool)) => tools.iter().any(|t| t == tool),
                (Some(_), None) => false,
                (None, _) => true,
            }
    }

    fn fail_open(&self) -> bool {
        self.config.fail_open
    }

    async fn call(&self, event: &HookEvent) -> HookAnswer {
        match self.run(event).await {
            Ok(answer) => answer,
            Err(e) => HookAnswer::Failed(format!("hook '{}' {e}", self.name())),
        }
    }
}
