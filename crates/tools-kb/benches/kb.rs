//! Knowledge-base benchmarks: ingest throughput of plain text, and the latency of
//! `build_sources` (the whole retrieval stage: search, candidate loading, dedupe, MMR) at 10k
//! and 100k chunks, lexical and hybrid.
//!
//! `cargo bench -p lsm-tools-kb --bench kb` — criterion medians, then p50/p95 over a few hundred
//! distinct queries per case (printed as `latency ...` lines). Hybrid uses a hashing embedder
//! with the local model's 384 dimensions, so the figures exclude the cost of embedding the
//! query (about 5–15 ms with all-MiniLM-L6-v2 on this CPU) but include the exact dense scan.
//! Set `LSM_BENCH_QUICK=1` to skip the 100k-chunk cases, `LSM_BENCH_ONLY=ingest`,
//! `LSM_BENCH_ONLY=query` or `LSM_BENCH_ONLY=embed` to run one part.
//!
//! `embed`: the local all-MiniLM-L6-v2 embedder (skipped with a message when `cargo xtask
//! fetch-model` has not put it in place) over the first 128 Cranfield abstracts, title and
//! abstract as ingest embeds them (`../shared/eval/cranfield/corpus.jsonl` beside the
//! repository, or the file `LSM_BENCH_CORPUS` names), in one `embed` call as ingest makes
//! it. Criterion reports documents/s; the `embed ...` line adds tokens/s (tokens as the
//! model sees them, truncated at 256).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use lsm_tools_kb::embed::{Embedder, HashEmbedder};
use lsm_tools_kb::{
    ChunkDraft, EmbedderKind, FileRecord, IngestOptions, KbConfig, KnowledgeBase, ModePolicy,
    ModeSpec, NoProgress, Pipeline, QueryRequest,
};

/// A deterministic word generator: a Zipf-like vocabulary of made-up words.
struct Words {
    state: u64,
    vocab: Vec<String>,
}

impl Words {
    fn new(seed: u64) -> Self {
        let syll = [
            "ka", "lo", "mi", "ter", "von", "sa", "rel", "ux", "pa", "dor", "en", "is",
        ];
        let mut vocab = Vec::new();
        for i in 0..6000u32 {
            let mut w = String::new();
            let mut x = i;
            loop {
                w.push_str(syll[(x % 12) as usize]);
                x /= 12;
                if x == 0 {
                    break;
                }
            }
            vocab.push(w);
        }
        Words { state: seed, vocab }
    }
    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }
    fn word(&mut self) -> &str {
        // Skewed toward frequent words, like text.
        let r = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        let i = ((r * r * r) * self.vocab.len() as f64) as usize;
        &self.vocab[i.min(self.vocab.len() - 1)]
    }
    fn sentence(&mut self) -> String {
        let n = 6 + (self.next() % 14) as usize;
        let mut s = String::new();
        for i in 0..n {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(self.word());
        }
        s.push('.');
        s
    }
    fn text(&mut self, bytes: usize) -> String {
        let mut t = String::new();
        while t.len() < bytes {
            for _ in 0..(3 + self.next() % 4) {
                t.push_str(&self.sentence());
                t.push(' ');
            }
            t.push_str("\n\n");
        }
        t
    }
}

fn lexical_config(dir: &Path) -> KbConfig {
    let mut c = KbConfig {
        index_dir: dir.join("index"),
        ..Default::default()
    };
    c.embedder.kind = EmbedderKind::None;
    c
}

fn bench_ingest(c: &mut Criterion) {
    let corpus = tempfile::tempdir().unwrap();
    let docs = corpus.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let mut w = Words::new(7);
    let mut total = 0u64;
    for i in 0..100 {
        let t = w.text(100_000);
        total += t.len() as u64;
        std::fs::write(docs.join(format!("doc{i:03}.txt")), t).unwrap();
    }
    let mut g = c.benchmark_group("ingest");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Bytes(total));
    g.bench_function("plain_text_10MB", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let scratch = tempfile::tempdir().unwrap();
                let config = lexical_config(scratch.path());
                let kb = KnowledgeBase::open_or_create(&config, false, None).unwrap();
                let t = Instant::now();
                kb.ingest(
                    std::slice::from_ref(&docs),
                    &IngestOptions::default(),
                    &NoProgress,
                )
                .unwrap();
                spent += t.elapsed();
            }
            spent
        });
    });
    g.finish();
}

/// An index of `chunks` synthetic chunks (~600 characters each, 20 per file) with 384-d
/// vectors, written directly through the store.
fn build_index(dir: &Path, chunks: usize) -> Arc<KnowledgeBase> {
    let config = KbConfig {
        index_dir: dir.join("index"),
        ..Default::default()
    };
    let embedder: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(384));
    let kb = KnowledgeBase::open_or_create(&config, false, Some(Arc::clone(&embedder))).unwrap();
    let mut w = Words::new(11);
    {
        let mut writer = kb.store().writer().unwrap();
        let per_file = 20;
        for f in 0..chunks.div_ceil(per_file) {
            let drafts: Vec<ChunkDraft> = (0..per_file)
                .map(|i| ChunkDraft {
                    index: i,
                    text: w.text(560),
                    heading_path: vec![format!("Section {i}")],
                })
                .collect();
            let inputs: Vec<&str> = drafts.iter().map(|d| d.text.as_str()).collect();
            let vectors = embedder.embed(&inputs).unwrap();
            let ext = ["md", "txt", "rst", "html"][f % 4];
            let record = FileRecord {
                path: format!("/bench/folder{}/file{f}.{ext}", f % 50),
                file_hash: String::new(),
                mtime: 0,
                size: 0,
                chunks: per_file as u64,
                ext: ext.into(),
                content_type: "text".into(),
            };
            writer.add_file(&record, &drafts, Some(&vectors)).unwrap();
        }
        writer.commit().unwrap();
    }
    Arc::new(kb)
}

fn request(query: String, profile: &str) -> QueryRequest {
    let mut mode = lsm_tools_kb::mode::grounded();
    mode.retrieval_profile = profile.into();
    mode.local_policy.min_relevance = 0.0;
    QueryRequest {
        query,
        mode: Some(ModeSpec::Config(Box::new(mode))),
        ..Default::default()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn bench_queries(c: &mut Criterion) {
    let quick = std::env::var_os("LSM_BENCH_QUICK").is_some();
    let sizes: &[usize] = if quick { &[10_000] } else { &[10_000, 100_000] };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for &n in sizes {
        let dir = tempfile::tempdir().unwrap();
        let t = Instant::now();
        let kb = build_index(dir.path(), n);
        println!(
            "index of {n} chunks built in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        let pipeline = Pipeline::new(kb, None, ModePolicy::new(&[], false));
        let mut w = Words::new(99);
        let queries: Vec<String> = (0..300)
            .map(|_| {
                let k = 2 + (w.next() % 4) as usize;
                (0..k)
                    .map(|_| w.word().to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        // Warm the dense view and the caches.
        rt.block_on(pipeline.build_sources(request(queries[0].clone(), "hybrid_rrf")))
            .unwrap();
        for profile in ["lexical", "hybrid_rrf"] {
            let mut stage_ms: Vec<(String, f64)> = Vec::new();
            let mut times: Vec<Duration> = queries
                .iter()
                .map(|q| {
                    let t = Instant::now();
                    let pkg = rt
                        .block_on(pipeline.build_sources(request(q.clone(), profile)))
                        .unwrap();
                    let elapsed = t.elapsed();
                    for st in &pkg.retrieval_trace.stages {
                        match stage_ms.iter_mut().find(|(n, _)| *n == st.stage) {
                            Some((_, total)) => *total += st.ms,
                            None => stage_ms.push((st.stage.clone(), st.ms)),
                        }
                    }
                    elapsed
                })
                .collect();
            let stages: Vec<String> = stage_ms
                .iter()
                .map(|(n, total)| format!("{n} {:.3}", total / queries.len() as f64))
                .collect();
            println!(
                "stages {profile} {n} chunks (mean ms): {}",
                stages.join(", ")
            );
            times.sort();
            println!(
                "latency {profile} {n} chunks: p50 {:.2} ms, p95 {:.2} ms ({} queries)",
                percentile(&times, 0.5).as_secs_f64() * 1e3,
                percentile(&times, 0.95).as_secs_f64() * 1e3,
                times.len()
            );
            let mut g = c.benchmark_group(format!("build_sources_{n}"));
            g.sample_size(50);
            let mut i = 0;
            g.bench_function(profile, |b| {
                b.iter(|| {
                    i = (i + 1) % queries.len();
                    rt.block_on(pipeline.build_sources(request(queries[i].clone(), profile)))
                        .unwrap()
                });
            });
            g.finish();
        }
    }
}

/// The abstracts the embedding benchmark embeds: `(title, text)` of the first `n` documents.
fn bench_abstracts(n: usize) -> Option<Vec<String>> {
    let path = std::env::var_os("LSM_BENCH_CORPUS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/eval/cranfield/corpus.jsonl")
        });
    let text = std::fs::read_to_string(&path).ok()?;
    let docs: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            let chunk = ChunkDraft {
                index: 0,
                text: v["text"].as_str().unwrap_or_default().to_string(),
                heading_path: vec![v["title"].as_str().unwrap_or_default().to_string()],
            };
            lsm_tools_kb::embedding_input(&chunk)
        })
        .collect();
    Some(docs)
}

fn bench_embed(c: &mut Criterion) {
    let Some(dir) =
        lsm_tools_kb::default_model_dir().filter(|d| lsm_tools_kb::embed::local_model_present(d))
    else {
        println!("embed: skipped, the local model is absent (run `cargo xtask fetch-model`)");
        return;
    };
    let Some(docs) = bench_abstracts(128) else {
        println!("embed: skipped, no Cranfield corpus (set LSM_BENCH_CORPUS to a corpus.jsonl)");
        return;
    };
    let model = lsm_tools_kb::embed::LocalMiniLm::load(&dir, 32).unwrap();
    // Counted as the embedder sees them: the shipped tokenizer.json pads and cuts at 128.
    let mut tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    tokenizer.with_padding(None);
    tokenizer.with_truncation(None).unwrap();
    let tokens: usize = docs
        .iter()
        .map(|d| {
            tokenizer
                .encode(d.as_str(), true)
                .unwrap()
                .get_ids()
                .len()
                .min(lsm_tools_kb::embed::LOCAL_MAX_TOKENS)
        })
        .sum();
    let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
    // A few timed passes for tokens/s (criterion reports one throughput per benchmark).
    let mut passes: Vec<Duration> = (0..3)
        .map(|_| {
            let t = Instant::now();
            model.embed(&refs).unwrap();
            t.elapsed()
        })
        .collect();
    passes.sort();
    let median = passes[1].as_secs_f64();
    println!(
        "embed minilm: {} docs, {tokens} tokens, median of 3 passes {median:.2} s: {:.1} docs/s, {:.0} tokens/s",
        docs.len(),
        docs.len() as f64 / median,
        tokens as f64 / median
    );
    let mut g = c.benchmark_group("embed");
    g.sample_size(10);
    g.sampling_mode(criterion::SamplingMode::Flat);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(30));
    g.throughput(Throughput::Elements(docs.len() as u64));
    g.bench_function("minilm_128_abstracts", |b| {
        b.iter(|| model.embed(&refs).unwrap());
    });
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let only = std::env::var("LSM_BENCH_ONLY").unwrap_or_default();
    if only.is_empty() || only == "ingest" {
        bench_ingest(&mut c);
    }
    if only.is_empty() || only == "query" {
        bench_queries(&mut c);
    }
    if only.is_empty() || only == "embed" {
        bench_embed(&mut c);
    }
    c.final_summary();
}
