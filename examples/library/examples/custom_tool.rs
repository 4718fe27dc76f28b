//! A tool of your own and an agent of your own: `cargo run -p lsm-examples --example custom_tool`.
//!
//! The agent is a definition (the same format as `lsm-agents/*.md` files) with one phase that
//! may call only `word_count`; the model, scripted here, calls the tool and then answers. Put any other `Provider` in the scripted one's place to use a
//! real model (see the `embed_openai` example).

#![allow(clippy::print_stdout)]

use std::sync::Arc;

use lsm_agents::definition::{self, DefinitionSource};
use lsm_agents::{Agent, AgentContext, DefinedAgent};
use lsm_harness::{HarnessConfig, HarnessFactory};
use lsm_providers::{ScriptedProvider, ScriptedResponse};
use lsm_sandbox::{RiskLevel, Sandbox, SandboxConfig, Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{Value, json};

/// The tool: counts the words of a text. It runs only through the sandbox, which validates
/// its arguments against `parameters` first.
struct WordCount;

#[async_trait::async_trait]
impl Tool for WordCount {
    fn name(&self) -> &str {
        "word_count"
    }
    fn description(&self) -> &str {
        "Count the words of a text."
    }
    fn parameters(&self) -> Value {
        // Or derive it from an arguments struct with `lsm_sandbox::schema_for`.
        json!({"type": "object", "properties": {"text": {"type": "string"}},
               "required": ["text"], "additionalProperties": false})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let words = ctx.str_arg("text")?.split_whitespace().count();
        Ok(ToolOutput::text(words.to_string()))
    }
}

/// The agent, as data: its card in TOML front matter, its system prompt below. The same
/// text in `lsm-agents/counter.md` makes it an agent of the `lsm` program (docs/AGENTS.md).
const COUNTER: &str = r#"+++
name = "counter"
description = "Counts the words of a text with the word_count tool."
tools = ["word_count"]
max_iterations = 4
+++
Count words with the word_count tool, then give the number.
"#;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let agents_folder = dir.path().join("Agents");
    // The registry and the sandbox every call goes through (no folder readable: none needed).
    let tools = lsm_sandbox::ToolRegistry::new().with(Arc::new(WordCount));
    let sandbox = Sandbox::new(SandboxConfig::default(), tools, None)?;
    // The model: call the tool, then answer.
    let model = Arc::new(ScriptedProvider::new(vec![
        ScriptedResponse::tool("word_count", json!({"text": "the quick brown fox"})),
        ScriptedResponse::text("That is 4 words."),
    ]));
    let config = HarnessConfig {
        agents_folder: agents_folder.clone(),
        ..HarnessConfig::default()
    };
    let factory = HarnessFactory::new(config, model.clone(), Arc::new(sandbox));
    let ctx = AgentContext::new(Arc::new(factory), agents_folder).with_max_iterations(4);
    let definition = definition::parse(COUNTER, DefinitionSource::Builtin, "counter.md")?;
    let mut agent = DefinedAgent::new(definition, ctx);
    let output = agent.run("How many words: 'the quick brown fox'?").await;

    // The model's second call carries the tool's result as its last message.
    let requests = model.requests();
    let tool_said = requests.get(1).and_then(|r| r.messages.last());
    let tool_said = tool_said.map_or("", |m| m.content.as_str());
    println!(
        "word_count returned {tool_said:?}; the agent answered {:?}",
        output.text
    );
    anyhow::ensure!(
        tool_said == "4",
        "word_count did not return 4: {tool_said:?}"
    );
    anyhow::ensure!(
        output.text == "That is 4 words.",
        "unexpected run: {output:?}"
    );
    Ok(())
}
