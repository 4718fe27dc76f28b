//! [`Snapshot`]: one consistent read view — lexical search, dense search, term matches and
//! chunk lookup over the same commit.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use tantivy::collector::{Count, DocSetCollector, TopDocs};
use tantivy::query::{
    AllQuery, BooleanQuery, ConstScoreQuery, Occur, Query, RegexQuery, TermQuery,
};
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::{DocAddress, Searcher, TantivyDocument, Term};

use super::analyzer::analyze;
use super::dense::DenseView;
use super::filters::Filters;
use super::records::{ChunkRecord, HEADING_SEP};
use super::schema::{Fields, first_str};
use crate::error::{KbError, Result};

/// A scored hit within one [`Snapshot`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Where the chunk is in the snapshot.
    pub addr: DocAddress,
    /// The ranking's score (BM25, or cosine similarity).
    pub score: f32,
}

/// A consistent read view: lexical and dense search and chunk lookup agree on one commit.
pub struct Snapshot {
    pub(super) searcher: Searcher,
    pub(super) fields: Fields,
    pub(super) dense: Option<Arc<DenseView>>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").finish_non_exhaustive()
    }
}

impl Snapshot {
    /// The dense vectors, when the index has an embedder.
    pub fn dense(&self) -> Option<&DenseView> {
        self.dense.as_deref()
    }

    /// Number of chunks visible.
    ///
    /// # Errors
    /// When tantivy fails.
    pub fn chunk_count(&self) -> tantivy::Result<usize> {
        let q = TermQuery::new(
            Term::from_field_text(self.fields.kind, "chunk"),
            IndexRecordOption::Basic,
        );
        self.searcher.search(&q, &Count)
    }

    fn filter_clauses(&self, filters: &Filters) -> Result<Vec<(Occur, Box<dyn Query>)>> {
        let f = self.fields;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![(
            Occur::Must,
            Box::new(ConstScoreQuery::new(
                Box::new(TermQuery::new(
                    Term::from_field_text(f.kind, "chunk"),
                    IndexRecordOption::Basic,
                )),
                0.0,
            )),
        )];
        if let Some(needle) = filters.path_contains.as_deref().filter(|s| !s.is_empty()) {
            let pattern = format!(".*{}.*", regex_escape(&needle.to_lowercase()));
            let q = RegexQuery::from_pattern(&pattern, f.path_lc)
                .map_err(|e| KbError::InvalidRequest(format!("bad path_contains: {e}")))?;
            clauses.push((
                Occur::Must,
                Box::new(ConstScoreQuery::new(Box::new(q), 0.0)),
            ));
        }
        let allow = Filters::normalized_exts(&filters.ext_allow);
        if !allow.is_empty() {
            let any: Vec<(Occur, Box<dyn Query>)> = allow
                .iter()
                .map(|e| {
                    let q: Box<dyn Query> = Box::new(TermQuery::new(
                        Term::from_field_text(f.ext, e),
                        IndexRecordOption::Basic,
                    ));
                    (Occur::Should, q)
                })
                .collect();
            clauses.push((
                Occur::Must,
                Box::new(ConstScoreQuery::new(Box::new(BooleanQuery::new(any)), 0.0)),
            ));
        }
        for e in Filters::normalized_exts(&filters.ext_deny) {
            clauses.push((
                Occur::MustNot,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.ext, &e),
                    IndexRecordOption::Basic,
                )),
            ));
        }
        Ok(clauses)
    }

    /// BM25 over heading + text of the chunks passing `filters`, best first.
    ///
    /// # Errors
    /// [`KbError::InvalidRequest`] for an unusable filter, [`KbError::Index`] when tantivy fails.
    pub fn lexical(&self, query: &str, filters: &Filters, limit: usize) -> Result<Vec<Hit>> {
        let terms = analyze(query);
        if terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let should: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(self.fields.body, t),
                    IndexRecordOption::WithFreqs,
                ));
                (Occur::Should, q)
            })
            .collect();
        let text_query = BooleanQuery::new(should);
        // File records have no body text, so a pure text query matches chunks only; without
        // filters it stays a plain disjunction, which tantivy scores with block-max WAND.
        let q: Box<dyn Query> = if filters.is_empty() {
            Box::new(text_query)
        } else {
            let mut clauses = self.filter_clauses(filters)?;
            clauses.push((Occur::Must, Box::new(text_query)));
            Box::new(BooleanQuery::new(clauses))
        };
        let top = self
            .searcher
            .search(q.as_ref(), &TopDocs::with_limit(limit))
            .map_err(|e| KbError::index(PathBuf::new(), e))?;
        Ok(top
            .into_iter()
            .map(|(score, addr)| Hit { addr, score })
            .collect())
    }

    /// For each of `addrs`, how many of the analyzed `terms` its heading + text contains
    /// (read from the postings lists).
    ///
    /// # Errors
    /// [`KbError::Index`] when the postings cannot be read.
    pub fn term_matches(&self, terms: &[String], addrs: &[DocAddress]) -> Result<Vec<usize>> {
        use tantivy::DocSet;
        let mut counts = vec![0usize; addrs.len()];
        // Per segment, the candidates in doc order (postings only seek forward).
        let mut by_segment: BTreeMap<u32, Vec<(u32, usize)>> = BTreeMap::new();
        for (i, a) in addrs.iter().enumerate() {
            by_segment
                .entry(a.segment_ord)
                .or_default()
                .push((a.doc_id, i));
        }
        for (seg, mut docs) in by_segment {
            docs.sort_unstable();
            let reader = self.searcher.segment_reader(seg);
            let inverted = reader
                .inverted_index(self.fields.body)
                .map_err(|e| KbError::index(PathBuf::new(), e))?;
            for t in terms {
                let term = Term::from_field_text(self.fields.body, t);
                let Some(mut postings) = inverted
                    .read_postings(&term, IndexRecordOption::Basic)
                    .map_err(|e| KbError::index(PathBuf::new(), e))?
                else {
                    continue;
                };
                for &(doc, i) in &docs {
                    if postings.doc() > doc {
                        continue;
                    }
                    if postings.seek(doc) == doc {
                        counts[i] += 1;
                    }
                }
            }
        }
        Ok(counts)
    }

    /// Every chunk passing `filters` (at most `limit`), in index order.
    ///
    /// # Errors
    /// As [`Snapshot::lexical`].
    pub fn filtered(&self, filters: &Filters, limit: usize) -> Result<Vec<DocAddress>> {
        let mut clauses = self.filter_clauses(filters)?;
        clauses.push((Occur::Must, Box::new(AllQuery)));
        let q = BooleanQuery::new(clauses);
        let docs = self
            .searcher
            .search(&q, &DocSetCollector)
            .map_err(|e| KbError::index(PathBuf::new(), e))?;
        let mut v: Vec<DocAddress> = docs.into_iter().collect();
        v.sort();
        v.truncate(limit);
        Ok(v)
    }

    /// The chunk at `addr`.
    ///
    /// # Errors
    /// [`KbError::Index`] when it cannot be read.
    pub fn chunk(&self, addr: DocAddress) -> Result<ChunkRecord> {
        let doc: TantivyDocument = self
            .searcher
            .doc(addr)
            .map_err(|e| KbError::index(PathBuf::new(), e))?;
        let f = self.fields;
        let heading = first_str(&doc, f.heading).unwrap_or_default();
        Ok(ChunkRecord {
            chunk_id: first_str(&doc, f.chunk_id).unwrap_or_default(),
            path: first_str(&doc, f.path).unwrap_or_default(),
            ext: first_str(&doc, f.ext).unwrap_or_default(),
            content_type: first_str(&doc, f.content_type).unwrap_or_default(),
            heading_path: if heading.is_empty() {
                Vec::new()
            } else {
                heading.split(HEADING_SEP).map(str::to_string).collect()
            },
            chunk_index: doc
                .get_first(f.chunk_index)
                .and_then(|v| v.as_u64())
                .unwrap_or(0),
            text: first_str(&doc, f.text).unwrap_or_default(),
            content_hash: first_str(&doc, f.content_hash).unwrap_or_default(),
            mtime: doc.get_first(f.mtime).and_then(|v| v.as_i64()).unwrap_or(0),
        })
    }

    /// The address of the chunk with id `chunk_id`, if it is current.
    ///
    /// # Errors
    /// [`KbError::Index`] when tantivy fails.
    pub fn find_chunk(&self, chunk_id: &str) -> Result<Option<DocAddress>> {
        let q = TermQuery::new(
            Term::from_field_text(self.fields.chunk_id, chunk_id),
            IndexRecordOption::Basic,
        );
        let top = self
            .searcher
            .search(&q, &TopDocs::with_limit(1))
            .map_err(|e| KbError::index(PathBuf::new(), e))?;
        Ok(top.first().map(|(_, a)| *a))
    }
}

/// Escape regex metacharacters (tantivy's regex syntax).
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~\"<>@".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
