//! Opening a checked path through its root folder's handle.
//!
//! A [`ConfinedPath`] is an open root folder (`cap_std::fs::Dir`) plus a path relative to it.
//! Every access goes through that handle:
//!
//! - reads resolve the relative path beneath the root (`openat2(RESOLVE_BENEATH)` where the
//!   kernel has it, cap-std's own checked walk elsewhere): a symbolic link that stays inside
//!   the root works, one that leads out is refused — also when it was swapped in after the
//!   name check;
//! - writes walk the parent folders one component at a time without following links
//!   (creating missing ones), refuse any folder that is a protected entry, then open the
//!   file itself without following a link and refuse it when it is a protected file;
//! - every file is opened with `O_NONBLOCK` and its handle checked with `fstat` before use:
//!   anything but a regular file (a named pipe, a device, a socket) is refused, so no open
//!   can block the process for good. `O_NONBLOCK` is then cleared on every handle that
//!   leaves this module; a whole-file read that closes its handle at once leaves it set
//!   (it changes nothing for a regular file).

use std::fs::File;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use rustix::fs::{FileType, OFlags};

use crate::ToolError;

/// A write to a path no tool may change (lsm's own configuration and run records, or
/// anything beneath them). Not recoverable by retrying: write somewhere else.
#[derive(Debug, thiserror::Error)]
#[error(
    "'{}' is protected: lsm's own configuration and run records cannot be changed by tools",
    .path.display()
)]
pub(crate) struct ProtectedPath {
    /// The refused path.
    pub(crate) path: PathBuf,
}

/// The message for a refused write to a protected path.
pub(crate) fn protected_message(path: &Path) -> String {
    ProtectedPath {
        path: path.to_path_buf(),
    }
    .to_string()
}

/// Paths no tool may change (lsm's configuration and run records), whatever the allowlists
/// say. Checked by name when a path is confined and by device and inode when it is opened.
#[derive(Debug, Default)]
pub(crate) struct Protected {
    entries: Vec<PathBuf>,
}

impl Protected {
    pub(crate) fn new(entries: Vec<PathBuf>) -> Self {
        Protected { entries }
    }

    /// Err when `resolved` is a protected entry or lies beneath one.
    pub(crate) fn check_name(&self, resolved: &Path) -> Result<(), ProtectedPath> {
        match self.entries.iter().find(|p| resolved.starts_with(p)) {
            Some(_) => Err(ProtectedPath {
                path: resolved.to_path_buf(),
            }),
            None => Ok(()),
        }
    }

    /// The (device, inode) of every protected entry that exists now. Read at each write, so
    /// an entry created after the sandbox (the agents folder) is covered too.
    fn identities(&self) -> Vec<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        self.entries
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| (m.dev(), m.ino()))
            .collect()
    }
}

/// What a confined path is, without following a final symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A folder.
    Folder,
    /// A symbolic link.
    Symlink,
    /// A named pipe, socket or device: never opened.
    Other,
}

/// A confined path's metadata.
#[derive(Debug, Clone)]
pub struct EntryInfo {
    /// Its kind.
    pub kind: EntryKind,
    /// Size in bytes.
    pub len: u64,
    /// Last modification, when known.
    pub modified: Option<SystemTime>,
    /// Whether its permissions forbid writing.
    pub readonly: bool,
}

/// How [`ConfinedPath::open_write`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Read and write, creating the file (and its parent folders) when missing. Nothing is
    /// truncated: call `set_len` once the handle is known to be the right file.
    Create,
    /// Read and write an existing file.
    Existing,
    /// Append, creating the file (and its parent folders) when missing.
    Append,
}

/// A path the sandbox checked: an open root folder plus the path beneath it. Tools open,
/// list and create only through it; [`ConfinedPath::shown`] is for messages and records.
#[derive(Debug, Clone)]
pub struct ConfinedPath {
    root: Arc<Dir>,
    relative: PathBuf,
    shown: PathBuf,
    protected: Arc<Protected>,
    /// What the sandbox's name check saw (following links), `None` when nothing was there.
    checked: Option<EntryInfo>,
}

/// Two confined paths are equal when they name the same checked path (the handles they hold
/// are not compared).
impl PartialEq for ConfinedPath {
    fn eq(&self, other: &Self) -> bool {
        self.shown == other.shown
    }
}

impl Eq for ConfinedPath {}

impl ConfinedPath {
    pub(crate) fn new(
        root: Arc<Dir>,
        relative: PathBuf,
        shown: PathBuf,
        protected: Arc<Protected>,
    ) -> Self {
        ConfinedPath {
            root,
            relative,
            shown,
            protected,
            checked: None,
        }
    }

    /// The path below the root handle it is opened through.
    #[cfg(test)]
    pub(crate) fn relative(&self) -> &Path {
        &self.relative
    }

    /// The same path, with what the sandbox's name check saw of it.
    pub(crate) fn with_checked(mut self, meta: std::fs::Metadata) -> Self {
        self.checked = Some(info_of(&cap_std::fs::Metadata::from_just_metadata(meta)));
        self
    }

    /// What the entry was when the sandbox checked the path — by name, following links, an
    /// instant before the tool was given it — or `None` when nothing was there then (or the
    /// path did not come from the sandbox's check). A look only, as [`ConfinedPath::info`]
    /// is: it spares a tool that decides on the entry's kind a second look, and what an open
    /// finds is checked again on the handle, which is what confines.
    pub fn info_when_checked(&self) -> Option<&EntryInfo> {
        self.checked.as_ref()
    }

    /// The absolute path as resolved when it was checked, for messages and run records.
    /// Do not open it by name: use the methods of this type.
    pub fn shown(&self) -> &Path {
        &self.shown
    }

    /// The path relative to its root (`.` for the root itself).
    fn rel(&self) -> &Path {
        if self.relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &self.relative
        }
    }

    fn io(&self, e: io::Error) -> ToolError {
        ToolError::io(&self.shown, e)
    }

    /// Metadata, not following a final symbolic link.
    ///
    /// # Errors
    /// When it does not exist or cannot be reached beneath its root.
    pub fn symlink_info(&self) -> Result<EntryInfo, ToolError> {
        let meta = self
            .root
            .symlink_metadata(self.rel())
            .map_err(|e| self.io(e))?;
        Ok(info_of(&meta))
    }

    /// Metadata, following symbolic links that stay beneath the root.
    ///
    /// # Errors
    /// When it does not exist or cannot be reached beneath its root.
    pub fn info(&self) -> Result<EntryInfo, ToolError> {
        let meta = self.root.metadata(self.rel()).map_err(|e| self.io(e))?;
        Ok(info_of(&meta))
    }

    /// Open a regular file for reading. Blocking (call it off the async runtime), but it
    /// never waits for a writer: a named pipe, device or socket is refused.
    ///
    /// # Errors
    /// When it is missing, escapes its root, or is not a regular file.
    pub fn open_read(&self) -> Result<File, ToolError> {
        let file = self.open_read_sized(Probe::First)?.0;
        // The handle leaves this module (a child's stdin, a stream): it must block as a
        // file normally does.
        clear_nonblocking(&file, &self.shown)?;
        Ok(file)
    }

    /// Open a regular file for reading, with its size when it was opened; `O_NONBLOCK`
    /// stays set (it changes nothing for a regular file, which is all this returns).
    fn open_read_sized(&self, probe: Probe) -> Result<(File, u64), ToolError> {
        if probe == Probe::First
            && let Ok(meta) = self.root.metadata(self.rel())
        {
            refuse_kind(info_of(&meta).kind, &self.shown)?;
        }
        let mut opts = OpenOptions::new();
        opts.read(true).custom_flags(nonblocking_flags());
        let file = self
            .root
            .open_with(self.rel(), &opts)
            .map_err(|e| self.io(e))?
            .into_std();
        let size = regular_size(&file, &self.shown)?;
        Ok((file, size))
    }

    /// Read at most `limit` bytes of a regular file, off the async runtime.
    ///
    /// # Errors
    /// As [`ConfinedPath::open_read`], or a read failure.
    pub async fn read_bytes(&self, limit: u64) -> Result<Vec<u8>, ToolError> {
        let this = self.clone();
        let task = tokio::task::spawn_blocking(move || this.read_capped(limit).map(|(b, _)| b));
        match task.await {
            Ok(result) => result,
            Err(e) => Err(ToolError::Failed(format!("reading was interrupted: {e}"))),
        }
    }

    /// Read at most `limit` bytes of a regular file; blocking (call it off the async
    /// runtime). Returns the bytes and the file's size when it was opened: the file as it was
    /// then (what was appended after the open is not read), or, for a file whose size reads
    /// as 0, whatever reading it gives.
    ///
    /// # Errors
    /// As [`ConfinedPath::open_read`], or a read failure.
    pub fn read_capped(&self, limit: u64) -> Result<(Vec<u8>, u64), ToolError> {
        self.read_capped_as(Probe::First, limit)
    }

    /// [`ConfinedPath::read_capped`] for a caller that has just looked at the entry with
    /// [`ConfinedPath::info`]: the look before opening is not made again (the handle is
    /// still checked once opened, which is what confines).
    ///
    /// # Errors
    /// As [`ConfinedPath::read_capped`]; also when `info` is not a regular file's.
    pub fn read_capped_after(
        &self,
        info: &EntryInfo,
        limit: u64,
    ) -> Result<(Vec<u8>, u64), ToolError> {
        refuse_kind(info.kind, &self.shown)?;
        self.read_capped_as(Probe::Done, limit)
    }

    fn read_capped_as(&self, probe: Probe, limit: u64) -> Result<(Vec<u8>, u64), ToolError> {
        let (file, size) = self.open_read_sized(probe)?;
        // The file as it was when opened: the bytes its size counted (one read, none to see
        // the end). A size of 0 may be a file the kernel makes up as it is read: read to its
        // end, up to `limit`.
        let room = size.min(limit);
        let take = if size == 0 { limit } else { room };
        let mut bytes = Vec::with_capacity(usize::try_from(room).unwrap_or(0));
        file.take(take)
            .read_to_end(&mut bytes)
            .map_err(|e| self.io(e))?;
        Ok((bytes, size))
    }

    /// Open the folder itself (following links beneath the root).
    pub(crate) fn open_dir(&self) -> Result<Dir, ToolError> {
        self.root.open_dir(self.rel()).map_err(|e| self.io(e))
    }

    /// Open a regular file for writing, as `mode` says. Parent folders are walked (and
    /// created) without following links; a protected folder on the way, a protected file, and
    /// anything but a regular file are refused.
    ///
    /// # Errors
    /// When it is a folder, protected, not a regular file, or cannot be opened.
    pub fn open_write(&self, mode: WriteMode) -> Result<File, ToolError> {
        let (Some(name), parent) = (self.relative.file_name(), self.relative.parent()) else {
            return Err(ToolError::InvalidArguments(format!(
                "'{}' is a folder, not a file",
                self.shown.display()
            )));
        };
        let identities = self.protected.identities();
        let (dir, _) = self.walk(
            parent.unwrap_or(Path::new("")),
            mode != WriteMode::Existing,
            &identities,
        )?;
        match dir.symlink_metadata(name) {
            Ok(meta) => refuse_kind(info_of(&meta).kind, &self.shown)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound && mode != WriteMode::Existing => {}
            Err(e) => return Err(self.io(e)),
        }
        let mut opts = OpenOptions::new();
        opts.write(true)
            .read(mode != WriteMode::Append)
            .append(mode == WriteMode::Append)
            .create(mode != WriteMode::Existing)
            .follow(FollowSymlinks::No)
            .custom_flags(nonblocking_flags());
        let file = dir
            .open_with(name, &opts)
            .map_err(|e| self.io(e))?
            .into_std();
        // Checked before a single byte is written (nothing was truncated on open).
        if identities.contains(&identity(&file).map_err(|e| self.io(e))?) {
            return Err(ToolError::Failed(protected_message(&self.shown)));
        }
        ready_regular(&file, &self.shown)?;
        Ok(file)
    }

    /// Create the folder and its missing parents, walking without following links and
    /// refusing protected folders. Returns whether the folder itself was created.
    ///
    /// # Errors
    /// When something on the way is not a folder, is protected, or cannot be created.
    pub fn create_folder(&self) -> Result<bool, ToolError> {
        let identities = self.protected.identities();
        let (_, created) = self.walk(&self.relative, true, &identities)?;
        Ok(created)
    }

    /// Walk `relative` from the root one folder at a time, never following a link, creating
    /// missing folders when `create`. Every folder reached (the root too) is compared with
    /// the protected entries. Returns the last folder and whether it was created.
    fn walk(
        &self,
        relative: &Path,
        create: bool,
        protected: &[(u64, u64)],
    ) -> Result<(Dir, bool), ToolError> {
        let refuse_protected = |dir: &Dir| -> Result<(), ToolError> {
            if protected.contains(&identity(dir).map_err(|e| self.io(e))?) {
                return Err(ToolError::Failed(protected_message(&self.shown)));
            }
            Ok(())
        };
        let mut dir = self.root.try_clone().map_err(|e| self.io(e))?;
        refuse_protected(&dir)?;
        let mut created = false;
        for component in relative.components() {
            let Component::Normal(name) = component else {
                continue; // `.`; the checked relative path has no `..` or root
            };
            created = false;
            let next = match dir.open_dir_nofollow(name) {
                Ok(next) => next,
                Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                    match dir.create_dir(name) {
                        Ok(()) => created = true,
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(self.io(e)),
                    }
                    dir.open_dir_nofollow(name).map_err(|e| self.io(e))?
                }
                Err(e) => return Err(self.io(e)),
            };
            refuse_protected(&next)?;
            dir = next;
        }
        Ok((dir, created))
    }
}

/// Open the regular file `name` in `dir` for reading, without following a link and without
/// waiting (walks use it for the files they find).
pub(crate) fn open_entry(dir: &Dir, name: &Path) -> Result<File, ToolError> {
    let mut opts = OpenOptions::new();
    opts.read(true)
        .follow(FollowSymlinks::No)
        .custom_flags(nonblocking_flags());
    let file = dir
        .open_with(name, &opts)
        .map_err(|e| ToolError::io(name, e))?
        .into_std();
    ready_regular(&file, name)?;
    Ok(file)
}

/// `O_NONBLOCK | O_NOCTTY`: opening never waits (a named pipe without a writer), never
/// takes a terminal.
fn nonblocking_flags() -> i32 {
    // The flag bits fit an i32 (they are the C `int` open flags).
    i32::try_from((OFlags::NONBLOCK | OFlags::NOCTTY).bits()).unwrap_or(0)
}

/// (device, inode) of an open handle.
fn identity(fd: impl rustix::fd::AsFd) -> io::Result<(u64, u64)> {
    let stat = rustix::fs::fstat(fd)?;
    #[allow(clippy::useless_conversion)] // the field types differ between targets
    Ok((u64::from(stat.st_dev), u64::from(stat.st_ino)))
}

/// Whether [`ConfinedPath::open_read_sized`] looks at the entry before opening it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// Look first: a device is refused before an open could act on it.
    First,
    /// The caller has just looked ([`ConfinedPath::info`]).
    Done,
}

/// Refuse an opened handle that is not a regular file, then clear `O_NONBLOCK`.
fn ready_regular(file: &File, shown: &Path) -> Result<u64, ToolError> {
    let size = regular_size(file, shown)?;
    clear_nonblocking(file, shown)?;
    Ok(size)
}

/// The size of an opened handle; refused unless it is a regular file.
fn regular_size(file: &File, shown: &Path) -> Result<u64, ToolError> {
    let stat = rustix::fs::fstat(file).map_err(|e| ToolError::io(shown, e.into()))?;
    let kind = match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => EntryKind::File,
        FileType::Directory => EntryKind::Folder,
        FileType::Symlink => EntryKind::Symlink,
        _ => EntryKind::Other,
    };
    refuse_kind(kind, shown)?;
    Ok(u64::try_from(stat.st_size).unwrap_or(0))
}

/// Clear `O_NONBLOCK` on a handle that is handed on.
fn clear_nonblocking(file: &File, shown: &Path) -> Result<(), ToolError> {
    let flags = rustix::fs::fcntl_getfl(file).map_err(|e| ToolError::io(shown, e.into()))?;
    rustix::fs::fcntl_setfl(file, flags - OFlags::NONBLOCK)
        .map_err(|e| ToolError::io(shown, e.into()))
}

/// Err unless `kind` is a regular file.
fn refuse_kind(kind: EntryKind, shown: &Path) -> Result<(), ToolError> {
    match kind {
        EntryKind::File => Ok(()),
        EntryKind::Folder => Err(ToolError::InvalidArguments(format!(
            "'{}' is a folder, not a file",
            shown.display()
        ))),
        EntryKind::Symlink => Err(ToolError::Failed(format!(
            "'{}' became a symbolic link after it was checked; try again",
            shown.display()
        ))),
        EntryKind::Other => Err(ToolError::InvalidArguments(format!(
            "'{}' is not a regular file (a named pipe, socket or device); only regular files can be read or written",
            shown.display()
        ))),
    }
}

fn info_of(meta: &cap_std::fs::Metadata) -> EntryInfo {
    let ft = meta.file_type();
    let kind = if ft.is_dir() {
        EntryKind::Folder
    } else if ft.is_file() {
        EntryKind::File
    } else if ft.is_symlink() {
        EntryKind::Symlink
    } else {
        EntryKind::Other
    };
    EntryInfo {
        kind,
        len: meta.len(),
        modified: meta
            .modified()
            .ok()
            .map(cap_std::time::SystemTime::into_std),
        readonly: meta.permissions().readonly(),
    }
}

/// What a non-regular, non-folder file type is called in messages, or `None` for regular
/// files, folders and links.
pub(crate) fn not_regular_kind(ft: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_fifo() {
        Some("named pipe")
    } else if ft.is_socket() {
        Some("socket")
    } else if ft.is_char_device() {
        Some("character device")
    } else if ft.is_block_device() {
        Some("block device")
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
