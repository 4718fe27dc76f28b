//! [`Catalog`]: the agents a run can name — the built-ins, then the user's definitions, then
//! the project's, a later one replacing an earlier one of the same name.
//!
//! The catalog holds definitions; it never reads a file (the composition root finds the
//! definition files and parses them with [`crate::definition::parse`]).

use crate::definition::{AgentDefinition, DefinitionError, Program, builtin};
use crate::{Agent, AgentContext, DefinedAgent};

/// The agents by name, in listing order: the built-ins first (in their order), then the
/// others by name.
#[derive(Debug, Clone)]
pub struct Catalog {
    agents: Vec<AgentDefinition>,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog::builtin()
    }
}

impl Catalog {
    /// The built-in agents alone.
    pub fn builtin() -> Self {
        Catalog {
            agents: builtin().to_vec(),
        }
    }

    /// Add one layer of definitions (the user's, then the project's): each replaces the
    /// agent of its name, which it then lists in its `overrides`.
    ///
    /// # Errors
    /// Two definitions of one name in the same layer (both files are named).
    pub fn with_layer(mut self, layer: Vec<AgentDefinition>) -> Result<Self, DefinitionError> {
        for (i, def) in layer.iter().enumerate() {
            if let Some(other) = layer[..i].iter().find(|d| d.name() == def.name()) {
                let first = other
                    .source
                    .path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                let second = def
                    .source
                    .path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                return Err(DefinitionError::new(
                    &second,
                    1,
                    format!(
                        "a second definition of agent '{}' in the same folder (the first is {first}): rename one",
                        def.name()
                    ),
                ));
            }
        }
        for mut def in layer {
            match self.agents.iter().position(|a| a.name() == def.name()) {
                Some(i) => {
                    let old = self.agents.remove(i);
                    def.overrides = std::iter::once(old.source.clone())
                        .chain(old.overrides)
                        .collect();
                    self.agents.insert(i, def);
                }
                None => {
                    let at = self
                        .agents
                        .iter()
                        .position(|a| {
                            a.source != crate::definition::DefinitionSource::Builtin
                                && a.name() > def.name()
                        })
                        .unwrap_or(self.agents.len());
                    self.agents.insert(at, def);
                }
            }
        }
        Ok(self)
    }

    /// The agent `name`.
    pub fn get(&self, name: &str) -> Option<&AgentDefinition> {
        self.agents.iter().find(|a| a.name() == name)
    }

    /// Every agent, in listing order.
    pub fn iter(&self) -> impl Iterator<Item = &AgentDefinition> {
        self.agents.iter()
    }

    /// The agents' names, in listing order.
    pub fn names(&self) -> Vec<&str> {
        self.agents.iter().map(AgentDefinition::name).collect()
    }

    /// The agent `name`, ready to run on `ctx`: its definition's interpreter, or its code.
    pub fn create(&self, name: &str, ctx: AgentContext) -> Option<Box<dyn Agent>> {
        Catalog::agent_of(self.get(name)?.clone(), ctx)
    }

    /// The agent of `definition`, ready to run on `ctx` (`None`: a code agent this crate
    /// does not have).
    pub fn agent_of(definition: AgentDefinition, ctx: AgentContext) -> Option<Box<dyn Agent>> {
        match definition.program {
            Program::Phases(_) => Some(Box::new(DefinedAgent::new(definition, ctx))),
            Program::Code => crate::agents::create_code(definition.name(), ctx),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::definition::{DefinitionSource, parse};

    fn def(name: &str, source: DefinitionSource) -> AgentDefinition {
        let text = format!("+++\nname = \"{name}\"\ndescription = \"d\"\n+++\nprompt\n");
        parse(&text, source, "test").unwrap()
    }

    fn user(name: &str) -> AgentDefinition {
        def(
            name,
            DefinitionSource::User {
                path: PathBuf::from(format!("u/{name}.md")),
            },
        )
    }

    fn project(name: &str, file: &str) -> AgentDefinition {
        def(
            name,
            DefinitionSource::Project {
                path: PathBuf::from(file),
            },
        )
    }

    #[test]
    fn the_project_wins_over_the_user_which_wins_over_a_builtin() {
        let catalog = Catalog::builtin()
            .with_layer(vec![user("general"), user("mine")])
            .unwrap()
            .with_layer(vec![project("general", "p/general.md")])
            .unwrap();
        let general = catalog.get("general").unwrap();
        assert_eq!(general.source.kind(), "project");
        let overridden: Vec<&str> = general.overrides.iter().map(|o| o.kind()).collect();
        assert_eq!(overridden, ["user", "builtin"]);
        assert_eq!(catalog.get("mine").unwrap().source.kind(), "user");
        assert_eq!(
            catalog.names()[0],
            "general",
            "a replaced agent keeps its place"
        );
        assert_eq!(
            catalog.names().len(),
            crate::definition::builtin().len() + 1
        );
    }

    #[test]
    fn two_definitions_of_one_name_in_one_folder_are_refused() {
        let e = Catalog::builtin()
            .with_layer(vec![project("x", "p/a.md"), project("x", "p/b.md")])
            .unwrap_err();
        assert_eq!(e.file, "p/b.md");
        assert!(e.message.contains("the first is p/a.md"), "{e}");
    }
}
