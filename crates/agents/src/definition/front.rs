//! The front matter of a definition file, as TOML, and its checks: every key known, every
//! value valid, every template variable defined, every reference to a phase pointing back.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::lines::{self, FrontMatter};
use super::template::Template;
use super::{
    DefinitionError, IfEmpty, ListRef, PhaseDefinition, Repeat, RunSettings, SaveFormat,
    SaveResults, StopMode, input_of, tier_of, valid_name,
};
use crate::{AgentSpec, TaskInput};

/// Items of a `for_each` list run by default at most.
pub const DEFAULT_MAX_ITEMS: usize = 20;

/// Keys people may expect to raise a limit or lift a rule: a definition has none of them.
const NOT_IN_A_DEFINITION: &[&str] = &[
    "max_tokens_budget",
    "max_cost_usd",
    "sandbox",
    "allow_url_access",
    "network",
    "read_paths",
    "write_paths",
    "read_roots",
    "write_roots",
    "permissions",
    "auto_approve",
    "yes",
    "commands",
    "allowed_commands",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Front {
    name: Spanned<String>,
    description: Spanned<String>,
    #[serde(default)]
    tools: Vec<Spanned<String>>,
    tier: Option<Spanned<String>>,
    model: Option<Spanned<String>>,
    input: Option<Spanned<String>>,
    max_iterations: Option<Spanned<u32>>,
    max_rounds: Option<Spanned<u32>>,
    stop_mode: Option<Spanned<StopMode>>,
    #[serde(default)]
    work_items: bool,
    contract: Option<Spanned<String>>,
    save_as: Option<Spanned<String>>,
    #[serde(default)]
    phases: Vec<Spanned<PhaseFront>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PhaseFront {
    name: Spanned<String>,
    prompt: Spanned<String>,
    repeat_prompt: Option<Spanned<String>>,
    tools: Option<Vec<Spanned<String>>>,
    context: Option<Spanned<String>>,
    #[serde(default = "yes")]
    continue_context: bool,
    max_iterations: Option<Spanned<u32>>,
    for_each: Option<Spanned<String>>,
    max_items: Option<Spanned<usize>>,
    #[serde(default)]
    if_empty: IfEmpty,
    save_as: Option<Spanned<String>>,
    #[serde(default)]
    always: bool,
    completes_task: Option<bool>,
    repeat: Option<Spanned<RepeatFront>>,
    save_results: Option<Spanned<SaveResultsFront>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SaveResultsFront {
    tool: Spanned<String>,
    #[serde(rename = "as")]
    name: Spanned<String>,
    title: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RepeatFront {
    from: Spanned<String>,
    items: Spanned<String>,
    until: Option<String>,
    leftover_heading: Option<String>,
}

fn yes() -> bool {
    true
}

/// What a parsed file gives its [`super::AgentDefinition`].
pub(super) struct Parsed {
    pub spec: AgentSpec,
    pub settings: RunSettings,
    pub phases: Vec<PhaseDefinition>,
    pub tool_lines: Vec<(String, usize)>,
}

/// Reports errors at lines of one file.
struct At<'a> {
    file: &'a str,
    front: FrontMatter<'a>,
}

impl At<'_> {
    fn err(&self, offset: usize, message: impl Into<String>) -> DefinitionError {
        DefinitionError::new(self.file, lines::line_of(&self.front, offset), message)
    }

    fn err_in<T>(&self, s: &Spanned<T>, message: impl Into<String>) -> DefinitionError {
        self.err(s.span().start, message)
    }

    /// A template in the string value `s`, every variable checked against `defined`.
    fn template(
        &self,
        s: &Spanned<String>,
        key: &str,
        defined: &dyn Fn(&str) -> Result<(), Undefined>,
    ) -> Result<Template, DefinitionError> {
        let (template, uses) = Template::parse(s.get_ref());
        for var in uses {
            if let Err(why) = defined(&var.name) {
                let line =
                    lines::line_in_value(&self.front, s.span().start, s.get_ref(), var.offset);
                return Err(DefinitionError::new(
                    self.file,
                    line,
                    format!(
                        "{key}: undefined template variable {{{{{}}}}}: {why}",
                        var.name
                    ),
                ));
            }
        }
        Ok(template)
    }
}

/// Parse and check the definition `text` of `file`.
pub(super) fn parse(text: &str, file: &str) -> Result<Parsed, DefinitionError> {
    let front = lines::split(text).map_err(|why| DefinitionError::new(file, 1, why.to_string()))?;
    let at = At { file, front };
    let parsed: Front = toml::from_str(front.toml).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        let mut message = e.message().trim().to_string();
        if message.starts_with("missing field") {
            message.push_str(": add it to the front matter (every definition has a name and a description)");
        }
        if let Some(key) = NOT_IN_A_DEFINITION
            .iter()
            .find(|k| message.contains(&format!("`{k}`")))
        {
            message.push_str(&format!(
                "; a definition cannot set `{key}`: budgets, sandbox rules and permissions come only from the configuration (lsm.toml) and the command line"
            ));
        }
        at.err(offset, message)
    })?;

    let name = parsed.name.get_ref().trim().to_string();
    if !valid_name(&name) {
        return Err(at.err_in(
            &parsed.name,
            format!(
                "name = \"{name}\" is not a valid agent name: use 1 to 64 ASCII letters, digits, `_` or `-`, starting with a letter or digit (it names the agent's workspace folder)"
            ),
        ));
    }
    let description = parsed.description.get_ref().trim().to_string();
    if description.is_empty() {
        return Err(at.err_in(
            &parsed.description,
            "description is empty: say in one line what the agent does (`lsm agent list` shows it)",
        ));
    }
    let tier = match &parsed.tier {
        None => lsm_phase::LlmTier::Normal,
        Some(t) => tier_of(t.get_ref()).ok_or_else(|| {
            at.err_in(
                t,
                format!(
                    "tier = \"{}\": the tiers are quick, normal and complex",
                    t.get_ref()
                ),
            )
        })?,
    };
    let input = match &parsed.input {
        None => TaskInput::Task,
        Some(i) => input_of(i.get_ref()).ok_or_else(|| {
            at.err_in(
                i,
                format!(
                    "input = \"{}\": an agent takes a \"task\" or a \"topic\"",
                    i.get_ref()
                ),
            )
        })?,
    };
    let mut tool_lines = Vec::new();
    let mut tools: Vec<String> = Vec::new();
    for tool in &parsed.tools {
        let t = tool.get_ref().trim().to_string();
        if t.is_empty() {
            return Err(at.err_in(tool, "tools: an empty tool name"));
        }
        tool_lines.push((t.clone(), lines::line_of(&front, tool.span().start)));
        if !tools.contains(&t) {
            tools.push(t);
        }
    }
    if let Some(m) = &parsed.max_iterations
        && *m.get_ref() == 0
    {
        return Err(at.err_in(m, "max_iterations must be at least 1"));
    }
    let model = match &parsed.model {
        Some(m) if m.get_ref().trim().is_empty() => {
            return Err(at.err_in(
                m,
                "model is empty: name a model, or leave the key out to use the tier's",
            ));
        }
        m => m.as_ref().map(|m| m.get_ref().trim().to_string()),
    };
    let contract = match &parsed.contract {
        Some(c) if c.get_ref().trim().is_empty() => {
            return Err(at.err_in(
                c,
                "contract is empty: name a contract file, or leave the key out",
            ));
        }
        c => c.as_ref().map(|c| PathBuf::from(c.get_ref().trim())),
    };
    let system_prompt = front.body.trim().to_string();
    if system_prompt.is_empty() {
        let last = lines::line_of(&front, front.toml.len()) + 1;
        return Err(DefinitionError::new(
            file,
            last,
            "the system prompt is empty: write it below the front matter's closing line",
        ));
    }

    let phases = if parsed.phases.is_empty() {
        let save_as = match &parsed.save_as {
            Some(s) => at.template(s, "save_as", &|var| top_level_var(var))?,
            None => Template::parse("result").0,
        };
        vec![single_phase(save_as)]
    } else {
        if let Some(s) = &parsed.save_as {
            return Err(at.err_in(
                s,
                "save_as at the top applies to an agent without [[phases]]: give save_as to the phase whose answer should be saved",
            ));
        }
        phases(&at, &parsed.phases, &tools)?
    };

    Ok(Parsed {
        spec: AgentSpec {
            name,
            description,
            tier,
            tools,
            input,
            system_prompt,
        },
        settings: RunSettings {
            model,
            max_iterations: parsed.max_iterations.map(|m| *m.get_ref()),
            max_rounds: parsed.max_rounds.map(|m| *m.get_ref()),
            stop_mode: parsed.stop_mode.map(|m| *m.get_ref()),
            work_items: parsed.work_items,
            contract,
        },
        phases,
        tool_lines,
    })
}

/// Why a template variable is not defined where it is used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Undefined {
    /// Outside any phase only the task is known.
    #[error("only {{{{task}}}} (or {{{{topic}}}}) can be used here")]
    OutsidePhases,
    /// `{{previous}}` in the first phase.
    #[error("the first phase has no previous phase")]
    NoPrevious,
    /// `{{item}}` in a phase without `for_each`.
    #[error("only a phase with for_each has an item")]
    NoItem,
    /// `{{phases.NAME}}` naming no earlier phase.
    #[error("no earlier phase is named \"{phase}\"; {earlier}")]
    NoSuchPhase {
        /// The name used.
        phase: String,
        /// The phases before this one, as a phrase.
        earlier: String,
    },
    /// A name that is no variable at all.
    #[error(
        "the variables are {{{{task}}}}, {{{{topic}}}}, {{{{previous}}}}, {{{{item}}}}, {{{{round}}}}, {{{{phases.NAME}}}} and {{{{phases.NAME.tools}}}}"
    )]
    Unknown,
}

/// The variables of a template outside any phase.
fn top_level_var(var: &str) -> Result<(), Undefined> {
    match var {
        "task" | "topic" => Ok(()),
        _ => Err(Undefined::OutsidePhases),
    }
}

/// The one phase of a definition without `[[phases]]`: the task as the user message, every
/// tool, the run's iteration limit, completing the task, the answer saved under a heading.
fn single_phase(save_as: Template) -> PhaseDefinition {
    PhaseDefinition {
        name: "main".to_string(),
        prompt: Template::parse("{{task}}").0,
        repeat_prompt: None,
        tools: None,
        context: None,
        continue_context: true,
        max_iterations: None,
        for_each: None,
        max_items: DEFAULT_MAX_ITEMS,
        if_empty: IfEmpty::Skip,
        save_as: Some(save_as),
        save_format: SaveFormat::WithHeading,
        always: false,
        completes_task: true,
        repeat: None,
        save_results: None,
    }
}

/// Check and convert the `[[phases]]`.
fn phases(
    at: &At<'_>,
    fronts: &[Spanned<PhaseFront>],
    agent_tools: &[String],
) -> Result<Vec<PhaseDefinition>, DefinitionError> {
    let any_completes = fronts.iter().any(|p| p.get_ref().completes_task.is_some());
    let mut out: Vec<PhaseDefinition> = Vec::new();
    for (i, spanned) in fronts.iter().enumerate() {
        let p = spanned.get_ref();
        let name = p.name.get_ref().trim().to_string();
        if !(valid_name(&name) && name.starts_with(|c: char| c.is_ascii_alphabetic())) {
            return Err(at.err_in(
                &p.name,
                format!(
                    "phase name \"{name}\" is not valid: use ASCII letters, digits, `_` or `-`, starting with a letter (templates name it as {{{{phases.NAME}}}})"
                ),
            ));
        }
        if out.iter().any(|q| q.name == name) {
            return Err(at.err_in(
                &p.name,
                format!("a second phase named \"{name}\": phase names must be unique"),
            ));
        }
        let earlier: Vec<&str> = out.iter().map(|q| q.name.as_str()).collect();
        let for_each = match &p.for_each {
            None => None,
            Some(f) => {
                let text = f.get_ref().trim();
                let (phase, field) = match text.split_once('.') {
                    Some((phase, field)) => (phase, Some(field.to_string())),
                    None => (text, None),
                };
                if !earlier.contains(&phase) {
                    return Err(at.err_in(
                        f,
                        format!(
                            "for_each = \"{text}\": no earlier phase is named \"{phase}\"; {}",
                            listed("the phases before this one are", &earlier)
                        ),
                    ));
                }
                Some(ListRef {
                    phase: phase.to_string(),
                    field: field.filter(|f| !f.is_empty()),
                })
            }
        };
        let has_item = for_each.is_some();
        let defined = |var: &str| -> Result<(), Undefined> {
            match var {
                "task" | "topic" | "round" => Ok(()),
                "previous" if i > 0 => Ok(()),
                "previous" => Err(Undefined::NoPrevious),
                "item" if has_item => Ok(()),
                "item" => Err(Undefined::NoItem),
                _ => match var.strip_prefix("phases.") {
                    Some(rest) => {
                        let phase = rest.strip_suffix(".tools").unwrap_or(rest);
                        if earlier.contains(&phase) {
                            Ok(())
                        } else {
                            Err(Undefined::NoSuchPhase {
                                phase: phase.to_string(),
                                earlier: listed("the phases before this one are", &earlier),
                            })
                        }
                    }
                    None => Err(Undefined::Unknown),
                },
            }
        };
        let prompt = at.template(&p.prompt, "prompt", &defined)?;
        if prompt.source().trim().is_empty() {
            return Err(at.err_in(&p.prompt, format!("phase \"{name}\": the prompt is empty")));
        }
        let repeat_prompt = p
            .repeat_prompt
            .as_ref()
            .map(|s| at.template(s, "repeat_prompt", &defined))
            .transpose()?;
        let context = p
            .context
            .as_ref()
            .map(|s| at.template(s, "context", &defined))
            .transpose()?;
        let save_as = p
            .save_as
            .as_ref()
            .map(|s| at.template(s, "save_as", &defined))
            .transpose()?;
        let tools = match &p.tools {
            None => None,
            Some(list) => {
                let mut names = Vec::new();
                for tool in list {
                    let t = tool.get_ref().trim().to_string();
                    if !agent_tools.contains(&t) {
                        return Err(at.err_in(
                            tool,
                            format!(
                                "phase \"{name}\": tool '{t}' is not among the agent's tools; a phase may use only tools the agent's `tools` lists ({})",
                                if agent_tools.is_empty() { "none".to_string() } else { agent_tools.join(", ") }
                            ),
                        ));
                    }
                    names.push(t);
                }
                Some(names)
            }
        };
        if let Some(m) = &p.max_iterations
            && *m.get_ref() == 0
        {
            return Err(at.err_in(
                m,
                format!("phase \"{name}\": max_iterations must be at least 1"),
            ));
        }
        if let Some(m) = &p.max_items
            && *m.get_ref() == 0
        {
            return Err(at.err_in(m, format!("phase \"{name}\": max_items must be at least 1")));
        }
        if !has_item {
            if let Some(m) = &p.max_items {
                return Err(at.err_in(
                    m,
                    format!("phase \"{name}\": max_items applies only to a phase with for_each"),
                ));
            }
        }
        let repeat = match &p.repeat {
            None => None,
            Some(r) => {
                let rf = r.get_ref();
                let from = rf.from.get_ref().trim().to_string();
                let target = out.iter().find(|q| q.name == from);
                match target {
                    Some(q) if q.for_each.is_some() => {}
                    Some(_) => {
                        return Err(at.err_in(
                            &rf.from,
                            format!("repeat.from = \"{from}\": that phase has no for_each, so it cannot take the next round's items"),
                        ));
                    }
                    None => {
                        return Err(at.err_in(
                            &rf.from,
                            format!(
                                "repeat.from = \"{from}\": no earlier phase is named \"{from}\"; {}",
                                listed("the phases before this one are", &earlier)
                            ),
                        ));
                    }
                }
                if out.iter().any(|q| q.repeat.is_some()) {
                    return Err(at.err_in(r, "only one phase of a definition may repeat"));
                }
                let items = rf.items.get_ref().trim().to_string();
                if items.is_empty() {
                    return Err(at.err_in(&rf.items, "repeat.items is empty: name the field of this phase's JSON answer that lists the next round's items"));
                }
                Some(Repeat {
                    from,
                    items,
                    until: rf.until.clone().filter(|u| !u.trim().is_empty()),
                    leftover_heading: rf
                        .leftover_heading
                        .clone()
                        .unwrap_or_else(|| "Not pursued".to_string()),
                })
            }
        };
        let save_results = match &p.save_results {
            None => None,
            Some(r) => {
                let rf = r.get_ref();
                let tool = rf.tool.get_ref().trim().to_string();
                let offered = tools.as_deref().unwrap_or(agent_tools);
                if !offered.contains(&tool) {
                    return Err(at.err_in(
                        &rf.tool,
                        format!("save_results.tool = \"{tool}\": phase \"{name}\" does not offer that tool"),
                    ));
                }
                Some(SaveResults {
                    title: rf.title.clone().unwrap_or_else(|| tool.clone()),
                    tool,
                    name: at.template(&rf.name, "save_results.as", &defined)?,
                })
            }
        };
        let last = i + 1 == fronts.len();
        out.push(PhaseDefinition {
            name,
            prompt,
            repeat_prompt,
            tools,
            context,
            continue_context: p.continue_context,
            max_iterations: p.max_iterations.as_ref().map(|m| *m.get_ref()),
            for_each,
            max_items: p
                .max_items
                .as_ref()
                .map_or(DEFAULT_MAX_ITEMS, |m| *m.get_ref()),
            if_empty: p.if_empty,
            save_as,
            save_format: SaveFormat::AsIs,
            always: p.always,
            completes_task: p.completes_task.unwrap_or(!any_completes && last),
            repeat,
            save_results,
        });
    }
    Ok(out)
}

/// `"<what>: a, b"`, or that there are none.
fn listed(what: &str, names: &[&str]) -> String {
    if names.is_empty() {
        "this is the first phase".to_string()
    } else {
        format!("{what}: {}", names.join(", "))
    }
}
