//! `cargo xtask eval-retrieval <dir> [--profile P]... [--json]` runs this (in release mode):
//! ingest a BEIR collection into a fresh index and print nDCG@10 and recall@100 per profile.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use lsm_tools_kb::{EmbedderKind, KbConfig, KnowledgeBase, Profile, eval};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("eval-retrieval: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut dir: Option<PathBuf> = None;
    let mut profiles: Vec<Profile> = Vec::new();
    let mut json = false;
    let mut embedder = EmbedderKind::Auto;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json = true,
            "--profile" => {
                let p = args.next().ok_or("--profile needs a value")?;
                profiles.push(Profile::parse(&p)?);
            }
            "--embedder" => {
                embedder = match args.next().as_deref() {
                    Some("none") => EmbedderKind::None,
                    Some("local") => EmbedderKind::Local,
                    Some("auto") => EmbedderKind::Auto,
                    other => {
                        return Err(format!("--embedder {other:?}: use none, local or auto").into());
                    }
                };
            }
            other if dir.is_none() && !other.starts_with("--") => dir = Some(PathBuf::from(other)),
            other => return Err(format!("unexpected argument {other}").into()),
        }
    }
    let dir = dir.ok_or(
        "usage: eval-retrieval <dir> [--profile P]... [--json] [--embedder none|local|auto]",
    )?;
    if profiles.is_empty() {
        profiles = vec![Profile::Lexical, Profile::DenseOnly, Profile::HybridRrf];
    }
    let collection = eval::load(&dir)?;
    let index = tempfile::tempdir()?;
    let mut config = KbConfig {
        index_dir: index.path().join("kb"),
        ..Default::default()
    };
    config.embedder.kind = embedder;
    let started = std::time::Instant::now();
    let kb = KnowledgeBase::open_or_create(&config, false, None)?;
    if kb.embedder().is_none() && profiles.iter().any(|p| p.uses_dense()) {
        eprintln!(
            "eval-retrieval: no embedder (run `cargo xtask fetch-model`): dense profiles fall back to lexical"
        );
    }
    eval::ingest_collection(&kb, &collection)?;
    eprintln!(
        "eval-retrieval: {} documents ingested in {:.1} s (embedder: {})",
        collection.corpus.len(),
        started.elapsed().as_secs_f64(),
        kb.store().manifest().embedder_label()
    );
    if profiles.contains(&Profile::LlmRerank) {
        eprintln!(
            "eval-retrieval: llm_rerank needs an LLM; it is scored as its first stage, hybrid_rrf"
        );
    }
    let scores = eval::evaluate(&kb, &collection, &profiles)?;
    if json {
        println!("{}", serde_json::to_string(&scores)?);
    } else {
        println!(
            "{:<12} {:>10} {:>13} {:>8}",
            "profile", "nDCG@10", "recall@100", "queries"
        );
        for (p, s) in &scores {
            println!(
                "{p:<12} {:>10.4} {:>13.4} {:>8}",
                s.ndcg_at_10, s.recall_at_100, s.queries
            );
        }
    }
    Ok(())
}
