//! Prompt templates: text with `{{name}}` variables, checked when a definition is loaded and
//! filled in when a phase runs.
//!
//! Only `{{` followed by a variable name (letters, digits, `_`, `.`, spaces around it) and `}}`
//! is a variable; any other `{{` is plain text, so prompts may show JSON or code freely. A
//! template never executes anything and never reads a file.

use std::fmt::Write as _;

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// Plain text, as written.
    Text(String),
    /// A variable, by its name (`task`, `item`, `phases.plan`, …).
    Var(String),
}

/// A parsed prompt template.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Template {
    pieces: Vec<Piece>,
}

/// A variable use in a template: its name and the byte offset of its `{{` in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarUse {
    /// The variable's name.
    pub name: String,
    /// Where its `{{` stands in the template's text (bytes).
    pub offset: usize,
}

impl Template {
    /// Parse `text`. Never fails: what is not a variable is text.
    pub fn parse(text: &str) -> (Template, Vec<VarUse>) {
        let mut pieces = Vec::new();
        let mut uses = Vec::new();
        let mut plain = String::new();
        let mut rest = text;
        let mut offset = 0;
        while let Some(open) = rest.find("{{") {
            let after = &rest[open + 2..];
            let var = after.find("}}").and_then(|close| {
                let name = after[..close].trim();
                is_var_name(name).then(|| (name.to_string(), close))
            });
            match var {
                Some((name, close)) => {
                    plain.push_str(&rest[..open]);
                    if !plain.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut plain)));
                    }
                    uses.push(VarUse {
                        name: name.clone(),
                        offset: offset + open,
                    });
                    pieces.push(Piece::Var(name));
                    let consumed = open + 2 + close + 2;
                    offset += consumed;
                    rest = &rest[consumed..];
                }
                None => {
                    plain.push_str(&rest[..open + 2]);
                    offset += open + 2;
                    rest = &rest[open + 2..];
                }
            }
        }
        plain.push_str(rest);
        if !plain.is_empty() {
            pieces.push(Piece::Text(plain));
        }
        (Template { pieces }, uses)
    }

    /// The text with each variable replaced by `value(name)`.
    pub fn render(&self, mut value: impl FnMut(&str) -> String) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Var(name) => {
                    let _ = write!(out, "{}", value(name));
                }
            }
        }
        out
    }

    /// Whether the template names `var` anywhere.
    pub fn uses(&self, var: &str) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Var(name) if name == var))
    }

    /// The template's text as written (variables as `{{name}}`).
    pub fn source(&self) -> String {
        self.render(|name| format!("{{{{{name}}}}}"))
    }
}

/// `task`, `item`, `phases.plan`, `phases.plan.tools`: ASCII letters, digits, `_`, `-` and `.`,
/// starting with a letter.
fn is_var_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_found_and_filled() {
        let (t, uses) = Template::parse("Topic: '{{ task }}'. Item {{item}}, {{phases.plan}}.");
        let names: Vec<&str> = uses.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["task", "item", "phases.plan"]);
        assert_eq!(uses[0].offset, 8);
        let out = t.render(|n| n.to_uppercase());
        assert_eq!(out, "Topic: 'TASK'. Item ITEM, PHASES.PLAN.");
        assert!(t.uses("item") && !t.uses("previous"));
    }

    #[test]
    fn other_braces_are_text() {
        let text = r#"Reply {"a": {{"b": 1}}} and {{ not a var }} or {{}} {{unclosed"#;
        let (t, uses) = Template::parse(text);
        assert!(uses.is_empty(), "{uses:?}");
        assert_eq!(t.render(|_| "X".into()), text);
        assert_eq!(t.source(), text);
    }

    #[test]
    fn source_round_trips_variables() {
        let (t, _) = Template::parse("a {{ task }} b {{item}}");
        assert_eq!(t.source(), "a {{task}} b {{item}}");
    }
}
