//! The context providers' pure parts: the cap, the files' order, the block's text, the
//! nested candidates.

use std::path::{Path, PathBuf};

use super::guidance::candidates;
use super::*;

fn project(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

#[test]
fn agents_md_then_lsm_md_whole_with_their_size_and_hash() {
    let dir = project(&[("LSM.md", b"lsm rules\n"), ("AGENTS.md", b"agent rules\n")]);
    let files = project_instructions(dir.path(), 1000).unwrap();
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["AGENTS.md", "LSM.md"]);
    assert_eq!(files[0].text, "agent rules\n");
    assert_eq!(files[0].path, dir.path().join("AGENTS.md"));
    assert_eq!(files[0].bytes, 12);
    assert_eq!(files[0].sha256, sha256_hex(b"agent rules\n"));
    assert_eq!(files[0].sha256.len(), 64);
    assert!(!files[0].truncated && !files[1].truncated);
    // Neither file: nothing, and no error.
    let empty = tempfile::tempdir().unwrap();
    assert!(project_instructions(empty.path(), 1000).unwrap().is_empty());
    // Only LSM.md.
    let dir = project(&[("LSM.md", b"only")]);
    let files = project_instructions(dir.path(), 1000).unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].name, "LSM.md");
}

#[test]
fn the_cap_is_for_both_files_together_and_a_cut_says_where_the_whole_file_is() {
    let dir = project(&[("AGENTS.md", b"0123456789"), ("LSM.md", b"abcdef")]);
    let files = project_instructions(dir.path(), 13).unwrap();
    assert_eq!(files[0].text, "0123456789");
    assert!(!files[0].truncated);
    let lsm = &files[1];
    assert!(lsm.truncated);
    assert_eq!(lsm.bytes, 6, "the size is the whole file's");
    assert_eq!(
        lsm.sha256,
        sha256_hex(b"abcdef"),
        "the hash is the whole file's"
    );
    let note = format!(
        "abc\n\n[cut: this file is 6 bytes; only its first 3 are given here. The full file \
         is {}.]",
        dir.path().join("LSM.md").display()
    );
    assert_eq!(lsm.text, note);
    // Nothing left for LSM.md: the note alone.
    let files = project_instructions(dir.path(), 10).unwrap();
    assert!(files[1].truncated);
    assert!(
        files[1]
            .text
            .starts_with("\n\n[cut: this file is 6 bytes; only its first 0")
    );
}

#[test]
fn a_cut_falls_on_a_character_boundary_and_bad_files_are_typed_errors() {
    // "é" is two bytes: a cap of 2 keeps "a" only.
    let dir = project(&[("AGENTS.md", "aé".as_bytes())]);
    let files = project_instructions(dir.path(), 2).unwrap();
    assert!(
        files[0]
            .text
            .starts_with("a\n\n[cut: this file is 3 bytes; only its first 1 ")
    );
    let files = project_instructions(dir.path(), 3).unwrap();
    assert_eq!(files[0].text, "aé");
    let dir = project(&[("AGENTS.md", b"ok \xff\xfe bad")]);
    let e = project_instructions(dir.path(), 100).unwrap_err();
    assert!(matches!(e, ContextError::NotText { .. }), "{e}");
    assert!(
        e.to_string().contains("project_instructions = false"),
        "{e}"
    );
    // Invalid bytes past the cap are never read as text.
    assert!(project_instructions(dir.path(), 3).is_ok());
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("AGENTS.md")).unwrap();
    let e = project_instructions(dir.path(), 100).unwrap_err();
    assert!(matches!(e, ContextError::Read { .. }), "{e}");
}

#[test]
fn the_environment_block_states_the_date_system_folder_tools_and_limits() {
    let facts = EnvironmentFacts {
        tools: vec!["read_file".into(), "write_file".into()],
        read_roots: vec![PathBuf::from("/p")],
        write_roots: Vec::new(),
        network: false,
        max_iterations: 25,
        ..EnvironmentFacts::on("2030-01-02", PathBuf::from("/p"))
    };
    let text = environment_block(&facts);
    let expected = format!(
        "Environment of this run:\n\
         - date (UTC): 2030-01-02\n\
         - operating system: {} ({})\n\
         - working folder: /p (relative paths resolve against it)\n\
         - tools: read_file, write_file\n\
         - file tools read under: /p\n\
         - file tools write under: none\n\
         - network access for tools: not allowed\n\
         - iteration limit: 25 model calls per phase unless the phase sets its own",
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    assert_eq!(text, expected);
    let open = environment_block(&EnvironmentFacts {
        network: true,
        ..facts
    });
    assert!(open.contains("network access for tools: allowed"), "{open}");
}

#[test]
fn the_standing_text_puts_the_instructions_before_the_environment() {
    assert_eq!(standing_text(&[], None), None);
    assert_eq!(standing_text(&[], Some("env\n")).as_deref(), Some("env"));
    let files = vec![InstructionFile {
        name: "AGENTS.md".into(),
        path: PathBuf::from("/p/AGENTS.md"),
        bytes: 3,
        sha256: String::new(),
        truncated: false,
        text: "do\n".into(),
    }];
    let text = standing_text(&files, Some("env")).unwrap();
    assert!(text.starts_with("Project instructions"), "{text}");
    assert!(
        text.ends_with("--- AGENTS.md (/p/AGENTS.md) ---\ndo\n\nenv"),
        "{text}"
    );
}

#[test]
fn nested_candidates_are_the_folders_under_the_root_on_the_way_to_the_path() {
    let root = Path::new("/p");
    let got = candidates(root, Path::new("/p"), "a/b/file.md");
    assert_eq!(
        got,
        [
            PathBuf::from("/p/a/AGENTS.md"),
            PathBuf::from("/p/a/b/AGENTS.md"),
            PathBuf::from("/p/a/b/file.md/AGENTS.md"),
        ]
    );
    // Absolute, with `.` and `..`, from another working folder.
    assert_eq!(
        candidates(root, Path::new("/p/a"), "./x/../b"),
        [
            PathBuf::from("/p/a/AGENTS.md"),
            PathBuf::from("/p/a/b/AGENTS.md")
        ]
    );
    assert_eq!(
        candidates(root, Path::new("/q"), "/p/a/AGENTS.md"),
        [PathBuf::from("/p/a/AGENTS.md")],
        "reading a nested file itself brings it in"
    );
    // The root's own file is the project instructions; outside the root, nothing.
    assert!(candidates(root, Path::new("/p"), ".").is_empty());
    assert!(candidates(root, Path::new("/p"), "AGENTS.md").is_empty());
    assert!(candidates(root, Path::new("/p"), "../q/x").is_empty());
    assert!(candidates(root, Path::new("/"), "/pq/x").is_empty());
}
