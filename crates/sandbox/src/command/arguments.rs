//! The arguments of a checked command: which are paths, how each is confined, and the
//! programs whose arguments are writes or other programs.

use super::CommandRefusal;
use crate::paths::PathPolicy;
use crate::{ConfinedPath, PathAccess};

/// Programs that create, change or delete the files named by their arguments. Their path
/// arguments must be inside the write allowlist too (the read allowlist alone would let
/// `rm` delete read-only documents), and every positional argument counts as a path
/// (`touch notes` names a file without looking like one).
const WRITING_PROGRAMS: &[&str] = &[
    "rm", "rmdir", "mv", "cp", "touch", "mkdir", "ln", "tee", "truncate", "shred", "unlink",
    "install", "patch", "split", "csplit",
];

/// Programs whose job is to run another program, which the lists would never see.
const PROGRAM_RUNNERS: &[&str] = &[
    "nice", "timeout", "stdbuf", "time", "watch", "strace", "ltrace", "ionice", "chroot", "setsid",
    "flock", "taskset", "unshare", "nsenter", "chrt", "busybox", "command", "sg", "script",
    "parallel",
];

/// How the arguments of `base` are checked: as reads, or also as writes for programs that
/// write to them (`sed -i`, `find -delete`, [`WRITING_PROGRAMS`]). Err for ways of running
/// another program (`find -exec`, [`PROGRAM_RUNNERS`]).
pub(super) fn argument_access(base: &str, args: &[String]) -> Result<PathAccess, CommandRefusal> {
    if PROGRAM_RUNNERS.contains(&base) {
        return Err(CommandRefusal::ProgramRunner {
            base: base.to_string(),
        });
    }
    let writes = match base {
        "sed" => args.iter().any(|a| {
            a.starts_with("--in-place")
                || (a.starts_with('-') && !a.starts_with("--") && a.contains('i'))
        }),
        "find" => {
            if let Some(flag) = args
                .iter()
                .find(|a| matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"))
            {
                return Err(CommandRefusal::FindExec { flag: flag.clone() });
            }
            args.iter()
                .any(|a| a == "-delete" || a.starts_with("-fprint") || a == "-fls")
        }
        _ => WRITING_PROGRAMS.contains(&base),
    };
    Ok(if writes {
        PathAccess::Write
    } else {
        PathAccess::Read
    })
}

/// Check every argument that could name a file: as a read path, and with
/// `PathAccess::Write` also as a write path (and then every positional argument is a path).
pub(super) fn check_arguments(
    args: &[String],
    paths: &PathPolicy,
    access: PathAccess,
) -> Result<(), CommandRefusal> {
    let writes = access == PathAccess::Write;
    let mut options_ended = false;
    for arg in args {
        if options_ended || !arg.starts_with('-') || arg == "-" {
            if (writes && arg != "-") || is_path_like(arg, paths) {
                check_path(arg, arg, paths, access)?;
            }
            continue;
        }
        if arg == "--" {
            options_ended = true;
            continue;
        }
        if let Some((_, value)) = arg.split_once('=') {
            // `--file=/etc/passwd`
            if value.contains('/') || value.starts_with('.') || value.starts_with('~') {
                check_path(value, arg, paths, access)?;
            }
        } else if !arg.starts_with("--") && arg.contains('/') {
            // `-f/etc/passwd`: getopt takes the value right after the option letter.
            check_path(after_option_letter(arg), arg, paths, access)?;
            // `-xf/etc/passwd` is `-x -f /etc/passwd` for some programs: when only option
            // letters come before the first '/', the absolute tail is a path too.
            if let Some(slash) = arg.find('/') {
                if slash > 2 && arg[1..slash].bytes().all(|b| b.is_ascii_alphabetic()) {
                    check_path(&arg[slash..], arg, paths, access)?;
                }
            }
        }
    }
    Ok(())
}

/// `-fvalue` → `value` (the text after the dash and one option letter).
fn after_option_letter(arg: &str) -> &str {
    arg.char_indices().nth(2).map_or("", |(i, _)| &arg[i..])
}

/// Whether a positional argument could be a path: it has a '/', starts with '.' or '~', or
/// names something in the working directory.
fn is_path_like(arg: &str, paths: &PathPolicy) -> bool {
    arg.contains('/')
        || arg.starts_with('.')
        || arg.starts_with('~')
        || (!arg.is_empty() && !arg.contains('\0') && paths.working_dir().join(arg).exists())
}

/// Check `path` (from argument `arg`) for reading, and for writing too when `access` says so.
fn check_path(
    path: &str,
    arg: &str,
    paths: &PathPolicy,
    access: PathAccess,
) -> Result<(), CommandRefusal> {
    if path.starts_with('~') {
        return Err(CommandRefusal::ArgumentTilde {
            arg: arg.to_string(),
        });
    }
    let mut checks = vec![PathAccess::Read];
    if access == PathAccess::Write {
        checks.push(PathAccess::Write);
    }
    for check in checks {
        paths
            .check(path, check)
            .map_err(|reason| CommandRefusal::Argument {
                arg: arg.to_string(),
                reason,
            })?;
    }
    Ok(())
}

pub(super) fn check_redirect_target(
    target: &str,
    access: PathAccess,
    paths: &PathPolicy,
) -> Result<ConfinedPath, CommandRefusal> {
    paths
        .confine(target, access)
        .map_err(|reason| CommandRefusal::RedirectTarget {
            target: target.to_string(),
            reason,
        })
}
