//! [`RunLock`]: one process drives a run at a time.
//!
//! The lock is the file `run.lock` in the run folder, holding the owner's pid, and an
//! exclusive `flock` on it held for as long as the owner drives the run. The kernel releases
//! the `flock` when the owner dies, however it dies, so a stale lock (a dead pid) is taken
//! over by the next owner without any guessing; the pid is there for people and for
//! [`lock_state`], which tells `running` from `interrupted` with `kill(pid, 0)`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use crate::error::HarnessError;

/// The lock file's name inside a run folder.
pub const LOCK_FILE: &str = "run.lock";

/// An exclusive hold on a run folder; released (and its file removed) by
/// [`RunLock::release`], or by the kernel when the process dies.
#[derive(Debug)]
pub struct RunLock {
    file: Option<Flock<File>>,
    path: PathBuf,
}

impl RunLock {
    /// Take the lock of the run in `run_dir` (which must exist) for this process.
    ///
    /// # Errors
    /// [`HarnessError::Locked`] when a live process holds it; [`HarnessError::Lock`] when the
    /// file cannot be opened or written.
    pub fn acquire(run_dir: &Path) -> Result<RunLock, HarnessError> {
        let path = run_dir.join(LOCK_FILE);
        let io = |e: std::io::Error| HarnessError::Lock {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        // Not truncated on open: the file may be a live owner's, whose pid must survive.
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io)?;
        let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => locked,
            Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
                return Err(HarnessError::Locked {
                    run_dir: run_dir.display().to_string(),
                    pid: read_pid(&mut file),
                });
            }
            Err((_, errno)) => return Err(io(std::io::Error::from(errno))),
        };
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(format!("{}\n", std::process::id()).as_bytes())
            .and_then(|()| file.sync_data())
            .map_err(io)?;
        Ok(RunLock {
            file: Some(file),
            path,
        })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Give the run up: the file is removed, then the lock released.
    pub fn release(mut self) {
        self.remove();
    }

    fn remove(&mut self) {
        if let Some(file) = self.file.take() {
            let _ = std::fs::remove_file(&self.path);
            drop(file);
        }
    }
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Whether a process with `pid` exists (`kill(pid, 0)`; a process of another user counts).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) => true,
        Err(e) => e == nix::errno::Errno::EPERM,
    }
}

/// Who holds a run's lock, as its file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockState {
    /// No lock file, or one without a pid.
    Absent,
    /// The pid in the file is a live process.
    Held(u32),
    /// The pid in the file is dead: the owner crashed.
    Stale(u32),
}

/// The lock state of the run in `run_dir`, read without taking the lock.
pub fn lock_state(run_dir: &Path) -> LockState {
    let pid = std::fs::read_to_string(run_dir.join(LOCK_FILE))
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok());
    match pid {
        None => LockState::Absent,
        Some(pid) if pid_alive(pid) => LockState::Held(pid),
        Some(pid) => LockState::Stale(pid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_refuses_a_second_owner_and_is_free_after_release() {
        let dir = tempfile::tempdir().unwrap();
        let lock = RunLock::acquire(dir.path()).unwrap();
        assert_eq!(lock_state(dir.path()), LockState::Held(std::process::id()));
        let e = RunLock::acquire(dir.path()).unwrap_err();
        assert!(
            matches!(e, HarnessError::Locked { pid: Some(p), .. } if p == std::process::id()),
            "{e}"
        );
        assert!(e.to_string().contains("is being driven by process"), "{e}");
        lock.release();
        assert_eq!(lock_state(dir.path()), LockState::Absent);
        RunLock::acquire(dir.path()).unwrap().release();
    }

    #[test]
    fn a_stale_lock_of_a_dead_pid_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        // A pid far beyond pid_max: no such process.
        std::fs::write(dir.path().join(LOCK_FILE), "2147483600\n").unwrap();
        assert_eq!(lock_state(dir.path()), LockState::Stale(2_147_483_600));
        let lock = RunLock::acquire(dir.path()).unwrap();
        assert_eq!(lock_state(dir.path()), LockState::Held(std::process::id()));
        drop(lock);
    }
}
