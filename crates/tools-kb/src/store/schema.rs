//! The tantivy schema: one document kind per chunk and one per file, in the same index.

use tantivy::TantivyDocument;
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing,
    TextOptions, Value,
};

use super::analyzer::ANALYZER;

/// The schema's fields.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fields {
    pub(super) kind: Field,
    pub(super) chunk_id: Field,
    pub(super) path: Field,
    pub(super) path_lc: Field,
    pub(super) ext: Field,
    pub(super) content_type: Field,
    pub(super) heading: Field,
    pub(super) body: Field,
    pub(super) text: Field,
    pub(super) chunk_index: Field,
    pub(super) content_hash: Field,
    pub(super) file_hash: Field,
    pub(super) mtime: Field,
    pub(super) size: Field,
    pub(super) chunks: Field,
    pub(super) vector: Field,
}

pub(super) fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let body_opts = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        kind: b.add_text_field("kind", STRING),
        chunk_id: b.add_text_field("chunk_id", STRING | STORED),
        path: b.add_text_field("path", STRING | STORED),
        path_lc: b.add_text_field("path_lc", STRING),
        ext: b.add_text_field("ext", STRING | STORED),
        content_type: b.add_text_field("content_type", STRING | STORED),
        heading: b.add_text_field("heading", STORED),
        body: b.add_text_field("body", body_opts),
        text: b.add_text_field("text", STORED),
        chunk_index: b.add_u64_field("chunk_index", STORED | FAST),
        content_hash: b.add_text_field("content_hash", STORED),
        file_hash: b.add_text_field("file_hash", STORED),
        mtime: b.add_i64_field("mtime", STORED | INDEXED),
        size: b.add_u64_field("size", STORED),
        chunks: b.add_u64_field("chunks", STORED),
        vector: b.add_bytes_field("vector", STORED),
    };
    (b.build(), fields)
}

pub(super) fn first_str(doc: &TantivyDocument, field: Field) -> Option<String> {
    doc.get_first(field)
        .and_then(|v| v.as_str())
        .map(str::to_string)
}
