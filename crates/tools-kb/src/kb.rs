//! [`KnowledgeBase`]: an index opened together with the embedder it was built with.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::KbConfig;
use crate::embed::{Embedder, LOCAL_MODEL_NAME, LocalMiniLm, local_model_present};
use crate::embed::{EmbedderKind, default_model_dir};
use crate::error::{KbError, Result};
use crate::ingest::{IngestOptions, IngestProgress, IngestReport};
use crate::store::{EmbedderInfo, Store, read_manifest};

/// An index and its embedder (if it has one). Cheap to share as `Arc<KnowledgeBase>`.
pub struct KnowledgeBase {
    store: Store,
    embedder: Option<Arc<dyn Embedder>>,
    config: KbConfig,
}

impl std::fmt::Debug for KnowledgeBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnowledgeBase")
            .field("store", &self.store)
            .field(
                "embedder",
                &self.embedder.as_ref().map(|e| e.model().to_string()),
            )
            .finish_non_exhaustive()
    }
}

/// `lsm kb stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KbStats {
    /// The index folder.
    pub index_dir: String,
    /// Files in the index.
    pub files: usize,
    /// Chunks in the index.
    pub chunks: usize,
    /// Bytes on disk.
    pub index_bytes: u64,
    /// The embedder (`model (dims)`), or `none`.
    pub embedder: String,
}

/// The embedder the configuration asks for, given what an existing index was built with.
fn wanted_embedder(config: &KbConfig, built: Option<Option<&EmbedderInfo>>) -> EmbedderKind {
    match config.embedder.kind {
        EmbedderKind::Auto => match built {
            // An existing index keeps its embedder.
            Some(None) => EmbedderKind::None,
            Some(Some(info)) if info.model == LOCAL_MODEL_NAME => EmbedderKind::Local,
            Some(Some(_)) => EmbedderKind::Openai,
            None => {
                let present = config
                    .embedder
                    .model_dir
                    .clone()
                    .or_else(default_model_dir)
                    .is_some_and(|d| local_model_present(&d));
                if present {
                    EmbedderKind::Local
                } else {
                    EmbedderKind::None
                }
            }
        },
        other => other,
    }
}

/// Build the embedder of `kind` from the configuration.
///
/// # Errors
/// [`KbError::Embedder`] when it cannot be loaded; [`KbError::Config`] when it is not
/// configured completely.
pub fn build_embedder(config: &KbConfig, kind: EmbedderKind) -> Result<Option<Arc<dyn Embedder>>> {
    match kind {
        EmbedderKind::None | EmbedderKind::Auto => Ok(None),
        EmbedderKind::Local => {
            let dir = config
                .embedder
                .model_dir
                .clone()
                .or_else(default_model_dir)
                .ok_or_else(|| KbError::Config {
                    key: "kb.embedder.model_dir".into(),
                    message: "no home folder to find the model in; set it explicitly".into(),
                })?;
            Ok(Some(Arc::new(LocalMiniLm::load(
                &dir,
                config.embedder.batch_size,
            )?)))
        }
        EmbedderKind::Openai => Ok(Some(Arc::new(crate::embed::OpenAiEmbedder::from_config(
            &config.embedder,
        )?))),
    }
}

impl KnowledgeBase {
    /// Open the existing index of `config` with its embedder.
    ///
    /// # Errors
    /// [`KbError::NoIndex`] when there is none; [`KbError::EmbedderMismatch`] when the
    /// configured embedder is not the one the index was built with.
    pub fn open(config: &KbConfig) -> Result<Self> {
        Self::open_with(config, None)
    }

    /// Open with this embedder instead of the configured one (tests, benchmarks).
    ///
    /// # Errors
    /// As [`KnowledgeBase::open`].
    pub fn open_with(config: &KbConfig, embedder: Option<Arc<dyn Embedder>>) -> Result<Self> {
        let dir = &config.index_dir;
        let Some(manifest) = read_manifest(dir)? else {
            return Err(KbError::NoIndex { path: dir.clone() });
        };
        let embedder = match embedder {
            Some(e) => Some(e),
            None => {
                let kind = wanted_embedder(config, Some(manifest.embedder.as_ref()));
                build_embedder(config, kind)?
            }
        };
        check_match(dir, manifest.embedder.as_ref(), embedder.as_deref())?;
        Ok(KnowledgeBase {
            store: Store::open(dir)?,
            embedder,
            config: config.clone(),
        })
    }

    /// Open the index of `config`, creating it when absent (for ingest). With `rebuild`, an
    /// existing index is deleted first.
    ///
    /// # Errors
    /// As [`KnowledgeBase::open`], and [`KbError::Index`] when it cannot be created.
    pub fn open_or_create(
        config: &KbConfig,
        rebuild: bool,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> Result<Self> {
        let dir = &config.index_dir;
        if rebuild && read_manifest(dir)?.is_some() {
            std::fs::remove_dir_all(dir).map_err(|e| KbError::io(dir, e))?;
        }
        if read_manifest(dir)?.is_some() {
            return Self::open_with(config, embedder);
        }
        let embedder = match embedder {
            Some(e) => Some(e),
            None => build_embedder(config, wanted_embedder(config, None))?,
        };
        let info = embedder.as_ref().map(|e| EmbedderInfo {
            model: e.model().to_string(),
            dims: e.dims(),
        });
        Ok(KnowledgeBase {
            store: Store::create(dir, info)?,
            embedder,
            config: config.clone(),
        })
    }

    /// The index.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The embedder, when the index has one.
    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.embedder.as_ref()
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &KbConfig {
        &self.config
    }

    /// The index folder.
    pub fn dir(&self) -> &Path {
        self.store.dir()
    }

    /// Ingest `roots` (see [`crate::ingest`]: incremental, batched commits).
    ///
    /// # Errors
    /// As [`crate::ingest::ingest`].
    pub fn ingest(
        &self,
        roots: &[PathBuf],
        options: &IngestOptions,
        progress: &dyn IngestProgress,
    ) -> Result<IngestReport> {
        crate::ingest::ingest(
            &self.store,
            self.embedder.as_deref(),
            roots,
            &self.config,
            options,
            progress,
        )
    }

    /// Files, chunks, size and embedder.
    ///
    /// # Errors
    /// [`KbError::Index`] when the index cannot be read.
    pub fn stats(&self) -> Result<KbStats> {
        Ok(KbStats {
            index_dir: self.store.dir().display().to_string(),
            files: self.store.file_records()?.len(),
            chunks: self.store.chunk_count()?,
            index_bytes: self.store.disk_size(),
            embedder: self.store.manifest().embedder_label(),
        })
    }
}

/// Refuse an embedder that is not the one the index was built with.
fn check_match(
    dir: &Path,
    built: Option<&EmbedderInfo>,
    configured: Option<&dyn Embedder>,
) -> Result<()> {
    let same = match (built, configured) {
        (None, None) => true,
        (Some(b), Some(c)) => b.model == c.model() && b.dims == c.dims(),
        _ => false,
    };
    if same {
        return Ok(());
    }
    let label = |m: &str, d: usize| crate::embed::describe(m, d);
    Err(KbError::EmbedderMismatch {
        path: dir.to_path_buf(),
        built: built.map_or_else(|| "none".to_string(), |b| label(&b.model, b.dims)),
        configured: configured.map_or_else(|| "none".to_string(), |c| label(c.model(), c.dims())),
    })
}
