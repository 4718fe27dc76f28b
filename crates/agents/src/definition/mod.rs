//! Agent definitions: an agent as data. A definition is a Markdown file whose TOML front
//! matter is the agent's card and phases and whose body is its system prompt (the format is
//! documented in `docs/AGENTS.md`). The built-in single- and multi-phase agents are such files,
//! embedded in the crate ([`builtin`]); users add their own in their project and their
//! configuration folder, and the composition root finds and reads them.
//!
//! This module parses and checks definitions from text: it never reads a file itself (the
//! caller hands it the text and says where it came from), and no key of a definition can lift
//! a sandbox rule, a budget or a permission — there is no such key, and an unknown key is an
//! error. A definition can only narrow what a run may do: its tools are an allowlist, its
//! iteration limit a ceiling under the configured one.

mod builtin;
mod front;
mod lines;
pub mod template;

use std::fmt;
use std::path::PathBuf;

use lsm_phase::LlmTier;
use serde::Serialize;

pub use builtin::{builtin, builtin_file};
pub use template::Template;

use crate::{AgentSpec, TaskInput};

/// Where a definition came from. Later sources win over earlier ones for the same name:
/// a project definition over a user one, both over a built-in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DefinitionSource {
    /// Embedded in the program.
    Builtin,
    /// A file in the user's configuration folder.
    User {
        /// The file.
        path: PathBuf,
    },
    /// A file in the project's definitions folder.
    Project {
        /// The file.
        path: PathBuf,
    },
}

impl DefinitionSource {
    /// `builtin`, `user` or `project`.
    pub fn kind(&self) -> &'static str {
        match self {
            DefinitionSource::Builtin => "builtin",
            DefinitionSource::User { .. } => "user",
            DefinitionSource::Project { .. } => "project",
        }
    }

    /// The file, for a user or project definition.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            DefinitionSource::Builtin => None,
            DefinitionSource::User { path } | DefinitionSource::Project { path } => Some(path),
        }
    }
}

impl fmt::Display for DefinitionSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DefinitionSource::Builtin => f.write_str("built-in"),
            DefinitionSource::User { path } => write!(f, "user {}", path.display()),
            DefinitionSource::Project { path } => write!(f, "project {}", path.display()),
        }
    }
}

/// How strictly a run of the agent must prove its task complete (the harness's stop modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopMode {
    /// Liveness first: after the completion retries a stop is accepted.
    Interactive,
    /// `done` only when every completion check is met.
    StrictAutomation,
}

/// What a definition asks of the run that the composition root applies: all of it narrows or
/// chooses, none of it widens.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunSettings {
    /// The model for this agent's runs, replacing its tier's model.
    pub model: Option<String>,
    /// A ceiling on the run's iteration limit: the run uses the smaller of this and the
    /// configured one.
    pub max_iterations: Option<u32>,
    /// Refinement rounds of a phase that repeats (the default for `--max-rounds`).
    pub max_rounds: Option<u32>,
    /// The stop mode of the agent's runs, unless the person running it chooses one.
    pub stop_mode: Option<StopMode>,
    /// Offer the work-item tools.
    pub work_items: bool,
    /// A task-contract file the runs are held to (resolved against the definition's folder),
    /// unless configuration or the command line gives one.
    pub contract: Option<PathBuf>,
}

/// Where a `for_each` phase takes its list from: an earlier phase's answer, or one field of
/// the JSON object that answer holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListRef {
    /// The earlier phase.
    pub phase: String,
    /// A field of its answer's JSON object (`review.suggestions`), or the whole answer.
    pub field: Option<String>,
}

impl fmt::Display for ListRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{}.{field}", self.phase),
            None => f.write_str(&self.phase),
        }
    }
}

/// What a `for_each` phase does when its list is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IfEmpty {
    /// Run no item (the default).
    #[default]
    Skip,
    /// Run once, with the run's task or topic as the item.
    Task,
}

/// A loop back: after this phase, run the phases from `from` again over the items this
/// phase's answer lists, until its `until` field is true or the rounds run out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Repeat {
    /// The earlier `for_each` phase the next round starts at.
    pub from: String,
    /// The field of this phase's JSON answer that lists the next round's items.
    pub items: String,
    /// A field of this phase's JSON answer that, when true, ends the loop.
    pub until: Option<String>,
    /// The heading under which items left when the rounds run out are added to the saved
    /// artifact.
    pub leftover_heading: String,
}

/// How a phase's saved answer is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SaveFormat {
    /// The answer as it is.
    AsIs,
    /// `# <Title>\n\nTask: <task>\n\n<answer>\n` (a definition without `[[phases]]`).
    WithHeading,
}

/// One phase of a definition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseDefinition {
    /// Its name (unique in the definition).
    pub name: String,
    /// The user message, a template.
    #[serde(serialize_with = "as_source")]
    pub prompt: Template,
    /// The user message from the second round of a repeat on.
    #[serde(serialize_with = "opt_as_source")]
    pub repeat_prompt: Option<Template>,
    /// The tools offered (a subset of the agent's); `None`: all of the agent's.
    pub tools: Option<Vec<String>>,
    /// The context label, a template (`None`: the primary context).
    #[serde(serialize_with = "opt_as_source")]
    pub context: Option<Template>,
    /// Whether the phase continues its context's history (else it starts it afresh).
    pub continue_context: bool,
    /// The iteration limit (`None`: the run's).
    pub max_iterations: Option<u32>,
    /// Run once per item of this list.
    pub for_each: Option<ListRef>,
    /// At most this many items are run (the rest are logged as cut).
    pub max_items: usize,
    /// What an empty list does.
    pub if_empty: IfEmpty,
    /// Save the answer as an artifact of this name (a template).
    #[serde(serialize_with = "opt_as_source")]
    pub save_as: Option<Template>,
    /// How the saved answer is written.
    pub save_format: SaveFormat,
    /// Run even after an earlier phase halted the run (a limit was reached, a stop was
    /// asked for, or a phase failed), with what was collected.
    pub always: bool,
    /// The phase completes the task: the run's completion checks apply to it.
    pub completes_task: bool,
    /// A loop back after this phase.
    pub repeat: Option<Repeat>,
    /// Save the successful results of one of its tools as an artifact of their own.
    pub save_results: Option<SaveResults>,
}

/// The successful results of a phase's tool, saved as an artifact: `# <title>: <task>`, then
/// each result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SaveResults {
    /// The tool.
    pub tool: String,
    /// The artifact's name (a template).
    #[serde(serialize_with = "as_source")]
    pub name: Template,
    /// The document's title.
    pub title: String,
}

fn as_source<S: serde::Serializer>(t: &Template, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.source())
}

fn opt_as_source<S: serde::Serializer>(t: &Option<Template>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_some(&t.source()),
        None => s.serialize_none(),
    }
}

/// What runs an agent: its phases, interpreted by [`crate::DefinedAgent`], or code of its own
/// (the conductor and the agents not yet described as data).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Program {
    /// Phases, run in order.
    Phases(Vec<PhaseDefinition>),
    /// A built-in agent's own code.
    Code,
}

/// One agent: its card, the settings its runs take, what runs it, and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentDefinition {
    /// The capability card (name, description, tier, tools, input, system prompt).
    pub spec: AgentSpec,
    /// What the run's wiring applies.
    pub settings: RunSettings,
    /// What runs it.
    pub program: Program,
    /// Where it came from.
    pub source: DefinitionSource,
    /// The definitions of the same name it replaces, nearest first.
    pub overrides: Vec<DefinitionSource>,
    /// Where each tool name stands in the file, for messages (`file`, line).
    #[serde(skip)]
    tool_lines: Vec<(String, usize)>,
    /// The file as named in messages.
    #[serde(skip)]
    file: String,
}

impl AgentDefinition {
    /// A definition for a built-in agent that runs code of its own.
    pub fn code(spec: AgentSpec) -> Self {
        AgentDefinition {
            file: format!("built-in {}", spec.name),
            spec,
            settings: RunSettings::default(),
            program: Program::Code,
            source: DefinitionSource::Builtin,
            overrides: Vec::new(),
            tool_lines: Vec::new(),
        }
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Its phases (empty for a code agent).
    pub fn phases(&self) -> &[PhaseDefinition] {
        match &self.program {
            Program::Phases(p) => p,
            Program::Code => &[],
        }
    }

    /// Whether a phase of it repeats (so `--max-rounds` applies to it).
    pub fn repeats(&self) -> bool {
        self.phases().iter().any(|p| p.repeat.is_some())
    }

    /// Check that every tool the definition names is one of `registered` (the tools this
    /// configuration registers, control tools included). Loading stops here, before any model
    /// call, when one is not.
    ///
    /// # Errors
    /// [`DefinitionError`] naming the file and the line of the first unknown tool, and listing
    /// the registered ones.
    pub fn check_tools(&self, registered: &[String]) -> Result<(), DefinitionError> {
        let known = |tool: &str| {
            registered.iter().any(|r| {
                r == tool || (r.ends_with('*') && tool.starts_with(r.trim_end_matches('*')))
            })
        };
        match self.tool_lines.iter().find(|(tool, _)| !known(tool)) {
            None => Ok(()),
            Some((tool, line)) => {
                let mut names: Vec<&str> = registered.iter().map(String::as_str).collect();
                names.sort_unstable();
                Err(DefinitionError::new(
                    &self.file,
                    *line,
                    format!(
                        "unknown tool '{tool}': no tool of that name is registered in this configuration; the tools are: {}",
                        names.join(", ")
                    ),
                ))
            }
        }
    }
}

/// A definition that cannot be used. It names the file and the line; fix the file there and
/// check it again with `lsm agent check FILE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct DefinitionError {
    /// The file (or `built-in NAME`).
    pub file: String,
    /// The line (1-based).
    pub line: usize,
    /// What is wrong and what to do.
    pub message: String,
}

impl DefinitionError {
    pub(crate) fn new(file: &str, line: usize, message: impl Into<String>) -> Self {
        DefinitionError {
            file: file.to_string(),
            line,
            message: message.into(),
        }
    }
}

/// Parse the definition `text`, which came from `source` (its file, when it has one, names
/// it in errors; `label` does otherwise).
///
/// # Errors
/// [`DefinitionError`] for a file without front matter, TOML that does not parse, an unknown
/// key, a bad value, an undefined template variable, a `for_each` or `repeat` naming no
/// earlier phase, a phase tool the agent does not list, or a name that is not a valid folder
/// name. Tools are checked against a configuration by [`AgentDefinition::check_tools`].
pub fn parse(
    text: &str,
    source: DefinitionSource,
    label: &str,
) -> Result<AgentDefinition, DefinitionError> {
    let file = match source.path() {
        Some(path) => path.display().to_string(),
        None => label.to_string(),
    };
    front::parse(text, &file).map(|parsed| AgentDefinition {
        spec: parsed.spec,
        settings: parsed.settings,
        program: Program::Phases(parsed.phases),
        source,
        overrides: Vec::new(),
        tool_lines: parsed.tool_lines,
        file,
    })
}

/// Whether `name` can name an agent (and so its workspace folder): 1 to 64 ASCII letters,
/// digits, `_` or `-`, starting with a letter or a digit.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The task input of an agent as written in a definition.
pub(crate) fn input_of(text: &str) -> Option<TaskInput> {
    match text {
        "task" => Some(TaskInput::Task),
        "topic" => Some(TaskInput::Topic),
        _ => None,
    }
}

/// The tier as written in a definition.
pub(crate) fn tier_of(text: &str) -> Option<LlmTier> {
    match text {
        "quick" => Some(LlmTier::Quick),
        "normal" => Some(LlmTier::Normal),
        "complex" => Some(LlmTier::Complex),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
