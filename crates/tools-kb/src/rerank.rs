//! LLM re-ranking: ask the configured model to order passages by how well they answer a
//! question. Used by the pipeline's `llm_rerank` profile and by the retrieval evaluation, so
//! both measure the same thing.

use lsm_providers::{CallOptions, LlmRequest, Message, Provider, ProviderError};

use crate::text::truncate_chars;

/// Characters of each passage shown to the model.
const PASSAGE_CHARS: usize = 400;

/// One passage to rank.
#[derive(Debug, Clone, Copy)]
pub struct Passage<'a> {
    /// Its heading path, shown above the text (may be empty).
    pub heading: &'a str,
    /// Its text (cut to a few hundred characters for the prompt).
    pub text: &'a str,
}

/// Why the model's ranking could not be had.
#[derive(Debug, thiserror::Error)]
pub enum RerankError {
    /// The call failed (or the run's budget refused it).
    #[error("the LLM failed ({0})")]
    Llm(ProviderError),
    /// The answer held no passage number.
    #[error("the LLM's ranking could not be read")]
    Unreadable,
}

/// The order the model gives `passages` for `query`: a permutation of `0..passages.len()`,
/// the passages it ranked first (most relevant first), then the ones it left out in their
/// original order. Also returns how many it ranked.
///
/// # Errors
/// [`RerankError`] when the model fails or its answer holds no passage number.
pub async fn rerank_order(
    provider: &dyn Provider,
    query: &str,
    passages: &[Passage<'_>],
) -> Result<(Vec<usize>, usize), RerankError> {
    if passages.len() < 2 {
        return Ok(((0..passages.len()).collect(), passages.len()));
    }
    let mut listing = String::new();
    for (i, p) in passages.iter().enumerate() {
        listing.push_str(&format!(
            "[{}] {}\n{}\n\n",
            i + 1,
            p.heading,
            truncate_chars(p.text, PASSAGE_CHARS)
        ));
    }
    let request = LlmRequest {
        messages: vec![
            Message::system(
                "You rank passages by how well they answer a question. Reply with only a \
                 JSON array of passage numbers, most relevant first, e.g. [3, 1, 2].",
            )
            .into(),
            Message::user(format!("Question: {query}\n\nPassages:\n{listing}")).into(),
        ],
        tools: Vec::new(),
        options: CallOptions {
            max_output_tokens: Some(200),
            ..Default::default()
        },
    };
    let text = provider
        .complete(&request)
        .await
        .map_err(RerankError::Llm)?
        .text;
    let order = parse_order(&text, passages.len());
    if order.is_empty() {
        return Err(RerankError::Unreadable);
    }
    let ranked = order.len();
    let mut full = order;
    for i in 0..passages.len() {
        if !full.contains(&i) {
            full.push(i);
        }
    }
    Ok((full, ranked))
}

/// The distinct passage numbers (1-based in the text, 0-based out) in `text`, from its first
/// `[` on, in order; numbers out of range are ignored.
fn parse_order(text: &str, n: usize) -> Vec<usize> {
    let start = text.find('[').unwrap_or(0);
    let mut order: Vec<usize> = Vec::new();
    for part in text[start..].split(|c: char| !c.is_ascii_digit()) {
        if let Ok(k) = part.parse::<usize>()
            && (1..=n).contains(&k)
            && !order.contains(&(k - 1))
        {
            order.push(k - 1);
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_are_read_from_the_first_bracket_without_repeats_or_strays() {
        assert_eq!(parse_order("[3, 1, 2]", 3), [2, 0, 1]);
        assert_eq!(parse_order("Top 5: [2, 2, 9, 1]", 3), [1, 0]);
        assert!(parse_order("no idea", 3).is_empty());
    }

    #[tokio::test]
    async fn the_models_order_comes_first_then_the_rest_in_place() {
        let provider =
            lsm_providers::ScriptedProvider::new(vec![lsm_providers::ScriptedResponse::text(
                "[3]",
            )]);
        let p = |t| Passage {
            heading: "",
            text: t,
        };
        let (order, ranked) = rerank_order(&provider, "q", &[p("a"), p("b"), p("c")])
            .await
            .unwrap();
        assert_eq!((order, ranked), (vec![2, 0, 1], 1));
        let empty =
            lsm_providers::ScriptedProvider::new(vec![lsm_providers::ScriptedResponse::text(
                "none of them",
            )]);
        assert!(rerank_order(&empty, "q", &[p("a"), p("b")]).await.is_err());
    }
}
