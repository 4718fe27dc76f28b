//! The [`Sandbox`]: the one path from a tool call to a tool's code.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use crate::command::CommandPolicy;
use crate::output::cap_output;
use crate::paths::PathPolicy;
use crate::redactor::redact_secrets;
use crate::validate::Validator;
use crate::{
    Caller, ExecError, PermissionAsker, PermissionEvent, PermissionRequest, SandboxConfig,
    SandboxConfigError, ToolContext, ToolError, ToolEvent, ToolRegistry,
};

mod inspect;

pub use inspect::Inspection;

/// The result of one call through the sandbox. Never a panic, never an `Err` to unwrap.
#[derive(Debug)]
pub struct Execution {
    /// The tool's (capped, redacted) output, or why there is none.
    pub outcome: Result<String, ExecError>,
    /// Files the call wrote.
    pub artifacts: Vec<PathBuf>,
    /// The permission or policy decision, when one was made (a person was asked, or a policy
    /// check refused the call).
    pub permission: Option<PermissionEvent>,
    /// Side effects the tool reported for the run's records (empty unless it succeeded).
    pub events: Vec<ToolEvent>,
}

impl Execution {
    fn refused(err: ExecError, permission: Option<PermissionEvent>) -> Self {
        Execution {
            outcome: Err(err),
            artifacts: Vec::new(),
            permission,
            events: Vec::new(),
        }
    }
}

struct Prepared {
    validator: Validator,
    limiter: DefaultDirectRateLimiter,
}

/// Runs tool calls under a policy. Cheap to share (`Arc<Sandbox>`); all methods take `&self`.
pub struct Sandbox {
    config: SandboxConfig,
    registry: ToolRegistry,
    prepared: HashMap<String, Prepared>,
    paths: PathPolicy,
    commands: CommandPolicy,
    asker: Option<Arc<dyn PermissionAsker>>,
    env: Arc<[(String, String)]>,
    timeout: Duration,
    working_dir: PathBuf,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("config", &self.config)
            .field("registry", &self.registry)
            .field("has_asker", &self.asker.is_some())
            .finish()
    }
}

impl Sandbox {
    /// A sandbox over `registry` with this policy. `asker` is who decides when a call needs a
    /// person; with `None`, such calls are denied.
    ///
    /// # Errors
    /// When an allowlist folder cannot be resolved, a tool's schema does not compile, or a
    /// limit is zero.
    pub fn new(
        config: SandboxConfig,
        registry: ToolRegistry,
        asker: Option<Arc<dyn PermissionAsker>>,
    ) -> Result<Self, SandboxConfigError> {
        if !(config.timeout_seconds.is_finite() && config.timeout_seconds > 0.0) {
            return Err(SandboxConfigError::BadLimit {
                key: "timeout_seconds",
                value: config.timeout_seconds.to_string(),
                message: "must be a positive number of seconds".into(),
            });
        }
        let working_dir = match config
            .working_dir
            .clone()
            .or_else(|| config.allowed_write_paths.first().cloned())
            .or_else(|| config.allowed_read_paths.first().cloned())
        {
            Some(dir) => dir,
            None => std::env::current_dir().map_err(|e| SandboxConfigError::BadAllowlistPath {
                path: PathBuf::from("."),
                message: e.to_string(),
            })?,
        };
        let paths = PathPolicy::new(
            &config.allowed_read_paths,
            &config.allowed_write_paths,
            &working_dir,
        )?
        .protecting(&config.protected_paths);
        let commands = CommandPolicy::from_config(&config);
        // Under `exec_shell` the built-in `bash` says what it then runs: a shell line. (A
        // tool of another name, or another `bash`, keeps its own description.)
        let mut registry = registry;
        let builtin_bash = crate::builtin::Bash;
        if config.exec_shell
            && registry
                .get("bash")
                .is_some_and(|t| t.description() == crate::Tool::description(&builtin_bash))
        {
            registry.register(Arc::new(crate::builtin::ShellBash));
        }
        let mut prepared = HashMap::new();
        for tool in registry.iter() {
            let name = tool.name().to_string();
            let validator =
                Validator::new(&tool.parameters()).map_err(|e| SandboxConfigError::BadLimit {
                    key: "tool schema",
                    value: name.clone(),
                    message: e.to_string(),
                })?;
            let limit = config.rate_limit_for(&name);
            let calls = NonZeroU32::new(limit.calls).ok_or(SandboxConfigError::BadLimit {
                key: "rate_limit.calls",
                value: limit.calls.to_string(),
                message: "must be at least 1".into(),
            })?;
            if limit.per_seconds == 0 {
                return Err(SandboxConfigError::BadLimit {
                    key: "rate_limit.per_seconds",
                    value: "0".into(),
                    message: "must be at least 1".into(),
                });
            }
            let period = Duration::from_secs(limit.per_seconds) / limit.calls;
            let quota = Quota::with_period(period.max(Duration::from_nanos(1)))
                .ok_or(SandboxConfigError::BadLimit {
                    key: "rate_limit",
                    value: format!("{}/{}s", limit.calls, limit.per_seconds),
                    message: "window too small".into(),
                })?
                .allow_burst(calls);
            prepared.insert(
                name,
                Prepared {
                    validator,
                    limiter: RateLimiter::direct(quota),
                },
            );
        }
        let env = config
            .env_passthrough
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.clone(), v)))
            .collect::<Vec<_>>()
            .into();
        let timeout = Duration::from_secs_f64(config.timeout_seconds);
        // Commands run in, and relative paths resolve against, the same canonical folder.
        let working_dir = paths.working_dir().to_path_buf();
        Ok(Sandbox {
            paths,
            commands,
            prepared,
            asker,
            env,
            timeout,
            working_dir,
            registry,
            config,
        })
    }

    /// The tools this sandbox can run.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// The policy.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// The canonical folder commands run in and relative paths resolve against.
    pub fn working_dir(&self) -> &std::path::Path {
        &self.working_dir
    }

    /// How a program run on the harness's behalf outside any tool (a hook command) is
    /// confined: the same OS sandbox as the programs tools execute (read roots readable,
    /// write roots writable, no network unless allowed, the program's own folder readable).
    /// Err: why it must not run (confinement unavailable and `allow_unconfined_exec` off).
    ///
    /// # Errors
    /// As described.
    pub fn confinement_for(
        &self,
        program: &std::path::Path,
    ) -> Result<crate::confine::Confinement, crate::ConfinementUnavailable> {
        self.commands.confinement_for(program)
    }

    /// Run one anonymous call through every check, in the documented order. Tools see no
    /// [`ToolContext::caller`]; use [`Sandbox::execute_as`] to say who the call is for.
    pub async fn execute(&self, name: &str, args: &serde_json::Value) -> Execution {
        self.execute_inner(None, name, args).await
    }

    /// Run one call made for `caller` (an agent's run) through every check, in the documented
    /// order. The tool reads the caller from [`ToolContext::caller`].
    pub async fn execute_as(
        &self,
        caller: &Caller,
        name: &str,
        args: &serde_json::Value,
    ) -> Execution {
        self.execute_inner(Some(caller.clone()), name, args).await
    }

    /// What the call would change, for the permission question: the tool's
    /// [`Tool::preview`] over the validated arguments and confined paths, redacted. `None`
    /// when the arguments or a path would be refused (the checks after the gate say why), or
    /// the tool has nothing to show. Reads only, through the roots' handles.
    async fn preview(
        &self,
        tool: &Arc<dyn crate::Tool>,
        prepared: &Prepared,
        args: &serde_json::Value,
    ) -> Option<String> {
        prepared
            .validator
            .validate(args, self.config.max_string_arg_bytes)
            .ok()?;
        let mut paths = HashMap::new();
        for arg in tool.path_args() {
            if let Some(raw) = args.get(arg.name).and_then(serde_json::Value::as_str) {
                paths.insert(
                    arg.name.to_string(),
                    self.paths.confine(raw, arg.access).ok()?,
                );
            }
        }
        let ctx = ToolContext {
            args: args.clone(),
            paths,
            command: None,
            max_write_bytes: self.config.max_write_bytes,
            timeout: self.timeout,
            working_dir: self.working_dir.clone(),
            env: Arc::clone(&self.env),
            caller: None,
            permission_granted: false,
        };
        let tool = Arc::clone(tool);
        let preview = tokio::task::spawn_blocking(move || tool.preview(&ctx))
            .await
            .ok()
            .flatten()?;
        Some(redact_secrets(&preview).into_owned())
    }

    async fn execute_inner(
        &self,
        caller: Option<Caller>,
        name: &str,
        args: &serde_json::Value,
    ) -> Execution {
        let Some(tool) = self.registry.get(name) else {
            return Execution::refused(
                ExecError::UnknownTool {
                    name: name.to_string(),
                },
                None,
            );
        };
        let Some(prepared) = self.prepared.get(name) else {
            return Execution::refused(
                ExecError::UnknownTool {
                    name: name.to_string(),
                },
                None,
            );
        };
        let tool_name = name.to_string();
        let denied = |err: ExecError| {
            let event = PermissionEvent {
                tool_name: tool_name.clone(),
                allowed: false,
                reason: err.to_string(),
            };
            Execution::refused(err, Some(event))
        };

        // 1. Permission gate.
        let mut permission = None;
        if let Some(reason) = self.permission_reason(tool.as_ref()) {
            let decision = match &self.asker {
                None => crate::PermissionDecision::deny(format!(
                    "{reason}, and no one is available to approve it"
                )),
                Some(asker) => {
                    let preview = self.preview(tool, prepared, args).await;
                    asker
                        .ask(PermissionRequest {
                            tool_name: tool_name.clone(),
                            risk_level: tool.risk(),
                            reason: reason.clone(),
                            args_summary: args_summary(args),
                            preview,
                        })
                        .await
                }
            };
            if !decision.allowed {
                return denied(ExecError::PermissionDenied {
                    tool: tool_name.clone(),
                    reason: decision.reason,
                });
            }
            permission = Some(PermissionEvent {
                tool_name: tool_name.clone(),
                allowed: true,
                reason: decision.reason,
            });
        }

        // 2. Network policy.
        if tool.risk() == crate::RiskLevel::Network && !self.config.allow_url_access {
            return denied(ExecError::NetworkDenied {
                tool: tool_name.clone(),
            });
        }

        // 3. Arguments against the schema.
        if let Err(e) = prepared
            .validator
            .validate(args, self.config.max_string_arg_bytes)
        {
            return Execution::refused(
                ExecError::InvalidArguments {
                    tool: tool_name.clone(),
                    message: e.to_string(),
                },
                permission,
            );
        }

        // 4. Path allowlists for every declared path argument.
        let mut paths = HashMap::new();
        for arg in tool.path_args() {
            let raw = match args.get(arg.name) {
                // Optional and absent (`null` is how some models say absent); required ones
                // were checked by the schema.
                None | Some(serde_json::Value::Null) => continue,
                Some(raw) => raw,
            };
            let Some(raw) = raw.as_str() else {
                return Execution::refused(
                    ExecError::InvalidArguments {
                        tool: tool_name.clone(),
                        message: format!("'{}' must be a path string", arg.name),
                    },
                    permission,
                );
            };
            match self.paths.confine(raw, arg.access) {
                Ok(resolved) => {
                    paths.insert(arg.name.to_string(), resolved);
                }
                Err(reason) => {
                    return denied(ExecError::PathDenied {
                        tool: tool_name.clone(),
                        path: raw.to_string(),
                        reason: reason.to_string(),
                    });
                }
            }
        }

        // 5. Command policy.
        let mut command = None;
        if let Some(arg) = tool.command_arg() {
            let line = args
                .get(arg)
                .and_then(serde_json::Value::as_str)
                .unwrap_or("");
            match self.commands.check(line, &self.paths) {
                Ok(checked) => command = Some(checked),
                Err(reason) => {
                    return denied(ExecError::CommandDenied {
                        tool: tool_name.clone(),
                        reason: reason.to_string(),
                    });
                }
            }
        }

        // 6. Rate limit.
        if prepared.limiter.check().is_err() {
            let limit = self.config.rate_limit_for(name);
            return denied(ExecError::RateLimited {
                tool: tool_name.clone(),
                calls: limit.calls,
                per_seconds: limit.per_seconds,
            });
        }

        // 7. The runner: timeout, contained panics, capped and redacted output.
        let ctx = ToolContext {
            args: args.clone(),
            paths,
            command,
            max_write_bytes: self.config.max_write_bytes,
            timeout: self.timeout,
            working_dir: self.working_dir.clone(),
            env: Arc::clone(&self.env),
            caller,
            permission_granted: permission.is_some(),
        };
        let run = std::panic::AssertUnwindSafe(tool.execute(ctx)).catch_unwind();
        // A tool that waits for a person is bounded by the interaction channel's own timeout;
        // one that runs an agent, by that run's budget.
        let timed = if tool.bounds_itself() {
            Ok(run.await)
        } else {
            tokio::time::timeout(self.timeout, run).await
        };
        let outcome = match timed {
            Err(_) | Ok(Ok(Err(ToolError::TimedOut))) => Err(ExecError::Timeout {
                tool: tool_name.clone(),
                seconds: self.config.timeout_seconds,
            }),
            Ok(Err(panic)) => Err(ExecError::Panicked {
                tool: tool_name.clone(),
                message: panic_message(panic.as_ref()),
            }),
            Ok(Ok(Err(source))) => Err(ExecError::Failed {
                tool: tool_name.clone(),
                source,
            }),
            Ok(Ok(Ok(output))) => {
                // The tool's own text unless something in it was redacted: a copy of the
                // whole output only when it changed.
                let redacted = match redact_secrets(&output.text) {
                    std::borrow::Cow::Owned(redacted) => Some(redacted),
                    std::borrow::Cow::Borrowed(_) => None,
                };
                let text = cap_output(
                    redacted.unwrap_or(output.text),
                    self.config.max_output_bytes,
                );
                // Events go to the records verbatim otherwise: redact them like the output.
                let events = output
                    .events
                    .into_iter()
                    .map(|mut e| {
                        redact_json(&mut e.data);
                        e
                    })
                    .collect();
                return Execution {
                    outcome: Ok(text),
                    artifacts: output.artifacts,
                    permission,
                    events,
                };
            }
        };
        Execution {
            outcome,
            artifacts: Vec::new(),
            permission,
            events: Vec::new(),
        }
    }

    /// Why this tool needs a person's permission, or `None` when it does not.
    fn permission_reason(&self, tool: &dyn crate::Tool) -> Option<String> {
        let name = tool.name();
        if let Some(&required) = self.config.require_user_permission.get(name) {
            return required.then(|| format!("sandbox.require_user_permission.{name} is set"));
        }
        if let Some(&required) = self.config.require_permission_by_risk.get(&tool.risk()) {
            return required
                .then(|| format!("sandbox.require_permission_by_risk.{} is set", tool.risk()));
        }
        tool.needs_permission()
            .then(|| format!("tool '{name}' needs permission by default"))
    }
}

/// Redact secrets in every string of `value`.
fn redact_json(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => {
            if let std::borrow::Cow::Owned(clean) = redact_secrets(s) {
                *s = clean;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_json),
        serde_json::Value::Object(map) => map.values_mut().for_each(redact_json),
        _ => {}
    }
}

/// Sorted-key JSON of the arguments, at most 500 characters.
fn args_summary(args: &serde_json::Value) -> String {
    // Sorted explicitly: with serde_json's `preserve_order` feature (which any crate in the
    // build can switch on) maps keep insertion order.
    let text = sorted_keys(args).to_string();
    if text.chars().count() <= 500 {
        return text;
    }
    let mut cut: String = text.chars().take(497).collect();
    cut.push_str("...");
    cut
}

fn sorted_keys(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            serde_json::Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted_keys(v)))
                    .collect(),
            )
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(sorted_keys).collect())
        }
        other => other.clone(),
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "no message".to_string()
    }
}
