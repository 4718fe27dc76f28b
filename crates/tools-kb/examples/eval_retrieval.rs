//! `cargo xtask eval-retrieval <dir> [--profile P]... [--json]` runs this (in release mode):
//! ingest a BEIR collection into a fresh index and print nDCG@10 and recall@100 per profile.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use lsm_providers::{ProviderConfig, ProviderKind};
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
    let (mut llm_url, mut llm_model, mut llm_kind) = (None, None, "compatible".to_string());
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
            "--llm-url" => llm_url = Some(args.next().ok_or("--llm-url needs a URL")?),
            "--llm-model" => llm_model = Some(args.next().ok_or("--llm-model needs a name")?),
            "--llm-kind" => llm_kind = args.next().ok_or("--llm-kind needs a value")?,
            other if dir.is_none() && !other.starts_with("--") => dir = Some(PathBuf::from(other)),
            other => return Err(format!("unexpected argument {other}").into()),
        }
    }
    let dir = dir.ok_or(
        "usage: eval-retrieval <dir> [--profile P]... [--json] [--embedder none|local|auto] \
         [--llm-url URL --llm-model NAME [--llm-kind compatible|openai|openai-responses|anthropic]]",
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
    let reranker = match (llm_url, llm_model) {
        (Some(url), Some(model)) => {
            let kind = ProviderKind::parse(&llm_kind).ok_or_else(|| {
                format!(
                    "--llm-kind {llm_kind}: use compatible, openai, openai-responses or anthropic"
                )
            })?;
            let mut config = ProviderConfig::new(kind, model);
            config.base_url = Some(url);
            let provider = config.build(&|name| std::env::var(name).ok())?;
            Some(eval::Reranker {
                provider,
                candidates: kb.config().retrieval.rerank_candidates,
            })
        }
        (None, None) => None,
        _ => return Err("--llm-url and --llm-model go together".into()),
    };
    if profiles.contains(&Profile::LlmRerank) {
        match &reranker {
            Some(r) => eprintln!(
                "eval-retrieval: llm_rerank re-orders the best {} hybrid candidates with {} \
                 (one call per query)",
                r.candidates,
                r.provider.model()
            ),
            None => eprintln!(
                "eval-retrieval: llm_rerank needs an LLM (--llm-url, --llm-model); it is scored \
                 as its first stage, hybrid_rrf, and marked \"scored_as\": \"hybrid_rrf\""
            ),
        }
    }
    let scores = eval::evaluate(&kb, &collection, &profiles, reranker.as_ref())?;
    if json {
        println!("{}", serde_json::to_string(&scores)?);
    } else {
        println!(
            "{:<12} {:>10} {:>13} {:>8}",
            "profile", "nDCG@10", "recall@100", "queries"
        );
        for (p, s) in &scores {
            let note = match (&s.scored_as, &s.reranker) {
                (Some(other), _) => format!("  (scored as {other})"),
                (None, Some(model)) => format!(
                    "  (re-ranked by {model}; {} failed calls)",
                    s.rerank_failures.unwrap_or(0)
                ),
                _ => String::new(),
            };
            println!(
                "{p:<12} {:>10.4} {:>13.4} {:>8}{note}",
                s.ndcg_at_10, s.recall_at_100, s.queries
            );
        }
    }
    Ok(())
}
