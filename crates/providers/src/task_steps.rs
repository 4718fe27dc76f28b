//! What a task asks for, read from its words: which offered tools it names (by the words
//! of their names: "Read notes.md, then write …" names `read_file` and `write_file`) and
//! which files each step is about (those named between the step's word and the next's).
//!
//! Small models are helped by two things this makes possible (see
//! [`crate::protocol_prompt`] and the local provider): a short tool list — the tools the
//! task names, not every tool the agent has — and an example decision that shows the step
//! the task names next, on the file the task gives for it, instead of one fixed example the
//! model copies at every step. Nothing here decides what the model does: the example is an
//! example, and the grammar still allows every offered tool and `DONE`.

use std::sync::Arc;

use std::collections::HashMap;

use crate::ToolDefinition;

/// Control tools: never among a small model's tools (a word like "complete" in a task is
/// not a request to report through the `complete` tool; a small model ends with `DONE`).
const CONTROL_TOOLS: &[&str] = &["complete", "block", "ask_user"];

fn is_control(name: &str) -> bool {
    CONTROL_TOOLS.contains(&name)
}

/// Irregular forms of the verbs tool names start with.
const IRREGULAR: &[(&str, &str)] = &[
    ("wrote", "write"),
    ("written", "write"),
    ("found", "find"),
    ("made", "create"),
];

/// A tool-name word followed by this word is another verb: "find out what the mascot is
/// called" asks to learn something, not to search for files.
const IDIOMS: &[(&str, &str)] = &[("find", "out")];

/// One step of a task: a tool and the file the task gives for it, in the task's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The tool's name.
    pub tool: String,
    /// Every file named between the step's word and the next step's ("Read a.txt and
    /// b.txt, then write c.txt": `a.txt`, `b.txt` for the reading step).
    pub files: Vec<String>,
    /// Where in the task the step is named (a byte offset).
    at: usize,
}

/// The steps `task` names among `tools`, in the task's order (a tool once, at its first
/// mention). A tool is named by its full name, or by a word of four or more letters of its
/// name that no more than two offered tools share (`read` names `read_file` and
/// `read_folder`; `file` names none: every file tool has it; `and` of
/// `query_and_synthesize` is too short), as the task's word or one of its inflections
/// (`reads`, `appended`, `wrote`).
pub fn steps(tools: &[Arc<ToolDefinition>], task: &str) -> Vec<Step> {
    // ASCII lowercasing keeps every byte offset, so offsets found in `lower` cut `task` at
    // character boundaries (full Unicode lowercasing can change lengths: `İ`).
    let lower = task.to_ascii_lowercase();
    let words = words_at(&lower);
    let mut shared: HashMap<&str, usize> = HashMap::new();
    for t in tools {
        for w in t.name.split('_') {
            *shared.entry(w).or_default() += 1;
        }
    }
    let mut found: Vec<Step> = Vec::new();
    for t in tools.iter().filter(|t| !is_control(&t.name)) {
        let full = lower.find(&t.name.to_ascii_lowercase());
        let by_word = t
            .name
            .split('_')
            .filter(|w| w.len() >= 4 && shared.get(w).copied().unwrap_or(0) <= 2)
            .filter_map(|w| {
                words
                    .iter()
                    .enumerate()
                    .find(|(i, (_, word))| {
                        names(word, w)
                            && !words
                                .get(i + 1)
                                .is_some_and(|(_, next)| IDIOMS.contains(&(w, *next)))
                    })
                    .map(|(_, (at, _))| *at)
            })
            .min();
        let Some(at) = [full, by_word].into_iter().flatten().min() else {
            continue;
        };
        found.push(Step {
            tool: t.name.clone(),
            files: Vec::new(),
            at,
        });
    }
    found.sort_by_key(|s| s.at);
    let starts: Vec<usize> = found.iter().map(|s| s.at).collect();
    for step in &mut found {
        let end = starts
            .iter()
            .copied()
            .find(|&a| a > step.at)
            .unwrap_or(task.len());
        step.files = file_names(&task[step.at.min(end)..end]);
    }
    found
}

impl Step {
    /// The step's file: the first one named for it.
    pub fn file(&self) -> Option<&str> {
        self.files.first().map(String::as_str)
    }
}

/// What a small model's example decision shows next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// The first step of the task none of whose tools has succeeded yet.
    Step(Step),
    /// Every step the task names has succeeded: the example is `DONE`.
    Finished,
    /// The task names no tool.
    Unknown,
}

/// The step after those whose tools are in `done` (tools that succeeded, in any order).
/// Steps named by one word are alternatives (`read` names `read_file` and `read_folder`):
/// one of them done is the step done, and the example prefers a `*_file` tool when the
/// step has a file.
pub fn next_step(tools: &[Arc<ToolDefinition>], task: &str, done: &[&str]) -> Next {
    let all = steps(tools, task);
    if all.is_empty() {
        return Next::Unknown;
    }
    let mut rest = all.as_slice();
    while let Some(first) = rest.first() {
        let n = rest.iter().take_while(|s| s.at == first.at).count();
        let (group, after) = rest.split_at(n);
        rest = after;
        if group.iter().any(|s| done.contains(&s.tool.as_str())) {
            continue;
        }
        let pick = group
            .iter()
            .find(|s| s.files.is_empty() || s.tool.ends_with("_file"))
            .unwrap_or(first);
        return Next::Step(pick.clone());
    }
    Next::Finished
}

/// The tools a small model is offered now, when the task names its steps: those of the
/// first step none of whose tools has succeeded (`done`), or none once every named step
/// has succeeded (the model then answers in text). `None` when the task names no tool.
///
/// A small model picks among offered tools by little more than their place in the list:
/// it re-reads a file it has read, or appends the same line again and again. Offering the
/// step that is due leaves it only what it does well, the arguments (what to write).
#[cfg_attr(not(feature = "local"), allow(dead_code))]
pub fn due_tools(tools: &[Arc<ToolDefinition>], task: &str, done: &[&str]) -> Option<Vec<String>> {
    let due = match next_step(tools, task, done) {
        Next::Unknown => return None,
        Next::Finished => return Some(Vec::new()),
        Next::Step(step) => step,
    };
    Some(
        steps(tools, task)
            .into_iter()
            .filter(|s| s.at == due.at)
            .map(|s| s.tool)
            .collect(),
    )
}

/// Whether the task's `word` is the tool-name word `stem` or an inflection of it.
fn names(word: &str, stem: &str) -> bool {
    if word == stem {
        return true;
    }
    if IRREGULAR.iter().any(|(w, s)| *w == word && *s == stem) {
        return true;
    }
    // `reads`, `reading`, `appended`, `edits`, `creating` (a final `e` dropped).
    let base = stem.strip_suffix('e').unwrap_or(stem);
    stem.len() >= 4
        && word.starts_with(base)
        && matches!(&word[base.len()..], "s" | "es" | "ed" | "d" | "ing" | "ng")
}

/// The task's words (ASCII letters) with their byte offsets.
fn words_at(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_ascii_alphabetic(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, &text[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, &text[s..]));
    }
    out
}

/// The tools of `narrow`, each tool's `path` argument limited ([`pin_paths`]) to the files the task
/// names for its step — those between the step's word and the next step's: "Read notes.md,
/// then write a summary to summary.md" lets `write_file` write `summary.md` only — or, for
/// a tool no step names, to every file the task names.
#[cfg_attr(not(feature = "local"), allow(dead_code))]
pub fn narrow_and_pin(
    tools: &[Arc<ToolDefinition>],
    task: &str,
    called: &[&str],
    max: usize,
) -> Vec<Arc<ToolDefinition>> {
    let all = file_names(task);
    let named = steps(tools, task);
    narrow(tools, task, called, max)
        .into_iter()
        .map(|t| {
            let files = named
                .iter()
                .find(|s| s.tool == t.name && !s.files.is_empty())
                .map_or(&all, |s| &s.files);
            Arc::new(pin_paths(t.clone(), files))
        })
        .collect()
}

/// At most `max` of `tools` for a small model: the ones `task` names, in its order, then
/// those already `called`; when the task names none, the reading tools among them
/// (`read_file`, `read_folder`, `find_file`, `query_and_synthesize`), else the first `max`.
/// Never a control tool (`complete`, `block`, `ask_user`).
#[cfg_attr(not(feature = "local"), allow(dead_code))]
fn narrow<'t>(
    tools: &'t [Arc<ToolDefinition>],
    task: &str,
    called: &[&str],
    max: usize,
) -> Vec<&'t ToolDefinition> {
    let by_name = |name: &str| tools.iter().find(|t| t.name == name);
    let mut chosen: Vec<&ToolDefinition> = Vec::new();
    fn add<'t>(t: &'t ToolDefinition, chosen: &mut Vec<&'t ToolDefinition>, max: usize) {
        if chosen.len() < max && !chosen.iter().any(|c| c.name == t.name) {
            chosen.push(t);
        }
    }
    let named = steps(tools, task);
    for s in &named {
        if let Some(t) = by_name(&s.tool) {
            add(t, &mut chosen, max);
        }
    }
    for c in called.iter().filter(|c| !is_control(c)) {
        if let Some(t) = by_name(c) {
            add(t, &mut chosen, max);
        }
    }
    if named.is_empty() {
        for name in [
            "read_file",
            "read_folder",
            "find_file",
            "query_and_synthesize",
        ] {
            if let Some(t) = by_name(name) {
                add(t, &mut chosen, max);
            }
        }
        if chosen.is_empty() {
            for t in tools.iter().filter(|t| !is_control(&t.name)) {
                add(t, &mut chosen, max);
            }
        }
    }
    chosen
}

/// Every file name `task` mentions, in order, each once.
#[cfg_attr(not(feature = "local"), allow(dead_code))]
pub fn file_names(task: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = task;
    while let Some(name) = first_file_name(rest) {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
        let Some(at) = rest.find(name) else { break };
        rest = &rest[at + name.len()..];
    }
    out
}

/// `tool` with its `path` argument (a string) restricted to `files`, when there are any: a
/// small model invents paths (`/Users/user123456789.json`) that a grammar can rule out.
#[cfg_attr(not(feature = "local"), allow(dead_code))]
pub fn pin_paths(mut tool: ToolDefinition, files: &[String]) -> ToolDefinition {
    if files.is_empty() {
        return tool;
    }
    if let Some(path) = tool
        .parameters
        .get_mut("properties")
        .and_then(|p| p.get_mut("path"))
        .and_then(serde_json::Value::as_object_mut)
        && path.get("type").and_then(serde_json::Value::as_str) == Some("string")
    {
        path.insert("enum".into(), serde_json::json!(files));
    }
    tool
}

/// The first word of `text` that looks like a file name (`notes.md`, `docs/a.txt`): a dot
/// followed by one to five letters or digits at its end.
pub fn first_file_name(text: &str) -> Option<&str> {
    text.split(|c: char| c.is_whitespace() || "'\"`,;:()[]<>".contains(c))
        .map(|w| w.trim_end_matches(['.', '!', '?']))
        .find(|w| {
            w.rsplit_once('.').is_some_and(|(stem, ext)| {
                !stem.is_empty()
                    && (1..=5).contains(&ext.len())
                    && ext.chars().all(|c| c.is_ascii_alphanumeric())
                    && ext.chars().any(|c| c.is_ascii_alphabetic())
            })
        })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn file_names_are_found_in_tasks() {
        assert_eq!(
            first_file_name("Read notes.md, then write a.txt."),
            Some("notes.md")
        );
        assert_eq!(
            first_file_name("Append 'milk' to shopping.txt."),
            Some("shopping.txt")
        );
        assert_eq!(
            first_file_name("Open docs/ARCHITECTURE.md"),
            Some("docs/ARCHITECTURE.md")
        );
        assert_eq!(first_file_name("Nothing to do. Really."), None);
        assert_eq!(first_file_name("Version 1.2 is out"), None);
    }
    use serde_json::json;

    /// A tool with one required `path` argument (also used by the local provider's tests).
    pub(crate) fn tool(name: &str) -> Arc<ToolDefinition> {
        std::sync::Arc::new(ToolDefinition {
            name: name.into(),
            description: format!("The {name} tool."),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        })
    }

    fn general() -> Vec<Arc<ToolDefinition>> {
        [
            "append_file",
            "ask_user",
            "create_folder",
            "edit_file",
            "file_metadata",
            "find_file",
            "hash_file",
            "read_file",
            "read_folder",
            "write_file",
            "query_and_synthesize",
            "complete",
        ]
        .into_iter()
        .map(tool)
        .collect()
    }

    fn names_of<T: std::borrow::Borrow<ToolDefinition>>(tools: &[T]) -> Vec<&str> {
        tools.iter().map(|t| t.borrow().name.as_str()).collect()
    }

    #[test]
    fn the_steps_of_a_task_come_in_its_order_with_the_file_named_after_each() {
        let s = steps(
            &general(),
            "Read notes.md, then write a one-line summary of it to summary.md.",
        );
        let got: Vec<(&str, Option<&str>)> =
            s.iter().map(|s| (s.tool.as_str(), s.file())).collect();
        assert_eq!(
            got,
            [
                ("read_file", Some("notes.md")),
                ("read_folder", Some("notes.md")),
                ("write_file", Some("summary.md"))
            ]
        );
        let s = steps(&general(), "Append the line milk to shopping.txt.");
        assert_eq!(s[0].tool, "append_file");
        assert_eq!(s[0].file(), Some("shopping.txt"));
    }

    #[test]
    fn text_beyond_ascii_is_read_without_breaking_a_character() {
        let task = "İİİ Read ünïcødé.md, then write İstanbul notes to çé.txt — ok.";
        let s = steps(&general(), task);
        assert_eq!(s[0].tool, "read_file");
        assert_eq!(s[0].file(), Some("ünïcødé.md"));
        let w = s.iter().find(|s| s.tool == "write_file").unwrap();
        assert_eq!(w.files, ["çé.txt"]);
    }

    #[test]
    fn inflections_and_full_names_name_a_tool_and_shared_words_do_not() {
        let named = |task: &str| -> Vec<String> {
            steps(&general(), task)
                .into_iter()
                .map(|s| s.tool)
                .collect()
        };
        assert_eq!(named("It reads the file"), ["read_file", "read_folder"]);
        assert_eq!(named("Then it wrote a file."), ["write_file"]);
        assert_eq!(named("appended to the file"), ["append_file"]);
        // "file" is in five tool names: it names none of them.
        assert!(named("Look at this file.").is_empty());
        assert_eq!(
            named("Use query_and_synthesize, then find notes.md."),
            ["query_and_synthesize", "find_file"]
        );
        // "ready" is not an inflection of "read", "editor" not one of "edit".
        assert!(named("Ready? Ask the editor.").is_empty());
        // Control tools are never named by a word.
        assert!(named("Complete the sentence.").is_empty());
    }

    #[test]
    fn the_next_step_follows_the_tools_that_succeeded() {
        let t = general();
        let task = "Read notes.md, then write a one-line summary of it to summary.md.";
        let Next::Step(s) = next_step(&t, task, &[]) else {
            panic!("no first step")
        };
        assert_eq!((s.tool.as_str(), s.file()), ("read_file", Some("notes.md")));
        let Next::Step(s) = next_step(&t, task, &["read_file"]) else {
            panic!("no second step")
        };
        assert_eq!(
            (s.tool.as_str(), s.file()),
            ("write_file", Some("summary.md"))
        );
        assert_eq!(
            next_step(&t, task, &["read_folder", "write_file"]),
            Next::Finished
        );
        assert_eq!(next_step(&t, "Answer DONE.", &[]), Next::Unknown);
    }

    #[test]
    fn find_out_is_not_a_file_search() {
        let t = general();
        let named =
            |task: &str| -> Vec<String> { steps(&t, task).into_iter().map(|s| s.tool).collect() };
        assert_eq!(
            named("Use query_and_synthesize to find out what the mascot is called, then answer."),
            ["query_and_synthesize"]
        );
        assert_eq!(named("Find the file named config.toml."), ["find_file"]);
    }

    #[test]
    fn the_due_tools_are_the_steps_not_yet_done_then_none() {
        let t = general();
        let task = "Read notes.md, then write a one-line summary of it to summary.md.";
        assert_eq!(
            due_tools(&t, task, &[]),
            Some(vec!["read_file".to_string(), "read_folder".to_string()])
        );
        assert_eq!(
            due_tools(&t, task, &["read_file"]),
            Some(vec!["write_file".to_string()])
        );
        assert_eq!(
            due_tools(&t, task, &["read_file", "write_file"]),
            Some(Vec::new())
        );
        // A repeated success changes nothing: the append is done once.
        let append = "Append the line milk to shopping.txt.";
        assert_eq!(due_tools(&t, append, &["append_file"]), Some(Vec::new()));
        assert_eq!(due_tools(&t, "Answer DONE.", &[]), None);
    }

    #[test]
    fn paths_are_pinned_to_the_files_the_task_names() {
        let task = "Read notes.md, then write a summary of notes.md to out/summary.md.";
        let files = file_names(task);
        assert_eq!(files, ["notes.md", "out/summary.md"]);
        let pinned = pin_paths((*tool("read_file")).clone(), &files);
        assert_eq!(
            pinned.parameters["properties"]["path"]["enum"],
            json!(["notes.md", "out/summary.md"])
        );
        assert_eq!(
            pin_paths((*tool("read_file")).clone(), &[]),
            *tool("read_file")
        );
    }

    #[test]
    fn each_step_may_use_the_files_named_for_it() {
        let t = general();
        let task = "Read a.txt and b.txt, then write a summary of them to c.txt.";
        let got = narrow_and_pin(&t, task, &[], 4);
        let enum_of = |name: &str| {
            got.iter().find(|t| t.name == name).unwrap().parameters["properties"]["path"]["enum"]
                .clone()
        };
        assert_eq!(enum_of("read_file"), json!(["a.txt", "b.txt"]));
        assert_eq!(enum_of("write_file"), json!(["c.txt"]));
        // A tool no step names (it succeeded before) may use every file the task names.
        let got = narrow_and_pin(&t, "Write c.txt after a.txt.", &["read_file"], 4);
        assert_eq!(
            got[1].parameters["properties"]["path"]["enum"],
            json!(["c.txt", "a.txt"])
        );
    }

    #[test]
    fn narrow_keeps_the_named_tools_then_the_called_ones_within_the_limit() {
        let t = general();
        let got = narrow(
            &t,
            "Append the line milk to shopping.txt.",
            &["read_file"],
            4,
        );
        assert_eq!(names_of(&got), ["append_file", "read_file"]);
        let got = narrow(
            &t,
            "Read a.txt, write b.txt, edit c.txt, hash d.txt, find e",
            &[],
            3,
        );
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn a_task_that_names_no_tool_gets_the_reading_tools_and_no_control_tool() {
        let t = general();
        let got = narrow(&t, "Nothing needs to be done: answer DONE.", &[], 4);
        assert_eq!(
            names_of(&got),
            [
                "read_file",
                "read_folder",
                "find_file",
                "query_and_synthesize"
            ]
        );
        let only_control: Vec<std::sync::Arc<ToolDefinition>> =
            ["complete", "block"].into_iter().map(tool).collect();
        assert!(narrow(&only_control, "Do it.", &[], 4).is_empty());
        let got = narrow(&t, "Call complete when you are done.", &["complete"], 4);
        assert!(!names_of(&got).contains(&"complete"));
    }
}
