use serde_json::json;

use std::path::Path;

use super::*;

fn ctx(args: serde_json::Value, path: &Path) -> ToolContext {
    let root = if path.is_dir() {
        path
    } else {
        path.parent().unwrap()
    };
    ToolContext::for_test(args, [("path", path.to_path_buf())], root.to_path_buf())
}

#[tokio::test]
async fn invalid_utf8_is_shown_as_replacement_characters_whole_or_by_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("f.txt");
    std::fs::write(&file, b"caf\xc3\xa9 \xff\xfe ok\nline \xc3\n").unwrap();
    let whole = ReadFile
        .execute(ctx(json!({"path": "f.txt"}), &file))
        .await
        .unwrap();
    assert_eq!(whole.text, "café \u{fffd}\u{fffd} ok\nline \u{fffd}\n");
    let lines = ReadFile
        .execute(ctx(
            json!({"path": "f.txt", "start_line": 2, "end_line": 2}),
            &file,
        ))
        .await
        .unwrap();
    assert_eq!(lines.text, "line \u{fffd}\n");
    // Valid text is kept as it is, byte for byte.
    assert_eq!(text_of("é ok".as_bytes().to_vec()), "é ok");
}

#[tokio::test]
async fn read_whole_and_ranges() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("f.txt");
    std::fs::write(&file, "one\ntwo\nthree\nfour").unwrap();
    let out = ReadFile
        .execute(ctx(json!({"path": "f.txt"}), &file))
        .await
        .unwrap();
    assert_eq!(out.text, "one\ntwo\nthree\nfour");
    let out = ReadFile
        .execute(ctx(
            json!({"path": "f.txt", "start_line": 2, "end_line": 3}),
            &file,
        ))
        .await
        .unwrap();
    assert_eq!(out.text, "two\nthree\n");
    let out = ReadFile
        .execute(ctx(
            json!({"path": "f.txt", "start_line": 4, "end_line": 99}),
            &file,
        ))
        .await
        .unwrap();
    assert_eq!(out.text, "four");
    let err = ReadFile
        .execute(ctx(json!({"path": "f.txt", "start_line": 9}), &file))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("has 4 lines"), "{err}");
    let err = ReadFile
        .execute(ctx(json!({"path": "f.txt", "start_line": 0}), &file))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("at least 1"), "{err}");
    let err = ReadFile
        .execute(ctx(json!({"path": "d"}), tmp.path()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("read_folder"), "{err}");
}

/// A small file is read on the calling task; a big one still goes to the blocking pool.
/// With the pool's only thread held busy, the small read completes and the big one
/// waits until the thread is released.
#[test]
fn small_files_are_read_inline_and_big_ones_on_the_blocking_pool() {
    let tmp = tempfile::tempdir().unwrap();
    let small = tmp.path().join("small.txt");
    let big = tmp.path().join("big.txt");
    std::fs::write(&small, "a few words").unwrap();
    let big_text = "x".repeat(usize::try_from(INLINE_READ_BYTES).unwrap() + 1);
    std::fs::write(&big, &big_text).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(1)
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (release, held) = std::sync::mpsc::channel::<()>();
        let busy = tokio::task::spawn_blocking(move || held.recv());
        // A guard against hanging, not a time limit: on the pool this read never ends.
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            ReadFile.execute(ctx(json!({"path": "small.txt"}), &small)),
        )
        .await
        .expect("the small read waited for the busy blocking pool")
        .unwrap();
        assert_eq!(out.text, "a few words");
        let mut big_read = Box::pin(ReadFile.execute(ctx(json!({"path": "big.txt"}), &big)));
        // Polled once: it has handed its work to the (busy) pool and waits.
        assert!(futures::poll!(big_read.as_mut()).is_pending());
        release.send(()).unwrap();
        busy.await.unwrap().unwrap();
        assert_eq!(big_read.await.unwrap().text, big_text);
    });
}

#[tokio::test]
async fn read_folder_flat_and_recursive() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    std::fs::write(root.join("b.txt"), "").unwrap();
    std::fs::write(root.join("sub/a.txt"), "").unwrap();
    let out = ReadFolder
        .execute(ctx(json!({"path": "."}), root))
        .await
        .unwrap();
    assert_eq!(out.text, "b.txt\nsub/");
    let out = ReadFolder
        .execute(ctx(json!({"path": ".", "recursive": true}), root))
        .await
        .unwrap();
    assert_eq!(out.text, "b.txt\nsub/\nsub/a.txt\nsub/deeper/");
}

#[tokio::test]
async fn metadata_and_hash() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("f.txt");
    std::fs::write(&file, "abc").unwrap();
    let out = FileMetadata
        .execute(ctx(json!({"path": "f.txt"}), &file))
        .await
        .unwrap();
    assert!(out.text.contains("kind: file"), "{}", out.text);
    assert!(out.text.contains("size: 3 bytes"), "{}", out.text);
    assert!(out.text.contains("readonly: false"), "{}", out.text);
    assert!(out.text.contains("modified: 20"), "{}", out.text);
    let out = HashFile
        .execute(ctx(json!({"path": "f.txt"}), &file))
        .await
        .unwrap();
    assert_eq!(
        out.text,
        "sha256 ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  f.txt (3 bytes)"
    );
}

#[test]
fn rfc3339_dates() {
    assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
    let leap = UNIX_EPOCH + std::time::Duration::from_secs(1_709_211_909);
    assert_eq!(rfc3339(leap), "2024-02-29T13:05:09Z");
    let before = UNIX_EPOCH - std::time::Duration::from_secs(1);
    assert_eq!(rfc3339(before), "1969-12-31T23:59:59Z");
}
