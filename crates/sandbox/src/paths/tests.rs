use std::os::unix::fs::symlink;

use proptest::prelude::*;

use super::*;
use crate::EntryKind;

/// A tempdir with `root/` (allowed), `outside/` (not), and links from inside to both.
struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    policy: PathPolicy,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("a/file.txt"), "x").unwrap();
    std::fs::write(outside.join("secret.txt"), "s").unwrap();
    symlink(root.join("a"), root.join("in_link")).unwrap();
    symlink(&outside, root.join("out_link")).unwrap();
    symlink(outside.join("secret.txt"), root.join("out_file")).unwrap();
    symlink(outside.join("nothing"), root.join("dangling")).unwrap();
    symlink("../outside", root.join("rel_out")).unwrap();
    let policy = PathPolicy::new(
        std::slice::from_ref(&root),
        std::slice::from_ref(&root),
        &root,
    )
    .unwrap();
    Fixture {
        _tmp: tmp,
        root,
        outside,
        policy,
    }
}

/// The check keeps what it saw of the entry (following links), for the tool that opens it.
#[test]
fn a_confined_path_carries_what_the_check_saw() {
    let f = fixture();
    let file = f.policy.confine("a/file.txt", PathAccess::Read).unwrap();
    let seen = file.info_when_checked().unwrap();
    assert_eq!((seen.kind, seen.len), (EntryKind::File, 1));
    let folder = f.policy.confine("in_link", PathAccess::Read).unwrap();
    assert_eq!(folder.info_when_checked().unwrap().kind, EntryKind::Folder);
    let missing = f.policy.confine("a/new.txt", PathAccess::Write).unwrap();
    assert!(missing.info_when_checked().is_none());
}

/// A plain path with no link on its way is found through its root's handle, as it is; a
/// link anywhere on it, a missing entry, the root itself, or a path with `.` or empty
/// components is left to resolving by name.
#[test]
fn a_path_without_links_is_found_through_its_roots_handle() {
    let f = fixture();
    let found = |raw: &str| f.policy.found_without_links(raw, &f.policy.read_roots);
    let file = found("a/file.txt").unwrap();
    assert_eq!(file.resolved, f.root.join("a/file.txt"));
    assert_eq!(file.relative, Path::new("a/file.txt"));
    assert_eq!(file.seen.unwrap().len(), 1);
    let folder = found("./a/b").unwrap();
    assert_eq!(folder.resolved, f.root.join("a/b"));
    assert!(folder.seen.unwrap().is_dir());
    let absolute = f.root.join("a/file.txt");
    let by_absolute = found(absolute.to_str().unwrap()).unwrap();
    assert_eq!(by_absolute.relative, Path::new("a/file.txt"));
    for raw in [
        "in_link/file.txt",
        "in_link",
        "out_file",
        "out_link/secret.txt",
        "dangling",
        "a/new.txt",
        "a/file.txt/",
        "a/./b",
        "a//b",
        ".",
        "/",
    ] {
        assert!(found(raw).is_none(), "{raw}");
    }
    let elsewhere = f.outside.join("secret.txt");
    assert!(found(elsewhere.to_str().unwrap()).is_none());
    // The deepest of nested roots.
    let inner = f.root.join("a");
    let nested = PathPolicy::new(&[f.root.clone(), inner.clone()], &[], &f.root).unwrap();
    let below_inner = nested
        .found_without_links("a/file.txt", &nested.read_roots)
        .unwrap();
    assert_eq!(below_inner.root.path, inner);
    assert_eq!(below_inner.relative, Path::new("file.txt"));
    // The inner root itself is the root, not a folder below the outer one: left to the
    // resolution by name, which says so.
    assert!(
        nested
            .found_without_links("a", &nested.read_roots)
            .is_none()
    );
}

/// Of nested roots, the deepest that holds the path is the handle it is opened through.
#[test]
fn a_path_is_opened_below_the_deepest_root_that_holds_it() {
    let f = fixture();
    let inner = f.root.join("a");
    for roots in [
        [f.root.clone(), inner.clone()],
        [inner.clone(), f.root.clone()],
    ] {
        let policy = PathPolicy::new(&roots, &[], &f.root).unwrap();
        let file = policy.confine("a/file.txt", PathAccess::Read).unwrap();
        assert_eq!(file.relative(), Path::new("file.txt"));
        assert_eq!(file.shown(), inner.join("file.txt"));
        let other = policy.confine("in_link", PathAccess::Read).unwrap();
        assert_eq!(other.relative(), Path::new(""), "the inner root itself");
        let outer = policy.confine("out_link", PathAccess::Read);
        assert!(outer.is_err(), "{outer:?}");
        let top = policy.confine("a", PathAccess::Read).unwrap();
        assert_eq!(top.relative(), Path::new(""));
        let beside = policy.confine("dangling", PathAccess::Read);
        assert!(beside.is_err(), "{beside:?}");
    }
}

/// A trailing slash after a file's name does not stop it resolving (the name is
/// resolved component by component when the system's resolution refuses it).
#[test]
fn a_trailing_slash_after_a_file_still_names_the_file() {
    let f = fixture();
    let file = f.policy.confine("a/file.txt/", PathAccess::Read).unwrap();
    assert_eq!(file.shown(), f.root.join("a/file.txt"));
    assert_eq!(file.relative(), Path::new("a/file.txt"));
    let folder = f.policy.confine("a/b/", PathAccess::Read).unwrap();
    assert_eq!(folder.shown(), f.root.join("a/b"));
}

#[test]
fn missing_root_is_a_config_error() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    let err = PathPolicy::new(std::slice::from_ref(&missing), &[], tmp.path()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("nope"), "{msg}");
    assert!(msg.contains("create the folder"), "{msg}");
}

#[test]
fn accepts_existing_and_new_paths_inside() {
    let f = fixture();
    assert_eq!(
        f.policy.check("a/file.txt", PathAccess::Read).unwrap(),
        f.root.join("a/file.txt")
    );
    assert_eq!(
        f.policy.check("./a/./b", PathAccess::Read).unwrap(),
        f.root.join("a/b")
    );
    assert_eq!(
        f.policy.check("new/dir/x.txt", PathAccess::Write).unwrap(),
        f.root.join("new/dir/x.txt")
    );
    let abs = f.root.join("a/b/c.txt");
    assert_eq!(
        f.policy
            .check(abs.to_str().unwrap(), PathAccess::Write)
            .unwrap(),
        abs
    );
    // A link that stays inside resolves to its target.
    assert_eq!(
        f.policy
            .check("in_link/file.txt", PathAccess::Read)
            .unwrap(),
        f.root.join("a/file.txt")
    );
}

#[test]
fn refuses_bad_raw_paths() {
    let f = fixture();
    assert!(
        f.policy
            .check("", PathAccess::Read)
            .unwrap_err()
            .to_string()
            .contains("empty")
    );
    assert!(
        f.policy
            .check("a\0b", PathAccess::Read)
            .unwrap_err()
            .to_string()
            .contains("NUL")
    );
    assert!(
        f.policy
            .check("a/../a", PathAccess::Read)
            .unwrap_err()
            .to_string()
            .contains("..")
    );
    assert!(
        f.policy
            .check("..", PathAccess::Read)
            .unwrap_err()
            .to_string()
            .contains("..")
    );
    assert!(
        f.policy
            .check("~/x", PathAccess::Read)
            .unwrap_err()
            .to_string()
            .contains('~')
    );
}

#[test]
fn refuses_outside_and_escaping_links() {
    let f = fixture();
    for raw in [
        "/etc/passwd",
        "/",
        "out_link/secret.txt",
        "out_link",
        "out_file",
        "out_link/new.txt",
        "rel_out/secret.txt",
    ] {
        let err = f
            .policy
            .check(raw, PathAccess::Read)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("outside the allowed read paths"),
            "{raw}: {err}"
        );
    }
    let outside = f.outside.join("secret.txt");
    assert!(
        f.policy
            .check(outside.to_str().unwrap(), PathAccess::Write)
            .is_err()
    );
    let err = f
        .policy
        .check("dangling", PathAccess::Write)
        .unwrap_err()
        .to_string();
    assert!(err.contains("symbolic link"), "{err}");
    let err = f
        .policy
        .check("a/file.txt/x", PathAccess::Write)
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot resolve"), "{err}");
}

#[test]
fn no_roots_of_a_kind() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let read_only = PathPolicy::new(std::slice::from_ref(&root), &[], &root).unwrap();
    assert_eq!(
        read_only
            .check("x", PathAccess::Write)
            .unwrap_err()
            .to_string(),
        "No write paths are allowed"
    );
    let none = PathPolicy::new(&[], &[], &root).unwrap();
    assert_eq!(
        none.check("x", PathAccess::Read).unwrap_err().to_string(),
        "No read paths are allowed"
    );
}

/// Whether `accepted` really stays inside `root`, judged independently of `check`: the
/// path itself (if it exists) or its deepest existing ancestor must canonicalize inside.
fn really_inside(accepted: &Path, root: &Path) -> bool {
    if !accepted.starts_with(root) {
        return false;
    }
    let mut probe = accepted.to_path_buf();
    loop {
        if let Ok(real) = probe.canonicalize() {
            return real.starts_with(root);
        }
        if std::fs::symlink_metadata(&probe).is_ok() {
            return false; // dangling link in the accepted path
        }
        if !probe.pop() {
            return false;
        }
    }
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_string()),
        Just(".".to_string()),
        Just(String::new()),
        Just("a".to_string()),
        Just("b".to_string()),
        Just("file.txt".to_string()),
        Just("in_link".to_string()),
        Just("out_link".to_string()),
        Just("out_file".to_string()),
        Just("dangling".to_string()),
        Just("rel_out".to_string()),
        Just("secret.txt".to_string()),
        Just("outside".to_string()),
        Just("root".to_string()),
        Just("~".to_string()),
        Just("a\0b".to_string()),
        "[a-z.~/\\\\]{1,4}",
    ]
}

/// `segments` joined by slashes after a prefix: none (0), the root (1), the folder
/// holding it (2), `/` (3) or `./` (4).
fn raw_path(f: &Fixture, prefix: u8, segments: &[String]) -> String {
    let prefix = match prefix {
        0 => String::new(),
        1 => format!("{}/", f.root.display()),
        2 => format!("{}/", f.root.parent().unwrap().display()),
        3 => "/".to_string(),
        _ => "./".to_string(),
    };
    format!("{prefix}{}", segments.join("/"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn accepted_paths_stay_inside(
        absolute in prop_oneof![Just(0u8), Just(1), Just(2), Just(3)],
        segments in proptest::collection::vec(segment(), 0..6),
    ) {
        let f = fixture();
        let raw = raw_path(&f, absolute, &segments);
        for access in [PathAccess::Read, PathAccess::Write] {
            if let Ok(accepted) = f.policy.check(&raw, access) {
                prop_assert!(
                    really_inside(&accepted, &f.root),
                    "{raw:?} accepted as {accepted:?}, outside {:?}", f.root
                );
                prop_assert!(!raw.contains('\0'));
                prop_assert!(!accepted.components().any(|c| c == Component::ParentDir));
            }
        }
    }

    /// What the kernel finds through a root's handle is what resolving by name gives:
    /// the same root, the same path below it, the same absolute path, the same entry.
    #[test]
    fn a_path_found_through_the_handle_is_its_resolution_by_name(
        absolute in prop_oneof![Just(0u8), Just(1), Just(2), Just(4)],
        segments in proptest::collection::vec(segment(), 1..6),
    ) {
        let f = fixture();
        let raw = raw_path(&f, absolute, &segments);
        let parent = Path::new(&raw).components().any(|c| c == Component::ParentDir);
        if raw.contains('\0') || parent {
            return Ok(()); // refused before either is asked
        }
        // One root, and nested ones (the deepest holding a path is its root).
        let nested =
            PathPolicy::new(&[f.root.clone(), f.root.join("a")], &[], &f.root).unwrap();
        for policy in [&f.policy, &nested] {
            let roots = &policy.read_roots;
            let Some(found) = policy.found_without_links(&raw, roots) else {
                continue;
            };
            let by_name = policy
                .resolved_by_name(Path::new(&raw), roots, PathAccess::Read)
                .unwrap();
            prop_assert!(std::ptr::eq(found.root, by_name.root));
            prop_assert_eq!(&found.relative, &by_name.relative);
            prop_assert_eq!(&found.resolved, &by_name.resolved);
            let seen = found.seen.unwrap();
            let there = std::fs::metadata(&by_name.resolved).unwrap();
            prop_assert_eq!(seen.file_type(), there.file_type());
            prop_assert_eq!(seen.len(), there.len());
        }
    }

    #[test]
    fn arbitrary_strings_never_escape(raw in "\\PC{0,24}") {
        let f = fixture();
        if let Ok(accepted) = f.policy.check(&raw, PathAccess::Write) {
            prop_assert!(really_inside(&accepted, &f.root), "{raw:?} → {accepted:?}");
        }
    }
}
