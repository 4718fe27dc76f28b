//! The knowledge-base commands: `lsm ingest`, `lsm query`, `lsm kb stats`, `lsm kb rm`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::exit::usage;
use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lsm_app::config::Config;
use lsm_tools_kb::{
    FileOutcome, Filters, IngestOptions, IngestProgress, IngestReport, KbError, KnowledgeBase,
    ModeSpec, QueryRequest, QueryResponse,
};

use crate::exit;
use crate::terminal::output::{self, OutputFormat};
use crate::terminal::text::{for_stdout, one_line};

/// Arguments of `lsm ingest`.
#[derive(Debug, Args)]
pub struct IngestArgs {
    /// Folders (or files) to ingest.
    #[arg(required = true, value_name = "DIR")]
    pub paths: Vec<PathBuf>,
    /// Delete the index first and build it anew (e.g. after changing the embedder).
    #[arg(long)]
    pub rebuild: bool,
    /// Print the summary as JSON on stdout, and no progress bar (same as `--output-format
    /// json`).
    #[arg(long, conflicts_with = "output_format")]
    pub json: bool,
    /// What stdout carries: `text` (a summary; the progress bar on stderr), `json` (the
    /// summary as one JSON document), `stream-json` (one JSON line per file as it is done,
    /// then the summary as the `result` line).
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub output_format: Option<OutputFormat>,
}

/// Arguments of `lsm query`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The question.
    pub question: String,
    /// Mode: grounded, insight, hybrid, or one from [kb.modes] (default: [kb] default_mode).
    #[arg(long)]
    pub mode: Option<String>,
    /// A filter, repeatable: path_contains=TEXT, ext_allow=md,txt, ext_deny=pdf.
    #[arg(long = "filter", value_name = "KEY=VALUE")]
    pub filters: Vec<String>,
    /// Number of sources (default: the mode's k).
    #[arg(long)]
    pub k: Option<usize>,
    /// The LLM provider that writes the answer (default: [llm] provider); without one, the
    /// answer lists the closest excerpts.
    #[arg(long, value_name = "SPEC")]
    pub provider: Option<String>,
    /// Print the whole response (answer, citations, sources, trace) as JSON on stdout (same
    /// as `--output-format json`).
    #[arg(long, conflicts_with = "output_format")]
    pub json: bool,
    /// What stdout carries: `text` (the answer and its sources), `json` (the whole response
    /// as one JSON document), `stream-json` (the response as one `result` line).
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub output_format: Option<OutputFormat>,
}

/// Arguments of `lsm kb stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `lsm kb rm`.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// A file or folder whose files leave the index (the files themselves are not touched).
    pub path: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Run a command body; map errors to exit codes (2 for usage and configuration, and for a
/// knowledge base that is missing, or was built with another embedder, or a bad request).
fn finish(result: Result<u8>) -> u8 {
    result.unwrap_or_else(|e| {
        exit::report(&e, |e| {
            let kb = e.chain().find_map(|cause| {
                cause.downcast_ref::<KbError>().or_else(|| {
                    match cause.downcast_ref::<lsm_app::error::AppError>() {
                        Some(lsm_app::error::AppError::Kb(kb)) => Some(kb),
                        _ => None,
                    }
                })
            });
            matches!(
                kb,
                Some(
                    KbError::NoIndex { .. }
                        | KbError::EmbedderMismatch { .. }
                        | KbError::Config { .. }
                        | KbError::InvalidRequest(_)
                )
            )
        })
    })
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    exit::runtime(None).context("cannot start the async runtime")
}

fn load_config(cfg: &lsm_app::config::ConfigArgs) -> Result<Config> {
    Ok(cfg.load()?)
}

/// A progress bar on stderr (drawn only on a terminal) that counts the chunks embedded —
/// the slow part — with their rate and the time left, and names the file being read; with
/// `stream`, also one JSON line per file on stdout.
struct Bar {
    bar: ProgressBar,
    stream: bool,
    files: std::sync::atomic::AtomicUsize,
    total_files: std::sync::atomic::AtomicUsize,
}

impl Bar {
    fn new(bar: ProgressBar, stream: bool) -> Self {
        Bar {
            bar,
            stream,
            files: Default::default(),
            total_files: Default::default(),
        }
    }
}

/// The bar's look: chunks embedded of those read so far, rate, time left, the file.
const BAR_TEMPLATE: &str =
    "{spinner} [{bar:30}] {pos}/{len} chunks embedded ({per_sec}, ETA {eta}) {wide_msg}";

impl IngestProgress for Bar {
    fn start(&self, files: usize) {
        self.total_files.store(files, Ordering::SeqCst);
    }
    fn file_done(&self, path: &Path, outcome: &FileOutcome) {
        if self.stream {
            let mut fields = serde_json::to_value(outcome).unwrap_or_default();
            if let Some(o) = fields.as_object_mut() {
                o.insert("path".into(), path.display().to_string().into());
            }
            output::stream_line("file", fields);
        }
        if let FileOutcome::Failed { reason } = outcome {
            let line = one_line(format!("skipped {}: {reason}", path.display()));
            self.bar.suspend(|| eprintln!("{line}"));
        }
        let done = self.files.fetch_add(1, Ordering::SeqCst) + 1;
        self.bar.set_message(format!(
            "file {done}/{} {}",
            self.total_files.load(Ordering::SeqCst),
            // A file's name is shown, never obeyed.
            path.file_name()
                .map(|n| one_line(n.to_string_lossy().into_owned()))
                .unwrap_or_default()
        ));
    }
    fn chunks_queued(&self, n: usize) {
        self.bar.inc_length(n as u64);
    }
    fn chunks_embedded(&self, n: usize) {
        self.bar.inc(n as u64);
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// `lsm ingest`.
pub fn ingest(cfg: &lsm_app::config::ConfigArgs, args: IngestArgs) -> u8 {
    finish(ingest_inner(cfg, args))
}

fn ingest_inner(cfg: &lsm_app::config::ConfigArgs, args: IngestArgs) -> Result<u8> {
    let config = load_config(cfg)?;
    let cwd = std::env::current_dir()?;
    let roots: Vec<PathBuf> = args.paths.iter().map(|p| cwd.join(p)).collect();
    for r in &roots {
        if !r.exists() {
            return Err(usage(format!("{} does not exist", r.display())));
        }
    }
    let kb = KnowledgeBase::open_or_create(&config.kb, args.rebuild, None)?;
    let options = IngestOptions::default();
    let rt = runtime()?;
    let cancel = Arc::clone(&options.cancel);
    let _signals = {
        let _in_runtime = rt.enter();
        crate::signals::on_stop("committing the files done so far", move || {
            cancel.store(true, Ordering::SeqCst);
        })
    };
    let format = OutputFormat::chosen(args.json, args.output_format);
    let bar = if format != OutputFormat::Text {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new(0);
        if let Ok(style) = ProgressStyle::with_template(BAR_TEMPLATE) {
            b.set_style(style.progress_chars("=> "));
        }
        // The spinner and the elapsed time move even while one large batch is embedded.
        b.enable_steady_tick(std::time::Duration::from_millis(120));
        b
    };
    let progress = Bar::new(bar, format == OutputFormat::StreamJson);
    // The walk and the index work run here; the runtime's threads watch for Ctrl-C.
    let report = kb.ingest(&roots, &options, &progress)?;
    print_ingest(&report, &kb, format)?;
    rt.shutdown_background();
    Ok(if report.interrupted {
        exit::STOP_REQUESTED
    } else {
        exit::OK
    })
}

fn print_ingest(report: &IngestReport, kb: &KnowledgeBase, format: OutputFormat) -> Result<()> {
    if format != OutputFormat::Text {
        let mut v = serde_json::to_value(report)?;
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "embedder".into(),
                kb.store().manifest().embedder_label().into(),
            );
            o.insert("index_dir".into(), kb.dir().display().to_string().into());
        }
        output::print_final(format, output::versioned(v));
        return Ok(());
    }
    println!(
        "{} files: {} indexed ({} chunks), {} unchanged, {} removed, {} failed{}",
        report.files,
        report.indexed,
        report.chunks,
        report.skipped,
        report.removed,
        report.failed.len(),
        if report.interrupted {
            " — interrupted; run the same command again to finish"
        } else {
            ""
        }
    );
    for f in &report.failed {
        println!("{}", one_line(format!("failed: {}: {}", f.path, f.reason)));
    }
    if report.unsupported > 0 {
        println!("{} files of unsupported types ignored", report.unsupported);
    }
    let mb = report.bytes as f64 / 1e6;
    // The index is under the project's folder, and the embedder a setting of its lsm.toml.
    println!(
        "{}",
        one_line(format!(
            "index {}: {} files, {} chunks, embedder {} ({mb:.1} MB read in {:.1} s)",
            kb.dir().display(),
            report.total_files,
            report.total_chunks,
            kb.store().manifest().embedder_label(),
            report.seconds
        ))
    );
    Ok(())
}

/// `lsm kb stats`.
pub fn stats(cfg: &lsm_app::config::ConfigArgs, args: StatsArgs) -> u8 {
    finish((|| {
        let config = load_config(cfg)?;
        let kb = KnowledgeBase::open(&config.kb)?;
        let s = kb.stats()?;
        if args.json {
            crate::terminal::output::print_json(&serde_json::to_string_pretty(&s)?);
        } else {
            println!("index:    {}", one_line(s.index_dir.clone()));
            println!("files:    {}", s.files);
            println!("chunks:   {}", s.chunks);
            println!("size:     {:.1} MB", s.index_bytes as f64 / 1e6);
            println!("embedder: {}", one_line(s.embedder.clone()));
        }
        Ok(exit::OK)
    })())
}

/// `lsm kb rm`.
pub fn rm(cfg: &lsm_app::config::ConfigArgs, args: RmArgs) -> u8 {
    finish((|| {
        let config = load_config(cfg)?;
        let kb = KnowledgeBase::open(&config.kb)?;
        let path = std::env::current_dir()?.join(&args.path);
        let removed = lsm_tools_kb::remove_path(kb.store(), &path)?;
        if args.json {
            crate::terminal::output::print_json(
                &serde_json::json!({ "removed": removed }).to_string(),
            );
        } else if removed.is_empty() {
            let shown = one_line(path.display().to_string());
            println!("nothing in the index is at {shown}");
        } else {
            for p in &removed {
                println!("removed {}", one_line(p.clone()));
            }
        }
        Ok(exit::OK)
    })())
}

/// Parse `--filter key=value` arguments.
fn parse_filters(items: &[String]) -> Result<Filters> {
    let mut f = Filters::default();
    let list = |v: &str| -> Vec<String> {
        v.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    for item in items {
        let Some((k, v)) = item.split_once('=') else {
            return Err(usage(format!(
                "--filter {item}: use KEY=VALUE with KEY path_contains, ext_allow or ext_deny"
            )));
        };
        match k.trim() {
            "path_contains" => f.path_contains = Some(v.to_string()),
            "ext_allow" => f.ext_allow.extend(list(v)),
            "ext_deny" => f.ext_deny.extend(list(v)),
            other => {
                return Err(usage(format!(
                    "--filter {item}: unknown filter '{other}'; use path_contains, ext_allow or ext_deny"
                )));
            }
        }
    }
    Ok(f)
}

/// `lsm query`.
pub fn query(cfg: &lsm_app::config::ConfigArgs, args: QueryArgs) -> u8 {
    finish(query_inner(cfg, args))
}

fn query_inner(cfg: &lsm_app::config::ConfigArgs, args: QueryArgs) -> Result<u8> {
    let config = load_config(cfg)?;
    let filters = parse_filters(&args.filters)?;
    if args.question.trim().is_empty() {
        return Err(usage("the question is empty"));
    }
    // Without a provider the answer lists the closest excerpts.
    let pipeline = lsm_app::wiring::kb::query_pipeline(
        &config,
        args.provider.clone(),
        crate::terminal::retry_notice::on_stderr(),
    )?;
    let request = QueryRequest {
        query: args.question.clone(),
        mode: args.mode.clone().map(ModeSpec::Name),
        filters,
        k: args.k,
        ..Default::default()
    };
    let rt = runtime()?;
    let response = rt.block_on(pipeline.run(request))?;
    print_response(
        &response,
        OutputFormat::chosen(args.json, args.output_format),
    )?;
    Ok(exit::OK)
}

fn print_response(r: &QueryResponse, format: OutputFormat) -> Result<()> {
    if format != OutputFormat::Text {
        // Through the text: an `f32` score keeps its short form (1.2921584, not its `f64`
        // widening).
        let document: serde_json::Value = serde_json::from_str(&serde_json::to_string(r)?)?;
        output::print_final(format, output::versioned(document));
        return Ok(());
    }
    println!("{}", for_stdout(&r.answer));
    // A document's file name and heading are shown on one line, nothing in them obeyed.
    let source_line = |label: &str, path: &str, heading: &str, chunk: u64| {
        let path = one_line(path.to_string());
        let heading = one_line(heading.to_string());
        if heading.is_empty() {
            println!("  [{label}] {path} (chunk {chunk})");
        } else {
            println!("  [{label}] {path} ({heading}, chunk {chunk})");
        }
    };
    if !r.citations.is_empty() {
        println!();
        println!("Sources:");
        if r.citations_attributed {
            println!("  (the answer names none itself: these hold its words)");
        }
        for c in &r.citations {
            source_line(&c.label, &c.path, &c.heading, c.chunk_index);
        }
    } else if !r.package.source_labels.is_empty() {
        // Nothing cited: still show what the answer was written from.
        println!();
        println!("Sources given to the model (none cited):");
        for s in r
            .package
            .candidates
            .iter()
            .filter(|s| r.package.source_labels.contains_key(&s.label))
        {
            source_line(&s.label, &s.path, &s.heading, s.chunk_index);
        }
    }
    if !r.invalid_citations.is_empty() {
        eprintln!(
            "note: the answer cited unknown sources {}; they were removed",
            r.invalid_citations.join(", ")
        );
    }
    // A note may quote a remote source's error: shown on one line, nothing in it obeyed.
    for n in &r.package.retrieval_trace.notes {
        eprintln!("note: {}", crate::terminal::text::masked_line(n));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ingest_bar_counts_chunks_embedded_of_those_read_and_names_the_file() {
        let hidden = indicatif::ProgressDrawTarget::hidden();
        let bar = Bar::new(ProgressBar::with_draw_target(Some(0), hidden), false);
        bar.start(2);
        bar.chunks_queued(100);
        bar.file_done(Path::new("/d/a.md"), &FileOutcome::Indexed { chunks: 100 });
        bar.chunks_embedded(64);
        assert_eq!((bar.bar.position(), bar.bar.length()), (64, Some(100)));
        assert_eq!(bar.bar.message(), "file 1/2 a.md");
        bar.chunks_queued(3);
        bar.file_done(Path::new("/d/b.md"), &FileOutcome::Indexed { chunks: 3 });
        bar.chunks_embedded(36);
        bar.chunks_embedded(3);
        assert_eq!((bar.bar.position(), bar.bar.length()), (103, Some(103)));
        assert_eq!(bar.bar.message(), "file 2/2 b.md");
        assert!(BAR_TEMPLATE.contains("{per_sec}") && BAR_TEMPLATE.contains("{eta}"));
    }

    #[test]
    fn filters_parse_and_bad_ones_are_usage_errors() {
        let f = parse_filters(&[
            "path_contains=notes/".into(),
            "ext_allow=md, txt".into(),
            "ext_deny=pdf".into(),
        ])
        .unwrap();
        assert_eq!(f.path_contains.as_deref(), Some("notes/"));
        assert_eq!(f.ext_allow, ["md", "txt"]);
        assert_eq!(f.ext_deny, ["pdf"]);
        assert!(parse_filters(&["color=red".into()]).is_err());
        assert!(parse_filters(&["nothing".into()]).is_err());
    }
}
