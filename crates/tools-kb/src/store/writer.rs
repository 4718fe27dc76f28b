//! [`StoreWriter`]: adds and deletes documents; a commit makes a batch visible at once.

use tantivy::{IndexWriter, TantivyDocument, Term};

use super::Store;
use super::records::{FileRecord, HEADING_SEP, chunk_id, sha256_hex};
use crate::chunk::ChunkDraft;
use crate::error::{KbError, Result};

/// Adds and deletes documents; nothing is visible until [`StoreWriter::commit`].
pub struct StoreWriter<'a> {
    pub(super) store: &'a Store,
    pub(super) writer: IndexWriter,
}

impl std::fmt::Debug for StoreWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreWriter").finish_non_exhaustive()
    }
}

impl StoreWriter<'_> {
    /// Delete every chunk and the record of the file at `path`.
    pub fn delete_path(&mut self, path: &str) {
        self.writer
            .delete_term(Term::from_field_text(self.store.fields.path, path));
    }

    /// Add a file's chunks (with their vectors, when the index has an embedder) and its record.
    ///
    /// # Errors
    /// [`KbError::Index`] when a vector has the wrong dimensions or tantivy refuses a document.
    pub fn add_file(
        &mut self,
        record: &FileRecord,
        chunks: &[ChunkDraft],
        vectors: Option<&[Vec<f32>]>,
    ) -> Result<()> {
        let f = self.store.fields;
        let dims = self.store.manifest.embedder.as_ref().map(|e| e.dims);
        let path_lc = record.path.to_lowercase();
        for (i, chunk) in chunks.iter().enumerate() {
            let content_hash = sha256_hex(chunk.text.as_bytes());
            let id = chunk_id(&record.path, chunk.index, &content_hash);
            let heading = chunk.heading_path.join(HEADING_SEP);
            let mut doc = TantivyDocument::new();
            doc.add_text(f.kind, "chunk");
            doc.add_text(f.chunk_id, &id);
            doc.add_text(f.path, &record.path);
            doc.add_text(f.path_lc, &path_lc);
            doc.add_text(f.ext, &record.ext);
            doc.add_text(f.content_type, &record.content_type);
            doc.add_text(f.heading, &heading);
            doc.add_text(f.body, format!("{heading}\n\n{}", chunk.text));
            doc.add_text(f.text, &chunk.text);
            doc.add_u64(f.chunk_index, chunk.index as u64);
            doc.add_text(f.content_hash, &content_hash);
            doc.add_i64(f.mtime, record.mtime);
            if let (Some(dims), Some(vectors)) = (dims, vectors) {
                let v = vectors
                    .get(i)
                    .ok_or_else(|| KbError::index(&self.store.dir, "fewer vectors than chunks"))?;
                if v.len() != dims {
                    return Err(KbError::index(
                        &self.store.dir,
                        format!("a vector has {} dimensions, the index {dims}", v.len()),
                    ));
                }
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                doc.add_bytes(f.vector, &bytes);
            }
            self.writer
                .add_document(doc)
                .map_err(|e| KbError::index(&self.store.dir, e))?;
        }
        let mut doc = TantivyDocument::new();
        doc.add_text(f.kind, "file");
        doc.add_text(f.path, &record.path);
        doc.add_text(f.path_lc, &path_lc);
        doc.add_text(f.ext, &record.ext);
        doc.add_text(f.content_type, &record.content_type);
        doc.add_text(f.file_hash, &record.file_hash);
        doc.add_i64(f.mtime, record.mtime);
        doc.add_u64(f.size, record.size);
        doc.add_u64(f.chunks, chunks.len() as u64);
        self.writer
            .add_document(doc)
            .map_err(|e| KbError::index(&self.store.dir, e))?;
        Ok(())
    }

    /// Make everything added and deleted so far visible, atomically, and reload the reader.
    ///
    /// # Errors
    /// [`KbError::Index`] when the commit fails (nothing of this batch is then visible).
    pub fn commit(&mut self) -> Result<()> {
        self.writer
            .commit()
            .map_err(|e| KbError::index(&self.store.dir, e))?;
        self.store.reload()
    }
}
