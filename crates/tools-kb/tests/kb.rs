//! The knowledge base end to end inside the crate: ingest (incremental, interrupted, bad
//! files), retrieval profiles and filters, the pipeline (citations, fallbacks, modes), the
//! tools, and the local embedder when its model is present.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use lsm_providers::{ProviderError, ScriptedProvider, ScriptedResponse};
use lsm_tools_kb::embed::{Embedder, HashEmbedder};
use lsm_tools_kb::{
    EmbedderKind, FileOutcome, Filters, IngestOptions, IngestProgress, KbConfig, KbError,
    KnowledgeBase, ModePolicy, ModeSpec, NoProgress, Pipeline, QueryRequest, QueryResponse,
};

#[path = "kb/remote.rs"]
mod remote;
#[path = "kb/tools.rs"]
mod tools;

/// A temp folder with documents and a config whose index lives inside it.
/// A test corpus and its configuration.
pub struct Fixture {
    /// Holds everything.
    pub dir: tempfile::TempDir,
    /// The documents.
    pub docs: PathBuf,
    /// The configuration.
    pub config: KbConfig,
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

impl Fixture {
    /// An empty fixture.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let docs = dir.path().join("docs");
        std::fs::create_dir_all(&docs).unwrap();
        let config = KbConfig {
            index_dir: dir.path().join("index"),
            chunk_size: 400,
            chunk_overlap: 50,
            embedder: lsm_tools_kb::EmbedderConfig {
                kind: EmbedderKind::None,
                ..Default::default()
            },
            ..Default::default()
        };
        Fixture { dir, docs, config }
    }

    /// Write a document.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.docs.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// The standard corpus: notes about aircraft, cooking and code.
    /// The standard corpus.
    pub fn corpus(&self) {
        self.write(
            "aero/wings.md",
            "# Wings\n\nThe boundary layer on a swept wing thickens toward the tip.\n\n## Flutter\n\nFlutter is an aeroelastic instability where the wing oscillates with growing amplitude.\n",
        );
        self.write(
            "aero/engines.txt",
            "Jet engines compress air, burn fuel and expand the exhaust through a nozzle to produce thrust.\n",
        );
        self.write(
            "kitchen/bread.md",
            "# Bread\n\nKnead the dough for ten minutes, then let it rise until doubled.\n",
        );
        self.write(
            "kitchen/soup.rst",
            "Soup\n====\n\nSimmer the onions slowly before adding the stock.\n",
        );
        self.write(
            "code/main.rs",
            "pub fn thrust(mass: f64, accel: f64) -> f64 {\n    mass * accel\n}\n",
        );
        self.write(
            "web/page.html",
            "<html><body><h1>Landing gear</h1><p>The landing gear retracts into the wing root after takeoff.</p></body></html>",
        );
    }

    /// Open or create the index.
    pub fn kb(&self, embedder: Option<Arc<dyn Embedder>>) -> Arc<KnowledgeBase> {
        Arc::new(KnowledgeBase::open_or_create(&self.config, false, embedder).unwrap())
    }

    /// Ingest the documents.
    pub fn ingest(&self, kb: &KnowledgeBase) -> lsm_tools_kb::IngestReport {
        kb.ingest(
            std::slice::from_ref(&self.docs),
            &IngestOptions::default(),
            &NoProgress,
        )
        .unwrap()
    }
}

fn hash_embedder() -> Arc<dyn Embedder> {
    Arc::new(HashEmbedder::new(256))
}

/// A pipeline over `kb`.
pub fn pipeline(kb: Arc<KnowledgeBase>, provider: Option<Arc<ScriptedProvider>>) -> Pipeline {
    Pipeline::new(
        kb,
        provider.map(|p| p as Arc<dyn lsm_providers::Provider>),
        ModePolicy::new(&[], false),
    )
}

fn request(query: &str, profile: &str) -> QueryRequest {
    let mut mode = lsm_tools_kb::mode::grounded();
    mode.retrieval_profile = profile.into();
    mode.local_policy.min_relevance = 0.0;
    QueryRequest {
        query: query.into(),
        mode: Some(ModeSpec::Config(Box::new(mode))),
        ..Default::default()
    }
}

fn paths(resp: &lsm_tools_kb::ContextPackage) -> Vec<String> {
    resp.candidates
        .iter()
        .map(|c| {
            Path::new(&c.path)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Ingest

/// Counts what the ingest reports about chunks, in order.
#[derive(Default)]
struct ChunkCounts {
    queued: std::sync::Mutex<Vec<usize>>,
    embedded: std::sync::Mutex<Vec<usize>>,
}

impl IngestProgress for ChunkCounts {
    fn start(&self, _: usize) {}
    fn file_done(&self, _: &Path, _: &FileOutcome) {}
    fn chunks_queued(&self, n: usize) {
        self.queued.lock().unwrap().push(n);
    }
    fn chunks_embedded(&self, n: usize) {
        self.embedded.lock().unwrap().push(n);
    }
    fn finish(&self) {}
}

#[test]
fn ingest_reports_chunks_as_they_are_read_and_as_they_are_embedded() {
    for embedder in [Some(hash_embedder()), None] {
        let f = Fixture::new();
        // 200 short paragraphs in one file: many chunks in one embedding batch.
        let text: String = (0..200)
            .map(|i| format!("## Part {i}\n\n{}\n\n", "word ".repeat(180)))
            .collect();
        std::fs::write(f.docs.join("long.md"), text).unwrap();
        std::fs::write(f.docs.join("short.md"), "# Short\n\nA short note.\n").unwrap();
        let kb = f.kb(embedder.clone());
        let counts = ChunkCounts::default();
        let report = kb
            .ingest(
                std::slice::from_ref(&f.docs),
                &IngestOptions::default(),
                &counts,
            )
            .unwrap();
        let queued: usize = counts.queued.lock().unwrap().iter().sum();
        let embedded = counts.embedded.lock().unwrap().clone();
        assert_eq!(queued, report.chunks);
        assert_eq!(embedded.iter().sum::<usize>(), report.chunks);
        if embedder.is_none() {
            assert_eq!(
                embedded.len(),
                2,
                "one report per file stored: {embedded:?}"
            );
        }
    }
}

#[test]
fn ingest_reads_every_supported_type_and_reports_bad_files() {
    let f = Fixture::new();
    f.corpus();
    std::fs::write(f.docs.join("binary.txt"), b"abc\0\x01\x02").unwrap();
    std::fs::write(
        f.docs.join("broken.pdf"),
        b"%PDF-1.4 this is not really a pdf",
    )
    .unwrap();
    std::fs::write(f.docs.join("image.png"), b"\x89PNG").unwrap();
    std::fs::write(
        f.docs.join("good.pdf"),
        make_pdf("Propellers convert torque into thrust"),
    )
    .unwrap();
    std::fs::write(f.docs.join(".hidden.md"), "# secret").unwrap();
    let kb = f.kb(None);
    let report = f.ingest(&kb);
    assert_eq!(report.files, 9, "{report:?}");
    assert_eq!(report.indexed, 7, "{report:?}");
    assert_eq!(report.unsupported, 1);
    let failed: Vec<&str> = report
        .failed
        .iter()
        .map(|f| Path::new(&f.path).file_name().unwrap().to_str().unwrap())
        .collect();
    assert_eq!(failed, ["binary.txt", "broken.pdf"], "{report:?}");
    assert!(report.failed[0].reason.contains("binary"));
    assert_eq!(report.total_files, 7);
    assert_eq!(report.total_chunks, report.chunks);

    let stats = kb.stats().unwrap();
    assert_eq!((stats.files, stats.chunks), (7, report.chunks));
    assert_eq!(stats.embedder, "none");
    assert!(stats.index_bytes > 0);

    // Metadata: heading path, extension, content type.
    let p = pipeline(kb, None);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pkg = rt
        .block_on(p.build_sources(request("aeroelastic flutter oscillates", "lexical")))
        .unwrap();
    let top = &pkg.candidates[0];
    assert!(top.path.ends_with("wings.md"));
    assert_eq!(top.heading, "Wings");
    assert_eq!(
        (top.ext.as_str(), top.content_type.as_str()),
        ("md", "markdown")
    );
    let pdf = rt
        .block_on(p.build_sources(request("propellers torque", "lexical")))
        .unwrap();
    assert!(pdf.candidates[0].path.ends_with("good.pdf"));
    assert_eq!(pdf.candidates[0].content_type, "pdf");
    let html = rt
        .block_on(p.build_sources(request("landing gear retracts", "lexical")))
        .unwrap();
    assert_eq!(html.candidates[0].heading, "Landing gear");
}

fn make_pdf(text: &str) -> Vec<u8> {
    use lopdf::content::{Content, Operation};
    use lopdf::{Document, Object, Stream, dictionary};
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Courier",
    });
    let resources_id = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font_id } });
    let content = Content {
        operations: vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 12.into()]),
            Operation::new("Td", vec![50.into(), 700.into()]),
            Operation::new("Tj", vec![Object::string_literal(text)]),
            Operation::new("ET", vec![]),
        ],
    };
    let content_id = doc.add_object(Stream::new(dictionary! {}, content.encode().unwrap()));
    let page_id = doc.add_object(dictionary! {
        "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
    });
    let pages = dictionary! {
        "Type" => "Pages", "Kids" => vec![page_id.into()], "Count" => 1,
        "Resources" => resources_id,
        "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
    };
    doc.objects.insert(pages_id, Object::Dictionary(pages));
    let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog_id);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

fn lexical_paths(kb: &Arc<KnowledgeBase>, query: &str) -> Vec<String> {
    let p = pipeline(Arc::clone(kb), None);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pkg = rt
        .block_on(p.build_sources(request(query, "lexical")))
        .unwrap();
    paths(&pkg)
}

#[test]
fn reingest_skips_unchanged_replaces_edited_and_removes_deleted_and_renamed() {
    let f = Fixture::new();
    f.corpus();
    let kb = f.kb(None);
    let first = f.ingest(&kb);
    assert_eq!(first.indexed, 6);

    // Nothing changed: everything skipped.
    let again = f.ingest(&kb);
    assert_eq!((again.indexed, again.skipped, again.removed), (0, 6, 0));

    // Edit: the old text is gone, the new one is found.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    f.write(
        "aero/engines.txt",
        "Turboprop engines drive a propeller through a reduction gearbox.\n",
    );
    let edited = f.ingest(&kb);
    assert_eq!((edited.indexed, edited.skipped), (1, 5));
    let hits = lexical_paths(&kb, "nozzle exhaust");
    assert!(hits.is_empty(), "stale chunks retrievable: {hits:?}");
    let hits = lexical_paths(&kb, "reduction gearbox");
    assert_eq!(hits, ["engines.txt"]);

    // Delete: its chunks and record go.
    std::fs::remove_file(f.docs.join("kitchen/bread.md")).unwrap();
    let deleted = f.ingest(&kb);
    assert_eq!(deleted.removed, 1);
    let hits = lexical_paths(&kb, "knead dough");
    assert!(hits.is_empty());

    // Rename: the old path goes, the new one comes.
    std::fs::rename(
        f.docs.join("kitchen/soup.rst"),
        f.docs.join("kitchen/broth.rst"),
    )
    .unwrap();
    let renamed = f.ingest(&kb);
    assert_eq!((renamed.removed, renamed.indexed), (1, 1));
    let hits = lexical_paths(&kb, "simmer onions stock");
    assert_eq!(hits, ["broth.rst"]);
    let stats = kb.stats().unwrap();
    assert_eq!(stats.files, 5);

    // A file that becomes unreadable loses its old chunks.
    std::fs::write(f.docs.join("aero/engines.txt"), b"\0\0binary now").unwrap();
    let broken = f.ingest(&kb);
    assert_eq!(broken.failed.len(), 1);
    let hits = lexical_paths(&kb, "reduction gearbox");
    assert!(hits.is_empty());
    assert_eq!(kb.stats().unwrap().files, 4);
}

#[test]
fn an_interrupted_ingest_leaves_a_consistent_index_and_the_next_run_completes_it() {
    let f = Fixture::new();
    for i in 0..10 {
        f.write(
            &format!("n{i:02}.md"),
            &format!("# Note {i}\n\nzebra{i} appears here.\n"),
        );
    }
    let kb = f.kb(None);

    /// Cancels the ingest once `after` files are done.
    struct CancelAfter {
        after: usize,
        seen: std::sync::atomic::AtomicUsize,
        flag: Arc<std::sync::atomic::AtomicBool>,
    }
    impl IngestProgress for CancelAfter {
        fn start(&self, _: usize) {}
        fn file_done(&self, _: &Path, _: &FileOutcome) {
            if self.seen.fetch_add(1, Ordering::SeqCst) + 1 >= self.after {
                self.flag.store(true, Ordering::SeqCst);
            }
        }
        fn finish(&self) {}
    }
    let options = IngestOptions {
        commit_every: 3,
        commit_on_cancel: false,
        ..Default::default()
    };
    let progress = CancelAfter {
        after: 5,
        seen: Default::default(),
        flag: Arc::clone(&options.cancel),
    };
    let report = kb
        .ingest(std::slice::from_ref(&f.docs), &options, &progress)
        .unwrap();
    assert!(report.interrupted);
    // Three files were committed in the first batch; the two of the second batch were not.
    let stats = kb.stats().unwrap();
    assert_eq!((stats.files, stats.chunks), (3, 3));
    // Every committed file has its chunks, and no chunk lacks its file.
    let hits = lexical_paths(&kb, "zebra3");
    assert!(hits.is_empty(), "an uncommitted file is visible: {hits:?}");
    let hits = lexical_paths(&kb, "zebra2");
    assert_eq!(hits, ["n02.md"]);

    let rest = f.ingest(&kb);
    assert_eq!((rest.skipped, rest.indexed), (3, 7));
    assert_eq!(kb.stats().unwrap().files, 10);
}

#[test]
fn include_exclude_globs_and_gitignore_are_respected() {
    let mut f = Fixture::new();
    f.corpus();
    f.write(".gitignore", "kitchen/\n");
    f.config.exclude = vec!["**/*.rs".into()];
    let kb = f.kb(None);
    let r = f.ingest(&kb);
    assert_eq!(r.files, 3, "{r:?}"); // wings.md, engines.txt, page.html
    drop(kb);
    f.config.include = vec!["*.md".into()];
    let kb = Arc::new(KnowledgeBase::open(&f.config).unwrap());
    let r = f.ingest(&kb);
    // Now only wings.md is included: the other two are removed.
    assert_eq!((r.files, r.removed), (1, 2));
}

#[test]
fn kb_rm_removes_a_file_or_a_folder() {
    let f = Fixture::new();
    f.corpus();
    let kb = f.kb(None);
    f.ingest(&kb);
    let gone = lsm_tools_kb::remove_path(kb.store(), &f.docs.join("kitchen")).unwrap();
    assert_eq!(gone.len(), 2);
    let gone = lsm_tools_kb::remove_path(kb.store(), &f.docs.join("aero/wings.md")).unwrap();
    assert_eq!(gone.len(), 1);
    assert_eq!(kb.stats().unwrap().files, 3);
    let hits = lexical_paths(&kb, "knead dough");
    assert!(hits.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Retrieval

#[test]
fn filters_apply_inside_every_profile() {
    let f = Fixture::new();
    f.corpus();
    let kb = f.kb(Some(hash_embedder()));
    f.ingest(&kb);
    let p = pipeline(kb, None);
    let rt = tokio::runtime::Runtime::new().unwrap();
    for profile in ["lexical", "dense_only", "hybrid_rrf"] {
        let mut r = request("wing thrust engines", profile);
        r.filters = Filters {
            path_contains: Some("AERO".into()),
            ..Default::default()
        };
        let pkg = rt.block_on(p.build_sources(r.clone())).unwrap();
        assert!(!pkg.candidates.is_empty(), "{profile}");
        assert!(
            pkg.candidates.iter().all(|c| c.path.contains("aero")),
            "{profile}"
        );

        r.filters = Filters {
            ext_allow: vec!["txt".into()],
            ..Default::default()
        };
        let pkg = rt.block_on(p.build_sources(r.clone())).unwrap();
        assert_eq!(paths(&pkg), ["engines.txt"], "{profile}");

        r.filters = Filters {
            ext_deny: vec!["md".into(), "txt".into()],
            ..Default::default()
        };
        let pkg = rt.block_on(p.build_sources(r)).unwrap();
        assert!(
            pkg.candidates
                .iter()
                .all(|c| c.ext != "md" && c.ext != "txt"),
            "{profile}"
        );
    }
}

#[test]
fn every_profile_retrieves_and_traces_its_stages() {
    let f = Fixture::new();
    f.corpus();
    let kb = f.kb(Some(hash_embedder()));
    f.ingest(&kb);
    let provider = Arc::new(ScriptedProvider::new(vec![ScriptedResponse::text(
        "[2, 1]",
    )]));
    let p = pipeline(kb, Some(Arc::clone(&provider)));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let stages = |pkg: &lsm_tools_kb::ContextPackage| -> Vec<String> {
        pkg.retrieval_trace
            .stages
            .iter()
            .map(|s| s.stage.clone())
            .collect()
    };
    let lex = rt
        .block_on(p.build_sources(request("flutter wing", "lexical")))
        .unwrap();
    assert_eq!(
        stages(&lex),
        ["lexical", "load", "dedupe", "min_relevance", "mmr"]
    );
    let dense = rt
        .block_on(p.build_sources(request("flutter wing", "dense_only")))
        .unwrap();
    assert_eq!(
        stages(&dense),
        [
            "embed_query",
            "dense",
            "load",
            "dedupe",
            "min_relevance",
            "mmr"
        ]
    );
    let hyb = rt
        .block_on(p.build_sources(request("flutter wing", "hybrid_rrf")))
        .unwrap();
    assert_eq!(
        stages(&hyb),
        [
            "embed_query",
            "lexical",
            "dense",
            "fuse_rrf",
            "load",
            "dedupe",
            "min_relevance",
            "mmr"
        ]
    );
    for pkg in [&lex, &dense, &hyb] {
        assert!(paths(pkg)[0] == "wings.md", "{:?}", paths(pkg));
        assert_eq!(
            pkg.retrieval_trace.effective_profile,
            pkg.retrieval_trace.profile
        );
        let mmr = pkg.retrieval_trace.stages.last().unwrap();
        assert_eq!(mmr.output, pkg.candidates.len());
    }
    let mut rr = request("flutter wing", "llm_rerank");
    rr.k = Some(2);
    let rerank = rt.block_on(p.build_sources(rr)).unwrap();
    assert!(stages(&rerank).contains(&"llm_rerank".to_string()));
    let note = rerank
        .retrieval_trace
        .stages
        .iter()
        .find(|s| s.stage == "llm_rerank")
        .and_then(|s| s.note.clone())
        .unwrap();
    assert!(note.contains("ranked 2"), "{note}");
    // The LLM put the hybrid second first.
    assert_eq!(rerank.candidates[0].chunk_id, {
        let mut h = request("flutter wing", "hybrid_rrf");
        h.k = Some(2);
        let hyb = rt.block_on(p.build_sources(h)).unwrap();
        hyb.candidates[1].chunk_id.clone()
    });
    assert_eq!(provider.calls(), 1);
}

#[test]
fn without_an_embedder_dense_profiles_fall_back_to_lexical_and_say_so() {
    let f = Fixture::new();
    f.corpus();
    let kb = f.kb(None);
    f.ingest(&kb);
    let p = pipeline(kb, None);
    let rt = tokio::runtime::Runtime::new().unwrap();
    for profile in ["dense_only", "hybrid_rrf"] {
        let pkg = rt
            .block_on(p.build_sources(request("flutter", profile)))
            .unwrap();
        assert_eq!(pkg.retrieval_trace.effective_profile, "lexical");
        assert!(
            pkg.retrieval_trace
                .notes
                .iter()
                .any(|n| n.contains("fell back to lexical")),
            "{:?}",
            pkg.retrieval_trace.notes
        );
        assert_eq!(paths(&pkg)[0], "wings.md");
    }
}

#[test]
fn a_mismatched_embedder_is_refused_with_a_clear_message() {
    let f = Fixture::new();
    f.corpus();
    let kb = f.kb(Some(hash_embedder()));
    f.ingest(&kb);
    drop(kb);
    let other: Arc<dyn Embedder> = Arc::new(HashEmbedder::named("other-model", 256));
    let err = KnowledgeBase::open_with(&f.config, Some(other)).unwrap_err();
    assert!(matches!(err, KbError::EmbedderMismatch { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("hash-256 (256 dims)") && msg.contains("other-model"),
        "{msg}"
    );
    assert!(msg.contains("--rebuild"), "{msg}");
    // Configuring no embedder for an index that has one is a mismatch too.
    let mut none = f.config.clone();
    none.embedder.kind = EmbedderKind::None;
    assert!(matches!(
        KnowledgeBase::open(&none).unwrap_err(),
        KbError::EmbedderMismatch { .. }
    ));
    // A rebuild with the new embedder works.
    let other: Arc<dyn Embedder> = Arc::new(HashEmbedder::named("other-model", 256));
    let kb = KnowledgeBase::open_or_create(&f.config, true, Some(other)).unwrap();
    assert_eq!(kb.stats().unwrap().files, 0);
}

#[test]
fn near_duplicates_and_the_per_file_cap_shape_the_result() {
    let mut f = Fixture::new();
    let para = "Vortex generators delay separation of the boundary layer on the upper surface.";
    f.write("a.md", &format!("{para}\n"));
    f.write("b.md", &format!("{para}\n"));
    let mut long = String::new();
    for i in 0..12 {
        long.push_str(&format!(
            "Section {i} separation boundary layer note number {i} with its own words {i}.\n\n"
        ));
    }
    f.write("c.md", &long);
    f.config.chunk_size = 120;
    f.config.chunk_overlap = 0;
    f.config.retrieval.max_per_file = 2;
    let kb = f.kb(None);
    f.ingest(&kb);
    let p = pipeline(kb, None);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pkg = rt
        .block_on(p.build_sources(request("boundary layer separation", "lexical")))
        .unwrap();
    let names = paths(&pkg);
    assert_eq!(
        names.iter().filter(|n| *n == "c.md").count(),
        2,
        "{names:?}"
    );
    // a.md and b.md hold the same text: one of them is dropped.
    assert_eq!(
        names
            .iter()
            .filter(|n| *n == "a.md" || *n == "b.md")
            .count(),
        1,
        "{names:?}"
    );
    let dedupe = pkg
        .retrieval_trace
        .stages
        .iter()
        .find(|s| s.stage == "dedupe")
        .unwrap();
    assert_eq!(dedupe.input, dedupe.output + 1);
}

// ---------------------------------------------------------------------------------------------
// Pipeline: citations and fallbacks

fn run(p: &Pipeline, r: QueryRequest) -> QueryResponse {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(p.run(r))
        .unwrap()
}

#[test]
fn answers_cite_sources_and_unknown_citations_are_dropped_and_reported() {
    let f = Fixture::new();
    f.corpus();
    let kb = f.kb(None);
    f.ingest(&kb);
    let provider = Arc::new(ScriptedProvider::new(vec![ScriptedResponse {
        text: "Flutter is an aeroelastic instability [S1]. It is also purple [S42].".into(),
        response_id: Some("resp-7".into()),
        ..Default::default()
    }]));
    let p = pipeline(kb, Some(Arc::clone(&provider)));
    let mut r = request("What is flutter?", "lexical");
    r.conversation_id = Some("conv-1".into());
    r.prior_response_id = Some("resp-6".into());
    r.starting_prompt = Some("Answer briefly.".into());
    let resp = run(&p, r);
    assert_eq!(resp.fallback, None);
    assert_eq!(
        resp.answer,
        "Flutter is an aeroelastic instability [S1]. It is also purple."
    );
    assert_eq!(resp.invalid_citations, ["S42"]);
    assert_eq!(resp.citations.len(), 1);
    assert!(resp.citations[0].path.ends_with("wings.md"));
    assert_eq!(resp.citations[0].heading, "Wings");
    assert_eq!(resp.response_id.as_deref(), Some("resp-7"));
    assert_eq!(resp.conversation_id, "conv-1");
    // The LLM saw the labelled sources, the starting prompt, and the chaining options.
    let sent = &provider.requests()[0];
    let user = &sent.messages.last().unwrap().content;
    assert!(
        user.contains("[S1] ") && user.contains("(Wings, chunk 0)"),
        "{user}"
    );
    assert!(sent.messages.iter().any(|m| m.content == "Answer briefly."));
    assert_eq!(sent.options.previous_response_id.as_deref(), Some("resp-6"));
    assert_eq!(sent.options.prompt_cache_key.as_deref(), Some("kb:conv-1"));
    assert_eq!(
        resp.package.source_labels.get("S1"),
        Some(&resp.citations[0].chunk_id)
    );
}

#[test]
fn an_answer_without_markers_is_credited_to_the_source_holding_its_words_and_says_so() {
    let f = Fixture::new();
    f.corpus();
    let kb = f.kb(None);
    f.ingest(&kb);
    let provider = Arc::new(ScriptedProvider::new(vec![
        ScriptedResponse::text(
            "Flutter is an aeroelastic instability where the wing oscillates with growing amplitude.",
        ),
        ScriptedResponse::text("Flutter is caused by purple moon dragons singing loudly."),
        ScriptedResponse::text("Flutter is an aeroelastic instability [S1]."),
    ]));
    let p = pipeline(kb, Some(provider));
    let resp = run(&p, request("What is flutter?", "lexical"));
    assert!(resp.citations_attributed);
    assert_eq!(resp.citations.len(), 1);
    assert!(resp.citations[0].path.ends_with("wings.md"));
    // The answer itself is left as the model wrote it.
    assert!(!resp.answer.contains("[S"), "{}", resp.answer);
    let json = serde_json::to_value(&resp).unwrap();
    assert_eq!(json["citations_attributed"], true);
    // Words the sources do not hold: no source is credited.
    let resp = run(&p, request("What is flutter?", "lexical"));
    assert!(!resp.citations_attributed);
    assert!(resp.citations.is_empty());
    // An answer that cites: its own citations, not attributed ones (the field is left out).
    let resp = run(&p, request("What is flutter?", "lexical"));
    assert!(!resp.citations_attributed);
    assert_eq!(resp.citations.len(), 1);
    assert!(
        serde_json::to_value(&resp)
            .unwrap()
            .get("citations_attributed")
            .is_none()
    );
}

#[test]
fn an_llm_failure_gives_a_fallback_listing_the_closest_excerpts() {
    let f = Fixture::new();
    f.corpus();
    let kb = f.kb(None);
    f.ingest(&kb);
    // An empty script: the call fails.
    let provider = Arc::new(ScriptedProvider::new(Vec::new()));
    let p = pipeline(kb, Some(provider));
    let resp = run(&p, request("flutter", "lexical"));
    let reason = resp.fallback.clone().unwrap();
    assert!(reason.starts_with("llm_error"), "{reason}");
    assert!(
        resp.answer.contains("The closest excerpts"),
        "{}",
        resp.answer
    );
    assert!(
        resp.answer.contains("[S1] ") && resp.answer.contains("Flutter"),
        "{}",
        resp.answer
    );
    assert!(resp.citations.is_empty());
    let _ = ProviderError::Call {
        provider: String::new(),
        message: String::new(),
    };
}

#[test]
fn low_relevance_and_no_results_return_early_without_calling_the_llm() {
    let f = Fixture::new();
    f.corpus();
    let kb = f.kb(None);
    f.ingest(&kb);
    let provider = Arc::new(ScriptedProvider::new(vec![ScriptedResponse::text("never")]));
    let p = pipeline(kb, Some(Arc::clone(&provider)));
    // Grounded asks for relevance ≥ 0.25: one query term of five matching is 0.2.
    let mut r = QueryRequest {
        query: "flutter quantum chromodynamics lattice gauge".into(),
        mode: Some(ModeSpec::Name("grounded".into())),
        ..Default::default()
    };
    let resp = run(&p, r.clone());
    assert!(
        resp.fallback
            .as_deref()
            .unwrap()
            .starts_with("low_relevance"),
        "{:?}",
        resp.fallback
    );
    assert!(resp.package.below_min_relevance);
    assert!(resp.answer.contains("closest excerpts"));
    r.query = "xylophone quark".into();
    let resp = run(&p, r);
    assert!(resp.fallback.as_deref().unwrap().starts_with("no_results"));
    assert_eq!(provider.calls(), 0);
}

#[test]
fn modes_resolve_by_name_or_object_and_composed_modes_are_validated() {
    let mut f = Fixture::new();
    f.corpus();
    let mut mine = lsm_tools_kb::mode::grounded();
    mine.retrieval_profile = "lexical".into();
    mine.local_policy.k = 1;
    f.config.modes.insert("tight".into(), mine);
    f.config.default_mode = "tight".into();
    let kb = f.kb(None);
    f.ingest(&kb);
    let p = Pipeline::new(
        kb,
        None,
        ModePolicy::new(&["lexical".to_string(), "hybrid_rrf".to_string()], false),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    // The configured default mode applies when none is given.
    let pkg = rt
        .block_on(p.build_sources(QueryRequest {
            query: "wing".into(),
            ..Default::default()
        }))
        .unwrap();
    assert_eq!(pkg.candidates.len(), 1);
    assert_eq!(pkg.mode.retrieval_profile, "lexical");
    // A named built-in with remote sources runs, without them.
    let pkg = rt
        .block_on(p.build_sources(QueryRequest {
            query: "wing".into(),
            mode: Some(ModeSpec::Name("insight".into())),
            ..Default::default()
        }))
        .unwrap();
    assert!(
        pkg.retrieval_trace
            .notes
            .iter()
            .any(|n| n.contains("URL access"))
    );
    // A composed mode asking for remote sources without URL access is refused.
    let err = rt
        .block_on(p.build_sources(QueryRequest {
            query: "wing".into(),
            mode: Some(ModeSpec::Config(Box::new(lsm_tools_kb::mode::insight()))),
            ..Default::default()
        }))
        .unwrap_err()
        .to_string();
    assert!(err.contains("allow_url_access"), "{err}");
    // A profile outside the allowed list is refused.
    let err = rt
        .block_on(p.build_sources(request("wing", "dense_only")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not allowed"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// The local embedder (needs `cargo xtask fetch-model`)

fn local_model_dir() -> Option<PathBuf> {
    let dir = lsm_tools_kb::default_model_dir()?;
    if lsm_tools_kb::embed::local_model_present(&dir) {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: the local embedding model is not in {} (run `cargo xtask fetch-model`)",
            dir.display()
        );
        None
    }
}

#[test]
fn the_local_minilm_embeds_meaningfully_and_pools_without_padding() {
    let Some(dir) = local_model_dir() else { return };
    let e = lsm_tools_kb::embed::LocalMiniLm::load(&dir, 8).unwrap();
    assert_eq!((e.model(), e.dims()), ("all-MiniLM-L6-v2", 384));
    let texts = [
        "A cat is sitting on the mat.",
        "A kitten rests on a rug.",
        "The stock market fell sharply on Tuesday.",
        "Shares dropped steeply this week as markets slid.",
    ];
    let v = e.embed(&texts).unwrap();
    let cos = |a: &[f32], b: &[f32]| lsm_tools_kb::dot(a, b);
    for x in &v {
        assert!((cos(x, x) - 1.0).abs() < 1e-4);
    }
    assert!(cos(&v[0], &v[1]) > 0.5, "{}", cos(&v[0], &v[1]));
    assert!(cos(&v[2], &v[3]) > 0.5, "{}", cos(&v[2], &v[3]));
    assert!(cos(&v[0], &v[2]) < 0.2, "{}", cos(&v[0], &v[2]));
    // Batched with longer inputs (padding) or alone: the same vector.
    let alone = e.embed(&[texts[0]]).unwrap();
    assert!(cos(&alone[0], &v[0]) > 0.9999);
    // Inputs beyond 128 tokens are not cut at the tokenizer file's 128.
    let long_a = format!("{} tail about cats", "word ".repeat(150));
    let long_b = format!("{} tail about finance", "word ".repeat(150));
    let l = e.embed(&[&long_a, &long_b]).unwrap();
    assert!(cos(&l[0], &l[1]) < 0.9999, "tokens after 128 were ignored");
}

#[test]
fn the_local_minilm_gives_the_same_vectors_batched_in_parallel_as_one_at_a_time() {
    let Some(dir) = local_model_dir() else { return };
    let e = lsm_tools_kb::embed::LocalMiniLm::load(&dir, 2).unwrap();
    // Lengths from a few tokens to past the 256-token limit, in no order: several batches,
    // padded differently, run on several threads.
    let texts: Vec<String> = [90, 3, 300, 40, 12, 140]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            format!(
                "{} note {i} about wings and {}",
                "lift ".repeat(*n),
                ["flutter", "bread", "markets", "rain"][i % 4]
            )
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let counted = std::sync::atomic::AtomicUsize::new(0);
    let together = e
        .embed_observed(&refs, &|n| {
            counted.fetch_add(n, Ordering::SeqCst);
        })
        .unwrap();
    assert_eq!(counted.load(Ordering::SeqCst), texts.len());
    for (t, v) in refs.iter().zip(&together) {
        let alone = e.embed(&[t]).unwrap();
        assert!(lsm_tools_kb::dot(&alone[0], v) > 0.9999, "{t:.40}");
    }
}

#[test]
fn ingest_reports_embedding_progress_per_chunk_group() {
    /// Records every `chunks_embedded` call.
    #[derive(Default)]
    struct Embedding(std::sync::Mutex<Vec<usize>>);
    impl IngestProgress for Embedding {
        fn start(&self, _: usize) {}
        fn file_done(&self, _: &Path, _: &FileOutcome) {}
        fn chunks_embedded(&self, n: usize) {
            self.0.lock().unwrap().push(n);
        }
        fn finish(&self) {}
    }
    let f = Fixture::new();
    f.corpus();
    let kb = f.kb(Some(hash_embedder()));
    let progress = Embedding::default();
    let options = IngestOptions {
        commit_every: 2,
        ..Default::default()
    };
    let report = kb
        .ingest(std::slice::from_ref(&f.docs), &options, &progress)
        .unwrap();
    let calls = progress.0.into_inner().unwrap();
    // One report per group the embedder finished, over several batches, adding up.
    assert!(calls.len() >= 2, "{calls:?}");
    assert_eq!(calls.iter().sum::<usize>(), report.chunks);
}

#[test]
fn a_local_model_index_answers_semantic_queries() {
    let Some(_) = local_model_dir() else { return };
    let mut f = Fixture::new();
    f.corpus();
    f.config.embedder.kind = EmbedderKind::Local;
    let kb = Arc::new(KnowledgeBase::open_or_create(&f.config, false, None).unwrap());
    f.ingest(&kb);
    assert_eq!(kb.stats().unwrap().embedder, "all-MiniLM-L6-v2 (384 dims)");
    let p = pipeline(kb, None);
    let rt = tokio::runtime::Runtime::new().unwrap();
    // No word in common with the bread note but its meaning.
    let pkg = rt
        .block_on(p.build_sources(request("how to bake a loaf", "dense_only")))
        .unwrap();
    assert_eq!(paths(&pkg)[0], "bread.md", "{:?}", paths(&pkg));
    // Auto keeps the index's embedder on reopen.
    drop(p);
    let mut auto = f.config.clone();
    auto.embedder.kind = EmbedderKind::Auto;
    let kb = KnowledgeBase::open(&auto).unwrap();
    assert_eq!(kb.embedder().unwrap().model(), "all-MiniLM-L6-v2");
}

// ---------- retrieval evaluation ----------

/// A three-document BEIR collection whose one query's lexical winner is not the relevant
/// document: "b" (graded 2) mentions the query words once, "a" (not relevant) many times.
fn tiny_beir(dir: &Path) {
    std::fs::write(
        dir.join("corpus.jsonl"),
        concat!(
            "{\"_id\": \"a\", \"title\": \"Flutter flutter\", \"text\": \"Flutter flutter wing flutter wing flutter.\"}\n",
            "{\"_id\": \"b\", \"title\": \"Aeroelastic stability\", \"text\": \"Panel flutter of a wing at supersonic speed.\"}\n",
            "{\"_id\": \"c\", \"title\": \"Cooking\", \"text\": \"Bread needs flour, water and time.\"}\n",
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("queries.jsonl"),
        "{\"_id\": \"q1\", \"text\": \"wing flutter\"}\n",
    )
    .unwrap();
    std::fs::create_dir(dir.join("qrels")).unwrap();
    std::fs::write(
        dir.join("qrels/test.tsv"),
        "query-id\tcorpus-id\tscore\nq1\tb\t2\n",
    )
    .unwrap();
}

#[test]
fn eval_scores_llm_rerank_with_the_llm_given_and_says_when_there_is_none() {
    use lsm_tools_kb::{Profile, eval};
    let f = Fixture::new();
    tiny_beir(&f.docs);
    let collection = eval::load(&f.docs).unwrap();
    let kb = f.kb(None);
    eval::ingest_collection(&kb, &collection).unwrap();
    let profiles = [Profile::Lexical, Profile::LlmRerank];

    // Without an LLM: llm_rerank carries the hybrid (here lexical) figures and says so.
    let plain = eval::evaluate(&kb, &collection, &profiles, None).unwrap();
    let lexical = &plain["lexical"];
    assert!(lexical.ndcg_at_10 < 1.0, "{lexical:?}");
    assert_eq!(plain["llm_rerank"].ndcg_at_10, lexical.ndcg_at_10);
    assert_eq!(plain["llm_rerank"].scored_as.as_deref(), Some("hybrid_rrf"));
    assert_eq!(plain["llm_rerank"].reranker, None);

    // With one: the model's order (the second candidate first) decides, one call per query.
    let provider = Arc::new(ScriptedProvider::new(vec![ScriptedResponse::text(
        "[2, 1]",
    )]));
    let reranker = eval::Reranker {
        provider: provider.clone(),
        candidates: 20,
    };
    let ranked = eval::evaluate(&kb, &collection, &profiles, Some(&reranker)).unwrap();
    let r = &ranked["llm_rerank"];
    assert_eq!(r.ndcg_at_10, 1.0, "{r:?}");
    assert_eq!(r.scored_as, None);
    assert_eq!(r.rerank_failures, Some(0));
    assert_eq!(
        r.reranker.as_deref(),
        Some(lsm_providers::Provider::model(provider.as_ref()))
    );
    assert_eq!(provider.calls(), 1);
    assert!(
        provider.requests()[0].messages[1]
            .content
            .contains("wing flutter")
    );
    assert_eq!(ranked["lexical"], *lexical, "other profiles are untouched");

    // An unreadable answer keeps the hybrid order and is counted.
    let confused = Arc::new(ScriptedProvider::new(vec![ScriptedResponse::text(
        "no idea",
    )]));
    let reranker = eval::Reranker {
        provider: confused,
        candidates: 20,
    };
    let kept = eval::evaluate(&kb, &collection, &[Profile::LlmRerank], Some(&reranker)).unwrap();
    assert_eq!(kept["llm_rerank"].rerank_failures, Some(1));
    assert_eq!(kept["llm_rerank"].ndcg_at_10, lexical.ndcg_at_10);
}
