use std::time::{Duration, Instant};

use super::*;

/// A path under `root` with no name checks at all: only the handle-level ones apply.
fn confined(root: &Path, relative: &str, protected: Vec<PathBuf>) -> ConfinedPath {
    let dir = Dir::open_ambient_dir(root, cap_std::ambient_authority()).unwrap();
    ConfinedPath::new(
        Arc::new(dir),
        PathBuf::from(relative),
        root.join(relative),
        Arc::new(Protected::new(protected)),
    )
}

/// A file is read as its size said when it was opened; a file whose size reads as 0 (the
/// kernel's own, made up as they are read) is read to its end all the same.
#[test]
fn a_file_sized_0_is_read_to_its_end_and_others_by_their_size() {
    let status = confined(Path::new("/proc/self"), "status", Vec::new());
    let (bytes, size) = status.read_capped(1 << 20).unwrap();
    assert_eq!(size, 0);
    assert!(
        String::from_utf8_lossy(&bytes).contains("Pid:"),
        "{bytes:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("f"), "0123456789").unwrap();
    let file = confined(tmp.path(), "f", Vec::new());
    assert_eq!(file.read_capped(4).unwrap(), (b"0123".to_vec(), 10));
    assert_eq!(file.read_capped(100).unwrap(), (b"0123456789".to_vec(), 10));
}

#[test]
fn a_named_pipe_is_refused_on_the_handle_without_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(tmp.path().join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let pipe = confined(tmp.path(), "pipe", Vec::new());
    let started = Instant::now();
    let err = pipe.open_read().unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
    for mode in [WriteMode::Create, WriteMode::Existing, WriteMode::Append] {
        let err = pipe.open_write(mode).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{mode:?}: {err}");
    }
    let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
    let err = open_entry(&dir, Path::new("pipe")).unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_read_after_a_look_still_checks_the_handle_and_blocks_as_a_file_when_handed_on() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("f"), "text").unwrap();
    let path = confined(tmp.path(), "f", Vec::new());
    let info = path.info().unwrap();
    assert_eq!(
        path.read_capped_after(&info, 100).unwrap(),
        (b"text".to_vec(), 4)
    );
    // A file swapped for a named pipe between the look and the open: refused on the
    // handle, without waiting for a writer.
    std::fs::remove_file(tmp.path().join("f")).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(tmp.path().join("f"))
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    let err = path.read_capped_after(&info, 100).unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // A folder's look is refused before anything opens.
    let folder = confined(tmp.path(), "", Vec::new());
    let err = folder
        .read_capped_after(&folder.info().unwrap(), 100)
        .unwrap_err()
        .to_string();
    assert!(err.contains("is a folder"), "{err}");
    // A handle handed on blocks as a file normally does (a child's stdin).
    std::fs::write(tmp.path().join("g"), "x").unwrap();
    let file = confined(tmp.path(), "g", Vec::new()).open_read().unwrap();
    let flags = rustix::fs::fcntl_getfl(&file).unwrap();
    assert!(!flags.contains(OFlags::NONBLOCK), "{flags:?}");
}

#[test]
fn writes_beneath_a_protected_folder_are_refused_on_the_handle() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("agents/a")).unwrap();
    std::fs::write(root.join("lsm.toml"), "x").unwrap();
    std::os::unix::fs::symlink(root.join("agents"), root.join("link")).unwrap();
    let protected = vec![root.join("agents"), root.join("lsm.toml")];
    for relative in ["agents/a/new.txt", "agents/new.txt", "lsm.toml"] {
        let path = confined(&root, relative, protected.clone());
        let err = path.open_write(WriteMode::Create).unwrap_err().to_string();
        assert!(err.contains("is protected"), "{relative}: {err}");
    }
    let err = confined(&root, "agents/b/c", protected.clone())
        .create_folder()
        .unwrap_err()
        .to_string();
    assert!(err.contains("is protected"), "{err}");
    // A link on the way is never followed when writing.
    let err = confined(&root, "link/new.txt", protected.clone())
        .open_write(WriteMode::Create)
        .unwrap_err();
    assert!(matches!(err, ToolError::Io { .. }), "{err}");
    assert!(!root.join("agents/new.txt").exists());
    assert!(!root.join("agents/b").exists());
    assert_eq!(std::fs::read_to_string(root.join("lsm.toml")).unwrap(), "x");
    // Unprotected siblings are fine, parents created.
    confined(&root, "work/deep/ok.txt", protected.clone())
        .open_write(WriteMode::Create)
        .unwrap();
    assert!(root.join("work/deep/ok.txt").is_file());
}

#[test]
fn reads_follow_links_beneath_the_root_only() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("root");
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::write(root.join("a/f.txt"), "in").unwrap();
    std::fs::write(base.join("secret.txt"), "out").unwrap();
    std::os::unix::fs::symlink("a", root.join("inside")).unwrap();
    std::os::unix::fs::symlink(&base, root.join("outside")).unwrap();
    let mut text = String::new();
    confined(&root, "inside/f.txt", Vec::new())
        .open_read()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, "in");
    assert!(
        confined(&root, "outside/secret.txt", Vec::new())
            .open_read()
            .is_err()
    );
}
