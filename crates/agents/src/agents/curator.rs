//! The curator agent: SURVEY the knowledge base folders → FIND duplicates and stale files →
//! REPORT.

use lsm_phase::{LlmTier, PhaseRequest};
use serde::Serialize;
use serde_json::Value;

use crate::agents::{answer_of, card_from_core, halts};
use crate::parse::{clip, json_object};
use crate::{Agent, AgentContext, AgentCore, AgentError, AgentOutput, Card, TaskInput};

/// The curator agent's card.
pub const CURATOR: Card = Card {
    name: "curator",
    description: "Curator: surveys knowledge-base folders, finds duplicate and stale files, and reports what to merge, update or remove.",
    tier: LlmTier::Normal,
    tools: &[
        "read_folder",
        "file_metadata",
        "hash_file",
        "query_and_synthesize",
        "similarity_search",
        "write_file",
    ],
    input: TaskInput::Task,
    system_prompt: "You are a curator of the user's knowledge base. You work in phases; each \
user message starts with the phase (SURVEY, FIND or REPORT) and says what to reply. You never \
delete or move files: you find exact duplicates (same hash), near-duplicates (similar content) \
and stale files (old, superseded or empty), and you recommend what to do with each, saying why.",
};

/// Tools of the SURVEY phase.
const SURVEY_TOOLS: &[&str] = &["read_folder", "file_metadata", "query_and_synthesize"];

/// Tools of the FIND phase.
const FIND_TOOLS: &[&str] = &[
    "hash_file",
    "similarity_search",
    "file_metadata",
    "read_folder",
];

/// At most this many duplicate groups and this many stale files are kept.
pub(crate) const MAX_FINDINGS: usize = 200;

/// At most this many files are kept per duplicate group.
const MAX_FILES_PER_GROUP: usize = 50;

/// A path or reason is cut to this many characters.
const MAX_FIELD_CHARS: usize = 500;

/// The survey handed to later phases is cut to this many characters.
const MAX_SURVEY_CHARS: usize = 12_000;

/// Iteration limit of REPORT.
const REPORT_ITERATIONS: u32 = 3;

/// Files that hold the same or nearly the same content.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct DuplicateGroup {
    pub files: Vec<String>,
    pub reason: String,
}

/// A file that looks out of date.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StaleFile {
    pub path: String,
    pub reason: String,
}

/// What FIND reported, cleaned and capped; saved as `curation_findings_<ts>.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Findings {
    /// Whether FIND's answer held the JSON object asked for.
    pub parsed: bool,
    pub duplicates: Vec<DuplicateGroup>,
    pub stale: Vec<StaleFile>,
    /// Entries cut by the limits.
    pub dropped: usize,
}

fn text_field(v: &Value, keys: &[&str]) -> String {
    keys.iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str))
        .map(|s| clip(s.trim(), MAX_FIELD_CHARS))
        .unwrap_or_default()
}

/// Read FIND's answer: `{"duplicates": [{"files", "reason"}], "stale": [{"path", "reason"}]}`,
/// found in prose; strings are accepted for stale entries; entries without a file are skipped.
pub(crate) fn parse_findings(text: &str) -> Findings {
    let Some(obj) = json_object(text, "duplicates") else {
        return Findings {
            parsed: false,
            duplicates: Vec::new(),
            stale: Vec::new(),
            dropped: 0,
        };
    };
    let mut dropped = 0;
    let mut duplicates = Vec::new();
    for group in obj
        .get("duplicates")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let mut files: Vec<String> = group
            .get("files")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|s| clip(s.trim(), MAX_FIELD_CHARS))
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if files.len() < 2 {
            continue;
        }
        if files.len() > MAX_FILES_PER_GROUP {
            dropped += files.len() - MAX_FILES_PER_GROUP;
            files.truncate(MAX_FILES_PER_GROUP);
        }
        if duplicates.len() == MAX_FINDINGS {
            dropped += 1;
            continue;
        }
        duplicates.push(DuplicateGroup {
            files,
            reason: text_field(group, &["reason", "why"]),
        });
    }
    let mut stale = Vec::new();
    for entry in obj
        .get("stale")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let (path, reason) = match entry {
            Value::String(s) => (clip(s.trim(), MAX_FIELD_CHARS), String::new()),
            other => (
                text_field(other, &["path", "file"]),
                text_field(other, &["reason", "why"]),
            ),
        };
        if path.is_empty() {
            continue;
        }
        if stale.len() == MAX_FINDINGS {
            dropped += 1;
            continue;
        }
        stale.push(StaleFile { path, reason });
    }
    Findings {
        parsed: true,
        duplicates,
        stale,
        dropped,
    }
}

/// The report the agent writes itself when REPORT produced none.
fn fallback_report(task: &str, survey: &str, findings: &Findings, raw: &str, why: &str) -> String {
    let mut out = format!(
        "# Curation report\n\nTask: {task}\n\n_{why}._\n\n## Survey\n\n{survey}\n\n## Duplicates\n\n"
    );
    if findings.duplicates.is_empty() {
        out.push_str("None found.\n");
    }
    for g in &findings.duplicates {
        out.push_str(&format!("- {} — {}\n", g.files.join(", "), g.reason));
    }
    out.push_str("\n## Stale files\n\n");
    if findings.stale.is_empty() {
        out.push_str("None found.\n");
    }
    for s in &findings.stale {
        out.push_str(&format!("- {} — {}\n", s.path, s.reason));
    }
    if !findings.parsed && !raw.trim().is_empty() {
        out.push_str(&format!("\n## Findings as reported\n\n{}\n", raw.trim()));
    }
    out
}

/// The curator agent. Its run:
///
/// 1. **SURVEY** (context `survey`; read_folder, file_metadata, query_and_synthesize; up to
///    [`AgentContext::max_iterations`]): an inventory of the folders the task names.
/// 2. **FIND** (context `findings`; hash_file, similarity_search, file_metadata,
///    read_folder; up to `max_iterations`): a JSON object of duplicate groups and stale
///    files, read even inside prose, capped at 200 entries each.
/// 3. **REPORT** (primary context; write_file; 3 iterations): a Markdown report with
///    recommended actions (also written to a workspace file when the task asks for one).
///
/// Saved: `artifacts/curation_report_<ts>.md` (the REPORT answer, else a report the agent
/// assembles from the survey and findings) and `artifacts/curation_findings_<ts>.json`.
#[derive(Debug)]
pub struct CuratorAgent {
    core: AgentCore,
}

impl CuratorAgent {
    /// The curator agent on `ctx`.
    pub fn new(ctx: AgentContext) -> Self {
        CuratorAgent {
            core: AgentCore::new(CURATOR.spec(), ctx),
        }
    }

    async fn phases(&mut self, task: &str) -> Result<String, AgentError> {
        let prompt = CURATOR.system_prompt;
        let max_iterations = self.core.max_iterations();
        self.core.log(&format!("Curation task: {task}"));

        let survey = self
            .core
            .run_phase(
                prompt,
                PhaseRequest::new(format!(
                    "Phase: SURVEY. Task: '{task}'. Survey the folders the task names (or the \
                     whole workspace): list the files with their size and modification date, \
                     and note what the knowledge base covers. Reply with the inventory in \
                     Markdown."
                ))
                .with_tool_names(SURVEY_TOOLS.iter().copied())
                .with_max_iterations(max_iterations)
                .with_context_label(Some("survey")),
            )
            .await;
        let survey_text = clip(
            answer_of(&survey).unwrap_or("(no survey was produced)"),
            MAX_SURVEY_CHARS,
        );
        self.core.log(&format!(
            "SURVEY: {} ({} tool call(s)).",
            survey.stop_reason,
            survey.tool_calls.len()
        ));
        let mut halted = halts(survey.stop_reason).then_some(survey.stop_reason);

        let mut raw_findings = String::new();
        let findings = if halted.is_some() {
            parse_findings("")
        } else {
            let find = self
                .core
                .run_phase(
                    prompt,
                    PhaseRequest::new(format!(
                        "Phase: FIND. Inventory:\n\n{survey_text}\n\nFind exact duplicates \
                         (hash_file), near-duplicates (similarity_search) and stale files. Reply \
                         with only a JSON object: {{\"duplicates\": [{{\"files\": [\"a\", \"b\"], \
                         \"reason\": \"...\"}}], \"stale\": [{{\"path\": \"...\", \"reason\": \
                         \"...\"}}]}}."
                    ))
                    .with_tool_names(FIND_TOOLS.iter().copied())
                    .with_max_iterations(max_iterations)
                    .with_context_label(Some("findings")),
                )
                .await;
            if halts(find.stop_reason) {
                halted = Some(find.stop_reason);
            }
            raw_findings = answer_of(&find).unwrap_or_default().to_string();
            parse_findings(&raw_findings)
        };
        if findings.parsed {
            self.core.log(&format!(
                "FIND: {} duplicate group(s), {} stale file(s){}.",
                findings.duplicates.len(),
                findings.stale.len(),
                if findings.dropped > 0 {
                    format!(", {} entries over the limits dropped", findings.dropped)
                } else {
                    String::new()
                }
            ));
        } else {
            self.core
                .log("FIND gave no JSON findings; the report keeps its text as it is.");
        }
        let findings_json =
            serde_json::to_string_pretty(&findings).unwrap_or_else(|_| "{}".to_string());

        let report = if let Some(reason) = halted {
            self.core.log(&format!(
                "Stopping early ({reason}); the report is assembled from what was found."
            ));
            None
        } else {
            let result = self
                .core
                .run_phase(
                    prompt,
                    PhaseRequest::new(format!(
                        "Phase: REPORT. Task: '{task}'. Inventory:\n\n{survey_text}\n\nFindings:\n\n{}\n\n\
                         Write a curation report in Markdown: what was surveyed, the duplicates, \
                         the stale files, and a recommended action for each. Reply with the \
                         report; if the task names a report file in the workspace, also write it \
                         there with write_file first.",
                        if findings.parsed {
                            findings_json.as_str()
                        } else {
                            raw_findings.as_str()
                        }
                    ))
                    .with_tool_names(["write_file"])
                    .with_max_iterations(REPORT_ITERATIONS)
                    .completing_task(),
                )
                .await;
            self.core.log(&format!("REPORT: {}.", result.stop_reason));
            answer_of(&result).map(str::to_string)
        };
        let report = report.unwrap_or_else(|| {
            let why = match halted {
                Some(reason) => format!("Assembled by the agent: the run stopped early ({reason})"),
                None => "Assembled by the agent: the model wrote no report".to_string(),
            };
            fallback_report(task, &survey_text, &findings, &raw_findings, &why)
        });
        self.core.save_artifact("curation_report", ".md", &report)?;
        self.core
            .save_artifact("curation_findings", ".json", &findings_json)?;
        Ok(report)
    }
}

#[async_trait::async_trait]
impl Agent for CuratorAgent {
    card_from_core!();

    async fn run(&mut self, task: &str) -> AgentOutput {
        self.core.begin_run(task);
        let result = self.phases(task).await;
        self.core.end_run(result).await
    }
}
