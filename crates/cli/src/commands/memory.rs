//! `lsm memory list | approve | rm | search`: a person's view of persistent memory.
//!
//! These commands reach every agent's memories (not only what one agent sees) and work
//! whether or not `[agents.memory] enabled` is set, so memory can be inspected and cleaned
//! while agents do not use it.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use clap::{Args, Subcommand};
use lsm_memory::{
    Hit, ListFilter, Memory, MemoryBackend, MemoryError, Reach, Scope, SearchQuery, Status,
};
use serde_json::json;

use crate::exit;
use crate::exit::usage;
use crate::terminal::text::clip;

/// `lsm memory …`.
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// List memories: every agent's, the project's and the global ones.
    List(ListArgs),
    /// Approve a candidate memory, so agents see it.
    Approve(IdArgs),
    /// Remove a memory.
    Rm(IdArgs),
    /// Search memories by words (ranked), tags, scope and agent.
    Search(SearchArgs),
}

/// Where the store is and how to print.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Root of the agents' workspaces (default: [agents] agents_folder).
    #[arg(long, value_name = "DIR")]
    pub agents_folder: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Filters shared by `list` and `search`.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Only this scope: agent, project or global.
    #[arg(long, value_name = "SCOPE")]
    pub scope: Option<Scope>,
    /// Only memories written by this agent (in any scope).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
}

/// `lsm memory list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    filter: FilterArgs,
    /// Only this status: candidate or approved.
    #[arg(long, value_name = "STATUS")]
    status: Option<Status>,
    #[command(flatten)]
    common: CommonArgs,
}

/// `lsm memory approve|rm <id>`.
#[derive(Debug, Args)]
pub struct IdArgs {
    /// The memory's id (`m-…`, from `lsm memory list`).
    id: String,
    #[command(flatten)]
    common: CommonArgs,
}

/// `lsm memory search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What to look for.
    text: String,
    #[command(flatten)]
    filter: FilterArgs,
    /// Only memories carrying this tag (repeat for several: all must match).
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    /// At most this many results.
    #[arg(long, value_name = "N", default_value_t = 20)]
    limit: usize,
    #[command(flatten)]
    common: CommonArgs,
}

/// Run a memory command; returns the exit code.
pub fn run(cfg: &lsm_app::config::ConfigArgs, command: MemoryCommand) -> u8 {
    exit::finish(run_inner(cfg, command))
}

fn store(cfg: &lsm_app::config::ConfigArgs, common: &CommonArgs) -> Result<Arc<dyn MemoryBackend>> {
    let config = cfg.load()?;
    let agents_folder = match &common.agents_folder {
        Some(dir) => std::env::current_dir()?.join(dir),
        None => config.agents.agents_folder.clone(),
    };
    Ok(lsm_app::wiring::memory::configured_backend(
        &config,
        &agents_folder,
    )?)
}

fn check_agent(agent: Option<&String>) -> Result<()> {
    if let Some(a) = agent
        && (a.is_empty()
            || !a
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
    {
        return Err(usage(format!(
            "'{a}' is not an agent name: use letters, digits, '-' and '_' only"
        )));
    }
    Ok(())
}

fn store_error(e: MemoryError) -> anyhow::Error {
    match e {
        MemoryError::BadTag { .. }
        | MemoryError::TooManyTags { .. }
        | MemoryError::BadAgentName(_) => usage(e.to_string()),
        other => other.into(),
    }
}

fn run_inner(cfg: &lsm_app::config::ConfigArgs, command: MemoryCommand) -> Result<u8> {
    match command {
        MemoryCommand::List(args) => {
            check_agent(args.filter.agent.as_ref())?;
            let store = store(cfg, &args.common)?;
            let filter = ListFilter {
                scopes: args.filter.scope.into_iter().collect(),
                owner: args.filter.agent,
                status: args.status,
            };
            let memories = store.list(&Reach::Everyone, &filter).map_err(store_error)?;
            if args.common.json {
                crate::terminal::output::print_json(&serde_json::to_string_pretty(&memories)?);
            } else if memories.is_empty() {
                println!("no memories");
            } else {
                print_table(memories.iter());
            }
        }
        MemoryCommand::Search(args) => {
            check_agent(args.filter.agent.as_ref())?;
            if args.text.trim().is_empty() && args.tags.is_empty() {
                return Err(usage("give the text to search for (or --tag)"));
            }
            let store = store(cfg, &args.common)?;
            let query = SearchQuery {
                text: args.text,
                tags: args.tags,
                scopes: args.filter.scope.into_iter().collect(),
                owner: args.filter.agent,
                include_candidates: true,
                limit: args.limit,
            };
            let hits: Vec<Hit> = store
                .search(&Reach::Everyone, &query)
                .map_err(store_error)?;
            if args.common.json {
                crate::terminal::output::print_json(&serde_json::to_string_pretty(&hits)?);
            } else if hits.is_empty() {
                println!("no memories match");
            } else {
                // Best match first; the scores are in the --json output.
                print_table(hits.iter().map(|h| &h.memory));
            }
        }
        MemoryCommand::Approve(args) => {
            let store = store(cfg, &args.common)?;
            let (memory, changed) = store
                .approve(&Reach::Everyone, args.id.trim())
                .map_err(store_error)?;
            if args.common.json {
                crate::terminal::output::print_json(&serde_json::to_string_pretty(
                    &json!({"approved": memory, "changed": changed}),
                )?);
            } else if changed {
                println!(
                    "approved {}: {}",
                    crate::terminal::text::masked_line(&memory.id),
                    crate::terminal::text::for_stdout(&memory.text)
                );
            } else {
                println!(
                    "{} was already approved",
                    crate::terminal::text::masked_line(&memory.id)
                );
            }
        }
        MemoryCommand::Rm(args) => {
            let store = store(cfg, &args.common)?;
            let memory = store
                .remove(&Reach::Everyone, args.id.trim())
                .map_err(store_error)?;
            if args.common.json {
                crate::terminal::output::print_json(&serde_json::to_string_pretty(
                    &json!({"removed": memory}),
                )?);
            } else {
                println!(
                    "removed {}: {}",
                    crate::terminal::text::masked_line(&memory.id),
                    crate::terminal::text::for_stdout(&memory.text)
                );
            }
        }
    }
    Ok(exit::OK)
}

fn describe(m: &Memory) -> String {
    let mut text = clip(&m.text, 100);
    if !m.tags.is_empty() {
        // Tags come from the model as the text does: nothing in them is obeyed.
        text.push_str(&format!(
            " [{}]",
            crate::terminal::text::one_line(m.tags.join(", "))
        ));
    }
    if let Some(t) = m.expires_at {
        text.push_str(&format!(" (expires {})", t.format("%Y-%m-%d %H:%M UTC")));
    }
    text
}

fn print_table<'a>(rows: impl Iterator<Item = &'a Memory>) {
    let rows: Vec<&Memory> = rows.collect();
    // A row's id and agent are the database's: in a shared one, whoever can write to it
    // chose them, past the checks `lsm` makes when it writes a memory.
    let shown: Vec<(String, String)> = rows
        .iter()
        .map(|m| {
            (
                crate::terminal::text::masked_line(&m.id),
                crate::terminal::text::masked_line(&m.owner_agent),
            )
        })
        .collect();
    let owner_w = shown
        .iter()
        .map(|(_, owner)| owner.chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    println!(
        "{:<18}  {:<7}  {:<owner_w$}  {:<9}  {:<16}  TEXT",
        "ID", "SCOPE", "OWNER", "STATUS", "UPDATED (UTC)"
    );
    for (m, (id, owner)) in rows.iter().zip(&shown) {
        println!(
            "{:<18}  {:<7}  {:<owner_w$}  {:<9}  {:<16}  {}",
            id,
            m.scope.as_str(),
            owner,
            m.status.as_str(),
            m.updated_at.format("%Y-%m-%d %H:%M"),
            describe(m)
        );
    }
}
