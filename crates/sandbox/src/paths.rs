//! Path confinement: every path a tool touches must lie inside the read or write allowlist,
//! and is then opened *through a handle of its root folder*, never by name.
//!
//! Checking a name and opening it later is a race: between the two, another process can swap
//! a folder on the path for a symbolic link to somewhere else. So a check here yields a
//! [`ConfinedPath`]: the opened root folder (a `cap_std::fs::Dir`) plus the path relative to
//! it. Tools open files only through it, and the kernel resolves every component beneath
//! the root handle (`openat2(RESOLVE_BENEATH)`), refusing anything that would leave it,
//! whatever was swapped in meanwhile.
//!
//! The name checks here come first and give the friendly messages: NUL, `..`, `~`, empty;
//! then the path is resolved to decide which root it is under. A path that exists with no
//! symbolic link on its way below a root is its own resolution, which the kernel confirms
//! through the root's handle in one call; any other is resolved by name (following
//! symlinks, via `canonicalize`), so a link inside a root that points outside is judged by
//! where it points. A path that does not exist yet is judged by its deepest existing
//! ancestor plus the rest, which contains no `..` (refused up front). Writes to protected
//! paths (lsm's own configuration and run records) are refused here by name and again by
//! handle when the file is opened ([`crate::confined_path`]).

use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::confined_path::{ConfinedPath, Protected, ProtectedPath, not_regular_kind};
use crate::{PathAccess, SandboxConfigError};

/// Why a path is refused. The message is for the model (or person) who gave the path: it
/// says what was wrong, so the call can be corrected with a path inside the allowlists.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PathRefusal {
    /// An empty string. Give a path.
    #[error("the path is empty")]
    Empty,
    /// The path has a NUL byte, which no file name can hold. Remove it.
    #[error("the path contains a NUL byte")]
    NulByte,
    /// A `..` component. Give the path inside the allowed folders directly.
    #[error("'..' is not allowed in paths; give a path inside the allowed folders")]
    ParentDir,
    /// A leading `~`, which no shell expands here. Give the full path or a relative one.
    #[error("'~' is not expanded; give an absolute path or one relative to the working directory")]
    Tilde,
    /// The read allowlist is empty: nothing can be read until `allowed_read_paths` names a
    /// folder.
    #[error("No read paths are allowed")]
    NoReadPaths,
    /// The write allowlist is empty: nothing can be written until `allowed_write_paths`
    /// names a folder.
    #[error("No write paths are allowed")]
    NoWritePaths,
    /// A write to a protected path. Write somewhere else.
    #[error(transparent)]
    Protected(#[from] ProtectedPath),
    /// A named pipe, socket or device, which is never opened. Give a regular file or folder.
    #[error("'{}' is a {kind}; only regular files and folders can be used", .path.display())]
    NotRegular {
        /// The resolved path.
        path: PathBuf,
        /// What it is (`named pipe`, …).
        kind: &'static str,
    },
    /// The resolution is not a plain absolute path (it cannot be judged). Give another path.
    #[error(
        "the path resolves to '{}', which is not a plain absolute path",
        .resolved.display()
    )]
    NotPlain {
        /// What the path resolved to.
        resolved: PathBuf,
    },
    /// The path, its symbolic links followed, lies outside every allowed folder for the
    /// access. Give a path inside one of them (listed), or widen the allowlist.
    #[error(
        "it resolves to '{}', which is outside the allowed {kind} paths ({allowed})",
        .resolved.display()
    )]
    Outside {
        /// What the path resolved to.
        resolved: PathBuf,
        /// `read` or `write`.
        kind: &'static str,
        /// The allowed folders, comma-separated.
        allowed: String,
    },
    /// A symbolic link on the path points at nothing; writing through it would create its
    /// target wherever it points. Give the link's target, or remove the link.
    #[error("'{}' is a symbolic link whose target does not exist", .link.display())]
    DanglingLink {
        /// The dangling link.
        link: PathBuf,
    },
    /// The file system refused to resolve part of the path (permissions, a file used as a
    /// folder, …). Fix the cause the error names, or give another path.
    #[error("cannot resolve '{}': {error}", .path.display())]
    Unresolvable {
        /// The part that could not be resolved.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// No part of the path could be resolved. Give another path.
    #[error("cannot resolve '{}'", .path.display())]
    Unresolved {
        /// The path.
        path: PathBuf,
    },
}

/// An allowlisted folder: its canonical path (for the name checks and messages) and an open
/// handle (for every access).
#[derive(Debug)]
struct Root {
    path: PathBuf,
    /// How many components `path` has: the most specific of nested roots is the deepest.
    depth: usize,
    dir: Arc<Dir>,
}

/// The read and write allowlists, opened once.
#[derive(Debug)]
pub(crate) struct PathPolicy {
    read_roots: Vec<Root>,
    write_roots: Vec<Root>,
    working_dir: PathBuf,
    protected: Arc<Protected>,
}

impl PathPolicy {
    /// Canonicalize and open the allowlist roots, and canonicalize the working directory.
    ///
    /// # Errors
    /// [`SandboxConfigError::BadAllowlistPath`] when one of them does not exist or cannot be
    /// resolved or opened.
    pub(crate) fn new(
        read: &[PathBuf],
        write: &[PathBuf],
        working_dir: &Path,
    ) -> Result<Self, SandboxConfigError> {
        Ok(PathPolicy {
            read_roots: read
                .iter()
                .map(|p| open_root(p))
                .collect::<Result<_, _>>()?,
            write_roots: write
                .iter()
                .map(|p| open_root(p))
                .collect::<Result<_, _>>()?,
            working_dir: canonical_root(working_dir)?,
            protected: Arc::new(Protected::default()),
        })
    }

    /// The same policy, refusing every write to `protected` paths and anything beneath them.
    /// A relative entry is relative to the working directory; one that does not exist yet is
    /// protected by its resolved name (and by handle once it exists).
    pub(crate) fn protecting(mut self, protected: &[PathBuf]) -> Self {
        let entries = protected
            .iter()
            .flat_map(|p| {
                let joined = self.working_dir.join(p);
                // Both the name as given and the resolved one: either may be asked for.
                let resolved = resolve(&joined).unwrap_or_else(|_| joined.clone());
                [joined, resolved]
            })
            .collect();
        self.protected = Arc::new(Protected::new(entries));
        self
    }

    /// The canonical working directory (base of relative paths).
    pub(crate) fn working_dir(&self) -> &Path {
        &self.working_dir
    }

    /// Resolve `raw` (relative to the working directory) and confine it to the roots for
    /// `access`. Returns the absolute, symlink-free path, for display and for commands (which
    /// a child process opens by name). Err: the reason, for the model.
    pub(crate) fn check(&self, raw: &str, access: PathAccess) -> Result<PathBuf, PathRefusal> {
        self.confine(raw, access).map(|c| c.shown().to_path_buf())
    }

    /// Like [`PathPolicy::check`], returning the handle-relative path tools open through.
    pub(crate) fn confine(
        &self,
        raw: &str,
        access: PathAccess,
    ) -> Result<ConfinedPath, PathRefusal> {
        if raw.is_empty() {
            return Err(PathRefusal::Empty);
        }
        if raw.contains('\0') {
            return Err(PathRefusal::NulByte);
        }
        let raw_path = Path::new(raw);
        if raw_path.components().any(|c| c == Component::ParentDir) {
            return Err(PathRefusal::ParentDir);
        }
        if raw.starts_with('~') {
            return Err(PathRefusal::Tilde);
        }
        let roots = match access {
            PathAccess::Read => &self.read_roots,
            PathAccess::Write => &self.write_roots,
        };
        if roots.is_empty() {
            return Err(match access {
                PathAccess::Read => PathRefusal::NoReadPaths,
                PathAccess::Write => PathRefusal::NoWritePaths,
            });
        }
        // A plain path that exists with no symbolic link below its root is its own
        // resolution: the kernel confirms it through the root's handle and says what is
        // there. Anything else (a link on the way, a path that does not exist yet) is
        // resolved by name.
        let found = match self.found_without_links(raw, roots) {
            Some(found) => found,
            None => self.resolved_by_name(raw_path, roots, access)?,
        };
        let Found {
            root,
            relative,
            resolved,
            seen,
        } = found;
        if access == PathAccess::Write {
            self.protected.check_name(&resolved)?;
        }
        // Refused before anything opens it (a named pipe would block an open for good).
        // The opening code checks again on the handle, so this is the friendly message only.
        let checked = seen.or_else(|| std::fs::metadata(&resolved).ok());
        if let Some(meta) = &checked
            && let Some(kind) = not_regular_kind(&meta.file_type())
        {
            return Err(PathRefusal::NotRegular {
                path: resolved,
                kind,
            });
        }
        let confined = ConfinedPath::new(
            Arc::clone(&root.dir),
            relative,
            resolved,
            Arc::clone(&self.protected),
        );
        // What was seen is kept: a tool that decides on the entry's kind need not look again.
        Ok(match checked {
            Some(meta) => confined.with_checked(meta),
            None => confined,
        })
    }

    /// [`PathPolicy::confine`]'s resolution when `raw` (the name checks passed) is plain —
    /// relative to the working directory or absolute, its components parted by single
    /// slashes, none of them `.` (a leading `./` aside) — and lies below a root by name,
    /// and exists with no symbolic link on its way below the deepest such root. It is then
    /// already what resolving by name would make of it (the roots' paths and the working
    /// directory are canonical). The kernel is asked through the root's handle,
    /// `openat2(O_PATH, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` (nothing is opened for
    /// reading, so a named pipe cannot block it), and what is there is read from that
    /// handle: three system calls, where resolving by name takes a `readlink` for every
    /// component of the absolute path, and no walk over the path's components here. `None`
    /// when any of that does not hold or cannot be asked (a kernel without `openat2`).
    fn found_without_links<'p>(&'p self, raw: &str, roots: &'p [Root]) -> Option<Found<'p>> {
        let plain =
            |s: &str| !s.is_empty() && s.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
        let rest = raw.strip_prefix("./").unwrap_or(raw);
        let lexical = match rest.strip_prefix('/') {
            Some(absolute) if plain(absolute) => PathBuf::from(rest),
            Some(_) => return None,
            None if plain(rest) => self.working_dir.join(rest),
            None => return None,
        };
        let bytes = lexical.as_os_str().as_encoded_bytes();
        let (root, relative) = roots
            .iter()
            .filter_map(|root| {
                let prefix = root.path.as_os_str().as_encoded_bytes();
                let below = bytes.strip_prefix(prefix)?;
                let relative = match (prefix.last(), below) {
                    (Some(b'/'), _) | (_, []) => below, // the root is `/`, or the path itself
                    _ => below.strip_prefix(b"/")?,
                };
                Some((root, relative))
            })
            .max_by_key(|(root, _)| root.depth)?;
        if relative.is_empty() {
            return None;
        }
        let relative =
            Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(relative));
        let seen = metadata_without_links(&root.dir, relative)?;
        Some(Found {
            relative: relative.to_path_buf(),
            root,
            resolved: lexical,
            seen: Some(seen),
        })
    }

    /// [`PathPolicy::confine`]'s resolution by name: every link followed (`canonicalize`),
    /// a path that does not exist yet judged by its deepest existing ancestor; then the
    /// deepest root that holds the result. Err: why the path is refused.
    fn resolved_by_name<'p>(
        &'p self,
        raw_path: &Path,
        roots: &'p [Root],
        access: PathAccess,
    ) -> Result<Found<'p>, PathRefusal> {
        let joined = self.working_dir.join(raw_path); // an absolute `raw` replaces the base
        let resolved = resolve(&joined)?;
        if resolved.components().any(|c| c == Component::ParentDir) || !resolved.is_absolute() {
            return Err(PathRefusal::NotPlain { resolved });
        }
        // The most specific root that holds it (roots may nest), and the path below it.
        let Some((root, relative)) = roots
            .iter()
            .filter_map(|root| Some((root, resolved.strip_prefix(&root.path).ok()?)))
            .max_by_key(|(root, _)| root.depth)
        else {
            let kind = match access {
                PathAccess::Read => "read",
                PathAccess::Write => "write",
            };
            let allowed: Vec<String> = roots.iter().map(|r| r.path.display().to_string()).collect();
            return Err(PathRefusal::Outside {
                resolved,
                kind,
                allowed: allowed.join(", "),
            });
        };
        Ok(Found {
            relative: relative.to_path_buf(),
            root,
            resolved,
            seen: None,
        })
    }
}

/// A resolved path: the deepest root that holds it, the path below that root, the absolute
/// path, and what is there when the resolution already looked.
struct Found<'p> {
    root: &'p Root,
    relative: PathBuf,
    resolved: PathBuf,
    seen: Option<std::fs::Metadata>,
}

/// What is at `relative` below `dir`, when it exists with no symbolic link on its way
/// (`openat2(O_PATH, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, then `statx` of that handle).
#[cfg(target_os = "linux")]
fn metadata_without_links(dir: &Dir, relative: &Path) -> Option<std::fs::Metadata> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let handle = rustix::fs::openat2(
        dir,
        relative,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
    )
    .ok()?;
    std::fs::File::from(handle).metadata().ok()
}

#[cfg(not(target_os = "linux"))]
fn metadata_without_links(_: &Dir, _: &Path) -> Option<std::fs::Metadata> {
    None
}

fn canonical_root(path: &Path) -> Result<PathBuf, SandboxConfigError> {
    std::fs::canonicalize(path).map_err(|e| SandboxConfigError::BadAllowlistPath {
        path: path.to_path_buf(),
        message: format!("{e}; create the folder or fix the path in the sandbox configuration"),
    })
}

fn open_root(path: &Path) -> Result<Root, SandboxConfigError> {
    let canonical = canonical_root(path)?;
    let dir = Dir::open_ambient_dir(&canonical, ambient_authority()).map_err(|e| {
        SandboxConfigError::BadAllowlistPath {
            path: path.to_path_buf(),
            message: format!("{e}; the allowlist entries must be folders that can be opened"),
        }
    })?;
    Ok(Root {
        depth: canonical.components().count(),
        path: canonical,
        dir: Arc::new(dir),
    })
}

/// Canonicalize `path`; when it does not exist, canonicalize its deepest existing ancestor and
/// append the rest. `path` is absolute and has no `..` component.
fn resolve(path: &Path) -> Result<PathBuf, PathRefusal> {
    // The usual case, a path that exists, at once; anything else is looked at prefix by
    // prefix below. A new file to write comes this way: the answer for the whole path is
    // used again rather than asked twice, unless the prefix differs from the path as given
    // (a trailing slash, which the components drop: `file.txt/` fails, `file.txt` may not).
    let mut whole = match std::fs::canonicalize(path) {
        Ok(resolved) => return Ok(resolved),
        Err(e) => Some(e),
    };
    let components: Vec<Component<'_>> = path.components().collect();
    // The whole path, then ever shorter prefixes. Component 0 is the root, which exists.
    for keep in (1..=components.len()).rev() {
        let prefix: PathBuf = components[..keep].iter().collect();
        let resolved = match whole.take() {
            Some(e) if prefix.as_os_str() == path.as_os_str() => Err(e),
            _ => std::fs::canonicalize(&prefix),
        };
        match resolved {
            Ok(mut resolved) => {
                resolved.extend(&components[keep..]);
                return Ok(resolved);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Missing, or a symlink whose target is missing. Writing through a dangling
                // link would create its target wherever it points, so refuse those.
                if std::fs::symlink_metadata(&prefix).is_ok() {
                    return Err(PathRefusal::DanglingLink { link: prefix });
                }
            }
            Err(e) => {
                return Err(PathRefusal::Unresolvable {
                    path: prefix,
                    error: e,
                });
            }
        }
    }
    Err(PathRefusal::Unresolved {
        path: path.to_path_buf(),
    })
}

#[cfg(test)]
mod tests;
