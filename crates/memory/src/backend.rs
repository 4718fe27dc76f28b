//! [`MemoryBackend`]: the operations on memories every store offers, whatever keeps them
//! (SQLite files here, PostgreSQL in `lsm-store-pg`), and the rules every store shares: what
//! a memory may hold, how a stored fact is refreshed, which words a search matches.
//!
//! The tools, the standing-context provider and the command line see a store only through
//! this trait, so a store that keeps the rules (checked by the shared tests of the `testing`
//! module) can replace another without them noticing.

use chrono::{DateTime, Utc};

use crate::model::{check_agent_name, check_text, normalize_tags};
use crate::standing::{StandingOptions, format_block};
use crate::{Hit, ListFilter, Memory, MemoryError, NewMemory, PutOutcome, Reach, SearchQuery};
use crate::{Scope, Status};

/// Most words of a query used for full-text matching.
const MAX_QUERY_TERMS: usize = 32;

/// A store of memories. Every method blocks (a file or a server answers it); async callers
/// run them on the blocking pool, as the tools do.
///
/// The rules every implementation keeps: expired memories are never returned and are deleted
/// by the next write; candidates are never found by a search that does not ask for them;
/// an agent's [`Reach`] covers its own agent-scope memories, the project's and the global
/// ones, never another agent's; text, tags and agent names are checked and normalized by
/// [`NewMemory::checked`] and [`Reach::check`]; storing a fact again refreshes it
/// ([`refresh`]); searches match the words of [`SearchQuery::matching`], scopes in the order
/// agent → project → global, best match first within a scope.
pub trait MemoryBackend: Send + Sync + std::fmt::Debug {
    /// "Now", by the store's clock (creation times, expiry).
    fn now(&self) -> DateTime<Utc>;

    /// Store a memory (or refresh the identical one already stored by that agent in that
    /// scope; see [`PutOutcome`]). Prunes expired memories first.
    ///
    /// # Errors
    /// Empty or oversize text, bad tags or agent name, a scope the store cannot keep, or the
    /// store failing.
    fn put(&self, new: NewMemory) -> Result<PutOutcome, MemoryError>;

    /// The memory `id`, if `reach` covers it and it has not expired.
    ///
    /// # Errors
    /// A bad agent name in `reach`, or the store failing.
    fn get(&self, reach: &Reach, id: &str) -> Result<Option<Memory>, MemoryError>;

    /// Approve the candidate `id`. Returns the memory and whether it changed (`false`: it
    /// was already approved).
    ///
    /// # Errors
    /// [`MemoryError::NotFound`] when `reach` has no such (unexpired) memory; the store
    /// failing.
    fn approve(&self, reach: &Reach, id: &str) -> Result<(Memory, bool), MemoryError>;

    /// Remove `id`. Returns what was removed.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`] when `reach` has no such (unexpired) memory; the store
    /// failing.
    fn remove(&self, reach: &Reach, id: &str) -> Result<Memory, MemoryError>;

    /// Search: the query's words (stemmed, any of them; common words ignored) ranked by
    /// relevance, scopes in the order agent → project → global, filtered by tags, owner and
    /// status; expired memories never returned. A query without words lists by recency.
    ///
    /// # Errors
    /// Bad tags, a bad agent name, or the store failing.
    fn search(&self, reach: &Reach, query: &SearchQuery) -> Result<Vec<Hit>, MemoryError>;

    /// Delete every expired memory `reach` covers. Returns how many were deleted.
    ///
    /// # Errors
    /// A bad agent name, or the store failing.
    fn prune_expired(&self, reach: &Reach) -> Result<usize, MemoryError>;

    /// The agents that have agent-scope memory in this project, sorted.
    ///
    /// # Errors
    /// The store failing.
    fn agents_with_memory(&self) -> Result<Vec<String>, MemoryError>;

    /// Memories matching `filter`, by scope (agent → project → global), then most recently
    /// updated first. Expired ones are never listed.
    ///
    /// # Errors
    /// A bad agent name, or the store failing.
    fn list(&self, reach: &Reach, filter: &ListFilter) -> Result<Vec<Memory>, MemoryError> {
        let query = SearchQuery {
            text: String::new(),
            tags: Vec::new(),
            scopes: filter.scopes.clone(),
            owner: filter.owner.clone(),
            include_candidates: filter.status != Some(Status::Approved),
            limit: usize::MAX,
        };
        let hits = self.search(reach, &query)?;
        Ok(hits
            .into_iter()
            .map(|h| h.memory)
            .filter(|m| filter.status.is_none_or(|s| m.status == s))
            .collect())
    }

    /// The standing block for `agent` about `topic`: approved, unexpired memories matching
    /// the topic's words, scopes agent → project → global, at most `options.limit` of them
    /// within `options.token_budget` (see [`format_block`]). `None` when nothing matches.
    ///
    /// # Errors
    /// A bad agent name, or the store failing.
    fn standing_context(
        &self,
        agent: &str,
        topic: &str,
        options: StandingOptions,
    ) -> Result<Option<String>, MemoryError> {
        if options.limit == 0 || topic.trim().is_empty() {
            return Ok(None);
        }
        let query = SearchQuery::new(topic, options.limit);
        let hits = self.search(&Reach::Agent(agent.to_string()), &query)?;
        let ranked: Vec<Memory> = hits.into_iter().map(|h| h.memory).collect();
        Ok(format_block(&ranked, options))
    }
}

impl NewMemory {
    /// The memory as every store keeps it: text trimmed, tags normalized, the owner's name
    /// checked.
    ///
    /// # Errors
    /// Empty or oversize text, bad tags, a bad agent name.
    pub fn checked(mut self) -> Result<NewMemory, MemoryError> {
        self.text = check_text(&self.text)?;
        self.tags = normalize_tags(&self.tags)?;
        check_agent_name(&self.owner_agent)?;
        Ok(self)
    }
}

impl Reach {
    /// Check the agent's name (it could name another folder).
    ///
    /// # Errors
    /// [`MemoryError::BadAgentName`].
    pub fn check(&self) -> Result<(), MemoryError> {
        match self {
            Reach::Agent(agent) => check_agent_name(agent),
            Reach::Everyone => Ok(()),
        }
    }
}

/// What a search's text matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matching {
    /// No text: every memory passing the filters, most recently updated first.
    Everything,
    /// Memories holding any of these words (lower case, deduplicated, common words left out,
    /// at most 32), ranked by relevance.
    Words(Vec<String>),
    /// Only common words: nothing can match.
    Nothing,
}

impl SearchQuery {
    /// What the text matches (see [`Matching`]).
    pub fn matching(&self) -> Matching {
        if self.text.trim().is_empty() {
            return Matching::Everything;
        }
        let terms = query_terms(&self.text);
        if terms.is_empty() {
            Matching::Nothing
        } else {
            Matching::Words(terms)
        }
    }
}

/// Words that say nothing about a topic.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have",
    "he", "her", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me",
    "my", "no", "not", "of", "on", "or", "our", "please", "she", "so", "some", "than", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "to", "up", "us", "was",
    "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "would", "you",
    "your",
];

/// The meaningful words of `text`: split at every character that is not a letter or digit,
/// lower-cased, deduplicated, without common words and single letters, at most 32. Every
/// word is letters and digits only, so no store can read it as query syntax.
pub fn query_terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| !w.is_empty())
    {
        if (word.chars().count() < 2 && !word.chars().all(|c| c.is_numeric()))
            || STOPWORDS.contains(&word.as_str())
            || terms.contains(&word)
        {
            continue;
        }
        terms.push(word);
        if terms.len() == MAX_QUERY_TERMS {
            break;
        }
    }
    terms
}

/// A new memory id: `m-` and 16 hex digits.
pub fn new_memory_id() -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    format!("m-{}", &hex[..16])
}

/// A stored fact stored again: what it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refresh {
    /// The old tags, then the new ones it did not have.
    pub tags: Vec<String>,
    /// Approved stays approved; a candidate takes the new status.
    pub status: Status,
    /// Whether this made it approved.
    pub newly_approved: bool,
}

/// How a memory with `old_tags` and `old_status` is refreshed by storing it again with
/// `new_tags` and `new_status`.
pub fn refresh(
    old_tags: Vec<String>,
    old_status: Status,
    new_tags: &[String],
    new_status: Status,
) -> Refresh {
    let mut tags = old_tags;
    for t in new_tags {
        if !tags.contains(t) {
            tags.push(t.clone());
        }
    }
    let was_approved = old_status == Status::Approved;
    let status = if was_approved {
        Status::Approved
    } else {
        new_status
    };
    Refresh {
        tags,
        status,
        newly_approved: !was_approved && status == Status::Approved,
    }
}

/// The scopes a search or listing covers (`scopes`, or all when empty), in search order.
pub fn scopes_wanted(scopes: &[Scope]) -> Vec<Scope> {
    Scope::ALL
        .into_iter()
        .filter(|s| scopes.is_empty() || scopes.contains(s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_terms_drop_common_words_and_syntax() {
        assert_eq!(
            query_terms("What is my favourite colour?"),
            ["favourite", "colour"]
        );
        assert!(query_terms("the and of a").is_empty());
        assert_eq!(
            query_terms("NEAR(cats dogs) OR \"fish\" AND -bird* x 7"),
            ["near", "cats", "dogs", "fish", "bird", "7"]
        );
        let many = (0..50)
            .map(|i| format!("word{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(query_terms(&many).len(), 32);
        let q = |text: &str| SearchQuery::new(text, 5).matching();
        assert_eq!(q("  "), Matching::Everything);
        assert_eq!(q("the of"), Matching::Nothing);
        assert_eq!(q("Cats"), Matching::Words(vec!["cats".into()]));
    }

    #[test]
    fn a_refresh_merges_tags_and_never_unapproves() {
        let tags = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let r = refresh(
            tags(&["a", "b"]),
            Status::Candidate,
            &tags(&["b", "c"]),
            Status::Approved,
        );
        assert_eq!(r.tags, ["a", "b", "c"]);
        assert_eq!((r.status, r.newly_approved), (Status::Approved, true));
        let r = refresh(tags(&[]), Status::Approved, &[], Status::Candidate);
        assert_eq!((r.status, r.newly_approved), (Status::Approved, false));
        let r = refresh(tags(&[]), Status::Candidate, &[], Status::Candidate);
        assert_eq!((r.status, r.newly_approved), (Status::Candidate, false));
    }

    #[test]
    fn a_new_memory_is_checked_and_normalized() {
        let new = NewMemory {
            scope: Scope::Agent,
            owner_agent: "a".into(),
            text: "  fact ".into(),
            tags: vec!["Style".into(), "style".into()],
            source_run_id: None,
            expires_at: None,
            status: Status::Approved,
        };
        let checked = new.clone().checked().unwrap();
        assert_eq!(
            (checked.text.as_str(), checked.tags),
            ("fact", vec!["style".into()])
        );
        let bad = NewMemory {
            owner_agent: "../x".into(),
            ..new
        };
        assert!(matches!(bad.checked(), Err(MemoryError::BadAgentName(_))));
        assert!(Reach::Agent("a/b".into()).check().is_err());
        assert!(Reach::Everyone.check().is_ok());
    }
}
