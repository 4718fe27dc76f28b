//! The context providers' pure parts: the block's text, the standing text, the nested
//! candidates.

use std::path::{Path, PathBuf};

use super::guidance::candidates;
use super::*;

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
