//! The helper's side: apply a [`Plan`] to this (single-threaded) process, then `exec`.
//!
//! Order matters: the namespaces and mounts first (Landlock forbids mounting afterwards),
//! then Landlock, seccomp, and the rlimits last (so that setting them up is not limited).

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
    /// `unshare` of the user (and mount, network) namespaces was refused.
    #[error("could not enter a user namespace: {0}")]
    Unshare(nix::Error),
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
    let namespaces = enter_namespaces(plan);
    let (namespaces, namespace_error) = match namespaces {
        Ok(()) => (true, None),
        Err(e) if plan.needs_namespaces() => return Err(e),
        Err(e) => (false, Some(e.to_string())),
    };
    let landlock_abi = restrict_filesystem(plan)?;
    restrict_syscalls(plan.allow_network)?;
    set_limits(&plan.limits, namespaces)?;
    Ok(Probe {
        landlock_abi,
        namespaces,
        namespace_error,
    })
}

/// A new user and mount namespace (and network namespace without network access), mapping
/// this user to itself, with each protected path bind-mounted read-only over itself.
fn enter_namespaces(plan: &Plan) -> Result<(), ApplyError> {
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS;
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
