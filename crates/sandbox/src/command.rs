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

mod arguments;
mod parse;
mod shell;

use arguments::{argument_access, check_arguments, check_redirect_target};
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

#[cfg(test)]
mod tests;
