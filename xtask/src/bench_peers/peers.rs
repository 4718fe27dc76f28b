//! The peers of `bench-peers`: pydantic-ai and openai-agents, each an agent with one
//! `read_file` tool against the mock, in a private virtual environment.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The pinned packages (the versions the figures in docs/PERFORMANCE.md were taken with).
pub const PACKAGES: [&str; 2] = ["pydantic-ai-slim[openai]==2.68.0", "openai-agents==0.24.0"];

/// The scripts written for one bench.
pub struct Scripts {
    pub pydantic_ai: PathBuf,
    pub openai_agents: PathBuf,
}

/// Both peers import in `python`.
pub fn installed(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import pydantic_ai, agents"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Create the virtual environment at `venv` and install [`PACKAGES`] into it with pip.
pub fn install(venv: &Path) -> Result<()> {
    let python = venv.join("bin").join("python");
    if !python.is_file() {
        eprintln!("xtask: [bench-peers] python3 -m venv {}", venv.display());
        let status = Command::new("python3")
            .args(["-m", "venv"])
            .arg(venv)
            .status()
            .context("cannot run python3 (install python3 and python3-venv)")?;
        if !status.success() {
            bail!(
                "`python3 -m venv` failed ({status}); on Debian install python3-venv \
                 (`apt-get install -y python3-venv`) and try again"
            );
        }
    }
    eprintln!("xtask: [bench-peers] pip install {}", PACKAGES.join(" "));
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(PACKAGES)
        .status()
        .context("cannot run the virtual environment's pip")?;
    if !status.success() {
        bail!("pip could not install the peers ({status}); check the network access to PyPI");
    }
    Ok(())
}

const PYDANTIC_AI: &str = r#"
import asyncio, sys
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import UsageLimits

base_url, calls, agents, task = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
model = OpenAIChatModel("mock", provider=OpenAIProvider(base_url=base_url, api_key="none"))
agent = Agent(model, instructions="You are a helpful assistant. Use the tools to do the task.")

@agent.tool_plain
def read_file(path: str) -> str:
    """Read a text file and return its content."""
    with open(path, encoding="utf-8") as f:
        return f.read()

limits = UsageLimits(request_limit=calls + 10, tool_calls_limit=None)
if agents == 1:
    print(agent.run_sync(task, usage_limits=limits).output)
else:
    async def main():
        results = await asyncio.gather(*(agent.run(task, usage_limits=limits) for _ in range(agents)))
        print(len(results), "runs;", results[0].output)
    asyncio.run(main())
"#;

const OPENAI_AGENTS: &str = r#"
import asyncio, sys
from openai import AsyncOpenAI
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled

set_tracing_disabled(True)
base_url, calls, agents, task = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
client = AsyncOpenAI(base_url=base_url, api_key="none")

@function_tool
def read_file(path: str) -> str:
    """Read a text file and return its content."""
    with open(path, encoding="utf-8") as f:
        return f.read()

agent = Agent(
    name="reader",
    instructions="You are a helpful assistant. Use the tools to do the task.",
    model=OpenAIChatCompletionsModel(model="mock", openai_client=client),
    tools=[read_file],
)
if agents == 1:
    print(Runner.run_sync(agent, task, max_turns=calls + 10).final_output)
else:
    async def main():
        results = await asyncio.gather(*(Runner.run(agent, task, max_turns=calls + 10) for _ in range(agents)))
        print(len(results), "runs;", results[0].final_output)
    asyncio.run(main())
"#;

/// Write both scripts into `work/peers/`.
pub fn write_scripts(work: &Path) -> Result<Scripts> {
    let dir = work.join("peers");
    std::fs::create_dir_all(&dir)?;
    let scripts = Scripts {
        pydantic_ai: dir.join("pydantic_ai_agent.py"),
        openai_agents: dir.join("openai_agents_agent.py"),
    };
    std::fs::write(&scripts.pydantic_ai, PYDANTIC_AI)?;
    std::fs::write(&scripts.openai_agents, OPENAI_AGENTS)?;
    Ok(scripts)
}
