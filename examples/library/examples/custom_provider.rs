//! A model of your own behind the `Provider` trait, driving a built-in agent:
//! `cargo run -p lsm-examples --example custom_provider`.
//!
//! `Rulebook` answers by two rules instead of a network call. The run around it is the real
//! one: the `general` agent, the harness (budget, records), the sandbox and the built-in
//! `read_file` tool, confined to a temporary workspace.

#![allow(clippy::print_stdout)]

use std::sync::Arc;

use lsm_agents::AgentContext;
use lsm_harness::{HarnessConfig, HarnessFactory};
use lsm_providers::{LlmRequest, LlmResponse, Provider, ProviderError, Role, ToolCall, Usage};
use lsm_sandbox::{Sandbox, SandboxConfig};

/// Rule 1: until a tool has answered, ask to read `notes.md`. Rule 2: then answer with the
/// first line of what the tool returned.
struct Rulebook;

#[async_trait::async_trait]
impl Provider for Rulebook {
    fn name(&self) -> &str {
        "rulebook"
    }
    fn model(&self) -> &str {
        "two-rules"
    }
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        let tool_result = request.messages.iter().rev().find(|m| m.role == Role::Tool);
        let (text, tool_calls) = match tool_result {
            Some(result) => {
                let first_line = result.content.lines().next().unwrap_or_default();
                (format!("notes.md begins with \"{first_line}\"."), vec![])
            }
            None => {
                let call = ToolCall {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    arguments: serde_json::json!({"path": "notes.md"}),
                };
                (String::new(), vec![call])
            }
        };
        // The harness charges the run's budget with what the provider reports.
        let usage = Usage {
            input_tokens: 20,
            output_tokens: 5,
            ..Usage::default()
        };
        Ok(LlmResponse {
            text,
            tool_calls,
            usage,
            response_id: None,
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace)?;
    std::fs::write(
        workspace.join("notes.md"),
        "# Field notes\n\nSoil holds carbon.\n",
    )?;
    let agents_folder = dir.path().join("Agents");

    // The built-in tools, confined to the workspace (reads and writes inside it only).
    let policy = SandboxConfig::confined_to(&workspace);
    let sandbox = Sandbox::new(policy, lsm_sandbox::builtin::registry(), None)?;
    let config = HarnessConfig {
        agents_folder: agents_folder.clone(),
        ..HarnessConfig::default()
    };
    let factory = HarnessFactory::new(config, Arc::new(Rulebook), Arc::new(sandbox));

    // A built-in agent by name, on a context over that factory (what `lsm agent run` does).
    let ctx = AgentContext::new(Arc::new(factory), agents_folder).with_max_iterations(4);
    let mut agent =
        lsm_agents::create("general", ctx).ok_or_else(|| anyhow::anyhow!("no general agent"))?;
    let output = agent.run("What is the title of notes.md?").await;

    println!("answer: {}", output.text);
    for artifact in &output.artifacts {
        let name = artifact.file_name().unwrap_or_default().to_string_lossy();
        println!(
            "saved: {name} ({} bytes)",
            std::fs::metadata(artifact)?.len()
        );
    }
    anyhow::ensure!(
        output.text == "notes.md begins with \"# Field notes\".",
        "unexpected run: {output:?}"
    );
    Ok(())
}
