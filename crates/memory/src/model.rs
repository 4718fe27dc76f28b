//! The data: [`Memory`], its [`Scope`] and [`Status`], and the limits on what may be stored.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::MemoryError;

/// Largest memory text, in bytes. A memory is one fact, not a document.
pub const MAX_TEXT_BYTES: usize = 2000;
/// Most tags on one memory (or in one query).
pub const MAX_TAGS: usize = 8;
/// Longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 32;

/// Who can see a memory.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Only the agent that owns it (stored in that agent's memory folder).
    Agent,
    /// Every agent of this agents folder (this project).
    Project,
    /// Every agent of every project of this user.
    Global,
}

impl Scope {
    /// Search order: the most specific first.
    pub const ALL: [Scope; 3] = [Scope::Agent, Scope::Project, Scope::Global];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Agent => "agent",
            Scope::Project => "project",
            Scope::Global => "global",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|scope| scope.as_str() == s)
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::parse(s).ok_or_else(|| format!("unknown scope '{s}': use agent, project or global"))
    }
}

/// Whether a memory is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Stored, awaiting a person's approval (`lsm memory approve <id>`); never injected as
    /// standing context and never returned to an agent's search.
    Candidate,
    /// In use: injected as standing context and found by searches.
    Approved,
}

impl Status {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Candidate => "candidate",
            Status::Approved => "approved",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Status> {
        [Status::Candidate, Status::Approved]
            .into_iter()
            .find(|status| status.as_str() == s)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Status {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Status::parse(s).ok_or_else(|| format!("unknown status '{s}': use candidate or approved"))
    }
}

/// One stored memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// Unique id (`m-` and 16 hex digits).
    pub id: String,
    /// Who can see it.
    pub scope: Scope,
    /// The agent that wrote it.
    pub owner_agent: String,
    /// The fact.
    pub text: String,
    /// Lower-case tags.
    pub tags: Vec<String>,
    /// The run that wrote it, when an agent did.
    pub source_run_id: Option<String>,
    /// When it was first stored.
    pub created_at: DateTime<Utc>,
    /// When it last changed (stored again, approved).
    pub updated_at: DateTime<Utc>,
    /// When it stops being returned (and is pruned), if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// Candidate or approved.
    pub status: Status,
}

/// What to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    /// Who can see it.
    pub scope: Scope,
    /// The agent writing it (for agent scope: whose folder it goes to).
    pub owner_agent: String,
    /// The fact.
    pub text: String,
    /// Tags (normalized to lower case).
    pub tags: Vec<String>,
    /// The run writing it.
    pub source_run_id: Option<String>,
    /// When it expires, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// Candidate or approved.
    pub status: Status,
}

/// The text, trimmed, if it is acceptable.
pub(crate) fn check_text(text: &str) -> Result<String, MemoryError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(MemoryError::EmptyText);
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(MemoryError::TextTooLong {
            len: text.len(),
            max: MAX_TEXT_BYTES,
        });
    }
    Ok(text.to_string())
}

/// The tags, lower-cased, trimmed and deduplicated in order, if they are acceptable.
pub fn normalize_tags(tags: &[String]) -> Result<Vec<String>, MemoryError> {
    let mut out: Vec<String> = Vec::new();
    for raw in tags {
        let tag = raw.trim().to_lowercase();
        let bad = |reason: &str| MemoryError::BadTag {
            tag: raw.clone(),
            reason: reason.to_string(),
        };
        if tag.is_empty() {
            return Err(bad("it is empty"));
        }
        if tag.chars().count() > MAX_TAG_CHARS {
            return Err(bad(&format!(
                "it is longer than {MAX_TAG_CHARS} characters"
            )));
        }
        if !tag
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/'))
        {
            return Err(bad(
                "use letters, digits, '-', '_', '.', ':' or '/' (no spaces)",
            ));
        }
        if !out.contains(&tag) {
            out.push(tag);
        }
    }
    if out.len() > MAX_TAGS {
        return Err(MemoryError::TooManyTags {
            count: out.len(),
            max: MAX_TAGS,
        });
    }
    Ok(out)
}

/// Whether `name` can be an agent's folder name.
pub(crate) fn check_agent_name(name: &str) -> Result<(), MemoryError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(MemoryError::BadAgentName(name.to_string()))
    }
}

/// Whose memories an operation may see or touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// What an agent reaches: its own agent-scope memories, the project's and the global
    /// ones.
    Agent(String),
    /// Everything: every agent's memories too (the person at the command line).
    Everyone,
}

/// A search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    /// Free text; its words are matched (stemmed, any order, common words ignored). Empty:
    /// every memory passing the filters, most recently updated first.
    pub text: String,
    /// Only memories carrying every one of these tags.
    pub tags: Vec<String>,
    /// Only these scopes (empty: all), searched in the order agent → project → global.
    pub scopes: Vec<Scope>,
    /// Only memories written by this agent.
    pub owner: Option<String>,
    /// Candidates too (agents never see them; people may).
    pub include_candidates: bool,
    /// At most this many results.
    pub limit: usize,
}

impl SearchQuery {
    /// Approved memories about `text`, every scope, up to `limit`.
    pub fn new(text: impl Into<String>, limit: usize) -> Self {
        SearchQuery {
            text: text.into(),
            tags: Vec::new(),
            scopes: Vec::new(),
            owner: None,
            include_candidates: false,
            limit,
        }
    }
}

/// One search result.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hit {
    /// The memory.
    #[serde(flatten)]
    pub memory: Memory,
    /// Relevance (higher is better; 0 for a search without words).
    pub score: f64,
}

/// A listing filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only these scopes (empty: all).
    pub scopes: Vec<Scope>,
    /// Only memories written by this agent.
    pub owner: Option<String>,
    /// Only this status.
    pub status: Option<Status>,
}

/// What a store's `put` did.
#[derive(Debug, Clone, PartialEq)]
pub struct PutOutcome {
    /// The memory as stored.
    pub memory: Memory,
    /// `false` when the same text was already stored in that scope by that agent: the
    /// existing memory was refreshed (tags merged, expiry and time updated, approval kept or
    /// granted) instead of duplicated.
    pub created: bool,
    /// Whether this call made it approved (it was not approved before).
    pub newly_approved: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_normalized_and_checked() {
        let tags = normalize_tags(&[" Style ".into(), "style".into(), "lang:en".into()]).unwrap();
        assert_eq!(tags, ["style", "lang:en"]);
        assert!(matches!(
            normalize_tags(&["two words".into()]),
            Err(MemoryError::BadTag { .. })
        ));
        assert!(matches!(
            normalize_tags(&["".into()]),
            Err(MemoryError::BadTag { .. })
        ));
        let many: Vec<String> = (0..9).map(|i| format!("t{i}")).collect();
        assert!(matches!(
            normalize_tags(&many),
            Err(MemoryError::TooManyTags { count: 9, max: 8 })
        ));
    }

    #[test]
    fn text_limits() {
        assert_eq!(check_text("  fact ").unwrap(), "fact");
        assert!(matches!(check_text(" \n"), Err(MemoryError::EmptyText)));
        let long = "x".repeat(MAX_TEXT_BYTES + 1);
        let e = check_text(&long).unwrap_err();
        assert!(e.to_string().contains("2001 bytes"), "{e}");
    }

    #[test]
    fn agent_names_cannot_escape_the_agents_folder() {
        check_agent_name("general").unwrap();
        check_agent_name("my-agent_2").unwrap();
        for bad in ["", "..", "a/b", ".hidden", "a b", "a\\b"] {
            assert!(check_agent_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn scope_and_status_round_trip_their_names() {
        for s in Scope::ALL {
            assert_eq!(s.as_str().parse::<Scope>().unwrap(), s);
        }
        assert_eq!("approved".parse::<Status>().unwrap(), Status::Approved);
        assert!("nope".parse::<Scope>().is_err());
    }
}
