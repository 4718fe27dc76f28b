//! `exec_shell`: the `bash` tool's command runs with `/bin/sh -c`, inside the OS sandbox.
//!
//! Pipes, globs, `&&`, `$VAR` and redirections then work, so the command policy cannot see
//! every program the line runs: the kernel sandbox confines them all (the read and write
//! roots, no network unless allowed, protected paths read-only, and a PID namespace whose
//! processes all end with the call). That is why the shell runs only where that sandbox is
//! fully available, never unconfined. The policy still checks the first program the line
//! starts (deny list, allow list, network programs), so `curl … | sh` is refused like
//! `curl` alone.

use std::path::Path;

use super::{CheckedCommand, CommandPolicy, CommandRefusal};
use crate::confine::Confinement;
use crate::paths::PathPolicy;

/// The shell that runs the line.
pub(crate) const SHELL: &str = "/bin/sh";

/// Built-ins that run no program: a line may start with them (`cd src && cargo test`).
const PLAIN_BUILTINS: &[&str] = &[
    "cd", "echo", "printf", "pwd", "true", "false", "test", "[", "export", "set", "unset", ":",
    "exit", "read", "shift", "umask", "wait",
];

/// Built-ins that run a program the policy would not see (`exec curl …`).
const RUNNING_BUILTINS: &[&str] = &[
    "exec", "eval", "command", "builtin", ".", "source", "trap", "time", "nohup", "env", "xargs",
];

/// What the line starts with.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// A program name (or path), to check.
    Program(String),
    /// A plain built-in.
    Builtin,
}

/// The first word of the first command of `line` that is not a variable assignment.
/// Err: why the start cannot be checked.
pub(crate) fn first_program(line: &str) -> Result<Start, CommandRefusal> {
    let refuse = |why: &str| CommandRefusal::ShellFirstProgram { why: why.into() };
    for word in words(line) {
        let word = word?;
        let is_assignment = word.split_once('=').is_some_and(|(name, _)| is_name(name));
        if is_assignment {
            continue;
        }
        if word.is_empty() {
            return Err(refuse("the command starts with an empty word"));
        }
        if word.contains(['$', '`', '*', '?', '[', '{', '}', '(', ')']) && word != "[" {
            return Err(refuse(&format!(
                "its first word '{word}' is expanded by the shell, so the program it runs \
                 cannot be checked"
            )));
        }
        if RUNNING_BUILTINS.contains(&word.as_str()) {
            return Err(refuse(&format!(
                "'{word}' runs another program, which the command policy could not check"
            )));
        }
        if PLAIN_BUILTINS.contains(&word.as_str()) {
            return Ok(Start::Builtin);
        }
        return Ok(Start::Program(word));
    }
    Err(refuse("the command names no program"))
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The words of the first simple command of `line`, quotes removed: up to the first
/// operator outside quotes (`|`, `&`, `;`, `<`, `>`, `(`, `)`, a line break).
fn words(line: &str) -> impl Iterator<Item = Result<String, CommandRefusal>> + '_ {
    let mut chars = line.chars().peekable();
    std::iter::from_fn(move || {
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        let first = *chars.peek()?;
        if "|&;<>()\n".contains(first) {
            return None;
        }
        let mut word = String::new();
        while let Some(&c) = chars.peek() {
            match c {
                ' ' | '\t' => break,
                c if "|&;<>()\n".contains(c) => break,
                '\'' => {
                    chars.next();
                    loop {
                        match chars.next() {
                            Some('\'') => break,
                            Some(c) => word.push(c),
                            None => {
                                return Some(Err(CommandRefusal::ShellFirstProgram {
                                    why: "a quote is not closed".into(),
                                }));
                            }
                        }
                    }
                }
                '"' => {
                    chars.next();
                    loop {
                        match chars.next() {
                            Some('"') => break,
                            Some('\\') => word.extend(chars.next()),
                            Some(c) => word.push(c),
                            None => {
                                return Some(Err(CommandRefusal::ShellFirstProgram {
                                    why: "a quote is not closed".into(),
                                }));
                            }
                        }
                    }
                }
                '\\' => {
                    chars.next();
                    word.extend(chars.next());
                }
                c => {
                    chars.next();
                    word.push(c);
                }
            }
        }
        Some(Ok(word))
    })
}

impl CommandPolicy {
    /// Check `line` for `/bin/sh -c`: its first program passes the lists, and the OS
    /// sandbox is fully available (never unconfined). Err: the reason, for the model.
    pub(crate) fn check_shell(
        &self,
        line: &str,
        paths: &PathPolicy,
    ) -> Result<CheckedCommand, CommandRefusal> {
        if line.contains('\0') {
            return Err(CommandRefusal::ShellFirstProgram {
                why: "the command holds a NUL byte".into(),
            });
        }
        if let Start::Program(argv0) = first_program(line)? {
            let (_, resolved) = self.check_program(&argv0, paths)?;
            if resolved.is_none() {
                return Err(if argv0.contains('/') {
                    CommandRefusal::NotExecutable { argv0 }
                } else {
                    CommandRefusal::NotOnPath { argv0 }
                });
            }
        }
        let confinement = match self.exec.confinement_for(Path::new(SHELL)) {
            Ok(Confinement::Confined(confined)) if confined.contains_processes() => {
                Confinement::Confined(confined)
            }
            Ok(Confinement::Confined(_)) => {
                return Err(CommandRefusal::ShellUnconfined {
                    reason: "the kernel refused the namespaces that keep the shell's \
                             processes from outliving the call"
                        .into(),
                });
            }
            Ok(Confinement::Unconfined(reason)) => {
                return Err(CommandRefusal::ShellUnconfined { reason });
            }
            Err(unavailable) => {
                return Err(CommandRefusal::ShellUnconfined {
                    reason: unavailable.reason().to_string(),
                });
            }
        };
        Ok(CheckedCommand {
            program: SHELL.to_string(),
            args: vec!["-c".to_string(), line.to_string()],
            stdin: None,
            stdout: None,
            confinement,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(line: &str) -> Start {
        first_program(line).unwrap()
    }

    fn refusal(line: &str) -> String {
        first_program(line).unwrap_err().to_string()
    }

    #[test]
    fn the_first_program_is_found_past_assignments_and_quotes() {
        assert_eq!(
            start("cargo test && git diff"),
            Start::Program("cargo".into())
        );
        assert_eq!(
            start("  RUST_LOG=debug X='a b' cargo test"),
            Start::Program("cargo".into())
        );
        assert_eq!(
            start("'grep' -r x . | wc -l"),
            Start::Program("grep".into())
        );
        assert_eq!(start("ls|wc"), Start::Program("ls".into()));
        assert_eq!(
            start("./run.sh > out.txt"),
            Start::Program("./run.sh".into())
        );
        assert_eq!(start("cd src && make"), Start::Builtin);
        assert_eq!(start("[ -f x ] && cat x"), Start::Builtin);
    }

    #[test]
    fn a_start_the_policy_cannot_check_is_refused_and_says_why() {
        assert!(refusal("$CMD x").contains("expanded by the shell"));
        assert!(refusal("`which curl` x").contains("expanded by the shell"));
        assert!(refusal("c*l http://x").contains("expanded by the shell"));
        assert!(refusal("exec curl x").contains("runs another program"));
        assert!(refusal("eval 'curl x'").contains("runs another program"));
        assert!(refusal("X=1").contains("names no program"));
        assert!(refusal("(curl x)").contains("names no program"));
        assert!(refusal("| wc").contains("names no program"));
        assert!(refusal("'unclosed").contains("not closed"));
        assert!(refusal("'' x").contains("empty word"));
    }
}
