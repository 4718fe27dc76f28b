//! The OS sandbox around every program a tool executes.
//!
//! The command policy ([`crate::CheckedCommand`]) decides *which* program may run; this
//! module makes the kernel enforce *what it can do* once running, whatever its arguments
//! make it do (`awk 'BEGIN{system(...)}'`, `python3 -c`, a script it writes itself):
//!
//! - **Landlock** (filesystem): the read roots are readable, the write roots writable, the
//!   system folders programs need to run ([`plan::SYSTEM_EXEC_PATHS`]) and the program's own
//!   installation prefix readable and executable, and nothing else — `/etc/passwd`, `$HOME`,
//!   `/tmp` are refused. With network access off, Landlock also refuses every TCP bind and
//!   connect (ABI ≥ 4), and its scopes keep the program from signalling processes or
//!   reaching abstract UNIX sockets outside its sandbox (ABI ≥ 6).
//! - **User + mount namespace**: each protected path inside a write root (`lsm.toml`, the
//!   agents folder) is bind-mounted read-only over itself, so it stays unwritable although
//!   Landlock (which can only allow) grants its parent. With network access off the child
//!   also gets an empty network namespace.
//! - **seccomp**: `socket(2)` is refused for every address family with network access off
//!   (TCP, UDP, raw, UNIX — `/var/run/docker.sock` too), and for all but IPv4, IPv6 and
//!   netlink with it on; `io_uring` (which could open sockets behind seccomp's back), mount
//!   syscalls, the kernel keyring, `bpf` and `perf_event_open` are refused always.
//! - **rlimits**: CPU seconds (from the call's timeout), address space, processes, file size
//!   (`max_write_bytes`), no core dumps ([`plan::Limits`]).
//!
//! The rules are applied by a small helper between fork and exec: the sandbox starts the
//! helper executable (the `lsm` binary itself, dispatched by [`run_helper_if_requested`] at
//! the start of `main`, or the `lsm-confine` binary of this crate) with the plan as an
//! argument; the helper, still single-threaded, unshares the namespaces, mounts, restricts
//! itself and then `exec`s the program in its place (same process, so the sandbox's timeout
//! kill reaches the program). This keeps all of it in safe Rust: `pre_exec` closures are
//! `unsafe` and the workspace forbids `unsafe` code.
//!
//! Where confinement is unavailable (no Landlock, namespaces refused where they are needed,
//! no helper), `bash` refuses to run unless `allow_unconfined_exec` accepts it, and then says
//! in its result that the program ran unconfined.

mod apply;
mod plan;
mod probe;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub(crate) use apply::{FAILURE_PREFIX, FAILURE_STATUS};
pub use plan::Limits;
pub(crate) use plan::Plan;

use crate::SandboxConfig;
pub use crate::config::ExecHelper;

/// First argument that makes a program act as the confinement helper.
pub const HELPER_ARG: &str = "__lsm-confine";

/// How a checked command will run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// Inside the OS sandbox.
    Confined(Arc<ConfinedExec>),
    /// Without it: confinement is unavailable (the reason) and `allow_unconfined_exec`
    /// accepted that.
    Unconfined(String),
}

/// A program's OS sandbox: the helper to start and the rules it applies.
#[derive(Debug, PartialEq, Eq)]
pub struct ConfinedExec {
    helper: PathBuf,
    plan: Plan,
    description: String,
}

impl ConfinedExec {
    /// How the program is confined, for the record (e.g. `landlock abi 7 + user/mount/net
    /// namespaces + seccomp + rlimits`).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Whether every process the program starts ends with it (it runs as the first process
    /// of a PID namespace of its own).
    pub fn contains_processes(&self) -> bool {
        self.plan.contain
    }

    /// The command that runs `args` under `arg0` through the helper. The limits come from the
    /// call: CPU seconds from `timeout`, file size from `max_write_bytes`.
    pub fn command(
        &self,
        arg0: &str,
        args: &[String],
        timeout: Duration,
        max_write_bytes: usize,
    ) -> std::process::Command {
        let mut plan = self.plan.clone();
        plan.arg0 = arg0.to_string();
        plan.args = args.to_vec();
        plan.limits = Limits::for_call(timeout, max_write_bytes);
        let mut command = std::process::Command::new(&self.helper);
        // Serialising plain data cannot fail; an empty plan would make the helper refuse.
        command
            .arg(HELPER_ARG)
            .arg(serde_json::to_string(&plan).unwrap_or_default());
        command
    }
}

/// Programs run only inside the OS sandbox, and it is unavailable here (the reason says
/// why: no helper, a kernel without Landlock, a refused user namespace). Fix that, or set
/// `allow_unconfined_exec = true` in `[sandbox]` to run programs without it.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "programs run only inside the OS sandbox, which is unavailable here: {reason}; \
     set allow_unconfined_exec = true in [sandbox] to run them without it"
)]
pub struct ConfinementUnavailable {
    reason: Unavailable,
}

impl ConfinementUnavailable {
    /// Why the OS sandbox is unavailable (without the advice to run unconfined).
    pub fn reason(&self) -> impl std::fmt::Display + '_ {
        &self.reason
    }
}

/// Why the OS sandbox cannot confine a program here.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Unavailable {
    /// The running program's path is unknown, so it cannot start itself as the helper.
    #[error("cannot locate the running program for the sandbox helper: {0}")]
    CurrentExe(Arc<std::io::Error>),
    /// The running program does not dispatch the helper: its `main` must call
    /// [`run_helper_if_requested`] first, or the configuration must name a helper executable.
    #[error(
        "this program does not provide the sandbox helper \
        (its main must call lsm_sandbox::confine::run_helper_if_requested)"
    )]
    NotDispatched,
    /// The composition root said so ([`ExecHelper::Unavailable`]), with its reason.
    #[error("{0}")]
    Configured(String),
    /// The helper could not be probed, or could not apply the sandbox.
    #[error(transparent)]
    Probe(#[from] probe::ProbeError),
    /// The kernel refused a user namespace that the plan needs. Allow unprivileged user
    /// namespaces, or drop what needs them (protected paths, running as root).
    #[error("the kernel refused a user namespace ({reason}), which is needed {needed_for}")]
    NamespaceRefused {
        /// The kernel's answer, as the helper reported it.
        reason: String,
        /// What the namespace is for.
        needed_for: &'static str,
    },
}

/// Everything the policy needs to confine programs, prepared once per sandbox.
#[derive(Debug)]
pub(crate) struct ExecSetup {
    helper: Result<PathBuf, Unavailable>,
    base: Plan,
    allow_unconfined: bool,
}

impl ExecSetup {
    /// From the `[sandbox]` policy: roots, protected paths, network, helper.
    pub(crate) fn from_config(config: &SandboxConfig) -> Self {
        let helper = match &config.exec_helper {
            ExecHelper::CurrentExe if HELPER_DISPATCHED.get().is_some() => {
                std::env::current_exe().map_err(|e| Unavailable::CurrentExe(Arc::new(e)))
            }
            ExecHelper::CurrentExe => Err(Unavailable::NotDispatched),
            ExecHelper::Path(path) => Ok(path.clone()),
            ExecHelper::Unavailable(reason) => Err(Unavailable::Configured(reason.clone())),
        };
        ExecSetup {
            helper,
            base: Plan::from_config(config),
            allow_unconfined: config.allow_unconfined_exec,
        }
    }

    /// A setup that runs everything unconfined (unit tests of the policy).
    #[cfg(test)]
    pub(crate) fn unconfined_for_tests() -> Self {
        ExecSetup {
            helper: Err(Unavailable::Configured("unit test".into())),
            base: Plan::default(),
            allow_unconfined: true,
        }
    }

    /// How `program` (the file that will run) will run.
    /// Err: why it must not run (confinement unavailable and not accepted).
    pub(crate) fn confinement_for(
        &self,
        program: &Path,
    ) -> Result<Confinement, ConfinementUnavailable> {
        let available = self.helper.clone().and_then(|helper| {
            let probe = probe::probe(&helper)?;
            if self.base.needs_namespaces() && !probe.namespaces {
                return Err(Unavailable::NamespaceRefused {
                    reason: probe
                        .namespace_error
                        .clone()
                        .unwrap_or_else(|| "unknown reason".into()),
                    needed_for: if self.base.protected.is_empty() {
                        "to drop root's privileges"
                    } else {
                        "to keep protected paths read-only"
                    },
                });
            }
            let mut plan = self.base.clone();
            plan.set_program(program);
            plan.contain = probe.namespaces;
            let description = probe.describe(&plan);
            Ok(Confinement::Confined(Arc::new(ConfinedExec {
                helper,
                plan,
                description,
            })))
        });
        match available {
            Ok(confined) => Ok(confined),
            Err(reason) if self.allow_unconfined => Ok(Confinement::Unconfined(reason.to_string())),
            Err(reason) => Err(ConfinementUnavailable { reason }),
        }
    }
}

/// Set when the running program dispatches the helper ([`run_helper_if_requested`]).
static HELPER_DISPATCHED: std::sync::OnceLock<()> = std::sync::OnceLock::new();

/// Call first thing in `main`: when this process was started as the confinement helper
/// (first argument [`HELPER_ARG`]), apply the sandbox and `exec` the program — this never
/// returns then. Otherwise it records that this program can serve as the helper
/// ([`ExecHelper::CurrentExe`]) and returns.
pub fn run_helper_if_requested() {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() == Some(std::ffi::OsStr::new(HELPER_ARG)) {
        apply::helper_main(args.next())
    }
    let _ = HELPER_DISPATCHED.set(());
}

/// The `main` of a dedicated helper executable (`lsm-confine`): `lsm-confine __lsm-confine
/// <plan>`.
pub fn helper_main() -> ! {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(flag) if flag == HELPER_ARG => apply::helper_main(args.next()),
        _ => apply::fail(&format!(
            "usage: {HELPER_ARG} <plan>; this program is started by the lsm sandbox"
        )),
    }
}
