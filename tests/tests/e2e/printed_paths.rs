//! The paths `lsm` prints are the real ones: a folder name that looks random (as `mktemp -d`
//! makes them) is the person's own, not a secret.

use super::*;

/// `lsm agent run` in a folder whose name has a long mixed-case component prints its records'
/// paths as they are on disk, whole: no `[REDACTED]` in them.
#[test]
fn records_in_a_folder_with_a_random_looking_name_are_printed_as_they_are() {
    let parent = tempfile::tempdir().unwrap();
    // `mktemp -d`'s shape, longer; and a name of 40 random-looking characters of its own.
    for name in [
        "tmp.Gxya19JcmMaB3kQ7",
        "cache.Q8zL3vX0mP9sR2tYwK7bN4cJ1hGfD6eA5uTxIoWq",
    ] {
        let dir = parent.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("script.jsonl");
        std::fs::write(&script, format!("{}\n", text("All done."))).unwrap();
        let provider = format!("scripted:{}", script.display());
        let out =
            run(lsm_e2e::general_run(&dir, "say done", &provider)
                .args(["--agents-folder", "Agents"]));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let printed = |label: &str| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(label))
                .unwrap_or_else(|| panic!("no `{label}` line:\n{stdout}"))
                .to_string()
        };
        let logs = dir.canonicalize().unwrap().join("Agents/general/logs");
        for (label, file) in [
            ("summary: ", "run_summary.json"),
            ("transcript: ", "transcript.jsonl"),
        ] {
            let path = PathBuf::from(printed(label));
            assert!(!path.to_string_lossy().contains("REDACTED"), "{stdout}");
            assert!(path.starts_with(&logs), "{}\n{stdout}", logs.display());
            assert!(path.ends_with(file) && path.is_file(), "{stdout}");
        }
        assert!(!stdout.contains("REDACTED") && !stderr(&out).contains("REDACTED"));
    }
}
