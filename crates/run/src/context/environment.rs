//! The environment block: a short standing text telling the model the date, the operating
//! system, its working folder and the tools it has with their limits.
//!
//! Pure: the driver gathers the facts (the clock, the sandbox's policy) and this module only
//! writes them out. It must never read the clock or the environment itself, so that the
//! block is testable and a resumed run keeps the block it recorded.

use std::path::PathBuf;

/// What the environment block says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvironmentFacts {
    /// Today's date, UTC, `YYYY-MM-DD`.
    pub date: String,
    /// The operating system (`std::env::consts::OS`).
    pub os: String,
    /// The processor architecture (`std::env::consts::ARCH`).
    pub arch: String,
    /// The folder relative paths resolve against.
    pub working_dir: PathBuf,
    /// The tools offered to the run, by name.
    pub tools: Vec<String>,
    /// Folders the file tools may read under.
    pub read_roots: Vec<PathBuf>,
    /// Folders the file tools may write under.
    pub write_roots: Vec<PathBuf>,
    /// Whether tools may reach the network.
    pub network: bool,
    /// The default limit of model calls per phase.
    pub max_iterations: u32,
}

impl EnvironmentFacts {
    /// The facts of this machine (OS and architecture) on `date`, with the rest to fill in.
    pub fn on(date: impl Into<String>, working_dir: PathBuf) -> Self {
        EnvironmentFacts {
            date: date.into(),
            os: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
            working_dir,
            tools: Vec::new(),
            read_roots: Vec::new(),
            write_roots: Vec::new(),
            network: false,
            max_iterations: 0,
        }
    }
}

fn folders(list: &[PathBuf]) -> String {
    if list.is_empty() {
        "none".to_string()
    } else {
        list.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The block's text.
pub fn environment_block(f: &EnvironmentFacts) -> String {
    let tools = if f.tools.is_empty() {
        "none".to_string()
    } else {
        f.tools.join(", ")
    };
    let network = if f.network { "allowed" } else { "not allowed" };
    format!(
        "Environment of this run:\n\
         - date (UTC): {}\n\
         - operating system: {} ({})\n\
         - working folder: {} (relative paths resolve against it)\n\
         - tools: {tools}\n\
         - file tools read under: {}\n\
         - file tools write under: {}\n\
         - network access for tools: {network}\n\
         - iteration limit: {} model calls per phase unless the phase sets its own",
        f.date,
        f.os,
        f.arch,
        f.working_dir.display(),
        folders(&f.read_roots),
        folders(&f.write_roots),
        f.max_iterations,
    )
}
