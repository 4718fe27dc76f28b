use super::report::{cold_start, fit, harness_own, noise_note, segment_slopes};
use super::workspace::file_text;
use super::*;

#[test]
fn the_slope_is_the_cost_of_one_call_and_the_intercept_the_cold_start() {
    let points = [(10, 0.02 + 10.0 * 0.001, 0), (200, 0.02 + 200.0 * 0.001, 0)];
    let (slope, intercept) = fit(&points);
    assert!((slope - 0.001).abs() < 1e-12, "{slope}");
    assert!((intercept - 0.02).abs() < 1e-12, "{intercept}");
    let segments = segment_slopes(&points);
    assert_eq!(segments.len(), 1);
    assert!((segments[0].2 - 0.001).abs() < 1e-12);
    // A cost per call that grows with N: the cold start comes from the first segment.
    let growing = [(10, 0.03, 0), (200, 0.22, 0), (1000, 2.0, 0)];
    assert!(fit(&growing).1 < 0.0);
    assert!(
        (cold_start(&growing) - 0.02).abs() < 1e-9,
        "{}",
        cold_start(&growing)
    );
}

#[test]
fn bodies_are_written_each_after_its_length() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.bin");
    write_bodies(&path, &[b"{}".to_vec(), Vec::new(), b"[1,2]".to_vec()]).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"\x02\0\0\0{}\0\0\0\0\x05\0\0\0[1,2]"
    );
}

#[test]
fn the_harness_own_cost_is_lsm_less_its_floor() {
    let row = |system, per_call: f64| Row {
        system,
        points: vec![
            (10, 0.01 + 10.0 * per_call, 0),
            (200, 0.01 + 200.0 * per_call, 0),
        ],
    };
    let rows = [
        row(System::Lsm, 300e-6),
        row(System::BareExchange, 120e-6),
        row(System::BareSocket, 70e-6),
    ];
    let (own, lsm, floor) = harness_own(&rows, System::BareExchange).unwrap();
    assert!((own - 180e-6).abs() < 1e-9, "{own}");
    assert!((lsm - 300e-6).abs() < 1e-9 && (floor - 120e-6).abs() < 1e-9);
    let (own, _, floor) = harness_own(&rows, System::BareSocket).unwrap();
    assert!(
        (own - 230e-6).abs() < 1e-9 && (floor - 70e-6).abs() < 1e-9,
        "{own}"
    );
    assert!(harness_own(&rows[..1], System::BareExchange).is_none());
}

#[test]
fn a_run_with_a_denied_call_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let since = std::time::SystemTime::now() - std::time::Duration::from_secs(5);
    let write = |id: &str, denials: u64| {
        let dir = work.path().join(format!(".lsm/agents/general/logs/{id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let summary = json!({"approvals_denials": {"approvals": 0, "denials": denials}});
        std::fs::write(dir.join("run_summary.json"), summary.to_string()).unwrap();
    };
    write("a", 0);
    check_no_denials(work.path(), since, 1).unwrap();
    let err = check_no_denials(work.path(), since, 2).unwrap_err();
    assert!(err.to_string().contains("1 run summaries"), "{err}");
    write("b", 80);
    let err = check_no_denials(work.path(), since, 2).unwrap_err();
    assert!(err.to_string().contains("80 tool call(s) denied"), "{err}");
}

#[test]
fn a_cost_per_call_of_zero_or_less_is_called_noise() {
    let row = |system, points: Vec<(u64, f64, u64)>| Row { system, points };
    let measured = row(System::Lsm, vec![(10, 0.011, 0), (200, 0.030, 0)]);
    assert_eq!(noise_note(&[measured]), None);
    let rows = [
        row(System::Lsm, vec![(10, 0.012, 0), (20, 0.011, 0)]),
        row(System::BareExchange, vec![(10, 0.001, 0), (20, 0.001, 0)]),
        row(System::PydanticAi, vec![(10, 1.2, 0), (20, 1.3, 0)]),
    ];
    let note = noise_note(&rows).unwrap();
    assert!(
        note.contains("of lsm, bare HTTP exchange of lsm's bodies came out ≤ 0"),
        "{note}"
    );
    assert!(!note.contains("pydantic"), "{note}");
    assert!(note.contains("--calls 10,200"), "{note}");
    // One N has no slope to judge.
    assert_eq!(noise_note(&[row(System::Lsm, vec![(10, 0.01, 0)])]), None);
}

#[test]
fn the_mock_s_files_are_written_alone_under_files() {
    // What `serve-mock` writes into the current folder: the files, nothing else.
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), None).unwrap();
    let top: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(top, ["files"]);
    let files = std::fs::read_dir(dir.path().join("files")).unwrap().count();
    assert_eq!(files, mock::FILES);
    let first = std::fs::read_to_string(dir.path().join("files/f0.txt")).unwrap();
    assert!(first.starts_with("File 0.\n"), "{first}");
}

#[test]
fn files_are_the_small_one_or_the_size_asked_for() {
    // Without a size: the file the documented tables were measured with, byte for byte.
    let small = file_text(3, None);
    assert_eq!(small.len(), 257);
    assert_eq!(
        small,
        format!("File 3.\n{}\n", "Some notes of a small project. ".repeat(8))
    );
    for bytes in [1, 9, 100, 20_000, 20_001] {
        let text = file_text(7, Some(bytes));
        assert_eq!(text.len(), bytes, "{bytes}");
        assert!(text.ends_with('\n'), "{bytes}");
    }
    assert!(check_file_bytes(Some(0)).is_err());
    assert!(check_file_bytes(Some(1)).is_ok() && check_file_bytes(None).is_ok());
    let big = file_text(7, Some(20_000));
    assert!(big.starts_with("File 7.\nSome notes"), "{}", &big[..40]);
    assert!(big.lines().count() > 200, "lines of prose, not one line");
}

#[test]
fn the_median_ignores_one_outlier() {
    let mut runs = [0.3, 9.0, 0.2];
    assert_eq!(median(&mut runs), 0.3);
    // The runs' spread is shown beside it, from the sorted runs.
    assert_eq!(spread(&runs), " (runs 0.200–9.000 s)");
    assert_eq!(spread(&[0.3]), "");
}
