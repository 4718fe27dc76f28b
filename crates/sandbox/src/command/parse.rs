//! Splitting a command line into words and `<` / `>` / `>>` redirections.
//!
//! Words are split by `shlex` (POSIX quoting). Before that, the unquoted redirection
//! operators are found with the same quoting rules, so `grep '<div>' f` keeps `<div>` as an
//! argument while `sort <in.txt >out.txt` redirects.

/// A command line split into words and redirections.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Parsed {
    pub(super) words: Vec<String>,
    pub(super) stdin: Option<String>,
    /// Target and whether it appends.
    pub(super) stdout: Option<(String, bool)>,
}

/// Why a command line cannot be split. The message says what to change in the line.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParseError {
    /// A redirection operator with nothing after it. Name the file.
    #[error("redirection '{symbol}' has no target file")]
    NoTarget {
        /// `<`, `>` or `>>`.
        symbol: &'static str,
    },
    /// Two `<`. Keep one.
    #[error("more than one input redirection '<'")]
    SecondInput,
    /// Two of `>` / `>>`. Keep one.
    #[error("more than one output redirection '>'")]
    SecondOutput,
    /// A quote is not closed, or the line ends with a backslash. Balance the quoting.
    #[error("unbalanced quotes or a trailing backslash in the command line")]
    Unbalanced,
    /// `<<`, which needs a shell. Redirect from a file instead.
    #[error("'<<' (here-documents) is not supported")]
    HereDocument,
    /// `<>`. Use `<` or `>`.
    #[error("'<>' (read-write redirection) is not supported")]
    ReadWrite,
    /// `2>` and the like. Only the plain `<`, `>` and `>>` are understood.
    #[error(
        "'{redirection}' (redirecting a file descriptor) is not supported; only '<', '>' and '>>' are"
    )]
    Descriptor {
        /// The descriptor number and operator as written (`2>`).
        redirection: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    In,
    Out,
    Append,
}

/// A redirection operator and the text after it (up to the next operator).
type Piece<'a> = (Op, &'a str);

/// Split `line` at unquoted redirection operators, then each piece into words with `shlex`.
/// The first word after an operator is its target; later words are more arguments, as in a
/// shell (`echo a > f b` writes "a b" to f).
pub(super) fn parse(line: &str) -> Result<Parsed, ParseError> {
    let (head, ops) = split_redirections(line)?;
    let mut parsed = Parsed {
        words: split_words(head)?,
        ..Parsed::default()
    };
    for (op, piece) in ops {
        let mut words = split_words(piece)?.into_iter();
        let symbol = match op {
            Op::In => "<",
            Op::Out => ">",
            Op::Append => ">>",
        };
        let target = words.next().ok_or(ParseError::NoTarget { symbol })?;
        match op {
            Op::In if parsed.stdin.is_some() => {
                return Err(ParseError::SecondInput);
            }
            Op::In => parsed.stdin = Some(target),
            Op::Out | Op::Append if parsed.stdout.is_some() => {
                return Err(ParseError::SecondOutput);
            }
            Op::Out | Op::Append => parsed.stdout = Some((target, op == Op::Append)),
        }
        parsed.words.extend(words);
    }
    Ok(parsed)
}

fn split_words(piece: &str) -> Result<Vec<String>, ParseError> {
    shlex::split(piece).ok_or(ParseError::Unbalanced)
}

/// Find the unquoted `<`, `>`, `>>` with the same quoting rules `shlex` applies (single
/// quotes literal, backslash escapes outside them, `#` at a word start begins a comment).
/// Returns the text before the first operator and each operator with the text after it.
fn split_redirections(line: &str) -> Result<(&str, Vec<Piece<'_>>), ParseError> {
    #[derive(PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let bytes = line.as_bytes();
    let mut quote = Quote::None;
    let mut ops: Vec<(usize, usize, Op)> = Vec::new(); // (start, end, op)
    let mut end_of_line = bytes.len();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let word_start = i == 0 || matches!(bytes[i - 1], b' ' | b'\t');
        match quote {
            Quote::Single => {
                if b == b'\'' {
                    quote = Quote::None;
                }
            }
            Quote::Double => match b {
                b'\\' => i += 1,
                b'"' => quote = Quote::None,
                _ => {}
            },
            Quote::None => match b {
                b'\\' => i += 1,
                b'\'' => quote = Quote::Single,
                b'"' => quote = Quote::Double,
                b'#' if word_start => {
                    end_of_line = i; // a comment: the rest is ignored, as by shlex
                    break;
                }
                b'<' | b'>' => {
                    let next = bytes.get(i + 1).copied();
                    let (op, len) = match (b, next) {
                        (b'>', Some(b'>')) => (Op::Append, 2),
                        (b'>', _) => (Op::Out, 1),
                        (b'<', Some(b'<')) => {
                            return Err(ParseError::HereDocument);
                        }
                        (b'<', Some(b'>')) => {
                            return Err(ParseError::ReadWrite);
                        }
                        _ => (Op::In, 1),
                    };
                    // `2>` / `1>`: a word of digits right before the operator is a file
                    // descriptor number.
                    let before = &line[..i];
                    let word_before = before.rsplit([' ', '\t']).next().unwrap_or_default();
                    if !word_before.is_empty() && word_before.bytes().all(|c| c.is_ascii_digit()) {
                        return Err(ParseError::Descriptor {
                            redirection: format!(
                                "{word_before}{}",
                                if op == Op::Append {
                                    ">>"
                                } else {
                                    &line[i..i + 1]
                                }
                            ),
                        });
                    }
                    ops.push((i, i + len, op));
                    i += len;
                    continue;
                }
                _ => {}
            },
        }
        i += 1;
    }
    let Some(&(first_start, _, _)) = ops.first() else {
        return Ok((&line[..end_of_line], Vec::new()));
    };
    let mut pieces = Vec::with_capacity(ops.len());
    for (n, &(_, end, op)) in ops.iter().enumerate() {
        let piece_end = ops.get(n + 1).map_or(end_of_line, |&(start, _, _)| start);
        pieces.push((op, &line[end..piece_end]));
    }
    Ok((&line[..first_start], pieces))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn splits_words_and_redirections() {
        let p = parse("sort -r <in.txt >>'out file.txt' extra").unwrap();
        assert_eq!(p.words, words(&["sort", "-r", "extra"]));
        assert_eq!(p.stdin.as_deref(), Some("in.txt"));
        assert_eq!(p.stdout, Some(("out file.txt".to_string(), true)));
    }

    #[test]
    fn quoted_and_escaped_operators_are_text() {
        let p = parse(r#"echo '>' "<" \> a\<b"#).unwrap();
        assert_eq!(p.words, words(&["echo", ">", "<", ">", "a<b"]));
        assert_eq!(p.stdin, None);
        assert_eq!(p.stdout, None);
    }

    #[test]
    fn digits_glued_to_a_word_are_not_a_descriptor() {
        let p = parse("echo a2>out.txt").unwrap();
        assert_eq!(p.words, words(&["echo", "a2"]));
        assert_eq!(p.stdout, Some(("out.txt".to_string(), false)));
        assert!(parse("echo 2>out.txt").is_err());
    }
}
