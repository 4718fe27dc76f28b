//! Reading the project instructions: the cap, the files' order, bad files.

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
