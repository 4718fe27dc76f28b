//! End-to-end tests of `Sandbox::execute`: every check in order, the runner's limits, and
//! every built-in tool, against real temporary folders.

// clippy.toml allows these inside #[test] functions only; the helpers below fail tests the
// same way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lsm_sandbox::{
    Caller, ExecError, ExecHelper, PermissionAsker, RateLimit, RiskLevel, Sandbox, SandboxConfig,
    SandboxConfigError, Tool, ToolContext, ToolError, ToolEvent, ToolEventKind, ToolOutput,
    ToolRegistry, builtin, schema_for,
};
use lsm_test_support::Asker;
use serde_json::{Value, json};

// ------------------------------------------------------------------------------------------
// Fixtures

/// `<tmp>/ws` is the allowed workspace; `<tmp>/outside` is not.
struct Fixture {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let ws = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(ws.join("docs")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("hello.txt"), "line one\nline two\nline three\n").unwrap();
    std::fs::write(ws.join("docs/guide.md"), "# Guide\nfind the needle here\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "TOPSECRET").unwrap();
    Fixture {
        _tmp: tmp,
        ws,
        outside,
    }
}

impl Fixture {
    /// Confined to the workspace, no person needed for any built-in tool.
    fn open_config(&self) -> SandboxConfig {
        let mut config = SandboxConfig::confined_to(&self.ws);
        config.exec_helper = ExecHelper::Path(env!("CARGO_BIN_EXE_lsm-confine").into());
        for name in [
            "write_file",
            "append_file",
            "create_folder",
            "edit_file",
            "bash",
        ] {
            config.require_user_permission.insert(name.into(), false);
        }
        config
    }

    fn sandbox(&self, config: SandboxConfig) -> Sandbox {
        Sandbox::new(config, registry(), None).unwrap()
    }
}

fn registry() -> ToolRegistry {
    builtin::registry()
        .with(Arc::new(Echo))
        .with(Arc::new(Sleeper))
        .with(Arc::new(Panicker))
        .with(Arc::new(Fetch))
}

/// A person who always answers the same, and remembers what they were asked.
fn tester(allow: bool) -> Arc<Asker> {
    Arc::new(if allow {
        Asker::approving("ok by the tester")
    } else {
        Asker::denying("the tester said no")
    })
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct TextArgs {
    /// Text to return.
    text: String,
}

/// Returns its `text` argument.
struct Echo;

#[async_trait::async_trait]
impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Echo."
    }
    fn parameters(&self) -> Value {
        schema_for::<TextArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(ctx.str_arg("text")?))
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// Sleeps far longer than the test timeout.
struct Sleeper;

#[async_trait::async_trait]
impl Tool for Sleeper {
    fn name(&self) -> &str {
        "sleeper"
    }
    fn description(&self) -> &str {
        "Sleeps."
    }
    fn parameters(&self) -> Value {
        schema_for::<NoArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(Duration::from_secs(5)).await;
        Ok(ToolOutput::text("woke up"))
    }
}

/// Panics.
struct Panicker;

#[async_trait::async_trait]
impl Tool for Panicker {
    fn name(&self) -> &str {
        "panicker"
    }
    fn description(&self) -> &str {
        "Panics."
    }
    fn parameters(&self) -> Value {
        schema_for::<NoArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        panic!("tool exploded");
    }
}

/// A network tool that needs no permission by default.
struct Fetch;

#[async_trait::async_trait]
impl Tool for Fetch {
    fn name(&self) -> &str {
        "fetch"
    }
    fn description(&self) -> &str {
        "Fetches."
    }
    fn parameters(&self) -> Value {
        schema_for::<NoArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::Network
    }
    async fn execute(&self, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("fetched"))
    }
}

fn ok(exec: lsm_sandbox::Execution) -> (String, Vec<PathBuf>) {
    match exec.outcome {
        Ok(text) => (text, exec.artifacts),
        Err(e) => panic!("expected success, got: {e}"),
    }
}

fn err(exec: lsm_sandbox::Execution) -> ExecError {
    match exec.outcome {
        Ok(text) => panic!("expected an error, got output: {text}"),
        Err(e) => e,
    }
}

// ------------------------------------------------------------------------------------------
// 1. Permission gate

#[tokio::test]
async fn needs_permission_without_asker_is_denied() {
    let f = fixture();
    let sb = f.sandbox(SandboxConfig::confined_to(&f.ws));
    let exec = sb
        .execute("write_file", &json!({"path": "a.txt", "content": "x"}))
        .await;
    let event = exec.permission.clone().unwrap();
    assert!(!event.allowed);
    let e = err(exec);
    assert!(matches!(e, ExecError::PermissionDenied { .. }), "{e}");
    assert!(e.to_string().contains("no one is available"), "{e}");
    assert!(!f.ws.join("a.txt").exists());
}

#[tokio::test]
async fn permission_precedence_tool_over_risk_over_default() {
    let f = fixture();
    let args = json!({"path": "hello.txt"});

    // Per-risk true makes a read-only tool need a person.
    let mut config = SandboxConfig::confined_to(&f.ws);
    config
        .require_permission_by_risk
        .insert(RiskLevel::ReadOnly, true);
    let e = err(f.sandbox(config.clone()).execute("read_file", &args).await);
    assert!(
        e.to_string()
            .contains("require_permission_by_risk.read_only"),
        "{e}"
    );

    // Per-tool false beats per-risk true.
    config
        .require_user_permission
        .insert("read_file".into(), false);
    ok(f.sandbox(config).execute("read_file", &args).await);

    // Per-risk false beats the tool's own default.
    let mut config = SandboxConfig::confined_to(&f.ws);
    config
        .require_permission_by_risk
        .insert(RiskLevel::WritesWorkspace, false);
    ok(f.sandbox(config.clone())
        .execute("write_file", &json!({"path": "b.txt", "content": "x"}))
        .await);

    // Per-tool true beats per-risk false.
    config
        .require_user_permission
        .insert("write_file".into(), true);
    let e = err(f
        .sandbox(config)
        .execute("write_file", &json!({"path": "c.txt", "content": "x"}))
        .await);
    assert!(
        e.to_string().contains("require_user_permission.write_file"),
        "{e}"
    );
}

#[tokio::test]
async fn asker_approves_and_denies() {
    let f = fixture();
    let yes = tester(true);
    let sb = Sandbox::new(
        SandboxConfig::confined_to(&f.ws),
        registry(),
        Some(yes.clone() as Arc<dyn PermissionAsker>),
    )
    .unwrap();
    let exec = sb
        .execute("write_file", &json!({"path": "a.txt", "content": "x"}))
        .await;
    let event = exec.permission.clone().unwrap();
    assert!(event.allowed);
    assert_eq!(event.reason, "ok by the tester");
    ok(exec);
    let asked = yes.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].tool_name, "write_file");
    assert_eq!(asked[0].risk_level, RiskLevel::WritesWorkspace);
    assert_eq!(asked[0].args_summary, r#"{"content":"x","path":"a.txt"}"#);
    // Tools that need no permission do not bother the person.
    ok(sb.execute("read_file", &json!({"path": "a.txt"})).await);
    assert_eq!(yes.asked().len(), 1);

    let no = tester(false);
    let sb = Sandbox::new(
        SandboxConfig::confined_to(&f.ws),
        registry(),
        Some(no.clone() as Arc<dyn PermissionAsker>),
    )
    .unwrap();
    let e = err(sb
        .execute("write_file", &json!({"path": "b.txt", "content": "x"}))
        .await);
    assert!(e.to_string().contains("the tester said no"), "{e}");
    assert!(e.is_denial());
    assert!(!f.ws.join("b.txt").exists());
}

/// Reports what the sandbox told it (caller, permission) and one record event.
struct Witness {
    needs_permission: bool,
}

#[async_trait::async_trait]
impl Tool for Witness {
    fn name(&self) -> &str {
        "witness"
    }
    fn description(&self) -> &str {
        "Says who called it."
    }
    fn parameters(&self) -> Value {
        schema_for::<NoArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::WritesWorkspace
    }
    fn needs_permission(&self) -> bool {
        self.needs_permission
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let who = ctx.caller().map_or_else(
            || "anonymous".to_string(),
            |c| format!("{}/{}", c.agent, c.run_id),
        );
        Ok(
            ToolOutput::text(format!("{who} granted={}", ctx.permission_granted())).with_event(
                ToolEvent::new(
                    ToolEventKind::MemoryWritten,
                    json!({"id": "m1", "text": ["API_KEY=abcdef123456"]}),
                ),
            ),
        )
    }
}

#[tokio::test]
async fn tools_learn_their_caller_and_whether_a_person_approved_and_report_events() {
    let f = fixture();
    let sandbox = |needs_permission: bool, asker: Option<Arc<dyn PermissionAsker>>| {
        Sandbox::new(
            SandboxConfig::confined_to(&f.ws),
            ToolRegistry::new().with(Arc::new(Witness { needs_permission })),
            asker,
        )
        .unwrap()
    };
    let caller = Caller::new("librarian", "run-7");

    // No permission needed: not granted, caller passed through, event reported.
    let sb = sandbox(false, None);
    let exec = sb.execute_as(&caller, "witness", &json!({})).await;
    // Event data is redacted like the output.
    assert_eq!(
        exec.events,
        [ToolEvent::new(
            ToolEventKind::MemoryWritten,
            json!({"id": "m1", "text": ["API_KEY=[REDACTED]"]})
        )]
    );
    assert_eq!(ok(exec).0, "librarian/run-7 granted=false");
    assert_eq!(
        ok(sb.execute("witness", &json!({})).await).0,
        "anonymous granted=false"
    );

    // A person approved: granted.
    let sb = sandbox(true, Some(tester(true) as Arc<dyn PermissionAsker>));
    let exec = sb.execute_as(&caller, "witness", &json!({})).await;
    assert_eq!(ok(exec).0, "librarian/run-7 granted=true");

    // Denied: the tool never ran, so no events.
    let sb = sandbox(true, Some(tester(false) as Arc<dyn PermissionAsker>));
    let exec = sb.execute_as(&caller, "witness", &json!({})).await;
    assert!(exec.events.is_empty());
    assert!(err(exec).is_denial());
}

// ------------------------------------------------------------------------------------------
// 2. Network

#[tokio::test]
async fn network_tools_need_url_access() {
    let f = fixture();
    let e = err(f
        .sandbox(f.open_config())
        .execute("fetch", &json!({}))
        .await);
    assert!(matches!(e, ExecError::NetworkDenied { .. }), "{e}");
    let mut config = f.open_config();
    config.allow_url_access = true;
    assert_eq!(
        ok(f.sandbox(config).execute("fetch", &json!({})).await).0,
        "fetched"
    );
}

#[tokio::test]
async fn permission_is_checked_before_network() {
    let f = fixture();
    let mut config = f.open_config();
    config.require_user_permission.insert("fetch".into(), true);
    let e = err(f.sandbox(config).execute("fetch", &json!({})).await);
    assert!(matches!(e, ExecError::PermissionDenied { .. }), "{e}");
}

// ------------------------------------------------------------------------------------------
// 3. Arguments

async fn invalid(sb: &Sandbox, tool: &str, args: Value) -> String {
    match err(sb.execute(tool, &args).await) {
        ExecError::InvalidArguments { message, .. } => message,
        other => panic!("expected invalid arguments, got {other}"),
    }
}

#[tokio::test]
async fn argument_validation() {
    let f = fixture();
    let sb = f.sandbox(f.open_config());
    assert_eq!(
        invalid(&sb, "read_file", json!({})).await,
        "missing required argument 'path'"
    );
    let m = invalid(&sb, "read_file", json!({"path": "hello.txt", "pth": "x"})).await;
    assert!(m.starts_with("unexpected argument 'pth'"), "{m}");
    assert_eq!(
        invalid(&sb, "read_folder", json!({"path": ".", "recursive": 1})).await,
        "argument 'recursive' must be a boolean, got integer 1"
    );
    assert_eq!(
        invalid(
            &sb,
            "read_file",
            json!({"path": "hello.txt", "start_line": "2"})
        )
        .await,
        "argument 'start_line' must be an integer, got string \"2\""
    );
    let m = invalid(&sb, "read_file", json!("hello.txt")).await;
    assert!(m.contains("must be a JSON object"), "{m}");
    // Validation comes before the path check.
    let m = invalid(&sb, "read_file", json!({"path": "/etc/passwd", "x": 1})).await;
    assert!(m.contains("unexpected argument 'x'"), "{m}");
}

#[tokio::test]
async fn oversize_string_is_refused() {
    let f = fixture();
    let mut config = f.open_config();
    config.max_string_arg_bytes = 16;
    let sb = f.sandbox(config);
    let m = invalid(
        &sb,
        "write_file",
        json!({"path": "a.txt", "content": "x".repeat(17)}),
    )
    .await;
    assert_eq!(m, "argument 'content' is 17 bytes, over the limit of 16");
    ok(sb
        .execute(
            "write_file",
            &json!({"path": "a.txt", "content": "x".repeat(16)}),
        )
        .await);
}

// ------------------------------------------------------------------------------------------
// 4. Paths

async fn path_denied(sb: &Sandbox, tool: &str, args: Value) -> String {
    match err(sb.execute(tool, &args).await) {
        ExecError::PathDenied { reason, .. } => reason,
        other => panic!("expected a path denial, got {other}"),
    }
}

#[tokio::test]
async fn path_checks() {
    let f = fixture();
    let sb = f.sandbox(f.open_config());
    assert!(
        path_denied(&sb, "read_file", json!({"path": ""}))
            .await
            .contains("empty")
    );
    assert!(
        path_denied(&sb, "read_file", json!({"path": "a\u{0}b"}))
            .await
            .contains("NUL")
    );
    assert!(
        path_denied(&sb, "read_file", json!({"path": "docs/../hello.txt"}))
            .await
            .contains("..")
    );
    assert!(
        path_denied(&sb, "read_file", json!({"path": "../outside/secret.txt"}))
            .await
            .contains("..")
    );
    let outside = f.outside.join("secret.txt");
    let reason = path_denied(&sb, "read_file", json!({"path": outside})).await;
    assert!(
        reason.contains("outside the allowed read paths"),
        "{reason}"
    );
    let reason = path_denied(
        &sb,
        "write_file",
        json!({"path": "/tmp/x.txt", "content": ""}),
    )
    .await;
    assert!(
        reason.contains("outside the allowed write paths"),
        "{reason}"
    );
}

#[tokio::test]
async fn escaping_symlinks_are_refused() {
    let f = fixture();
    std::os::unix::fs::symlink(&f.outside, f.ws.join("escape")).unwrap();
    std::os::unix::fs::symlink(f.outside.join("secret.txt"), f.ws.join("secret_link")).unwrap();
    let sb = f.sandbox(f.open_config());
    for (tool, args) in [
        ("read_file", json!({"path": "escape/secret.txt"})),
        ("read_file", json!({"path": "secret_link"})),
        ("hash_file", json!({"path": "secret_link"})),
        (
            "write_file",
            json!({"path": "escape/new.txt", "content": "x"}),
        ),
        (
            "append_file",
            json!({"path": "secret_link", "content": "x"}),
        ),
        (
            "edit_file",
            json!({"path": "secret_link", "start_line": 1, "end_line": 1, "new_text": "x"}),
        ),
        ("find_file", json!({"path": "escape"})),
    ] {
        let reason = path_denied(&sb, tool, args).await;
        assert!(reason.contains("outside"), "{tool}: {reason}");
    }
    assert_eq!(
        std::fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        "TOPSECRET"
    );
    assert!(!f.outside.join("new.txt").exists());
}

#[tokio::test]
async fn new_write_target_inside_is_created() {
    let f = fixture();
    let sb = f.sandbox(f.open_config());
    let (_, artifacts) = ok(sb
        .execute(
            "write_file",
            &json!({"path": "new/sub/file.txt", "content": "fresh"}),
        )
        .await);
    assert_eq!(artifacts, [f.ws.join("new/sub/file.txt")]);
    assert_eq!(
        std::fs::read_to_string(f.ws.join("new/sub/file.txt")).unwrap(),
        "fresh"
    );
}

#[tokio::test]
async fn no_allowlists_means_no_paths() {
    let f = fixture();
    let mut config = SandboxConfig {
        working_dir: Some(f.ws.clone()),
        ..SandboxConfig::default()
    };
    config
        .require_user_permission
        .insert("write_file".into(), false);
    let sb = f.sandbox(config);
    assert_eq!(
        path_denied(&sb, "read_file", json!({"path": "hello.txt"})).await,
        "No read paths are allowed"
    );
    assert_eq!(
        path_denied(&sb, "write_file", json!({"path": "x", "content": ""})).await,
        "No write paths are allowed"
    );
}

#[tokio::test]
async fn read_only_allowlist_refuses_writes() {
    let f = fixture();
    let mut config = f.open_config();
    config.allowed_write_paths = vec![f.ws.join("docs")];
    let sb = f.sandbox(config);
    ok(sb.execute("read_file", &json!({"path": "hello.txt"})).await);
    let reason = path_denied(
        &sb,
        "write_file",
        json!({"path": "hello.txt", "content": ""}),
    )
    .await;
    assert!(
        reason.contains("outside the allowed write paths"),
        "{reason}"
    );
    ok(sb
        .execute("write_file", &json!({"path": "docs/ok.txt", "content": ""}))
        .await);
}

// ------------------------------------------------------------------------------------------
// 5. Commands

async fn command_denied(sb: &Sandbox, line: &str) -> String {
    match err(sb.execute("bash", &json!({"command": line})).await) {
        ExecError::CommandDenied { reason, .. } => reason,
        other => panic!("expected a command denial for {line:?}, got {other}"),
    }
}

#[tokio::test]
async fn chaining_and_substitution_are_refused() {
    let f = fixture();
    let sb = f.sandbox(f.open_config());
    for (line, token) in [
        ("ls; cat hello.txt", ";"),
        ("ls && cat hello.txt", "&&"),
        ("ls || cat hello.txt", "||"),
        ("ls | cat", "|"),
        ("ls &", "&"),
        ("echo `ls`", "`"),
        ("echo $(ls)", "$("),
        ("echo ${PATH}", "${"),
        ("echo $PATH", "$"),
        ("ls\ncat hello.txt", "\\n"),
        ("cat <(ls)", "<("),
        ("ls >(cat)", ">("),
        ("ls &> out.txt", "&>"),
    ] {
        let reason = command_denied(&sb, line).await;
        assert!(reason.contains(&format!("'{token}'")), "{line:?}: {reason}");
    }
    let reason = command_denied(&sb, "ls 2> err.txt").await;
    assert!(reason.contains("file descriptor"), "{reason}");
}

#[tokio::test]
async fn deny_and_allow_lists() {
    let f = fixture();
    let mut config = f.open_config();
    config.command_denylist.push("rm".into());
    let sb = f.sandbox(config);
    for line in [
        "/bin/RM -rf docs",
        "rm hello.txt",
        "Sudo ls",
        "BASH -c ls",
        "/usr/bin/Env",
        "curl http://x",
    ] {
        let reason = command_denied(&sb, line).await;
        assert!(reason.contains("denylist"), "{line}: {reason}");
    }
    assert!(f.ws.join("hello.txt").exists());
    let mut config = f.open_config();
    config.command_denylist = vec!["RM".into()];
    let sb = f.sandbox(config.clone());
    assert!(command_denied(&sb, "/bin/rm x").await.contains("denylist"));
    // Network programs stay refused without network access even off the deny list.
    assert!(
        command_denied(&sb, "curl http://x")
            .await
            .contains("network")
    );

    config.command_allowlist = vec!["Echo".into(), "ls".into()];
    let sb = f.sandbox(config);
    ok(sb
        .execute("bash", &json!({"command": "echo allowed"}))
        .await);
    let reason = command_denied(&sb, "cat hello.txt").await;
    assert!(reason.contains("not on the command allowlist"), "{reason}");
}

#[tokio::test]
async fn command_paths_and_redirections() {
    let f = fixture();
    let sb = f.sandbox(f.open_config());
    let secret = f.outside.join("secret.txt");
    let reason = command_denied(&sb, &format!("cat {}", secret.display())).await;
    assert!(
        reason.contains("outside the allowed read paths"),
        "{reason}"
    );
    let reason = command_denied(&sb, "cat ../outside/secret.txt").await;
    assert!(reason.contains(".."), "{reason}");
    let reason = command_denied(&sb, &format!("echo hi > {}/out.txt", f.outside.display())).await;
    assert!(reason.contains("redirection target"), "{reason}");
    let reason = command_denied(&sb, &format!("cat < {}", secret.display())).await;
    assert!(reason.contains("redirection target"), "{reason}");
    assert!(!f.outside.join("out.txt").exists());

    let (text, artifacts) = ok(sb
        .execute("bash", &json!({"command": "echo hi there > out/said.txt"}))
        .await);
    assert_eq!(artifacts, [f.ws.join("out/said.txt")]);
    assert!(text.ends_with("[exit code: 0]"), "{text}");
    assert_eq!(
        std::fs::read_to_string(f.ws.join("out/said.txt")).unwrap(),
        "hi there\n"
    );
    let (text, _) = ok(sb
        .execute("bash", &json!({"command": "wc -l < hello.txt"}))
        .await);
    assert_eq!(text, "3\n[exit code: 0]");
}

#[tokio::test]
async fn non_zero_exit_is_output() {
    let f = fixture();
    let sb = f.sandbox(f.open_config());
    let (text, _) = ok(sb
        .execute("bash", &json!({"command": "ls no-such-file"}))
        .await);
    assert!(text.contains("[stderr]"), "{text}");
    assert!(text.ends_with("[exit code: 2]"), "{text}");
}

#[tokio::test]
async fn environment_is_scrubbed() {
    let f = fixture();
    let passthrough = SandboxConfig::default().env_passthrough;
    // A variable of this test process that must not reach the command. `cargo test` sets
    // CARGO_MANIFEST_DIR; any other non-passthrough variable serves as well.
    let (name, value) = std::env::vars()
        .filter(|(k, _)| !passthrough.contains(k) && !k.is_empty())
        .find(|(k, _)| k == "CARGO_MANIFEST_DIR")
        .or_else(|| std::env::vars().find(|(k, _)| !passthrough.contains(k)))
        .expect("the test process has some environment variable outside the passthrough list");
    let mut config = f.open_config();
    config.command_allowlist.push("printenv".into());
    let sb = f.sandbox(config.clone());
    let (text, _) = ok(sb.execute("bash", &json!({"command": "printenv"})).await);
    assert!(
        !text.contains(&format!("{name}=")),
        "{name} leaked:\n{text}"
    );
    assert!(text.contains("PATH="), "{text}");

    // The same check passes the variable through when configured to: the test can fail.
    config.env_passthrough.push(name.clone());
    let sb = f.sandbox(config);
    let (text, _) = ok(sb
        .execute("bash", &json!({"command": format!("printenv {name}")}))
        .await);
    assert!(text.starts_with(&value), "{text}");
}

// ------------------------------------------------------------------------------------------
// 6. Rate limit

#[tokio::test]
async fn rate_limit_per_tool() {
    let f = fixture();
    let mut config = f.open_config();
    config.rate_limits.insert(
        "read_file".into(),
        RateLimit {
            calls: 2,
            per_seconds: 60,
        },
    );
    let sb = f.sandbox(config);
    let args = json!({"path": "hello.txt"});
    ok(sb.execute("read_file", &args).await);
    ok(sb.execute("read_file", &args).await);
    let exec = sb.execute("read_file", &args).await;
    assert!(!exec.permission.clone().unwrap().allowed);
    let e = err(exec);
    assert!(
        matches!(
            e,
            ExecError::RateLimited {
                calls: 2,
                per_seconds: 60,
                ..
            }
        ),
        "{e}"
    );
    // Other tools have their own budget.
    ok(sb.execute("hash_file", &args).await);
}

// ------------------------------------------------------------------------------------------
// 7. The runner

#[tokio::test]
async fn slow_tool_times_out() {
    let f = fixture();
    let mut config = f.open_config();
    config.timeout_seconds = 0.2;
    let sb = f.sandbox(config);
    let started = Instant::now();
    let e = err(sb.execute("sleeper", &json!({})).await);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(e, ExecError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("timed out after 0.2 s"), "{e}");
}

/// Waits for a person (like `ask_user`): a minute, far past the sandbox timeout.
struct PatientAsk;

#[async_trait::async_trait]
impl Tool for PatientAsk {
    fn name(&self) -> &str {
        "patient_ask"
    }
    fn description(&self) -> &str {
        "Waits for a person."
    }
    fn parameters(&self) -> Value {
        schema_for::<NoArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn waits_for_person(&self) -> bool {
        true
    }
    async fn execute(&self, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(ToolOutput::text("the person answered"))
    }
}

/// A tool bounded by limits of its own (an agent run): not by the runner's timeout.
struct LongRun;

#[async_trait::async_trait]
impl Tool for LongRun {
    fn name(&self) -> &str {
        "long_run"
    }
    fn description(&self) -> &str {
        "Runs for a while under its own limits."
    }
    fn parameters(&self) -> Value {
        schema_for::<NoArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::Exec
    }
    fn bounds_itself(&self) -> bool {
        true
    }
    async fn execute(&self, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(ToolOutput::text("the run ended"))
    }
}

#[tokio::test(start_paused = true)]
async fn a_tool_waiting_for_a_person_or_bounding_itself_is_not_cut_off_by_the_runner_timeout() {
    let f = fixture();
    let mut config = f.open_config();
    config.timeout_seconds = 1.0;
    let sb = Sandbox::new(config, registry().with(Arc::new(PatientAsk)), None).unwrap();
    let (text, _) = ok(sb.execute("patient_ask", &json!({})).await);
    assert_eq!(text, "the person answered");
    let sb = Sandbox::new(
        {
            let mut c = f.open_config();
            c.timeout_seconds = 1.0;
            c
        },
        registry().with(Arc::new(LongRun)),
        None,
    )
    .unwrap();
    let (text, _) = ok(sb.execute("long_run", &json!({})).await);
    assert_eq!(text, "the run ended");
    // The same wait in an ordinary tool is cut off.
    let e = err(sb.execute("sleeper", &json!({})).await);
    assert!(matches!(e, ExecError::Timeout { .. }), "{e}");
}

#[tokio::test]
async fn timed_out_command_is_killed() {
    let f = fixture();
    let mut config = f.open_config();
    config.timeout_seconds = 0.3;
    config.command_allowlist.push("sleep".into());
    let sb = f.sandbox(config);
    let started = Instant::now();
    let e = err(sb.execute("bash", &json!({"command": "sleep 5"})).await);
    assert!(matches!(e, ExecError::Timeout { .. }), "{e}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn panic_is_contained() {
    let f = fixture();
    let sb = f.sandbox(f.open_config());
    let e = err(sb.execute("panicker", &json!({})).await);
    match &e {
        ExecError::Panicked { tool, message } => {
            assert_eq!(tool, "panicker");
            assert_eq!(message, "tool exploded");
        }
        other => panic!("expected a panic error, got {other}"),
    }
    // The sandbox keeps working.
    ok(sb.execute("read_file", &json!({"path": "hello.txt"})).await);
}

#[tokio::test]
async fn tool_failure_and_unknown_tool() {
    let f = fixture();
    let sb = f.sandbox(f.open_config());
    let e = err(sb
        .execute("read_file", &json!({"path": "missing.txt"}))
        .await);
    assert!(matches!(e, ExecError::Failed { .. }), "{e}");
    assert!(!e.is_denial());
    let e = err(sb.execute("nope", &json!({})).await);
    assert!(matches!(e, ExecError::UnknownTool { .. }), "{e}");
}

#[tokio::test]
async fn output_is_capped_with_exact_count() {
    let f = fixture();
    let mut config = f.open_config();
    config.max_output_bytes = 10;
    let sb = f.sandbox(config);
    let (text, _) = ok(sb.execute("echo", &json!({"text": "y".repeat(100)})).await);
    assert_eq!(text, "yyyyyyyyyy\n[TRUNCATED 90 bytes]");
    // Cut on a char boundary: "é" is two bytes.
    let (text, _) = ok(sb
        .execute("echo", &json!({"text": "aaaaaaaaaé and more"}))
        .await);
    assert_eq!(text, "aaaaaaaaa\n[TRUNCATED 11 bytes]");
}

#[tokio::test]
async fn secrets_are_redacted() {
    let f = fixture();
    let sb = f.sandbox(f.open_config());
    for (input, expected) in [
        (
            "key sk-proj_ABCDEF0123456789xyz here",
            "key [REDACTED] here",
        ),
        ("use key_0123456789ABCDEFghij now", "use [REDACTED] now"),
        ("OPENAI_API_KEY=abc123secret", "OPENAI_API_KEY=[REDACTED]"),
        ("MY_API_KEY = value", "MY_API_KEY = [REDACTED]"),
        (
            "blob q8ZL3vX0mP9sR2tYwK7bN4cJ1hGfD6eA5uT+Io/Wx= end",
            "blob [REDACTED] end",
        ),
        ("nothing secret", "nothing secret"),
    ] {
        let (text, _) = ok(sb.execute("echo", &json!({"text": input})).await);
        assert_eq!(text, expected, "{input}");
    }
}

// ------------------------------------------------------------------------------------------
// 8. Built-in tools end to end

#[tokio::test]
async fn builtin_read_tools() {
    let f = fixture();
    let sb = f.sandbox(f.open_config());
    let (text, artifacts) = ok(sb.execute("read_file", &json!({"path": "hello.txt"})).await);
    assert_eq!(text, "line one\nline two\nline three\n");
    assert!(artifacts.is_empty());
    let (text, _) = ok(sb
        .execute(
            "read_file",
            &json!({"path": "hello.txt", "start_line": 2, "end_line": 2}),
        )
        .await);
    assert_eq!(text, "line two\n");
    let abs = f.ws.join("hello.txt");
    ok(sb.execute("read_file", &json!({"path": abs})).await);

    let (text, _) = ok(sb.execute("read_folder", &json!({"path": "."})).await);
    assert_eq!(text, "docs/\nhello.txt");
    let (text, _) = ok(sb
        .execute("read_folder", &json!({"path": ".", "recursive": true}))
        .await);
    assert_eq!(text, "docs/\ndocs/guide.md\nhello.txt");

    let (text, _) = ok(sb
        .execute("file_metadata", &json!({"path": "hello.txt"}))
        .await);
    assert!(
        text.contains("kind: file") && text.contains("size: 29 bytes"),
        "{text}"
    );
    let (text, _) = ok(sb.execute("file_metadata", &json!({"path": "docs"})).await);
    assert!(text.contains("kind: folder"), "{text}");

    std::fs::write(f.ws.join("abc.txt"), "abc").unwrap();
    let (text, _) = ok(sb.execute("hash_file", &json!({"path": "abc.txt"})).await);
    assert!(
        text.contains("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        "{text}"
    );

    let (text, _) = ok(sb
        .execute("find_file", &json!({"path": ".", "name": "*.md"}))
        .await);
    assert_eq!(text, "docs/guide.md");
    let (text, _) = ok(sb
        .execute("find_file", &json!({"path": ".", "content": "needle"}))
        .await);
    assert_eq!(text, "docs/guide.md:2: find the needle here");
}

#[tokio::test]
async fn builtin_write_tools_report_artifacts() {
    let f = fixture();
    let sb = f.sandbox(f.open_config());
    let target = f.ws.join("notes/today.txt");

    let (_, artifacts) = ok(sb
        .execute(
            "write_file",
            &json!({"path": "notes/today.txt", "content": "a\nb\n"}),
        )
        .await);
    assert_eq!(artifacts, std::slice::from_ref(&target));

    let (_, artifacts) = ok(sb
        .execute(
            "append_file",
            &json!({"path": "notes/today.txt", "content": "c\n"}),
        )
        .await);
    assert_eq!(artifacts, std::slice::from_ref(&target));

    let (text, artifacts) = ok(sb
        .execute(
            "edit_file",
            &json!({"path": "notes/today.txt", "start_line": 2, "end_line": 2, "new_text": "B"}),
        )
        .await);
    assert_eq!(artifacts, std::slice::from_ref(&target));
    assert!(text.contains("Replaced lines 2-2"), "{text}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "a\nB\nc\n");

    let e = err(sb
        .execute(
            "edit_file",
            &json!({"path": "notes/today.txt", "start_line": 7, "end_line": 9, "new_text": "x"}),
        )
        .await);
    assert!(
        e.to_string()
            .contains("outside the file, which has 3 lines"),
        "{e}"
    );

    let (text, artifacts) = ok(sb
        .execute("create_folder", &json!({"path": "made/here"}))
        .await);
    assert!(text.contains("Created folder"), "{text}");
    assert!(artifacts.is_empty());
    assert!(f.ws.join("made/here").is_dir());
}

#[tokio::test]
async fn write_limits_through_the_sandbox() {
    let f = fixture();
    let mut config = f.open_config();
    config.max_write_bytes = 8;
    let sb = f.sandbox(config);
    let e = err(sb
        .execute(
            "write_file",
            &json!({"path": "big.txt", "content": "123456789"}),
        )
        .await);
    assert!(
        e.to_string().contains("over the write limit of 8 bytes"),
        "{e}"
    );
    ok(sb
        .execute(
            "write_file",
            &json!({"path": "big.txt", "content": "12345"}),
        )
        .await);
    let e = err(sb
        .execute(
            "append_file",
            &json!({"path": "big.txt", "content": "6789"}),
        )
        .await);
    assert!(e.to_string().contains("9 bytes"), "{e}");
    assert_eq!(
        std::fs::read_to_string(f.ws.join("big.txt")).unwrap(),
        "12345"
    );
}

#[tokio::test]
async fn builtin_bash() {
    let f = fixture();
    let sb = f.sandbox(f.open_config());
    let (text, artifacts) = ok(sb.execute("bash", &json!({"command": "ls docs"})).await);
    assert_eq!(text, "guide.md\n[exit code: 0]");
    assert!(artifacts.is_empty());
    // Quoted arguments reach the program unexpanded; no globbing happens.
    let (text, _) = ok(sb
        .execute("bash", &json!({"command": "echo '*' \"a  b\""}))
        .await);
    assert_eq!(text, "* a  b\n[exit code: 0]");
}

#[test]
fn path_properties_are_declared_path_args() {
    for tool in builtin::registry().iter() {
        let schema = tool.parameters();
        let props = schema["properties"].as_object().unwrap();
        for name in props.keys().filter(|k| k.contains("path")) {
            assert!(
                tool.path_args().iter().any(|a| a.name == name),
                "{}: argument '{name}' is not declared in path_args",
                tool.name()
            );
        }
        for arg in tool.path_args() {
            assert!(
                props.contains_key(arg.name),
                "{}: {}",
                tool.name(),
                arg.name
            );
        }
    }
}

// ------------------------------------------------------------------------------------------
// 9. Configuration errors

#[test]
fn bad_configuration_is_reported() {
    let f = fixture();
    let missing = f.ws.join("does-not-exist");
    let config = SandboxConfig::confined_to(&missing);
    match Sandbox::new(config, registry(), None) {
        Err(SandboxConfigError::BadAllowlistPath { path, message }) => {
            assert_eq!(path, missing);
            assert!(message.contains("create the folder"), "{message}");
        }
        other => panic!("expected a bad allowlist path, got {other:?}"),
    }
    let mut config = f.open_config();
    config.rate_limit = RateLimit {
        calls: 0,
        per_seconds: 60,
    };
    assert!(matches!(
        Sandbox::new(config, registry(), None),
        Err(SandboxConfigError::BadLimit { .. })
    ));
    let mut config = f.open_config();
    config.timeout_seconds = 0.0;
    assert!(matches!(
        Sandbox::new(config, registry(), None),
        Err(SandboxConfigError::BadLimit { .. })
    ));
}

#[test]
fn relative_working_dir_is_canonicalized() {
    // Commands get an absolute working directory even when the config gives a relative one.
    let f = fixture();
    let mut config = f.open_config();
    let cwd = std::env::current_dir().unwrap();
    let relative = pathdiff(&f.ws, &cwd);
    config.working_dir = Some(relative);
    let sb = Sandbox::new(config, registry(), None).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (text, _) = ok(rt.block_on(sb.execute("read_file", &json!({"path": "hello.txt"}))));
    assert!(text.starts_with("line one"));
}

/// `path` relative to `base` (both absolute), with `..` as needed.
fn pathdiff(path: &Path, base: &Path) -> PathBuf {
    let path: Vec<_> = path.components().collect();
    let base: Vec<_> = base.components().collect();
    let common = path.iter().zip(&base).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..base.len() {
        out.push("..");
    }
    for c in &path[common..] {
        out.push(c);
    }
    out
}

// ------------------------------------------------------------------------------------------
// 10. Confinement, end to end, on random paths

mod confinement {
    use proptest::prelude::*;

    use super::*;

    fn segment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("..".to_string()),
            Just(".".to_string()),
            Just("escape".to_string()),
            Just("secret_link".to_string()),
            Just("secret.txt".to_string()),
            Just("outside".to_string()),
            Just("ws".to_string()),
            Just("hello.txt".to_string()),
            Just("docs".to_string()),
            Just(String::new()),
            Just("\u{0}".to_string()),
            "[a-z./~]{1,3}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn no_tool_reads_or_writes_outside(
            prefix in prop_oneof![Just(0u8), Just(1), Just(2)],
            segments in proptest::collection::vec(segment(), 1..5),
        ) {
            let f = fixture();
            std::os::unix::fs::symlink(&f.outside, f.ws.join("escape")).unwrap();
            std::os::unix::fs::symlink(f.outside.join("secret.txt"), f.ws.join("secret_link"))
                .unwrap();
            let base = f.ws.parent().unwrap().to_path_buf();
            let raw = match prefix {
                0 => segments.join("/"),
                1 => format!("{}/{}", base.display(), segments.join("/")),
                _ => format!("/{}", segments.join("/")),
            };
            let sb = f.sandbox(f.open_config());
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            for (tool, args) in [
                ("read_file", json!({"path": raw})),
                ("hash_file", json!({"path": raw})),
                ("find_file", json!({"path": raw, "content": "TOPSECRET"})),
                ("append_file", json!({"path": raw, "content": "PWNED"})),
            ] {
                let exec = rt.block_on(sb.execute(tool, &args));
                if let Ok(text) = &exec.outcome {
                    prop_assert!(!text.contains("TOPSECRET"), "{tool} {raw:?}: {text}");
                }
                for artifact in &exec.artifacts {
                    prop_assert!(artifact.starts_with(&f.ws), "{tool} {raw:?}: {artifact:?}");
                }
            }
            prop_assert_eq!(
                std::fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
                "TOPSECRET"
            );
            let outside_entries = std::fs::read_dir(&f.outside).unwrap().count();
            prop_assert_eq!(outside_entries, 1);
        }
    }
}

// ------------------------------------------------------------------------------------------
// 11. Confinement by handle: a path component swapped for a link while tools use it

/// `ws/flip` swaps atomically, as fast as a thread can, between a real folder (holding
/// `secret.txt` = "INSIDE") and a link to the outside folder (holding `secret.txt` =
/// "TOPSECRET" and `victim.txt`), while the sandbox reads `flip/secret.txt` and writes
/// `flip/victim.txt` and `flip/new.txt`. Checking the name and opening it later lets some
/// calls through to the outside; opening through the root's handle lets none.
#[test]
fn a_component_swapped_for_a_link_never_leads_out() {
    use std::sync::atomic::{AtomicBool, Ordering};

    let f = fixture();
    let parked_dir = f.ws.join("parked_dir");
    std::fs::create_dir(&parked_dir).unwrap();
    std::fs::write(parked_dir.join("secret.txt"), "INSIDE").unwrap();
    std::fs::write(f.outside.join("victim.txt"), "ORIGINAL").unwrap();
    std::os::unix::fs::symlink(&f.outside, f.ws.join("flip")).unwrap();
    let mut config = f.open_config();
    config.rate_limit = RateLimit {
        calls: 1_000_000,
        per_seconds: 1,
    };
    let sb = f.sandbox(config);
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = Arc::clone(&stop);
        let (a, b) = (f.ws.join("flip"), parked_dir.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &a,
                    rustix::fs::CWD,
                    &b,
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (mut leaked_reads, mut inside_reads) = (0, 0);
    for i in 0..10_000 {
        let exec = rt.block_on(sb.execute("read_file", &json!({"path": "flip/secret.txt"})));
        match exec.outcome.as_deref() {
            Ok("TOPSECRET") => leaked_reads += 1,
            Ok(_) => inside_reads += 1,
            Err(_) => {}
        }
        // A write every third round: 3,334 in all, interleaved with the reads.
        if i % 3 == 0 {
            let path = if i % 2 == 0 {
                "flip/victim.txt"
            } else {
                "flip/new.txt"
            };
            rt.block_on(sb.execute("write_file", &json!({"path": path, "content": "PWNED"})));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = flipper.join().unwrap();
    assert!(swaps > 1_000, "the folder was swapped only {swaps} times");
    assert!(inside_reads > 0, "no read ever reached the inside file");
    assert_eq!(leaked_reads, 0, "reads returned the outside secret");
    assert_eq!(
        std::fs::read_to_string(f.outside.join("victim.txt")).unwrap(),
        "ORIGINAL",
        "a write landed outside"
    );
    assert!(
        !f.outside.join("new.txt").exists(),
        "a write created a file outside"
    );
}

/// read_file decides on what the sandbox's check saw of the path (no second look before its
/// open): a folder, also one reached through a link inside the workspace, still gets the
/// message that points to read_folder, and a file reached through such a link is read.
#[tokio::test]
async fn read_file_on_a_folder_points_to_read_folder() {
    let f = fixture();
    std::os::unix::fs::symlink(f.ws.join("docs"), f.ws.join("docs_link")).unwrap();
    let sb = f.sandbox(f.open_config());
    for path in ["docs", "docs_link", "."] {
        let e = err(sb.execute("read_file", &json!({ "path": path })).await);
        assert!(
            e.to_string().contains("is a folder; use read_folder"),
            "{path}: {e}"
        );
    }
    let (text, _) = ok(sb
        .execute("read_file", &json!({"path": "docs_link/guide.md"}))
        .await);
    assert_eq!(text, "# Guide\nfind the needle here\n");
}

// ------------------------------------------------------------------------------------------
// 12. Named pipes, devices and sockets are never opened

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_tools_refuse_a_named_pipe_at_once() {
    let f = fixture();
    mkfifo(&f.ws.join("pipe"));
    let mut config = f.open_config();
    config.timeout_seconds = 20.0;
    let sb = f.sandbox(config);
    for (tool, args) in [
        ("read_file", json!({"path": "pipe"})),
        ("read_file", json!({"path": "pipe", "start_line": 1})),
        ("hash_file", json!({"path": "pipe"})),
        ("write_file", json!({"path": "pipe", "content": "x"})),
        ("append_file", json!({"path": "pipe", "content": "x"})),
        (
            "edit_file",
            json!({"path": "pipe", "start_line": 1, "end_line": 1, "new_text": "x"}),
        ),
    ] {
        let started = Instant::now();
        let e = err(sb.execute(tool, &args).await);
        let took = started.elapsed();
        assert!(
            !matches!(e, ExecError::Timeout { .. }),
            "{tool} waited for the timeout: {e}"
        );
        assert!(e.to_string().contains("named pipe"), "{tool}: {e}");
        assert!(
            took < Duration::from_secs(5),
            "{tool} took {took:?}, not well before the 20 s timeout"
        );
    }
}

// ------------------------------------------------------------------------------------------
// 13. Protected paths: lsm's own configuration and run records

/// A workspace holding `lsm.toml` and `agents/`, both protected, plus links to them.
fn protected_fixture() -> (Fixture, Sandbox) {
    let f = fixture();
    std::fs::write(f.ws.join("lsm.toml"), "[sandbox]\n").unwrap();
    std::fs::create_dir_all(f.ws.join("agents/a/logs")).unwrap();
    std::fs::write(f.ws.join("agents/a/logs/transcript.jsonl"), "{}\n").unwrap();
    std::os::unix::fs::symlink(f.ws.join("lsm.toml"), f.ws.join("cfg_link")).unwrap();
    std::os::unix::fs::symlink(f.ws.join("agents"), f.ws.join("agents_link")).unwrap();
    let mut config = f.open_config();
    config.protected_paths = vec![f.ws.join("lsm.toml"), PathBuf::from("agents")];
    let sb = f.sandbox(config);
    (f, sb)
}

#[tokio::test]
async fn writes_to_protected_paths_are_refused_whatever_the_roots_say() {
    let (f, sb) = protected_fixture();
    let edit = |path: &str| json!({"path": path, "start_line": 1, "end_line": 1, "new_text": "allowed_read_paths = [\"/\"]"});
    for (tool, args) in [
        ("write_file", json!({"path": "lsm.toml", "content": "x"})),
        ("append_file", json!({"path": "lsm.toml", "content": "x"})),
        ("edit_file", edit("lsm.toml")),
        ("edit_file", edit("cfg_link")),
        ("write_file", json!({"path": "cfg_link", "content": "x"})),
        (
            "write_file",
            json!({"path": "agents/new.txt", "content": "x"}),
        ),
        (
            "append_file",
            json!({"path": "agents/a/logs/transcript.jsonl", "content": "x"}),
        ),
        ("edit_file", edit("agents/a/logs/transcript.jsonl")),
        ("create_folder", json!({"path": "agents/b"})),
        ("create_folder", json!({"path": "agents"})),
        (
            "write_file",
            json!({"path": "agents_link/a/new.txt", "content": "x"}),
        ),
        ("create_folder", json!({"path": "agents_link/c"})),
        (
            "write_file",
            json!({"path": f.ws.join("lsm.toml"), "content": "x"}),
        ),
        ("bash", json!({"command": "echo x > lsm.toml"})),
        ("bash", json!({"command": "touch agents/x"})),
    ] {
        let e = err(sb.execute(tool, &args).await);
        let text = e.to_string();
        assert!(
            text.contains(
                "is protected: lsm's own configuration and run records cannot be changed by tools"
            ),
            "{tool} {args}: {text}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(f.ws.join("lsm.toml")).unwrap(),
        "[sandbox]\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("agents/a/logs/transcript.jsonl")).unwrap(),
        "{}\n"
    );
    let entries: Vec<_> = std::fs::read_dir(f.ws.join("agents"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, ["a"]);
    // Reading stays allowed.
    let (text, _) = ok(sb.execute("read_file", &json!({"path": "lsm.toml"})).await);
    assert_eq!(text, "[sandbox]\n");
    let (text, _) = ok(sb
        .execute(
            "read_file",
            &json!({"path": "agents_link/a/logs/transcript.jsonl"}),
        )
        .await);
    assert_eq!(text, "{}\n");
}

/// A hard link has a name of its own, so only the check on the opened handle (device and
/// inode) can tell it is the protected file.
#[tokio::test]
async fn a_hard_link_to_a_protected_file_is_refused_by_handle() {
    let (f, sb) = protected_fixture();
    std::fs::hard_link(f.ws.join("lsm.toml"), f.ws.join("innocent.toml")).unwrap();
    for (tool, args) in [
        (
            "write_file",
            json!({"path": "innocent.toml", "content": "x"}),
        ),
        (
            "append_file",
            json!({"path": "innocent.toml", "content": "x"}),
        ),
        (
            "edit_file",
            json!({"path": "innocent.toml", "start_line": 1, "end_line": 1, "new_text": "x"}),
        ),
    ] {
        let text = err(sb.execute(tool, &args).await).to_string();
        assert!(text.contains("is protected"), "{tool}: {text}");
    }
    assert_eq!(
        std::fs::read_to_string(f.ws.join("lsm.toml")).unwrap(),
        "[sandbox]\n"
    );
}

#[test]
fn protected_paths_cannot_be_set_from_toml() {
    let from_toml: Result<SandboxConfig, _> =
        serde_json::from_value(json!({"protected_paths": ["/"]}));
    assert!(
        from_toml.is_err(),
        "protected_paths must not be a configuration key"
    );
    let config = SandboxConfig {
        protected_paths: vec![PathBuf::from("/x")],
        ..SandboxConfig::default()
    };
    let round = serde_json::to_value(&config).unwrap();
    assert!(round.get("protected_paths").is_none(), "{round}");
}

#[tokio::test]
async fn a_write_asks_with_the_diff_it_would_make_and_never_previews_outside_the_roots() {
    let f = fixture();
    let asker = tester(false);
    let config = SandboxConfig::confined_to(&f.ws);
    let sb = Sandbox::new(
        config,
        registry(),
        Some(Arc::clone(&asker) as Arc<dyn PermissionAsker>),
    )
    .unwrap();
    let _ = sb
        .execute(
            "edit_file",
            &json!({"path": "hello.txt", "start_line": 2, "end_line": 2, "new_text": "line 2"}),
        )
        .await;
    let _ = sb
        .execute(
            "append_file",
            &json!({"path": "hello.txt", "content": "line four\n"}),
        )
        .await;
    let _ = sb
        .execute(
            "write_file",
            &json!({"path": "new.md", "content": "# New\n"}),
        )
        .await;
    let _ = sb
        .execute(
            "write_file",
            &json!({"path": f.outside.join("secret.txt"), "content": "x"}),
        )
        .await;
    let asked = asker.asked();
    let previews: Vec<Option<String>> = asked.iter().map(|r| r.preview.clone()).collect();
    let edit = previews[0].as_deref().unwrap();
    assert!(edit.contains("-line two\n+line 2\n"), "{edit}");
    let append = previews[1].as_deref().unwrap();
    assert!(append.contains(" line three\n+line four"), "{append}");
    let new = previews[2].as_deref().unwrap();
    assert!(new.contains("+# New"), "{new}");
    // A path the sandbox will refuse is never read for a preview.
    assert_eq!(previews.get(3).cloned().flatten(), None);
    assert!(!format!("{asked:?}").contains("TOPSECRET"));
    // Denied: nothing changed.
    assert_eq!(
        std::fs::read_to_string(f.ws.join("hello.txt")).unwrap(),
        "line one\nline two\nline three\n"
    );
}
