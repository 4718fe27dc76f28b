//! What a file is, and its text: Markdown, plain text, reStructuredText, HTML (text
//! extracted), PDF (text extracted) and source code, with the headings found in it.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The kind of content a file holds, from its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentType {
    /// `.md`, `.markdown`, `.mdx`.
    Markdown,
    /// `.txt`, `.text`.
    Text,
    /// `.rst`.
    Rst,
    /// `.html`, `.htm`, `.xhtml` (text extracted).
    Html,
    /// `.pdf` (text extracted).
    Pdf,
    /// Source code and configuration files.
    Code,
}

impl ContentType {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentType::Markdown => "markdown",
            ContentType::Text => "text",
            ContentType::Rst => "rst",
            ContentType::Html => "html",
            ContentType::Pdf => "pdf",
            ContentType::Code => "code",
        }
    }

    /// The content type of a file with extension `ext` (lower case, no dot), or `None` when
    /// ingest does not read such files.
    pub fn for_extension(ext: &str) -> Option<Self> {
        Some(match ext {
            "md" | "markdown" | "mdx" => ContentType::Markdown,
            "txt" | "text" => ContentType::Text,
            "rst" => ContentType::Rst,
            "html" | "htm" | "xhtml" => ContentType::Html,
            "pdf" => ContentType::Pdf,
            e if CODE_EXTENSIONS.contains(&e) => ContentType::Code,
            _ => return None,
        })
    }
}

/// Extensions read as source code.
pub const CODE_EXTENSIONS: &[&str] = &[
    "rs", "py", "pyi", "js", "mjs", "cjs", "ts", "tsx", "jsx", "go", "java", "kt", "kts", "scala",
    "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "cs", "rb", "php", "swift", "m", "mm", "sh", "bash",
    "zsh", "fish", "ps1", "lua", "pl", "pm", "r", "jl", "hs", "ml", "mli", "fs", "ex", "exs",
    "erl", "clj", "el", "vim", "dart", "zig", "nim", "sql", "proto", "toml", "yaml", "yml", "json",
    "ini", "cfg", "css", "scss", "xml", "tex", "cmake", "gradle",
];

/// The lower-case extension of `path` (empty when it has none).
pub fn extension_of(path: &Path) -> String {
    path.extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

/// A heading found in the extracted text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    /// Byte offset of the heading in the text.
    pub offset: usize,
    /// Nesting level (1 = top).
    pub level: usize,
    /// The heading's text.
    pub title: String,
}

/// A file's text and structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// The text.
    pub text: String,
    /// What it was.
    pub content_type: ContentType,
    /// Headings, in order of offset.
    pub headings: Vec<Heading>,
    /// Whether the text is Markdown (chunked with the Markdown-aware splitter).
    pub markdown: bool,
}

/// Extract the text of a file of `content_type` from its bytes.
///
/// Why a file's text could not be extracted: the reason the ingest report gives. The file
/// is skipped; convert it to a supported text format to index it.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// The content holds NUL bytes: a binary file, not text.
    #[error("binary file (contains NUL bytes)")]
    Binary,
    /// More than 1% of the content is invalid UTF-8. Re-encode the file as UTF-8.
    #[error("not UTF-8 text (more than 1% of it is invalid)")]
    NotUtf8,
    /// The HTML could not be turned into text.
    #[error("cannot extract text from HTML: {0}")]
    Html(html2text::Error),
    /// The file does not start with `%PDF`: not a PDF despite its extension.
    #[error("not a PDF file (no %PDF header)")]
    NotPdf,
    /// The PDF parser failed on the file (it panicked).
    #[error("broken PDF (the PDF parser failed on it)")]
    BrokenPdf,
    /// The PDF parser refused the file.
    #[error("cannot extract text from PDF: {0}")]
    Pdf(pdf_extract::OutputError),
    /// The PDF holds no text layer (scanned images, perhaps). Run OCR on it first.
    #[error("PDF has no extractable text (scanned images?)")]
    NoPdfText,
}

/// # Errors
/// An [`ExtractError`], for the ingest report, when the file is binary, not valid text, or a
/// document that cannot be parsed.
pub fn extract(content_type: ContentType, bytes: &[u8]) -> Result<Extracted, ExtractError> {
    match content_type {
        ContentType::Pdf => extract_pdf(bytes),
        ContentType::Html => {
            let html = decode_text(bytes)?;
            let text = html_to_text(&html)?;
            Ok(Extracted {
                headings: markdown_headings(&text),
                text,
                content_type,
                markdown: true,
            })
        }
        ContentType::Markdown => {
            let text = decode_text(bytes)?;
            Ok(Extracted {
                headings: markdown_headings(&text),
                text,
                content_type,
                markdown: true,
            })
        }
        ContentType::Rst => {
            let text = decode_text(bytes)?;
            Ok(Extracted {
                headings: rst_headings(&text),
                text,
                content_type,
                markdown: false,
            })
        }
        ContentType::Text => {
            let text = decode_text(bytes)?;
            Ok(Extracted {
                headings: Vec::new(),
                text,
                content_type,
                markdown: false,
            })
        }
        ContentType::Code => {
            let text = decode_text(bytes)?;
            Ok(Extracted {
                headings: code_headings(&text),
                text,
                content_type,
                markdown: false,
            })
        }
    }
}

/// Bytes as UTF-8 text; binary content (a NUL byte) and mostly-invalid UTF-8 are refused.
fn decode_text(bytes: &[u8]) -> Result<String, ExtractError> {
    let probe = &bytes[..bytes.len().min(8192)];
    if probe.contains(&0) {
        return Err(ExtractError::Binary);
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(s.to_string()),
        Err(_) => {
            let lossy = String::from_utf8_lossy(bytes);
            let bad = lossy.chars().filter(|c| *c == '\u{FFFD}').count();
            if bad * 100 > lossy.chars().count().max(1) {
                Err(ExtractError::NotUtf8)
            } else {
                Ok(lossy.into_owned())
            }
        }
    }
}

fn html_to_text(html: &str) -> Result<String, ExtractError> {
    html2text::config::plain()
        .link_footnotes(false)
        .string_from_read(html.as_bytes(), 400)
        .map_err(ExtractError::Html)
}

fn extract_pdf(bytes: &[u8]) -> Result<Extracted, ExtractError> {
    if !bytes.starts_with(b"%PDF") {
        return Err(ExtractError::NotPdf);
    }
    // The PDF parser may panic on malformed files: contain it, report the file, go on.
    let owned = bytes.to_vec();
    let pages =
        std::panic::catch_unwind(move || pdf_extract::extract_text_from_mem_by_pages(&owned))
            .map_err(|_| ExtractError::BrokenPdf)?
            .map_err(ExtractError::Pdf)?;
    let mut text = String::new();
    let mut headings = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        if page.trim().is_empty() {
            continue;
        }
        headings.push(Heading {
            offset: text.len(),
            level: 1,
            title: format!("page {}", i + 1),
        });
        text.push_str(page.trim());
        text.push_str("\n\n");
    }
    if text.trim().is_empty() {
        return Err(ExtractError::NoPdfText);
    }
    Ok(Extracted {
        text,
        content_type: ContentType::Pdf,
        headings,
        markdown: false,
    })
}

/// Byte offsets of each line's start, with the line (without its newline).
fn lines_with_offsets(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split_inclusive('\n').map(move |raw| {
        let start = offset;
        offset += raw.len();
        (start, raw.trim_end_matches(['\n', '\r']))
    })
}

/// Markdown headings (ATX `# Title` and setext `Title` over `===` / `---`) as CommonMark
/// reads them (pulldown-cmark): nothing inside code blocks, fences of any length, a setext
/// title over several lines, inline markup reduced to its text, entities decoded. The offset
/// is where the heading's block starts.
pub fn markdown_headings(text: &str) -> Vec<Heading> {
    use pulldown_cmark::{Event, Parser, Tag, TagEnd};
    let mut out = Vec::new();
    // The heading being read: its offset, level and text so far.
    let mut open: Option<(usize, usize, String)> = None;
    for (event, range) in Parser::new(text).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                open = Some((range.start, level as usize, String::new()));
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((offset, level, title)) = open.take() {
                    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
                    if !title.is_empty() {
                        out.push(Heading {
                            offset,
                            level,
                            title,
                        });
                    }
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, _, title)) = open.as_mut() {
                    title.push_str(&t);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some((_, _, title)) = open.as_mut() {
                    title.push(' ');
                }
            }
            _ => {}
        }
    }
    out
}

/// reStructuredText section titles: a line underlined (and optionally overlined) by one
/// repeated punctuation character; levels in order of first appearance of each style.
pub fn rst_headings(text: &str) -> Vec<Heading> {
    const ADORN: &str = "=-~^\"'`#*+_.:";
    let lines: Vec<(usize, &str)> = lines_with_offsets(text).collect();
    let mut styles: Vec<(char, bool)> = Vec::new();
    let mut out = Vec::new();
    let is_adorn = |s: &str| {
        let s = s.trim_end();
        let mut chars = s.chars();
        match chars.next() {
            Some(c) if ADORN.contains(c) && s.len() >= 3 => chars.all(|d| d == c).then_some(c),
            _ => None,
        }
    };
    let mut i = 0;
    while i + 1 < lines.len() {
        let (off, line) = lines[i];
        let title = line.trim();
        if !title.is_empty()
            && is_adorn(line).is_none()
            && let Some(c) = is_adorn(lines[i + 1].1)
            && lines[i + 1].1.trim_end().chars().count() >= title.chars().count()
        {
            let overlined = i > 0 && is_adorn(lines[i - 1].1) == Some(c);
            let style = (c, overlined);
            let level = match styles.iter().position(|s| *s == style) {
                Some(p) => p + 1,
                None => {
                    styles.push(style);
                    styles.len()
                }
            };
            let offset = if overlined { lines[i - 1].0 } else { off };
            out.push(Heading {
                offset,
                level,
                title: title.to_string(),
            });
            i += 2;
            continue;
        }
        i += 1;
    }
    out
}

/// Top-level definitions in source code (a line at column 0 starting with a definition
/// keyword), as level-1 headings, so chunks say which item they are in.
pub fn code_headings(text: &str) -> Vec<Heading> {
    const KEYWORDS: &[&str] = &[
        "fn ",
        "pub fn ",
        "async fn ",
        "pub async fn ",
        "struct ",
        "pub struct ",
        "enum ",
        "pub enum ",
        "trait ",
        "pub trait ",
        "impl ",
        "impl<",
        "mod ",
        "pub mod ",
        "def ",
        "async def ",
        "class ",
        "func ",
        "function ",
        "export function ",
        "export class ",
        "export default ",
        "interface ",
        "export interface ",
        "type ",
        "export type ",
        "public class ",
        "public interface ",
        "module ",
    ];
    lines_with_offsets(text)
        .filter(|(_, line)| KEYWORDS.iter().any(|k| line.starts_with(k)))
        .map(|(offset, line)| {
            let title: String = line
                .trim_end_matches(['{', ':', ' '])
                .chars()
                .take(100)
                .collect();
            Heading {
                offset,
                level: 1,
                title,
            }
        })
        .collect()
}

/// The heading path (outermost first) in force at byte `offset`.
pub fn heading_path_at(headings: &[Heading], offset: usize) -> Vec<String> {
    let mut stack: Vec<&Heading> = Vec::new();
    for h in headings {
        if h.offset > offset {
            break;
        }
        while stack.last().is_some_and(|top| top.level >= h.level) {
            stack.pop();
        }
        stack.push(h);
    }
    stack.iter().map(|h| h.title.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_headings_skip_code_fences_and_read_setext() {
        let text =
            "# Top\n\nintro\n\n## Sub\n\n```\n# not a heading\n```\n\nSetext\n======\n\nbody\n";
        let h = markdown_headings(text);
        let titles: Vec<(&str, usize)> = h.iter().map(|h| (h.title.as_str(), h.level)).collect();
        assert_eq!(titles, [("Top", 1), ("Sub", 2), ("Setext", 1)]);
        assert_eq!(heading_path_at(&h, text.find("intro").unwrap()), ["Top"]);
        let in_sub = text.find("not a").unwrap();
        assert_eq!(heading_path_at(&h, in_sub), ["Top", "Sub"]);
        assert_eq!(heading_path_at(&h, text.find("body").unwrap()), ["Setext"]);
    }

    #[test]
    fn markdown_headings_follow_commonmark() {
        // A four-backtick fence holds a three-backtick line: still inside the fence.
        let text = "# One\n\n````\n```\n# not a heading\n```\n````\n\nMulti\nline\n===\n\n\
                    ## See [the *guide*](http://x) &amp; `code`\n\n    # indented code\n";
        let h = markdown_headings(text);
        let titles: Vec<(&str, usize)> = h.iter().map(|h| (h.title.as_str(), h.level)).collect();
        assert_eq!(
            titles,
            [("One", 1), ("Multi line", 1), ("See the guide & code", 2)]
        );
        // A setext heading starts where its first line does.
        assert_eq!(h[1].offset, text.find("Multi").unwrap());
    }

    #[test]
    fn rst_titles_get_levels_by_style() {
        let text = "=====\nTitle\n=====\n\nSection\n-------\n\ntext\n\nOther\n-----\n";
        let h = rst_headings(text);
        let titles: Vec<(&str, usize)> = h.iter().map(|h| (h.title.as_str(), h.level)).collect();
        assert_eq!(titles, [("Title", 1), ("Section", 2), ("Other", 2)]);
    }

    #[test]
    fn html_text_is_extracted_with_headings() {
        let html = b"<html><head><title>x</title><script>var a=1;</script></head><body><h1>Guide</h1><p>Hello <b>world</b>.</p><h2>Part</h2><p>More.</p></body></html>";
        let e = extract(ContentType::Html, html).unwrap();
        assert!(e.text.contains("Hello"), "{}", e.text);
        assert!(!e.text.contains("var a"), "{}", e.text);
        let titles: Vec<&str> = e.headings.iter().map(|h| h.title.as_str()).collect();
        assert_eq!(titles, ["Guide", "Part"]);
    }

    #[test]
    fn binary_and_broken_files_are_refused_with_a_reason() {
        assert!(
            extract(ContentType::Text, b"abc\0def")
                .unwrap_err()
                .to_string()
                .contains("binary")
        );
        assert!(
            extract(ContentType::Pdf, b"not a pdf")
                .unwrap_err()
                .to_string()
                .contains("PDF")
        );
        let broken = extract(ContentType::Pdf, b"%PDF-1.4\n garbage garbage").unwrap_err();
        assert!(broken.to_string().contains("PDF"), "{broken}");
        assert!(extract(ContentType::Text, &[0xff, 0xfe, 0xfd, 0x41]).is_err());
    }

    #[test]
    fn code_headings_name_top_level_items() {
        let text = "use x;\n\npub fn alpha() {\n}\n\nstruct Beta {\n}\n";
        let titles: Vec<String> = code_headings(text).into_iter().map(|h| h.title).collect();
        assert_eq!(titles, ["pub fn alpha()", "struct Beta"]);
    }

    #[test]
    fn extensions_map_to_content_types() {
        assert_eq!(
            ContentType::for_extension("md"),
            Some(ContentType::Markdown)
        );
        assert_eq!(ContentType::for_extension("rs"), Some(ContentType::Code));
        assert_eq!(ContentType::for_extension("png"), None);
        assert_eq!(extension_of(Path::new("a/B.TXT")), "txt");
    }
}
