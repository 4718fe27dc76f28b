//! `bash`: run one checked program, without a shell — or, with `exec_shell`, a shell line.
//!
//! The name is what models expect; by default the behaviour is deliberately less than a
//! shell's. The sandbox has already parsed and checked the command line
//! ([`crate::CheckedCommand`]; with `exec_shell`, `/bin/sh -c` and the line, its first
//! program checked); this tool only executes it with a scrubbed environment, bounded output,
//! and the call's timeout, after which every process the call started has ended.

use std::process::{ExitStatus, Stdio};

use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::{parse_args, run_blocking};
use crate::confine::{self, Confinement};
use crate::{Redirect, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, WriteMode, schema_for};

/// Most bytes of stdout (and of stderr) kept; past it the pipe is closed, which stops a
/// program that writes without end (`yes`) instead of letting it run to the timeout.
const MAX_CAPTURE_BYTES: usize = 4 * 1024 * 1024;

/// `bash`: run a program.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bash;

/// Arguments of `bash`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// One program and its arguments, e.g. `grep -rn TODO src`, optionally with `< in.txt`,
    /// `> out.txt` or `>> out.txt`. No shell runs it: pipes, `;`, `&&`, `$VAR`, backticks
    /// and globs are not available.
    pub command: String,
}

/// `bash` when `exec_shell` is on: the same tool, described as the shell it then is. The
/// sandbox puts it in place of the built-in [`Bash`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ShellBash;

/// Arguments of `bash` under `exec_shell`: only its schema is used (the model reads its
/// description); the call is read as [`BashArgs`], which has the same field.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    dead_code,
    reason = "only the schema is used; calls are read as BashArgs"
)]
pub struct ShellArgs {
    /// A command line for `/bin/sh`, e.g. `cargo test 2>&1 | tail -n 20`. Pipes, `&&`, globs,
    /// variables and redirections work; it runs inside the OS sandbox (the allowed folders
    /// only, no network unless allowed), and every process it starts ends with the call.
    pub command: String,
}

#[async_trait::async_trait]
impl Tool for ShellBash {
    fn name(&self) -> &str {
        "bash"
    }
    fn description(&self) -> &str {
        "Run a shell command line with /bin/sh in the working directory, inside the OS sandbox: pipes, &&, globs, variables and redirections work; files outside the allowed folders and the network (unless allowed) are out of reach."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<ShellArgs>()
    }
    fn risk(&self) -> RiskLevel {
        Bash.risk()
    }
    fn needs_permission(&self) -> bool {
        Bash.needs_permission()
    }
    fn command_arg(&self) -> Option<&'static str> {
        Bash.command_arg()
    }
    fn bounds_itself(&self) -> bool {
        Bash.bounds_itself()
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Bash.execute(ctx).await
    }
}

#[async_trait::async_trait]
impl Tool for Bash {
    fn name(&self) -> &str {
        "bash"
    }
    fn description(&self) -> &str {
        "Run one program with arguments in the working directory, without a shell (no pipes, chaining, variables or globs); '<', '>' and '>>' redirect to files."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<BashArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::Exec
    }
    fn needs_permission(&self) -> bool {
        true
    }
    fn command_arg(&self) -> Option<&'static str> {
        Some("command")
    }
    /// The call's timeout is enforced here, so that every process the call started has ended
    /// when the call returns (see [`end_call`]).
    fn bounds_itself(&self) -> bool {
        true
    }

    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: BashArgs = parse_args(&ctx)?;
        let checked = ctx.command()?;
        tracing::debug!(command = %args.command, program = %checked.program, "running");
        let (mut command, unconfined) = match &checked.confinement {
            Confinement::Confined(confined) => {
                tracing::debug!(confinement = confined.description(), "confined");
                let command = confined.command(
                    &checked.program,
                    &checked.args,
                    ctx.timeout,
                    ctx.max_write_bytes,
                );
                (tokio::process::Command::from(command), None)
            }
            Confinement::Unconfined(reason) => {
                let mut command = tokio::process::Command::new(&checked.program);
                command.args(&checked.args);
                (command, Some(reason))
            }
        };
        command
            .env_clear()
            .envs(ctx.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(&ctx.working_dir)
            .kill_on_drop(true) // the sandbox's timeout drops this future: the child dies too
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match &checked.stdin {
            Some(path) => {
                // Through the root's handle, never by name: a swapped link cannot lead out.
                let path = path.clone();
                let file = run_blocking(move |_| path.open_read()).await?;
                command.stdin(file);
            }
            None => {
                command.stdin(Stdio::null());
            }
        }
        let sink = match &checked.stdout {
            Some(redirect) => Some(open_redirect(redirect, ctx.max_write_bytes).await?),
            None => None,
        };
        let mut child = command.spawn().map_err(|e| {
            ToolError::Failed(format!(
                "could not start '{}': {e}; is it installed and on PATH?",
                checked.program
            ))
        })?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let ran = tokio::time::timeout(ctx.timeout, async {
            tokio::join!(
                async {
                    match (stdout, sink) {
                        (Some(pipe), Some(sink)) => sink.fill_from(pipe).await.map(Captured::File),
                        (Some(pipe), None) => Ok(Captured::Text(capture(pipe).await)),
                        (None, _) => Ok(Captured::Text(Capture::default())),
                    }
                },
                async {
                    match stderr {
                        Some(pipe) => capture(pipe).await,
                        None => Capture::default(),
                    }
                },
                child.wait()
            )
        })
        .await;
        let Ok((out, err, status)) = ran else {
            end_call(&mut child, unconfined.is_none()).await;
            return Err(ToolError::TimedOut);
        };
        let status =
            status.map_err(|e| ToolError::Failed(format!("waiting for the program: {e}")))?;
        if let Some(failure) = helper_failure(status, &err) {
            return Err(ToolError::Failed(failure));
        }
        let out = out?;
        let mut parts: Vec<String> = Vec::new();
        let mut artifacts = Vec::new();
        match out {
            Captured::Text(text) => parts.extend(text.render("stdout")),
            Captured::File(written) => {
                parts.push(written.render());
                artifacts.push(written.path);
            }
        }
        if let Some(text) = err.render("stderr") {
            parts.push(format!("[stderr]\n{text}"));
        }
        parts.push(describe_status(status));
        if let Some(reason) = unconfined {
            parts.push(format!(
                "[ran unconfined, without the OS sandbox: {reason}]"
            ));
        }
        Ok(ToolOutput {
            text: parts.join("\n"),
            artifacts,
            ..ToolOutput::default()
        })
    }
}

/// Most time the confinement helper gets to end the program's PID namespace after a
/// timeout before it is killed itself.
const END_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// End a call that ran out of time. A confined program runs under the helper's first stage,
/// which on `SIGTERM` kills the program's PID namespace (every process the call started)
/// and waits until it is gone: so once the helper has exited, nothing of the call is left.
/// An unconfined program (no helper, no namespace) is killed alone.
async fn end_call(child: &mut tokio::process::Child, confined: bool) {
    if let (true, Some(pid)) = (confined, child.id().and_then(|id| i32::try_from(id).ok())) {
        let pid = nix::unistd::Pid::from_raw(pid);
        if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).is_ok()
            && tokio::time::timeout(END_GRACE, child.wait()).await.is_ok()
        {
            return;
        }
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
}

/// What a stream produced.
#[derive(Debug, Default)]
struct Capture {
    bytes: Vec<u8>,
    /// Whether the limit was reached and the pipe closed.
    cut: bool,
}

impl Capture {
    fn render(&self, stream: &str) -> Option<String> {
        if self.bytes.is_empty() {
            return None;
        }
        let mut text = String::from_utf8_lossy(&self.bytes).into_owned();
        if text.ends_with('\n') {
            text.pop();
        }
        if self.cut {
            text.push_str(&format!(
                "\n[{stream} stopped after {MAX_CAPTURE_BYTES} bytes; the rest was not read]"
            ));
        }
        Some(text)
    }
}

enum Captured {
    Text(Capture),
    File(Written),
}

/// Read `pipe` up to [`MAX_CAPTURE_BYTES`]. Read errors end the capture: what was read is
/// still worth showing.
async fn capture(pipe: impl AsyncRead + Unpin) -> Capture {
    let mut bytes = Vec::new();
    let limit = MAX_CAPTURE_BYTES as u64 + 1;
    let _ = pipe.take(limit).read_to_end(&mut bytes).await;
    let cut = bytes.len() > MAX_CAPTURE_BYTES;
    bytes.truncate(MAX_CAPTURE_BYTES);
    Capture { bytes, cut }
}

/// An opened `>`/`>>` target and how much may still be written to it.
struct Sink {
    file: tokio::fs::File,
    path: std::path::PathBuf,
    room: u64,
    limit: usize,
}

/// What went into a redirect target.
struct Written {
    path: std::path::PathBuf,
    bytes: u64,
    cut: bool,
    limit: usize,
}

impl Written {
    fn render(&self) -> String {
        let mut text = format!(
            "[stdout written to {} ({} bytes)]",
            self.path.display(),
            self.bytes
        );
        if self.cut {
            text.push_str(&format!(
                "\n[stopped at the write limit of {} bytes; the rest was not written]",
                self.limit
            ));
        }
        text
    }
}

/// Open the redirect target (creating parent folders: the path is confined for writing).
async fn open_redirect(redirect: &Redirect, max_write_bytes: usize) -> Result<Sink, ToolError> {
    // Opened through the root's handle (parent folders created beneath it, no link
    // followed, protected paths and non-regular files refused), never by name.
    let target = redirect.path.clone();
    let append = redirect.append;
    let (file, existing) = run_blocking(move |_| {
        let mode = if append {
            WriteMode::Append
        } else {
            WriteMode::Create
        };
        let file = target.open_write(mode)?;
        let io = |e| ToolError::io(target.shown(), e);
        let existing = if append {
            file.metadata().map_err(io)?.len()
        } else {
            // `Create` truncates nothing: the handle is known to be the right file now.
            file.set_len(0).map_err(io)?;
            0
        };
        Ok((file, existing))
    })
    .await?;
    Ok(Sink {
        file: tokio::fs::File::from_std(file),
        path: redirect.path.shown().to_path_buf(),
        room: (max_write_bytes as u64).saturating_sub(existing),
        limit: max_write_bytes,
    })
}

impl Sink {
    /// Copy `pipe` into the file until it ends or the write limit is reached.
    async fn fill_from(mut self, mut pipe: impl AsyncRead + Unpin) -> Result<Written, ToolError> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut written = 0u64;
        let mut cut = false;
        loop {
            let n = match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let keep = (n as u64).min(self.room - written);
            self.file
                .write_all(&buf[..keep as usize])
                .await
                .map_err(|e| ToolError::io(&self.path, e))?;
            written += keep;
            if keep < n as u64 {
                cut = true; // dropping the pipe below stops the program's writes
                break;
            }
        }
        self.file
            .flush()
            .await
            .map_err(|e| ToolError::io(&self.path, e))?;
        Ok(Written {
            path: self.path,
            bytes: written,
            cut,
            limit: self.limit,
        })
    }
}

/// The sandbox helper's own error (it could not confine or start the program), which is a
/// failure of the call rather than the program's output.
fn helper_failure(status: ExitStatus, stderr: &Capture) -> Option<String> {
    if status.code() != Some(confine::FAILURE_STATUS) {
        return None;
    }
    let text = String::from_utf8_lossy(&stderr.bytes);
    let message = text.strip_prefix(confine::FAILURE_PREFIX)?;
    Some(message.trim().to_string())
}

fn describe_status(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("[exit code: {code}]");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("[killed by signal {signal}]");
        }
    }
    format!("[{status}]")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use std::path::Path;

    use super::*;
    use crate::CheckedCommand;

    fn ctx(dir: &Path, command: CheckedCommand) -> ToolContext {
        let mut ctx = ToolContext::for_test(
            json!({"command": "(parsed separately)"}),
            [],
            dir.to_path_buf(),
        );
        ctx.command = Some(command);
        ctx.env = vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())].into();
        ctx
    }

    /// `rel` beneath `dir`, confined by a policy whose roots are `dir`.
    fn confined(dir: &Path, rel: &str, access: crate::PathAccess) -> crate::ConfinedPath {
        crate::paths::PathPolicy::new(&[dir.to_path_buf()], &[dir.to_path_buf()], dir)
            .unwrap()
            .confine(rel, access)
            .unwrap()
    }

    fn cmd(program: &str, args: &[&str]) -> CheckedCommand {
        CheckedCommand {
            program: program.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            stdin: None,
            stdout: None,
            confinement: Confinement::Unconfined("unit test".into()),
        }
    }

    #[tokio::test]
    async fn runs_and_reports_exit_code() {
        let tmp = tempfile::tempdir().unwrap();
        let out = Bash
            .execute(ctx(tmp.path(), cmd("echo", &["hi", "there"])))
            .await
            .unwrap();
        assert_eq!(
            out.text,
            "hi there\n[exit code: 0]\n[ran unconfined, without the OS sandbox: unit test]"
        );
        assert!(out.artifacts.is_empty());
        let out = Bash
            .execute(ctx(tmp.path(), cmd("ls", &["missing-file"])))
            .await
            .unwrap();
        assert!(out.text.contains("[stderr]"), "{}", out.text);
        assert!(out.text.contains("[exit code: 2]"), "{}", out.text);
    }

    #[tokio::test]
    async fn runs_in_working_dir_with_redirects() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("in.txt"), "b\na\n").unwrap();
        let mut c = cmd("sort", &[]);
        c.stdin = Some(confined(tmp.path(), "in.txt", crate::PathAccess::Read));
        c.stdout = Some(Redirect {
            path: confined(tmp.path(), "out/sorted.txt", crate::PathAccess::Write),
            append: false,
        });
        let out = Bash.execute(ctx(tmp.path(), c.clone())).await.unwrap();
        assert_eq!(out.artifacts, [tmp.path().join("out/sorted.txt")]);
        assert!(out.text.contains("(4 bytes)"), "{}", out.text);
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("out/sorted.txt")).unwrap(),
            "a\nb\n"
        );
        c.stdout = Some(Redirect {
            path: confined(tmp.path(), "out/sorted.txt", crate::PathAccess::Write),
            append: true,
        });
        Bash.execute(ctx(tmp.path(), c)).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("out/sorted.txt")).unwrap(),
            "a\nb\na\nb\n"
        );
        let out = Bash.execute(ctx(tmp.path(), cmd("ls", &[]))).await.unwrap();
        assert!(out.text.starts_with("in.txt\nout\n"), "{}", out.text);
    }

    #[tokio::test]
    async fn redirect_respects_write_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let mut c = cmd("yes", &[]);
        c.stdout = Some(Redirect {
            path: confined(tmp.path(), "y.txt", crate::PathAccess::Write),
            append: false,
        });
        let mut context = ctx(tmp.path(), c);
        context.max_write_bytes = 10;
        let out = Bash.execute(context).await.unwrap();
        assert!(out.text.contains("write limit of 10 bytes"), "{}", out.text);
        assert_eq!(std::fs::read(tmp.path().join("y.txt")).unwrap().len(), 10);
    }

    #[tokio::test]
    async fn unbounded_output_is_cut() {
        let tmp = tempfile::tempdir().unwrap();
        let out = Bash
            .execute(ctx(tmp.path(), cmd("yes", &[])))
            .await
            .unwrap();
        assert!(
            out.text.contains("stdout stopped after"),
            "{}",
            &out.text[out.text.len() - 200..]
        );
    }

    #[tokio::test]
    async fn missing_program_is_a_failure() {
        let tmp = tempfile::tempdir().unwrap();
        let err = Bash
            .execute(ctx(tmp.path(), cmd("no-such-program-xyz", &[])))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("could not start"), "{err}");
    }
}
