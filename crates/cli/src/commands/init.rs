//! `lsm init`: write a commented `lsm.toml` for this project — provider, model and the
//! variable holding the key, asked on the terminal or given as flags — then ping the model
//! with it.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use anyhow::{Context, Result};
use clap::Args;
use lsm_phase::LlmTier;

use crate::exit;
use crate::exit::usage;
use lsm_app::config::{ConfigArgs, DEFAULT_CONFIG_FILE};
use lsm_app::wiring::{self, ProviderFlags};

/// Arguments of `lsm init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The provider: openai | openai-responses | anthropic | compatible | local |
    /// scripted:<file.jsonl>. Asked when missing and stdin is a terminal.
    #[arg(long, value_name = "SPEC")]
    pub provider: Option<String>,
    /// The model (default: a small current model of the provider). Asked when missing.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The environment variable that holds the API key (default: the provider's usual one,
    /// OPENAI_API_KEY or ANTHROPIC_API_KEY). Asked when missing. The key itself is never
    /// written.
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// The API base URL (compatible servers: http://localhost:11434/v1 for Ollama).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Replace an existing lsm.toml.
    #[arg(long)]
    pub force: bool,
    /// Write the file without pinging the model.
    #[arg(long)]
    pub no_ping: bool,
}

/// Asks a person one question (with the default an empty answer takes).
pub type Ask<'a> = &'a mut dyn FnMut(&str, Option<&str>) -> Result<String>;

/// What the file will say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answers {
    /// `[llm] provider`.
    pub provider: String,
    /// `[llm] model` (none for local and scripted providers).
    pub model: Option<String>,
    /// `[llm] api_key_env`.
    pub api_key_env: Option<String>,
    /// `[llm] base_url`.
    pub base_url: Option<String>,
}

/// The usual model and key variable of a provider.
fn provider_defaults(provider: &str) -> (Option<&'static str>, Option<&'static str>) {
    match provider {
        "openai" | "openai-responses" => (Some("gpt-4o-mini"), Some("OPENAI_API_KEY")),
        "anthropic" => (Some("claude-sonnet-4-5"), Some("ANTHROPIC_API_KEY")),
        "compatible" => (Some("llama3.2"), None),
        _ => (None, None),
    }
}

/// Whether `provider` calls an HTTP API (and so has a model name and maybe a key).
fn is_http(provider: &str) -> bool {
    wiring::is_http_provider(provider)
}

/// Fill in what the flags leave out: from `ask` (a person at a terminal) or the provider's
/// defaults.
///
/// # Errors
/// A usage error when the provider is missing and nobody can be asked, or is unknown.
pub fn answers(args: &InitArgs, ask: &mut Option<Ask<'_>>) -> Result<Answers> {
    let provider = match (&args.provider, ask.as_mut()) {
        (Some(p), _) => p.clone(),
        (None, Some(ask)) => ask(
            &format!("provider ({})", wiring::PROVIDER_NAMES),
            Some("openai"),
        )?,
        (None, None) => {
            return Err(usage(
                "lsm init needs a provider: pass --provider (openai, openai-responses, anthropic, compatible, local or scripted:<file.jsonl>), or run it on a terminal to be asked",
            ));
        }
    };
    let provider = provider.trim().to_string();
    let known = is_http(&provider)
        || provider == wiring::LOCAL_PROVIDER
        || provider
            .strip_prefix("scripted:")
            .is_some_and(|f| !f.is_empty());
    if !known {
        return Err(usage(format!(
            "--provider {provider}: not a provider; use {}",
            wiring::PROVIDER_NAMES
        )));
    }
    let (default_model, default_key) = provider_defaults(&provider);
    let mut value = |given: &Option<String>, question: &str, default: Option<&str>| {
        let answer = match (given, ask.as_mut()) {
            (Some(v), _) => v.clone(),
            (None, Some(ask)) => ask(question, default)?,
            (None, None) => default.unwrap_or_default().to_string(),
        };
        let answer = answer.trim().to_string();
        Ok::<_, anyhow::Error>((!answer.is_empty()).then_some(answer))
    };
    if !is_http(&provider) {
        return Ok(Answers {
            provider,
            model: None,
            api_key_env: None,
            base_url: None,
        });
    }
    let model = value(&args.model, "model", default_model)?;
    let api_key_env = value(
        &args.api_key_env,
        "environment variable holding the API key (empty: none)",
        default_key,
    )?;
    let base_url = match (&args.base_url, provider.as_str()) {
        (Some(u), _) => Some(u.clone()),
        (None, "compatible") => value(&None, "base URL", Some("http://localhost:11434/v1"))?,
        (None, _) => None,
    };
    Ok(Answers {
        provider,
        model,
        api_key_env,
        base_url,
    })
}

/// The commented `lsm.toml` for `answers`.
pub fn render(a: &Answers) -> String {
    let quoted = |v: &str| toml::Value::String(v.to_string()).to_string();
    let mut llm = format!("provider = {}\n", quoted(&a.provider));
    match &a.model {
        Some(m) => llm.push_str(&format!("model = {}\n", quoted(m))),
        None if a.provider == wiring::LOCAL_PROVIDER => llm.push_str(
            "# model_path = \"models/model.gguf\"   # default: the model `cargo xtask fetch-model` fetched\n",
        ),
        None => {}
    }
    if let Some(u) = &a.base_url {
        llm.push_str(&format!("base_url = {}\n", quoted(u)));
    }
    match &a.api_key_env {
        Some(v) => llm.push_str(&format!(
            "api_key_env = {}   # the key is read from this variable, never from this file\n",
            quoted(v)
        )),
        None => llm.push_str("# api_key_env = \"MY_API_KEY\"   # the variable holding the key, if the server needs one\n"),
    }
    format!(
        r#"# lsm configuration for this project, written by `lsm init`.
# Every key is documented in docs/CONFIG.md. `lsm config show` prints the effective
# settings and where each comes from: ~/.config/lsm/config.toml (yours), this file (the
# project's, found from any folder below it), --config FILE, LSM_* variables, -c KEY=VALUE.

[llm]
{llm}# stream = true                 # show the answer as it is written
# max_retries = 4               # retries on 429, 5xx and dropped connections

# [llm.pricing]                 # US dollars per million tokens, for cost accounting
# "model-name" = {{ input = 0.15, output = 0.60 }}

[agents]
# Run records, artifacts and memory go under .lsm/agents next to this file.
# max_tokens_budget = 200000    # token ceiling of one run
# max_iterations = 25           # model calls in one long phase
# max_cost_usd = 1.0            # cost ceiling of one run (needs [llm.pricing])

[sandbox]
# Folders tools may read and write; empty: the folder lsm runs in.
# allowed_read_paths = ["."]
# allowed_write_paths = ["."]
# require_user_permission = {{ write_file = true }}

# [kb]                          # the knowledge base (`lsm ingest <dir>`)
# index_dir = ".lsm/kb"

# [mcp.servers.files]           # tools of an MCP server, for agents that name them
# command = "npx"
# args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
"#
    )
}

/// Ask on stderr, read the answer from stdin; an empty answer takes the default.
fn ask_on_terminal(question: &str, default: Option<&str>) -> Result<String> {
    let mut err = std::io::stderr();
    match default {
        Some(d) => write!(err, "{question} [{d}]: ")?,
        None => write!(err, "{question}: ")?,
    }
    err.flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let line = line.trim();
    Ok(if line.is_empty() {
        default.unwrap_or_default().to_string()
    } else {
        line.to_string()
    })
}

/// `lsm init`; returns the exit code.
pub fn run(cfg: &ConfigArgs, args: InitArgs) -> u8 {
    exit::block_on_command(init(cfg, args))
}

async fn init(cfg: &ConfigArgs, args: InitArgs) -> Result<u8> {
    let cwd = std::env::current_dir()?;
    let path = cwd.join(DEFAULT_CONFIG_FILE);
    if path.exists() && !args.force {
        return Err(usage(format!(
            "{} exists already; pass --force to replace it (`lsm config show` shows what it sets)",
            path.display()
        )));
    }
    let interactive = std::io::stdin().is_terminal();
    let mut asker = ask_on_terminal;
    let mut ask: Option<Ask<'_>> = interactive.then_some(&mut asker as _);
    let answers = answers(&args, &mut ask)?;
    let text = render(&answers);
    write_new(&path, &text)?;
    eprintln!(
        "wrote {}",
        crate::terminal::text::one_line(path.display().to_string())
    );
    if args.no_ping {
        return Ok(exit::OK);
    }
    // The file just written, with whatever else is in force (user file, LSM_*, -c).
    let config = ConfigArgs {
        file: Some(path.clone()),
        overrides: cfg.overrides.clone(),
    }
    .load()?;
    eprintln!("pinging the model…");
    let code = super::llm::ping_with(
        &config,
        &ProviderFlags::default(),
        LlmTier::Normal,
        crate::terminal::output::OutputFormat::Text,
    )
    .await?;
    if code != exit::OK {
        eprintln!(
            "the file is written; fix the setting or the key and check again with `lsm llm ping`"
        );
    }
    Ok(code)
}

fn write_new(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(provider: Option<&str>) -> InitArgs {
        InitArgs {
            provider: provider.map(Into::into),
            model: None,
            api_key_env: None,
            base_url: None,
            force: false,
            no_ping: true,
        }
    }

    #[test]
    fn flags_and_defaults_fill_the_answers_without_a_terminal() {
        let a = answers(&args(Some("openai")), &mut None).unwrap();
        assert_eq!(a.model.as_deref(), Some("gpt-4o-mini"));
        assert_eq!(a.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        let e = answers(&args(None), &mut None).unwrap_err();
        assert!(crate::exit::is_usage(&e));
        assert!(e.to_string().contains("--provider"), "{e}");
        let e = answers(&args(Some("gpt")), &mut None).unwrap_err();
        assert!(e.to_string().contains("not a provider"), "{e}");
    }

    #[test]
    fn a_person_is_asked_what_the_flags_leave_out() {
        let mut asked = Vec::new();
        let mut ask = |q: &str, d: Option<&str>| -> Result<String> {
            asked.push(q.to_string());
            Ok(match q {
                q if q.starts_with("provider") => "anthropic".into(),
                "model" => String::new(), // no model
                _ => d.unwrap_or_default().to_string(),
            })
        };
        let mut some: Option<Ask<'_>> = Some(&mut ask);
        let a = answers(&args(None), &mut some).unwrap();
        assert_eq!(a.provider, "anthropic");
        assert_eq!(a.model, None, "an empty answer from the asker is no value");
        assert_eq!(asked.len(), 3, "{asked:?}");
    }

    #[test]
    fn every_rendered_file_loads_and_says_what_was_answered() {
        for provider in [
            "openai",
            "anthropic",
            "compatible",
            "local",
            "scripted:s.jsonl",
        ] {
            let a = answers(&args(Some(provider)), &mut None).unwrap();
            let text = render(&a);
            let dir = tempfile::tempdir().unwrap();
            let f = dir.path().join("lsm.toml");
            std::fs::write(&f, &text).unwrap();
            let c = lsm_app::config::load(Some(&f), &[]).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let llm = c.llm.resolve(LlmTier::Normal).unwrap();
            assert!(
                llm.provider
                    .clone()
                    .unwrap()
                    .ends_with(provider.trim_start_matches("scripted:"))
            );
            assert_eq!(llm.model, a.model);
            assert_eq!(llm.api_key_env, a.api_key_env);
            assert!(text.contains("docs/CONFIG.md"));
        }
    }
}
