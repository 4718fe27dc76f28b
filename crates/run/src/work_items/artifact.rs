//! The path `work_item_set_artifact` is given: cleaned of what a model wraps around a path,
//! then checked (seed 004 §4.1: artifact contamination cleaning and control-artifact
//! validation).
//!
//! Models write paths the way they write prose: `` `summary.md` ``, `"./out/report.md"`,
//! `[report](out/report.md)`, `file:///work/summary.md`, `summary.md.` at the end of a
//! sentence. Recorded as given, such a path names no file and the deliverable is lost; so the
//! wrapping is taken off ([`clean_artifact_path`]). What cannot be a file path at all (a URL,
//! a line break, a `..` that leaves the working folder) is refused with the reason. And no
//! file is both a deliverable and the run's own working file: a control item's artifact is
//! never another item's deliverable, and the other way round ([`check_role`]). Whether the
//! file exists is not this pure core's to know: the path is only recorded.

use super::{Role, WorkItem};

/// Why an artifact path cannot be recorded. The message is for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    /// Nothing is left once the wrapping is taken off.
    #[error("the artifact path '{given}' names no file; give the file's path, e.g. summary.md")]
    NoPath {
        /// The path as given.
        given: String,
    },
    /// A URL, not a file.
    #[error(
        "the artifact '{given}' is a URL; record the path of the file the work produced, relative to the working folder"
    )]
    Url {
        /// The path as given.
        given: String,
    },
    /// A line break, tab or other control character: more than one path, or prose.
    #[error("the artifact path holds a line break or control character; record one path per item")]
    ControlCharacter,
    /// `..` leaves the working folder.
    #[error(
        "the artifact path '{given}' leaves the working folder ('..'); record a path inside it"
    )]
    Escapes {
        /// The path as given.
        given: String,
    },
    /// The file is another item's artifact with a role that excludes this one.
    #[error(
        "{path} is the artifact of {other} ({other_role}); a {role} item's file must be a file of its own, so the run's working notes never pass for a deliverable"
    )]
    RoleConflict {
        /// The path.
        path: String,
        /// The other item's id.
        other: String,
        /// The other item's role.
        other_role: &'static str,
        /// This item's role.
        role: &'static str,
    },
}

/// `raw` without the wrapping a model puts around a path: surrounding whitespace, quotes and
/// backticks, a Markdown link's text (`[x](path)` → `path`), a `file://` scheme, a leading
/// `./`, and sentence punctuation after the name. Err: what makes it no file path at all.
///
/// # Errors
/// An empty result, a URL, a control character, a `..` component.
pub fn clean_artifact_path(raw: &str) -> Result<String, ArtifactError> {
    let given = raw.trim().to_string();
    if given.chars().any(char::is_control) {
        return Err(ArtifactError::ControlCharacter);
    }
    let mut path = given.as_str();
    // `[text](path)`: the target is the path.
    if let (Some(open), true) = (
        path.find("]("),
        path.starts_with('[') && path.ends_with(')'),
    ) {
        path = &path[open + 2..path.len() - 1];
    }
    loop {
        let before = path;
        path = path.trim();
        for (open, close) in [('`', '`'), ('"', '"'), ('\'', '\''), ('<', '>'), ('(', ')')] {
            if path.len() >= 2 && path.starts_with(open) && path.ends_with(close) {
                path = &path[open.len_utf8()..path.len() - close.len_utf8()];
            }
        }
        // Sentence punctuation after the name (`summary.md.`), never a name's own last dot
        // alone (`notes.` stays when nothing else remains).
        let trimmed = path.trim_end_matches(['.', ',', ';', ':', '!', '?']);
        if !trimmed.is_empty() && trimmed.len() != path.len() && trimmed.contains(['.', '/']) {
            path = trimmed;
        }
        if path == before {
            break;
        }
    }
    if let Some(rest) = path.strip_prefix("file://") {
        path = rest;
    } else if let Some((scheme, _)) = path.split_once("://") {
        if !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+')
        {
            return Err(ArtifactError::Url { given });
        }
    }
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    if path.is_empty() || path.ends_with('/') || path == "." {
        return Err(ArtifactError::NoPath { given });
    }
    if path.split('/').any(|part| part == "..") {
        return Err(ArtifactError::Escapes { given });
    }
    Ok(path.to_string())
}

/// Whether item `id` (of `role`) may record `path`: a path another item records keeps one
/// kind of use — the run's working material ([`Role::Control`]) and the task's results never
/// share a file.
///
/// # Errors
/// [`ArtifactError::RoleConflict`], naming the other item.
pub(super) fn check_role(
    items: &[WorkItem],
    id: &str,
    role: Role,
    path: &str,
) -> Result<(), ArtifactError> {
    let is_control = |r: Role| r == Role::Control;
    let conflict = items.iter().find(|other| {
        other.id != id
            && other.artifact.as_deref() == Some(path)
            && is_control(other.role) != is_control(role)
    });
    match conflict {
        Some(other) => Err(ArtifactError::RoleConflict {
            path: path.to_string(),
            other: other.id.clone(),
            other_role: other.role.as_str(),
            role: role.as_str(),
        }),
        None => Ok(()),
    }
}
