//! Structural chunking: headings, paragraphs and code blocks are kept together up to a target
//! size, with overlap between consecutive chunks (the `text-splitter` crate; Markdown-aware
//! for Markdown and extracted HTML).

use text_splitter::{ChunkConfig, MarkdownSplitter, TextSplitter};

use crate::error::{KbError, Result};
use crate::extract::{Extracted, heading_path_at};

/// One chunk of a file, before it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkDraft {
    /// 0-based position in the file.
    pub index: usize,
    /// The chunk's text.
    pub text: String,
    /// The headings in force at its start, outermost first.
    pub heading_path: Vec<String>,
}

/// Splits text into chunks of a target size (characters) with overlap.
#[derive(Debug)]
pub struct Chunker {
    markdown: MarkdownSplitter<text_splitter::Characters>,
    plain: TextSplitter<text_splitter::Characters>,
}

impl Chunker {
    /// A chunker for chunks of about `size` characters sharing `overlap` characters.
    ///
    /// # Errors
    /// [`KbError::Config`] when `size` is 0 or `overlap` is not smaller than `size`.
    pub fn new(size: usize, overlap: usize) -> Result<Self> {
        if size == 0 {
            return Err(KbError::Config {
                key: "kb.chunk_size".into(),
                message: "must be at least 1".into(),
            });
        }
        let config = || {
            ChunkConfig::new(size)
                .with_overlap(overlap)
                .map_err(|e| KbError::Config {
                    key: "kb.chunk_overlap".into(),
                    message: format!("{e} (it must be smaller than kb.chunk_size)"),
                })
        };
        Ok(Chunker {
            markdown: MarkdownSplitter::new(config()?),
            plain: TextSplitter::new(config()?),
        })
    }

    /// The chunks of an extracted file, in order.
    pub fn chunk(&self, doc: &Extracted) -> Vec<ChunkDraft> {
        let pieces: Vec<(usize, &str)> = if doc.markdown {
            self.markdown.chunk_indices(&doc.text).collect()
        } else {
            self.plain.chunk_indices(&doc.text).collect()
        };
        pieces
            .into_iter()
            .filter(|(_, t)| !t.trim().is_empty())
            .enumerate()
            .map(|(index, (offset, text))| ChunkDraft {
                index,
                text: text.to_string(),
                heading_path: heading_path_at(&doc.headings, offset),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::{ContentType, extract};

    #[test]
    fn chunks_respect_size_keep_headings_and_overlap() {
        let mut md = String::from("# Guide\n\n");
        for i in 0..30 {
            md.push_str(&format!(
                "Paragraph {i} talks about topic number {i} in some detail here.\n\n"
            ));
            if i == 15 {
                md.push_str("## Second part\n\n");
            }
        }
        let doc = extract(ContentType::Markdown, md.as_bytes()).unwrap();
        let chunker = Chunker::new(300, 60).unwrap();
        let chunks = chunker.chunk(&doc);
        assert!(chunks.len() > 5, "{}", chunks.len());
        for (i, c) in chunks.iter().enumerate() {
            assert_eq!(c.index, i);
            assert!(c.text.chars().count() <= 300, "{}", c.text.len());
            assert_eq!(c.heading_path.first().map(String::as_str), Some("Guide"));
        }
        assert!(
            chunks
                .iter()
                .any(|c| c.heading_path == ["Guide", "Second part"])
        );
        // Overlap: some text at the end of a chunk reappears at the start of the next.
        let overlapping = chunks.windows(2).any(|w| {
            let tail: String = w[0]
                .text
                .chars()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            w[1].text.contains(tail.trim())
        });
        assert!(overlapping);
    }

    #[test]
    fn bad_sizes_are_config_errors() {
        assert!(Chunker::new(0, 0).is_err());
        assert!(Chunker::new(100, 200).is_err());
    }
}
