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
    ///
    /// The text is first cut into blocks of about [`BLOCK_BYTES`] at paragraph boundaries
    /// outside code fences, and each block is split on its own: the splitter's cost grows
    /// faster than linearly with the length of its input, and no chunk spans a block boundary
    /// anyway.
    pub fn chunk(&self, doc: &Extracted) -> Vec<ChunkDraft> {
        let mut pieces: Vec<(usize, &str)> = Vec::new();
        for (start, block) in blocks(&doc.text, BLOCK_BYTES) {
            let inner: Vec<(usize, &str)> = if doc.markdown {
                self.markdown.chunk_indices(block).collect()
            } else {
                self.plain.chunk_indices(block).collect()
            };
            pieces.extend(inner.into_iter().map(|(o, t)| (start + o, t)));
        }
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

/// Target size of the blocks a text is cut into before splitting.
pub const BLOCK_BYTES: usize = 16 * 1024;

/// Cut `text` into `(offset, block)` pieces of at least `max` bytes where possible, each
/// ending at a blank line that is not inside a fenced code block.
pub fn blocks(text: &str, max: usize) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_fence = false;
    let mut offset = 0;
    let mut prev_blank = false;
    for line in text.split_inclusive('\n') {
        let line_start = offset;
        offset += line.len();
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        }
        let blank = trimmed.trim().is_empty();
        // Cut before this line when the block is big enough and we are between paragraphs.
        if prev_blank && !blank && !in_fence && line_start - start >= max {
            out.push((start, &text[start..line_start]));
            start = line_start;
        }
        prev_blank = blank && !in_fence;
    }
    if start < text.len() || out.is_empty() {
        out.push((start, &text[start..]));
    }
    out
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
    fn blocks_cut_between_paragraphs_outside_code_fences() {
        let text = "aaaa\n\nbbbb\n\n```\ncode\n\nmore\n```\n\ncccc\n";
        let b = blocks(text, 3);
        let joined: String = b.iter().map(|(_, t)| *t).collect();
        assert_eq!(joined, text);
        for (o, t) in &b {
            assert_eq!(&text[*o..*o + t.len()], *t);
        }
        assert!(
            b.iter().any(|(_, t)| t.contains("```\ncode\n\nmore\n```")),
            "{b:?}"
        );
        assert_eq!(blocks("short", 100), [(0, "short")]);
    }

    #[test]
    fn long_texts_chunk_in_linear_time_with_continuous_offsets() {
        let para = "Some words in a sentence that goes on. Another sentence follows here.\n\n";
        let text = format!("# Top\n\n{}", para.repeat(3000));
        let doc = extract(ContentType::Markdown, text.as_bytes()).unwrap();
        let chunks = Chunker::new(500, 50).unwrap().chunk(&doc);
        assert!(chunks.len() > 400, "{}", chunks.len());
        assert!(chunks.iter().all(|c| c.heading_path == ["Top"]));
        assert!(chunks.windows(2).all(|w| w[1].index == w[0].index + 1));
    }

    #[test]
    fn bad_sizes_are_config_errors() {
        assert!(Chunker::new(0, 0).is_err());
        assert!(Chunker::new(100, 200).is_err());
    }
}
