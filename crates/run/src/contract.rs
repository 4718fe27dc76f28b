//! Task contracts (seed 004 §4.2): what must be true of a run before a phase that completes
//! its task may stop, checked against the run's real evidence — the outcomes of its tool
//! calls as recorded in `tool_result` / `tool_denied` events (folded into
//! [`crate::RunState`]), its final answer, its artifacts, its work items — and against the
//! files on disk, read through the sandbox's confinement.
//!
//! Seed 004 §6.1 describes a verifier that expected `tool_result` evidence its harness never
//! recorded; here every predicate reads what the fold keeps of the journal, and each
//! predicate type is tested against a real run's transcript.
//!
//! The evaluation is pure ([`evaluate`]): the core asks the driver for the [`FileFact`]s of
//! the paths the contract names ([`TaskContract::file_paths`]), then evaluates and records
//! the [`Coverage`] (`contract_checked`), so a resumed run replays the verdict instead of
//! looking again.

use globset::GlobBuilder;
use lsm_phase::{ToolCallRecord, ToolOutcome};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::work_items::WorkItem;

/// What a run must achieve (from `--contract file.toml`, `[agents.contracts.<agent>]`, or a
/// library caller). Recorded in `run_started`, so a resumed run checks the same contract.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskContract {
    /// What the contract is about (shown with its coverage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Predicates that must all hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub require: Vec<Predicate>,
    /// Files that must exist, as regular non-empty files (paths as the tools take them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_outputs: Vec<String>,
}

/// One condition of a contract. In TOML: `[[require]]` tables with `kind = "..."`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Predicate {
    /// A call of `tool` succeeded during the run; with `args_match`, one whose arguments
    /// match: every key given must be present, a string value containing `*`, `?` or `[` is
    /// a glob pattern over the argument, any other value must be equal.
    ToolSucceeded {
        /// The tool.
        tool: String,
        /// Arguments the call must have had.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        args_match: Option<Map<String, Value>>,
    },
    /// `path` exists and is a regular file.
    FileExists {
        /// The file (relative paths resolve as the tools resolve them).
        path: String,
    },
    /// `path` is a regular text file containing `text`.
    FileContains {
        /// The file.
        path: String,
        /// The text it must contain (case-sensitive).
        text: String,
    },
    /// A tool wrote a file whose name (or path) matches `name_glob` during the run.
    ArtifactCreated {
        /// A glob such as `report*.md`.
        name_glob: String,
    },
    /// The model's final answer contains `text` (ignoring case).
    TextContains {
        /// The text.
        text: String,
    },
    /// Every work item is done (none todo, doing, blocked or flagged for revision).
    WorkItemsDone,
    /// No tool call of the run was refused (by a person, the policy, a hook or a guard).
    NoDenials,
}

/// What the driver found at a path the contract names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum FileFact {
    /// No such file.
    Missing,
    /// A regular file: its size, and its text when it is UTF-8 and not too large to read.
    File {
        /// Size in bytes.
        bytes: u64,
        /// The content, when read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// Not a regular file, outside the sandbox's read roots, or unreadable: why.
    Unusable {
        /// The reason.
        reason: String,
    },
}

/// The run's evidence at the moment of a check.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// Every tool call of the run so far, in order: the completed phases' and the current
    /// one's, with their outcomes.
    pub calls: &'a [&'a ToolCallRecord],
    /// The model's final answer (the current phase's last text).
    pub final_text: &'a str,
    /// Files the run's tools wrote.
    pub artifacts: &'a [String],
    /// Tool calls refused so far.
    pub denials: u64,
    /// The work-item ledger.
    pub work_items: &'a [WorkItem],
    /// What the driver found at each path of [`TaskContract::file_paths`].
    pub files: &'a [(String, FileFact)],
}

/// One line of the coverage ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CoverageItem {
    /// The condition, in words (`file_exists summary.md`).
    pub predicate: String,
    /// Whether it holds.
    pub met: bool,
    /// What shows it, or what is missing.
    pub evidence: String,
}

/// A contract's coverage ledger: every condition and whether it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Coverage {
    /// Every condition holds.
    pub satisfied: bool,
    /// Each condition, in the contract's order (`require`, then `required_outputs`).
    pub items: Vec<CoverageItem>,
}

impl Coverage {
    /// The unmet conditions, one line each: `file_exists summary.md: no such file`.
    pub fn unmet(&self) -> Vec<String> {
        self.items
            .iter()
            .filter(|i| !i.met)
            .map(|i| format!("{}: {}", i.predicate, i.evidence))
            .collect()
    }
}

/// Why a contract cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid task contract: {0}")]
pub struct ContractError(pub String);

impl TaskContract {
    /// Check what cannot be judged later: globs compile, paths and texts are not empty, and
    /// there is at least one condition.
    ///
    /// # Errors
    /// The first problem, naming the predicate.
    pub fn validate(&self) -> Result<(), ContractError> {
        if self.require.is_empty() && self.required_outputs.is_empty() {
            return Err(ContractError(
                "it has no condition: add [[require]] predicates or required_outputs".into(),
            ));
        }
        for p in &self.require {
            let empty = match p {
                Predicate::ToolSucceeded { tool, .. } => tool.trim().is_empty(),
                Predicate::FileExists { path } => path.trim().is_empty(),
                Predicate::FileContains { path, text } => path.trim().is_empty() || text.is_empty(),
                Predicate::ArtifactCreated { name_glob } => {
                    glob(name_glob).map_err(|e| ContractError(format!("{}: {e}", describe(p))))?;
                    name_glob.trim().is_empty()
                }
                Predicate::TextContains { text } => text.is_empty(),
                Predicate::WorkItemsDone | Predicate::NoDenials => false,
            };
            if empty {
                return Err(ContractError(format!(
                    "{}: a required value is empty",
                    describe(p)
                )));
            }
            if let Predicate::ToolSucceeded {
                args_match: Some(m),
                ..
            } = p
            {
                for v in m.values() {
                    if let Value::String(s) = v
                        && is_glob(s)
                    {
                        glob(s).map_err(|e| ContractError(format!("{}: {e}", describe(p))))?;
                    }
                }
            }
        }
        if let Some(empty) = self.required_outputs.iter().find(|p| p.trim().is_empty()) {
            return Err(ContractError(format!(
                "required_outputs holds an empty path ({empty:?})"
            )));
        }
        Ok(())
    }

    /// The paths whose [`FileFact`] the evaluation needs, once each, in order.
    pub fn file_paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = Vec::new();
        let named = self
            .require
            .iter()
            .filter_map(|p| match p {
                Predicate::FileExists { path } | Predicate::FileContains { path, .. } => Some(path),
                _ => None,
            })
            .chain(&self.required_outputs);
        for path in named {
            if !paths.contains(path) {
                paths.push(path.clone());
            }
        }
        paths
    }
}

/// The condition in words.
pub fn describe(p: &Predicate) -> String {
    match p {
        Predicate::ToolSucceeded { tool, args_match } => match args_match {
            Some(m) if !m.is_empty() => {
                format!("tool_succeeded {tool} {}", Value::Object(m.clone()))
            }
            _ => format!("tool_succeeded {tool}"),
        },
        Predicate::FileExists { path } => format!("file_exists {path}"),
        Predicate::FileContains { path, text } => format!("file_contains {path} {text:?}"),
        Predicate::ArtifactCreated { name_glob } => format!("artifact_created {name_glob}"),
        Predicate::TextContains { text } => format!("text_contains {text:?}"),
        Predicate::WorkItemsDone => "work_items_done".to_string(),
        Predicate::NoDenials => "no_denials".to_string(),
    }
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

fn glob(pattern: &str) -> Result<globset::GlobMatcher, globset::Error> {
    GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .map(|g| g.compile_matcher())
}

/// Whether `arguments` match `wanted` (see [`Predicate::ToolSucceeded`]).
fn args_match(arguments: &Value, wanted: &Map<String, Value>) -> bool {
    wanted.iter().all(|(key, want)| {
        let Some(got) = arguments.get(key) else {
            return false;
        };
        match (want, got) {
            (Value::String(pattern), Value::String(value)) if is_glob(pattern) => {
                glob(pattern).is_ok_and(|g| g.is_match(value))
            }
            _ => want == got,
        }
    })
}

fn fact<'a>(files: &'a [(String, FileFact)], path: &str) -> Option<&'a FileFact> {
    files.iter().find(|(p, _)| p == path).map(|(_, f)| f)
}

fn file_check(files: &[(String, FileFact)], path: &str, non_empty: bool) -> (bool, String) {
    match fact(files, path) {
        None => (false, "not checked".into()),
        Some(FileFact::Missing) => (false, "no such file".into()),
        Some(FileFact::Unusable { reason }) => (false, reason.clone()),
        Some(FileFact::File { bytes: 0, .. }) if non_empty => (false, "the file is empty".into()),
        Some(FileFact::File { bytes, .. }) => (true, format!("a file of {bytes} bytes")),
    }
}

/// Check one predicate against the evidence.
fn check(p: &Predicate, ev: &Evidence<'_>) -> (bool, String) {
    match p {
        Predicate::ToolSucceeded {
            tool,
            args_match: m,
        } => {
            let calls = ev.calls.iter().filter(|c| &c.name == tool);
            let mut tried = 0usize;
            for (index, call) in calls.enumerate() {
                let matches = m.as_ref().is_none_or(|m| args_match(&call.arguments, m));
                if !matches {
                    continue;
                }
                tried += 1;
                if let ToolOutcome::Result(text) = &call.outcome {
                    let first = text.lines().next().unwrap_or_default();
                    let shown: String = first.chars().take(80).collect();
                    return (
                        true,
                        format!("call {} of {tool} succeeded: {shown}", index + 1),
                    );
                }
            }
            let reason = match (tried, m.is_some()) {
                (0, false) => format!("{tool} was never called"),
                (0, true) => format!("no call of {tool} had matching arguments"),
                (n, _) => format!("{n} matching call(s) of {tool}, none succeeded"),
            };
            (false, reason)
        }
        Predicate::FileExists { path } => file_check(ev.files, path, false),
        Predicate::FileContains { path, text } => match fact(ev.files, path) {
            Some(FileFact::File {
                text: Some(content),
                ..
            }) => {
                if content.contains(text.as_str()) {
                    (true, format!("{path} contains it"))
                } else {
                    (false, format!("{path} does not contain it"))
                }
            }
            Some(FileFact::File { text: None, .. }) => {
                (false, format!("{path} is not readable as text"))
            }
            _ => file_check(ev.files, path, false),
        },
        Predicate::ArtifactCreated { name_glob } => {
            let Ok(g) = glob(name_glob) else {
                return (false, "the glob does not compile".into());
            };
            let hit = ev.artifacts.iter().find(|a| {
                let name = std::path::Path::new(a)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                g.is_match(&name) || g.is_match(a.as_str())
            });
            match hit {
                Some(a) => (true, format!("{a} was written")),
                None if ev.artifacts.is_empty() => (false, "no file was written".into()),
                None => (
                    false,
                    format!("none of the {} file(s) written matches", ev.artifacts.len()),
                ),
            }
        }
        Predicate::TextContains { text } => {
            if ev.final_text.to_lowercase().contains(&text.to_lowercase()) {
                (true, "the final answer contains it".into())
            } else {
                (false, "the final answer does not contain it".into())
            }
        }
        Predicate::WorkItemsDone => {
            let open = crate::work_items::unfinished(ev.work_items);
            if open.is_empty() {
                (
                    true,
                    format!("{} work item(s), all done", ev.work_items.len()),
                )
            } else {
                (false, open.join("; "))
            }
        }
        Predicate::NoDenials => match ev.denials {
            0 => (true, "no call was refused".into()),
            n => (false, format!("{n} call(s) were refused")),
        },
    }
}

/// The coverage ledger of `contract` on `evidence`.
pub fn evaluate(contract: &TaskContract, evidence: &Evidence<'_>) -> Coverage {
    let mut items: Vec<CoverageItem> = contract
        .require
        .iter()
        .map(|p| {
            let (met, evidence) = check(p, evidence);
            CoverageItem {
                predicate: describe(p),
                met,
                evidence,
            }
        })
        .collect();
    for path in &contract.required_outputs {
        let (met, ev) = file_check(evidence.files, path, true);
        items.push(CoverageItem {
            predicate: format!("required_output {path}"),
            met,
            evidence: ev,
        });
    }
    Coverage {
        satisfied: items.iter().all(|i| i.met),
        items,
    }
}

#[cfg(test)]
mod tests;
