//! The helper's side: apply a [`Plan`] to this (single-threaded) process, then `exec`.
//!
//! Order matters: the namespaces and mounts first (Landlock forbids mounting afterwards),
//! then Landlock, seccomp, and the rlimits last (so that setting them up is not limited).
//!
//! With [`Plan::contain`], the helper works in two stages so that nothing a program starts
//! outlives it. The first stage enters the namespaces, a new PID namespace among them, and
//! starts itself again: that second stage is the namespace's first process (its "init"). It
//! asks the kernel to kill it when the first stage dies (`PR_SET_PDEATHSIG`), checks that the
//! first stage is still there (the write end of a pipe only the first stage holds), applies
//! Landlock, seccomp and the rlimits, and `exec`s the program. When the program ends, or the
//! sandbox kills the first stage (a timeout, a stopped run), the kernel kills every process
//! left in the namespace: a `setsid` daemon or a double fork included. The first stage exits
//! as the program did.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use nix::libc;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::statvfs::{FsFlags, statvfs};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use super::plan::{Limits, Plan};
use super::probe::Probe;

/// Exit status of the helper when it could not confine or start the program. Its message on
/// stderr starts with [`FAILURE_PREFIX`].
pub(crate) const FAILURE_STATUS: i32 = 125;
/// Start of the helper's own error messages.
pub(crate) const FAILURE_PREFIX: &str = "lsm sandbox:";

/// The newest Landlock ABI whose rights are requested; older kernels enforce what they know.
const LANDLOCK_ABI: ABI = ABI::V10;

/// Why the helper could not apply a layer of the sandbox. Printed on stderr (after
/// [`FAILURE_PREFIX`]) and reported by the probe; the kernel or its configuration has to
/// allow the layer, or the sandbox is unavailable on this machine.
#[derive(Debug, thiserror::Error)]
enum ApplyError {
    /// `unshare` of the user (and mount, PID, network) namespaces was refused.
    #[error("could not enter a user namespace: {0}")]
    Unshare(nix::Error),
    /// The second stage (the PID namespace's first process) could not be started.
    #[error("could not start the sandbox's first process: {0}")]
    SecondStage(std::io::Error),
    /// The kernel would not kill the second stage with the first (`PR_SET_PDEATHSIG`).
    #[error("could not tie the sandbox's first process to its helper: {0}")]
    DeathSignal(nix::Error),
    /// The user or group mapping of the new namespace could not be written.
    #[error("could not write {file}: {error}")]
    IdMap {
        /// The `/proc/self/…` file.
        file: &'static str,
        /// Why.
        error: std::io::Error,
    },
    /// The mount namespace could not be made private.
    #[error("could not make the mount namespace private: {0}")]
    PrivateMounts(nix::Error),
    /// A protected path could not be bind-mounted read-only over itself.
    #[error("could not make {} read-only: {error}", .path.display())]
    ReadOnly {
        /// The protected path.
        path: PathBuf,
        /// Why.
        error: nix::Error,
    },
    /// Landlock refused the ruleset.
    #[error("Landlock: {0}")]
    Landlock(Box<landlock::RulesetError>),
    /// Landlock is compiled in but not enabled: boot with it in the `lsm=` list.
    #[error("Landlock is built into this kernel but not enabled (boot with lsm=…,landlock)")]
    LandlockNotEnabled,
    /// The kernel has no Landlock at all.
    #[error("this kernel has no Landlock (Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK)")]
    LandlockNotImplemented,
    /// Landlock accepted the ruleset but enforces none of it.
    #[error("Landlock rules could not be enforced")]
    LandlockNotEnforced,
    /// The seccomp filter could not be built or installed (seccompiler's message).
    #[error("seccomp: {0}")]
    Seccomp(String),
    /// The current rlimit could not be read.
    #[error("reading rlimit {resource:?}: {error}")]
    GetLimit {
        /// Which limit.
        resource: Resource,
        /// Why.
        error: nix::Error,
    },
    /// The rlimit could not be set.
    #[error("setting rlimit {resource:?}: {error}")]
    SetLimit {
        /// Which limit.
        resource: Resource,
        /// Why.
        error: nix::Error,
    },
}

/// Print `message` and exit with [`FAILURE_STATUS`].
pub(crate) fn fail(message: &str) -> ! {
    eprintln!("{FAILURE_PREFIX} {message}");
    std::process::exit(FAILURE_STATUS)
}

/// Apply the plan given as the helper's argument and run its program (or report, for a
/// probe). Never returns.
pub(crate) fn helper_main(plan: Option<OsString>) -> ! {
    let Some(plan) = plan.and_then(|p| p.into_string().ok()) else {
        fail("missing plan argument")
    };
    let plan: Plan = match serde_json::from_str(&plan) {
        Ok(plan) => plan,
        Err(e) => fail(&format!("unreadable plan: {e}")),
    };
    let probe = match confine(&plan) {
        Ok(probe) => probe,
        Err(e) => fail(&e.to_string()),
    };
    let Some(program) = &plan.program else {
        match serde_json::to_string(&probe) {
            Ok(report) => {
                // The probe's answer goes to the sandbox that started this helper.
                #[allow(clippy::print_stdout)]
                {
                    println!("{report}");
                }
                std::process::exit(0)
            }
            Err(e) => fail(&format!("could not report the probe: {e}")),
        }
    };
    let err = std::process::Command::new(program)
        .arg0(&plan.arg0)
        .args(&plan.args)
        .exec();
    fail(&format!("could not start '{}': {err}", plan.arg0))
}

/// Every layer, in order. Returns what was applied.
fn confine(plan: &Plan) -> Result<Probe, ApplyError> {
    if let Some([read, write]) = plan.pid1 {
        // The second stage: the namespaces are the first stage's already.
        become_first_process(read, write)?;
        return restrict(plan, true, None);
    }
    let namespaces = enter_namespaces(plan);
    let (namespaces, namespace_error) = match namespaces {
        Ok(()) => (true, None),
        Err(e) if plan.needs_namespaces() || plan.contain => return Err(e),
        Err(e) => (false, Some(e.to_string())),
    };
    if plan.contain && plan.program.is_some() {
        run_second_stage(plan)
    }
    restrict(plan, namespaces, namespace_error)
}

/// Landlock, seccomp and the rlimits, the layers applied last. Returns what was applied.
fn restrict(
    plan: &Plan,
    namespaces: bool,
    namespace_error: Option<String>,
) -> Result<Probe, ApplyError> {
    let landlock_abi = restrict_filesystem(plan)?;
    restrict_syscalls(plan.allow_network)?;
    set_limits(&plan.limits, namespaces)?;
    Ok(Probe {
        landlock_abi,
        namespaces,
        namespace_error,
    })
}

/// The signals the first stage waits for instead of dying of them: its child's end, and a
/// request to end the call (the sandbox's timeout sends `SIGTERM`).
fn first_stage_signals() -> SigSet {
    let mut set = SigSet::empty();
    for signal in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
    ] {
        set.add(signal);
    }
    set
}

/// The first stage, inside the new namespaces: start this helper again as the PID
/// namespace's first process, wait for it, and exit as it did. Asked to end (`SIGTERM`),
/// it kills that process — and with it every process in the namespace — and waits for it
/// before exiting. Never returns.
fn run_second_stage(plan: &Plan) -> ! {
    let signals = first_stage_signals();
    // Blocked, the signals wait for `sigwait` below (none is lost before it). The second
    // stage inherits the mask and unblocks them first thing.
    if let Err(e) = signals.thread_block() {
        fail(&format!("could not block signals: {e}"))
    }
    let started = nix::unistd::pipe()
        .map_err(|e| ApplyError::SecondStage(e.into()))
        .and_then(|(read, write)| {
            use std::os::fd::AsRawFd;
            let mut second = plan.clone();
            second.pid1 = Some([read.as_raw_fd(), write.as_raw_fd()]);
            let second = serde_json::to_string(&second)
                .map_err(|e| ApplyError::SecondStage(std::io::Error::other(e)))?;
            let exe = std::env::current_exe().map_err(ApplyError::SecondStage)?;
            let child = std::process::Command::new(exe)
                .arg(super::HELPER_ARG)
                .arg(second)
                .spawn()
                .map_err(ApplyError::SecondStage)?;
            // Only this stage may hold the write end: the second stage sees it closed once
            // this one is gone.
            drop(read);
            Ok((child, write))
        });
    let (mut child, _write) = match started {
        Ok(started) => started,
        Err(e) => fail(&e.to_string()),
    };
    loop {
        match signals.wait() {
            Ok(Signal::SIGCHLD) => match child.try_wait() {
                Ok(Some(status)) => exit_as(status),
                Ok(None) => continue,
                Err(e) => fail(&format!("waiting for the sandbox's first process: {e}")),
            },
            Ok(_) | Err(_) => {
                // The namespace's first process killed: the kernel kills every other
                // process in it before this wait returns.
                let _ = child.kill();
                match child.wait() {
                    Ok(status) => exit_as(status),
                    Err(e) => fail(&format!("waiting for the sandbox's first process: {e}")),
                }
            }
        }
    }
}

/// Exit as `status` did: with its code, or killed by its signal.
fn exit_as(status: std::process::ExitStatus) -> ! {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        std::process::exit(code)
    }
    let signal = status.signal().unwrap_or(libc::SIGKILL);
    if let Ok(signal) = Signal::try_from(signal) {
        // No handler is installed here: the default action ends this process the same way.
        let _ = nix::sys::signal::raise(signal);
    }
    std::process::exit(128 + signal)
}

/// The second stage, first thing: die with the first stage from now on, and make sure it
/// has not died already (then the pipe's write end is closed everywhere).
fn become_first_process(read: i32, write: i32) -> Result<(), ApplyError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(ApplyError::DeathSignal)?;
    // The first stage's blocked signals, inherited: the program gets them as usual.
    first_stage_signals()
        .thread_unblock()
        .map_err(ApplyError::DeathSignal)?;
    // This stage's copy of the write end; closing it leaves the first stage's the only one.
    let _ = nix::unistd::close(write);
    let gone = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("/proc/self/fd/{read}"))
        .and_then(|mut pipe| pipe.read(&mut [0u8; 1]));
    let _ = nix::unistd::close(read);
    match gone {
        // Nothing to read yet, and a writer left: the first stage is there.
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
        // End of file: no writer is left, the first stage is gone.
        Ok(_) => std::process::exit(libc::SIGKILL + 128),
        Err(e) => Err(ApplyError::SecondStage(e)),
    }
}

/// A new user and mount namespace (a PID namespace to contain the program's processes, a
/// network namespace without network access), mapping
/// this user to itself, with each protected path bind-mounted read-only over itself.
fn enter_namespaces(plan: &Plan) -> Result<(), ApplyError> {
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS;
    if plan.contain || plan.program.is_none() {
        // The probe tries it too, so that `contain` is only asked for where it works.
        flags |= CloneFlags::CLONE_NEWPID;
    }
    if !plan.allow_network {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(ApplyError::Unshare)?;
    let write = |file: &'static str, text: String| {
        std::fs::write(file, text).map_err(|error| ApplyError::IdMap { file, error })
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    // Mounts made here must not propagate back to the host.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(ApplyError::PrivateMounts)?;
    for path in &plan.protected {
        bind_read_only(path)?;
    }
    Ok(())
}

/// Bind `path` over itself, then remount the bind read-only, keeping the flags the kernel
/// locks for a mount inherited from another user namespace (`nosuid`, `nodev`, …).
fn bind_read_only(path: &Path) -> Result<(), ApplyError> {
    let what = |error: nix::Error| ApplyError::ReadOnly {
        path: path.to_path_buf(),
        error,
    };
    mount(
        Some(path),
        path,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(what)?;
    let current = statvfs(path).map_err(what)?.flags();
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    for (fs, ms) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if current.contains(fs) {
            flags |= ms;
        }
    }
    mount(None::<&str>, path, None::<&str>, flags, None::<&str>).map_err(what)
}

/// Landlock: the plan's paths and nothing else; no TCP without network access; no signals
/// or abstract UNIX sockets beyond the sandbox. Returns the ABI in force.
fn restrict_filesystem(plan: &Plan) -> Result<i32, ApplyError> {
    let err = |e: landlock::RulesetError| ApplyError::Landlock(Box::new(e));
    let all = AccessFs::from_all(LANDLOCK_ABI);
    let read: BitFlags<AccessFs> = AccessFs::from_read(LANDLOCK_ABI);
    // Device nodes would open the host's disks to a root user.
    let write = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(err)?;
    if !plan.allow_network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(LANDLOCK_ABI))
            .map_err(err)?;
    }
    let status = ruleset
        .scope(Scope::from_all(LANDLOCK_ABI))
        .map_err(err)?
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(&plan.exec, read))
        .map_err(err)?
        .add_rules(path_beneath_rules(&plan.system_read, AccessFs::ReadFile))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            &plan.system_write,
            AccessFs::ReadFile | AccessFs::WriteFile,
        ))
        .map_err(err)?
        .add_rules(path_beneath_rules(&plan.read, read))
        .map_err(err)?
        .add_rules(path_beneath_rules(&plan.write, write))
        .map_err(err)?
        .restrict_self()
        .map_err(err)?;
    let abi = match status.landlock {
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => kernel_abi.unwrap_or(effective_abi as i32),
        LandlockStatus::NotEnabled => {
            return Err(ApplyError::LandlockNotEnabled);
        }
        LandlockStatus::NotImplemented => {
            return Err(ApplyError::LandlockNotImplemented);
        }
    };
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(ApplyError::LandlockNotEnforced);
    }
    Ok(abi)
}

/// seccomp: no sockets without network access (only IPv4, IPv6 and netlink with it), and
/// none of the syscalls that would get around the other layers.
fn restrict_syscalls(allow_network: bool) -> Result<(), ApplyError> {
    fn err(e: impl std::fmt::Display) -> ApplyError {
        ApplyError::Seccomp(e.to_string())
    }
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
    ]
    .into_iter()
    .map(|call| (call, Vec::new()))
    .collect();
    let socket_rules = if allow_network {
        let other_family = |family: i32| {
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, family as u64)
        };
        vec![
            SeccompRule::new(vec![
                other_family(libc::AF_INET).map_err(err)?,
                other_family(libc::AF_INET6).map_err(err)?,
                other_family(libc::AF_NETLINK).map_err(err)?,
            ])
            .map_err(err)?,
        ]
    } else {
        Vec::new() // every socket(2)
    };
    rules.insert(libc::SYS_socket, socket_rules);
    let arch = std::env::consts::ARCH.try_into().map_err(err)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(err)?;
    let program: BpfProgram = filter.try_into().map_err(err)?;
    // This thread only (the helper has no other), inherited across exec.
    seccompiler::apply_filter(&program).map_err(err)
}

/// The rlimits (never above the current hard limits, which cannot be raised).
fn set_limits(limits: &Limits, in_user_namespace: bool) -> Result<(), ApplyError> {
    let set = |resource: Resource, soft: u64, hard: u64| {
        let (_, current_hard) =
            getrlimit(resource).map_err(|error| ApplyError::GetLimit { resource, error })?;
        let hard = hard.min(current_hard);
        setrlimit(resource, soft.min(hard), hard)
            .map_err(|error| ApplyError::SetLimit { resource, error })
    };
    set(
        Resource::RLIMIT_CPU,
        limits.cpu_seconds,
        limits.cpu_seconds.saturating_add(1),
    )?;
    set(
        Resource::RLIMIT_AS,
        limits.address_space_bytes,
        limits.address_space_bytes,
    )?;
    set(
        Resource::RLIMIT_FSIZE,
        limits.file_size_bytes,
        limits.file_size_bytes,
    )?;
    set(Resource::RLIMIT_CORE, 0, 0)?;
    if in_user_namespace {
        set(Resource::RLIMIT_NPROC, limits.processes, limits.processes)?;
    }
    Ok(())
}
