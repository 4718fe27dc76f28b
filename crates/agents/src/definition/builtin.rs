//! The built-in agents, in `lsm agent list` order: the ones described as data are
//! definition files embedded here (`builtin/*.md`, the same format users write); the rest run
//! code of their own and are listed by their cards.

use std::sync::OnceLock;

use super::{AgentDefinition, DefinitionSource, parse};

/// The embedded definition files: (file name, text).
const FILES: &[(&str, &str)] = &[
    ("general.md", include_str!("builtin/general.md")),
    ("research.md", include_str!("builtin/research.md")),
    ("synthesis.md", include_str!("builtin/synthesis.md")),
    ("librarian.md", include_str!("builtin/librarian.md")),
    (
        "manuscript_editor.md",
        include_str!("builtin/manuscript_editor.md"),
    ),
    ("researcher.md", include_str!("builtin/researcher.md")),
    ("terminal.md", include_str!("builtin/terminal.md")),
];

/// The text of the built-in definition file `name` (`general.md`), to show or copy.
pub fn builtin_file(name: &str) -> Option<&'static str> {
    FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

/// Every built-in agent, in `lsm agent list` order. Parsed once per process; an embedded file
/// that does not parse is left out and logged (a test parses every one).
pub fn builtin() -> &'static [AgentDefinition] {
    static BUILTIN: OnceLock<Vec<AgentDefinition>> = OnceLock::new();
    BUILTIN.get_or_init(|| {
        let mut defined: Vec<AgentDefinition> = FILES
            .iter()
            .filter_map(|(file, text)| {
                parse(text, DefinitionSource::Builtin, &format!("built-in {file}"))
                    .map_err(|e| tracing::error!("{e}"))
                    .ok()
            })
            .collect();
        let mut take = |name: &str| {
            defined
                .iter()
                .position(|d| d.name() == name)
                .map(|i| defined.remove(i))
        };
        let mut all = Vec::new();
        for name in ORDER {
            if let Some(d) = take(name) {
                all.push(d);
            } else if let Some(card) = crate::agents::code_card(name) {
                all.push(AgentDefinition::code(card));
            }
        }
        all
    })
}

/// `lsm agent list`'s order of the built-ins.
const ORDER: &[&str] = &[
    "general",
    "research",
    "synthesis",
    "curator",
    "writing",
    "librarian",
    "manuscript_editor",
    "assistant",
    "conductor",
    "researcher",
    "terminal",
];
