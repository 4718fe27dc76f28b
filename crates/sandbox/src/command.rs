//! Command-line policy for tools that execute programs.
//!
//! A command line is never given to a shell. It is split into words here (with `shlex`'s
//! POSIX quoting rules), the only shell syntax understood is `<`, `>` and `>>` redirection,
//! and everything that would make a shell do more than run one program — chaining, pipes,
//! substitution, variables, background jobs — is refused outright, quoted or not, so that
//! no quoting subtlety can ever change what runs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::config::default_command_allowlist;
use crate::confine::{Confinement, ConfinementUnavailable, ExecSetup};
use crate::paths::{PathPolicy, PathRefusal};
use crate::{ConfinedPath, PathAccess, SandboxConfig};

mod parse;
mod shell;

use parse::{ParseError, parse};

/// Why a command line is refused. The message is for the model: it names what to change
/// (the syntax, the program, an argument) so the next call can pass.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CommandRefusal {
    /// Nothing to run. Give a command.
    #[error("the command is empty")]
    Empty,
    /// Shell syntax, which nothing here interprets. Run one program per call.
    #[error(
        "'{}' ({what}) is not allowed: commands run without a shell, one program per call",
        .token.escape_default()
    )]
    ShellSyntax {
        /// The operator found.
        token: &'static str,
        /// What it would have done.
        what: &'static str,
    },
    /// The line cannot be split into words and redirections.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// Only redirections, no program. Name the program first.
    #[error("no program given (only a redirection)")]
    NoProgram,
    /// A program given by a path that is not an executable file. Check the path.
    #[error("'{argv0}' is not an executable file")]
    NotExecutable {
        /// The program as given.
        argv0: String,
    },
    /// A program name found in no folder of `PATH`. Check the name.
    #[error("'{argv0}' was not found on PATH")]
    NotOnPath {
        /// The program as given.
        argv0: String,
    },
    /// The program cannot be confined, and running it unconfined is not accepted.
    #[error(transparent)]
    Unconfined(#[from] ConfinementUnavailable),
    /// A program path starting with `~`, which is not expanded. Give the full path or name.
    #[error("'~' is not expanded; give the program's full path or its name")]
    ProgramTilde,
    /// A relative program path refused by the read allowlist.
    #[error("program '{argv0}': {reason}")]
    ProgramPath {
        /// The program as given.
        argv0: String,
        /// Why its path is refused.
        reason: PathRefusal,
    },
    /// A relative program path whose confined path is not UTF-8, so it cannot be run by it.
    #[error("program '{argv0}' resolves to a non-UTF-8 path")]
    NonUtf8Program {
        /// The program as given.
        argv0: String,
    },
    /// The program is on `command_denylist`.
    #[error("'{name}' is on the command denylist (command_denylist in [sandbox])")]
    Denied {
        /// Its lowercased name.
        name: String,
    },
    /// A network program while network access is off (`allow_url_access`).
    #[error("'{name}' reaches the network, which this sandbox does not allow")]
    Network {
        /// Its lowercased name.
        name: String,
    },
    /// The program is not on `command_allowlist`. Add it there, or allow any program.
    #[error(
        "'{name}' is not on the command allowlist (allowed: {allowed}); add it to \
         command_allowlist in [sandbox], or set command_allow_any = true, to run it"
    )]
    NotAllowed {
        /// Its lowercased name.
        name: String,
        /// The allowlist, comma-separated.
        allowed: String,
    },
    /// A program given by a path that is not the allowlisted program of that name. Give
    /// its name instead, or allow any program.
    #[error(
        "'{argv0}' is not the '{name}' found on PATH, and only programs on the command \
         allowlist run; give its name instead, or set command_allow_any = true in \
         [sandbox] to run programs given by a path"
    )]
    NotThePathProgram {
        /// The program as given.
        argv0: String,
        /// Its lowercased name.
        name: String,
    },
    /// A program whose job is to run another one, which the policy would not see. Run
    /// that program directly.
    #[error(
        "'{base}' runs another program, which the command policy could not check; run that program directly"
    )]
    ProgramRunner {
        /// Its lowercased name.
        base: String,
    },
    /// `find -exec` and the like. Find the files, then run the program directly.
    #[error(
        "'find {flag}' runs other programs, which the command policy could not check; find the files, then run the program directly"
    )]
    FindExec {
        /// The flag (`-exec`, …).
        flag: String,
    },
    /// The program has no file name (`/`, `..`, or not UTF-8).
    #[error("'{argv0}' is not a program name")]
    NotAProgramName {
        /// The program as given.
        argv0: String,
    },
    /// A path argument starting with `~`, which is not expanded.
    #[error(
        "argument '{arg}': '~' is not expanded; give an absolute path or one relative to the working directory"
    )]
    ArgumentTilde {
        /// The argument.
        arg: String,
    },
    /// A path argument refused by the allowlists.
    #[error("argument '{arg}': {reason}")]
    Argument {
        /// The argument.
        arg: String,
        /// Why its path is refused.
        reason: PathRefusal,
    },
    /// A redirection target refused by the allowlists.
    #[error("redirection target '{target}': {reason}")]
    RedirectTarget {
        /// The target as given.
        target: String,
        /// Why it is refused.
        reason: PathRefusal,
    },
    /// `exec_shell` is on, but the kernel sandbox that confines a shell's commands is not
    /// fully available here. Fix that (see the reason), or turn `exec_shell` off to run one
    /// program per call.
    #[error(
        "the shell runs only inside the full OS sandbox, which is unavailable here: {reason}; \
         set exec_shell = false in [sandbox] to run one program per call"
    )]
    ShellUnconfined {
        /// What is missing.
        reason: String,
    },
    /// The shell command does not start with a program the policy can check. Start it with
    /// a program's name (`cargo test && …`), or a plain shell built-in such as `cd`.
    #[error("{why}: start the command with a program's name, e.g. `cargo test`")]
    ShellFirstProgram {
        /// What is wrong with the start of the command.
        why: String,
    },
}

/// An output redirection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// Confined target path (opened through its root's handle, never by name).
    pub path: ConfinedPath,
    /// `>>` rather than `>`.
    pub append: bool,
}

/// A parsed command line that passed the policy. Executed without a shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedCommand {
    /// The program: a bare name looked up on the scrubbed PATH, an absolute path, or (for a
    /// relative path such as `./tool`) the confined absolute path.
    pub program: String,
    /// Its arguments, unexpanded.
    pub args: Vec<String>,
    /// `< file`, confined for reading (opened through its root's handle, never by name).
    pub stdin: Option<ConfinedPath>,
    /// `> file` / `>> file`, confined for writing.
    pub stdout: Option<Redirect>,
    /// The OS sandbox the program runs in.
    pub confinement: Confinement,
}

/// Programs that reach the network; refused whenever network access is off, whatever the
/// deny list says.
const NETWORK_PROGRAMS: &[&str] = &[
    "curl", "wget", "nc", "ncat", "ssh", "scp", "rsync", "ftp", "telnet",
];

/// Shell syntax refused anywhere in the line, with what it would have done. Longer
/// operators come first so the message names the one actually used.
const FORBIDDEN: &[(&str, &str)] = &[
    ("$(", "command substitution"),
    ("${", "variable expansion"),
    ("<(", "process substitution"),
    (">(", "process substitution"),
    ("&&", "command chaining"),
    ("||", "command chaining"),
    ("&>", "redirecting stderr"),
    (";", "command chaining"),
    ("|", "a pipe"),
    ("&", "a background job or file-descriptor redirection"),
    ("`", "command substitution"),
    ("$", "variable expansion"),
    ("\n", "a second command line"),
    ("\r", "a carriage return"),
    ("\0", "a NUL byte"),
];

/// The command allow/deny lists, and how allowed programs are confined.
#[derive(Debug)]
pub(crate) struct CommandPolicy {
    /// `None`: any program the deny list does not name (`command_allow_any`).
    allow: Option<Vec<String>>,
    deny: Vec<String>,
    allow_network: bool,
    /// `exec_shell`: the line runs with `/bin/sh -c` (see [`shell`]).
    shell: bool,
    /// The `PATH` executed programs get, on which bare names are found.
    search_path: Option<OsString>,
    exec: ExecSetup,
}

impl CommandPolicy {
    /// The policy of `[sandbox]`: an empty allowlist means the default one.
    pub(crate) fn from_config(config: &SandboxConfig) -> Self {
        let allow = if config.command_allow_any {
            None
        } else if config.command_allowlist.is_empty() {
            Some(lower(&default_command_allowlist()))
        } else {
            Some(lower(&config.command_allowlist))
        };
        let search_path = config
            .env_passthrough
            .iter()
            .any(|k| k == "PATH")
            .then(|| std::env::var_os("PATH"))
            .flatten();
        CommandPolicy {
            allow,
            deny: lower(&config.command_denylist),
            allow_network: config.allow_url_access,
            shell: config.exec_shell,
            search_path,
            exec: ExecSetup::from_config(config),
        }
    }

    /// Lists of base command names (`allow: None` allows any), running programs unconfined.
    #[cfg(test)]
    pub(crate) fn new(allow: Option<&[String]>, deny: &[String], allow_network: bool) -> Self {
        CommandPolicy {
            allow: allow.map(lower),
            deny: lower(deny),
            allow_network,
            shell: false,
            search_path: std::env::var_os("PATH"),
            exec: ExecSetup::unconfined_for_tests(),
        }
    }

    /// How `program` (a resolved file) runs: inside the OS sandbox, or unconfined when that
    /// is unavailable and accepted. Err: why it must not run.
    pub(crate) fn confinement_for(
        &self,
        program: &Path,
    ) -> Result<Confinement, ConfinementUnavailable> {
        self.exec.confinement_for(program)
    }

    /// Parse `line` and check it: syntax, program name, path arguments, redirections; then
    /// decide how the program is confined. Err: the reason, for the model.
    pub(crate) fn check(
        &self,
        line: &str,
        paths: &PathPolicy,
    ) -> Result<CheckedCommand, CommandRefusal> {
        if line.trim().is_empty() {
            return Err(CommandRefusal::Empty);
        }
        if self.shell {
            return self.check_shell(line, paths);
        }
        for &(token, what) in FORBIDDEN {
            if line.contains(token) {
                return Err(CommandRefusal::ShellSyntax { token, what });
            }
        }
        let parsed = parse(line)?;
        let Some((argv0, args)) = parsed.words.split_first() else {
            return Err(CommandRefusal::NoProgram);
        };
        let (program, resolved) = self.check_program(argv0, paths)?;
        let access = argument_access(&base_name(argv0)?, args)?;
        check_arguments(args, paths, access)?;
        let stdin = match &parsed.stdin {
            Some(target) => Some(check_redirect_target(target, PathAccess::Read, paths)?),
            None => None,
        };
        let stdout = match &parsed.stdout {
            Some((target, append)) => Some(Redirect {
                path: check_redirect_target(target, PathAccess::Write, paths)?,
                append: *append,
            }),
            None => None,
        };
        let resolved = resolved.ok_or_else(|| {
            let argv0 = argv0.clone();
            if argv0.contains('/') {
                CommandRefusal::NotExecutable { argv0 }
            } else {
                CommandRefusal::NotOnPath { argv0 }
            }
        })?;
        let confinement = self.exec.confinement_for(&resolved)?;
        Ok(CheckedCommand {
            program,
            args: args.to_vec(),
            stdin,
            stdout,
            confinement,
        })
    }

    /// Check the program against the lists; returns what to execute and, when it exists,
    /// the file that will run.
    fn check_program(
        &self,
        argv0: &str,
        paths: &PathPolicy,
    ) -> Result<(String, Option<PathBuf>), CommandRefusal> {
        let mut names = vec![base_name(argv0)?];
        let mut program = argv0.to_string();
        let by_path = argv0.contains('/');
        if by_path {
            if argv0.starts_with('~') {
                return Err(CommandRefusal::ProgramTilde);
            }
            let path = Path::new(argv0);
            if path.is_relative() {
                // A program inside the workspace: it must be readable, and it is executed by
                // its confined absolute path (a relative program path would be resolved
                // against this process's directory, not the command's).
                let resolved = paths.check(argv0, PathAccess::Read).map_err(|reason| {
                    CommandRefusal::ProgramPath {
                        argv0: argv0.to_string(),
                        reason,
                    }
                })?;
                program = resolved
                    .to_str()
                    .ok_or_else(|| CommandRefusal::NonUtf8Program {
                        argv0: argv0.to_string(),
                    })?
                    .to_string();
            }
            // A link such as `./x -> /bin/sh` is judged by what it runs too.
            if let Ok(real) = std::fs::canonicalize(Path::new(&program)) {
                if let Some(name) = real.file_name().and_then(|n| n.to_str()) {
                    names.push(name.to_lowercase());
                }
            }
        }
        for name in &names {
            let unversioned = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
            if self.deny.iter().any(|d| d == name || d == unversioned) {
                return Err(CommandRefusal::Denied { name: name.clone() });
            }
            if !self.allow_network
                && NETWORK_PROGRAMS
                    .iter()
                    .any(|n| *n == name.as_str() || *n == unversioned)
            {
                return Err(CommandRefusal::Network { name: name.clone() });
            }
        }
        let on_path = find_on_path(&names[0], self.search_path.as_deref());
        let resolved = if by_path {
            Some(PathBuf::from(&program)).filter(|p| is_executable(p))
        } else {
            on_path.clone()
        };
        if let Some(allow) = &self.allow {
            if let Some(name) = names.iter().find(|n| !allow.contains(n)) {
                return Err(CommandRefusal::NotAllowed {
                    name: name.clone(),
                    allowed: allow.join(", "),
                });
            }
            // `./ls` is a workspace file named like an allowed program, not that program.
            let same =
                |a: &Path, b: &Path| std::fs::canonicalize(a).ok() == std::fs::canonicalize(b).ok();
            if by_path
                && !matches!((&resolved, &on_path), (Some(given), Some(found)) if same(given, found))
            {
                return Err(CommandRefusal::NotThePathProgram {
                    argv0: argv0.to_string(),
                    name: names[0].clone(),
                });
            }
        }
        Ok((program, resolved))
    }
}

fn lower(names: &[String]) -> Vec<String> {
    names.iter().map(|n| n.trim().to_lowercase()).collect()
}

/// The first executable file called `name` in the absolute folders of `search_path`.
fn find_on_path(name: &str, search_path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(search_path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

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
fn argument_access(base: &str, args: &[String]) -> Result<PathAccess, CommandRefusal> {
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

/// The lowercased file name of `argv0` (`/bin/LS` → `ls`).
fn base_name(argv0: &str) -> Result<String, CommandRefusal> {
    Path::new(argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_lowercase)
        .ok_or_else(|| CommandRefusal::NotAProgramName {
            argv0: argv0.to_string(),
        })
}

/// Check every argument that could name a file: as a read path, and with
/// `PathAccess::Write` also as a write path (and then every positional argument is a path).
fn check_arguments(
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

fn check_redirect_target(
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        _tmp: tempfile::TempDir,
        root: PathBuf,
        paths: PathPolicy,
    }

    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("notes.txt"), "n").unwrap();
        let paths = PathPolicy::new(
            std::slice::from_ref(&root),
            std::slice::from_ref(&root),
            &root,
        )
        .unwrap();
        Fixture {
            _tmp: tmp,
            root,
            paths,
        }
    }

    fn default_policy() -> CommandPolicy {
        CommandPolicy::new(None, &crate::config::default_command_denylist(), false)
    }

    #[test]
    fn parses_plain_command() {
        let f = fixture();
        let cmd = default_policy()
            .check("ls -la 'src' \"notes.txt\"", &f.paths)
            .unwrap();
        assert_eq!(cmd.program, "ls");
        assert_eq!(cmd.args, ["-la", "src", "notes.txt"]);
        assert_eq!(cmd.stdin, None);
        assert_eq!(cmd.stdout, None);
    }

    #[test]
    fn refuses_each_forbidden_token() {
        let f = fixture();
        let policy = default_policy();
        for (line, token) in [
            ("ls; rm x", ";"),
            ("ls && rm x", "&&"),
            ("ls || rm x", "||"),
            ("ls | wc", "|"),
            ("sleep 1 &", "&"),
            ("echo `id`", "`"),
            ("echo $(id)", "$("),
            ("echo ${HOME}", "${"),
            ("echo $HOME", "$"),
            ("echo 'a$'", "$"),
            ("ls\nrm x", "\\n"),
            ("diff <(ls) x", "<("),
            ("tee >(cat)", ">("),
            ("ls &> out", "&>"),
        ] {
            let err = policy.check(line, &f.paths).unwrap_err().to_string();
            assert!(err.contains(&format!("'{token}'")), "{line:?}: {err}");
        }
    }

    #[test]
    fn refuses_bad_syntax() {
        let f = fixture();
        let policy = default_policy();
        for (line, needle) in [
            ("", "empty"),
            ("   ", "empty"),
            ("echo 'unbalanced", "unbalanced"),
            ("echo hi 2> err.txt", "file descriptor"),
            ("echo hi 2>>err.txt", "file descriptor"),
            ("cat << EOF", "here-documents"),
            ("echo hi >", "no target"),
            ("> out.txt", "no program"),
            ("echo a > x > y", "more than one output"),
            ("cat < a < b", "more than one input"),
        ] {
            let err = policy.check(line, &f.paths).unwrap_err().to_string();
            assert!(err.contains(needle), "{line:?}: {err}");
        }
    }

    #[test]
    fn deny_list_is_case_insensitive_on_base_name() {
        let f = fixture();
        let deny = ["RM", "sudo", "python", "sh"].map(String::from);
        let policy = CommandPolicy::new(None, &deny, false);
        for line in [
            "/bin/RM -rf x",
            "rm x",
            "Sudo ls",
            "/usr/bin/python3.12 -c 1",
            "SH -c ls",
        ] {
            let err = policy.check(line, &f.paths).unwrap_err().to_string();
            assert!(err.contains("denylist"), "{line}: {err}");
        }
        assert!(policy.check("ls", &f.paths).is_ok());
        let defaults = default_policy();
        assert!(
            defaults
                .check("BASH -c ls", &f.paths)
                .unwrap_err()
                .to_string()
                .contains("denylist")
        );
    }

    #[test]
    fn allow_list_applies_after_deny_list() {
        let f = fixture();
        let policy = CommandPolicy::new(Some(&["LS".into(), "cat".into()]), &["cat".into()], false);
        assert_eq!(
            policy.check("/bin/ls", &f.paths).unwrap().program,
            "/bin/ls"
        );
        assert!(
            policy
                .check("cat x", &f.paths)
                .unwrap_err()
                .to_string()
                .contains("denylist")
        );
        let err = policy.check("echo x", &f.paths).unwrap_err().to_string();
        assert!(err.contains("not on the command allowlist"), "{err}");
    }

    #[test]
    fn network_programs_refused_without_network_even_with_empty_denylist() {
        let f = fixture();
        let offline = CommandPolicy::new(None, &[], false);
        for prog in NETWORK_PROGRAMS {
            let err = offline
                .check(&format!("{prog} example.com"), &f.paths)
                .unwrap_err()
                .to_string();
            assert!(err.contains("network"), "{prog}: {err}");
        }
        let online = CommandPolicy::new(None, &[], true);
        assert!(online.check("curl example.com", &f.paths).is_ok());
    }

    #[test]
    fn redirections_are_parsed_and_confined() {
        let f = fixture();
        let policy = default_policy();
        let cmd = policy.check("echo hi >out.txt", &f.paths).unwrap();
        assert_eq!(cmd.args, ["hi"]);
        let out = cmd.stdout.unwrap();
        assert_eq!(
            (out.path.shown(), out.append),
            (&*f.root.join("out.txt"), false)
        );
        let cmd = policy.check("echo hi>>log/out.txt more", &f.paths).unwrap();
        assert_eq!(cmd.args, ["hi", "more"]);
        let out = cmd.stdout.unwrap();
        assert_eq!(
            (out.path.shown(), out.append),
            (&*f.root.join("log/out.txt"), true)
        );
        let cmd = policy.check("wc -l < notes.txt", &f.paths).unwrap();
        assert_eq!(cmd.args, ["-l"]);
        assert_eq!(
            cmd.stdin.as_ref().map(ConfinedPath::shown),
            Some(&*f.root.join("notes.txt"))
        );
        let err = policy
            .check("echo hi > /tmp/evil.txt", &f.paths)
            .unwrap_err()
            .to_string();
        assert!(err.contains("redirection target"), "{err}");
        let err = policy
            .check("cat </etc/passwd", &f.paths)
            .unwrap_err()
            .to_string();
        assert!(err.contains("redirection target"), "{err}");
    }

    #[test]
    fn quoted_angle_brackets_are_arguments() {
        let f = fixture();
        let cmd = default_policy()
            .check("grep '<div>' notes.txt", &f.paths)
            .unwrap();
        assert_eq!(cmd.args, ["<div>", "notes.txt"]);
        assert_eq!(cmd.stdout, None);
        let cmd = default_policy().check("echo \"a > b\"", &f.paths).unwrap();
        assert_eq!(cmd.args, ["a > b"]);
    }

    #[test]
    fn comment_hides_the_rest() {
        let f = fixture();
        let cmd = default_policy()
            .check("echo hi # > /etc/x", &f.paths)
            .unwrap();
        assert_eq!(cmd.args, ["hi"]);
        assert_eq!(cmd.stdout, None);
    }

    #[test]
    fn path_arguments_are_checked() {
        let f = fixture();
        let policy = default_policy();
        for line in [
            "cat /etc/passwd",
            "cat ../x",
            "cat src/../../x",
            "grep --file=/etc/passwd x",
            "grep -f/etc/passwd x",
            "tar -xf/etc/passwd",
            "cat ~/secret",
            "cat -- /etc/passwd",
            "grep --file=~/x y",
        ] {
            let err = policy.check(line, &f.paths).unwrap_err().to_string();
            assert!(err.contains("argument"), "{line}: {err}");
        }
        for line in [
            "cat notes.txt",
            "cat ./notes.txt",
            "ls src/",
            "grep -rn foo src",
            "grep --color=never foo",
            "cc -I./src x.c",
            "/usr/bin/ls",
        ] {
            assert!(policy.check(line, &f.paths).is_ok(), "{line}");
        }
    }

    #[test]
    fn writing_programs_need_write_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let (docs, ws) = (base.join("docs"), base.join("ws"));
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(docs.join("report.txt"), "r").unwrap();
        // Both folders readable, only ws writable; commands run in docs.
        let paths = PathPolicy::new(
            &[docs.clone(), ws.clone()],
            std::slice::from_ref(&ws),
            &docs,
        )
        .unwrap();
        let policy = default_policy();
        assert!(policy.check("cat report.txt", &paths).is_ok());
        for line in [
            "rm report.txt".to_string(),
            "touch newfile".to_string(),
            "mv report.txt x".to_string(),
            format!("cp report.txt {}", ws.join("copy.txt").display()),
            "sed -i s/r/x/ report.txt".to_string(),
            "find . -delete".to_string(),
            format!("cp -t {} report.txt", ws.display()),
        ] {
            let err = policy.check(&line, &paths).unwrap_err().to_string();
            assert!(
                err.contains("outside the allowed write paths"),
                "{line}: {err}"
            );
        }
        assert!(policy.check("sed -n 1p report.txt", &paths).is_ok());
        let inside = format!("touch {}", ws.join("new.txt").display());
        assert!(policy.check(&inside, &paths).is_ok());
    }

    #[test]
    fn programs_that_run_programs_are_refused() {
        let f = fixture();
        let policy = default_policy();
        for line in [
            "timeout 5 python3 x.py",
            "nice rm x",
            "find . -exec rm {} +",
            "busybox sh",
        ] {
            let err = policy.check(line, &f.paths).unwrap_err().to_string();
            assert!(err.contains("runs"), "{line}: {err}");
        }
        assert!(policy.check("find . -name '*.rs'", &f.paths).is_ok());
    }

    #[test]
    fn relative_program_is_confined_and_made_absolute() {
        let f = fixture();
        let policy = default_policy();
        std::fs::write(f.root.join("tool.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            f.root.join("tool.sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let cmd = policy.check("./tool.sh arg", &f.paths).unwrap();
        assert_eq!(cmd.program, f.root.join("tool.sh").to_str().unwrap());
        assert!(policy.check("../tool.sh", &f.paths).is_err());
    }

    #[test]
    fn program_link_is_judged_by_its_target() {
        let f = fixture();
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        std::os::unix::fs::symlink(&sh, f.root.join("innocent")).unwrap();
        let policy = CommandPolicy::new(
            None,
            &[sh.file_name().unwrap().to_str().unwrap().into()],
            false,
        );
        let link = f.root.join("innocent");
        let err = policy
            .check(&format!("{} -c id", link.display()), &f.paths)
            .unwrap_err()
            .to_string();
        assert!(err.contains("denylist"), "{err}");
        // Run by a relative path, the link's target is outside the read roots.
        assert!(policy.check("./innocent -c id", &f.paths).is_err());
    }
}
