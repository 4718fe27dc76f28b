//! Agent definition files on disk: where they are found and how one is read. No
//! configuration here (the configuration's checks use it to know the agents' names).
//!
//! - The project's definitions: `<root>/lsm-agents/*.md`, next to `lsm.toml`. Run records
//!   stay in `[agents] agents_folder` (`.lsm/agents` by default): never the same folder.
//! - The user's: `$XDG_CONFIG_HOME/lsm/agents/*.md`, else `~/.config/lsm/agents/*.md`, beside
//!   the user configuration file.

use std::path::{Path, PathBuf};

use lsm_agents::DefinitionError;
use lsm_agents::definition::{self, AgentDefinition, DefinitionSource};

/// The project's definitions folder, under its root.
pub const PROJECT_FOLDER: &str = "lsm-agents";

/// The project's definitions folder for `root`.
pub fn project_folder(root: &Path) -> PathBuf {
    root.join(PROJECT_FOLDER)
}

/// The `*.md` files of `folder`, by name (none when it does not exist).
fn definition_files(folder: &Path) -> Result<Vec<PathBuf>, DefinitionError> {
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(error_at(folder, format!("cannot read the folder: {e}")));
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md") && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

pub(crate) fn error_at(path: &Path, message: String) -> DefinitionError {
    DefinitionError {
        file: path.display().to_string(),
        line: 1,
        message,
    }
}

/// Read and parse the definition file `path`, from `source`'s layer (or, for `lsm agent
/// check`, as a project file). Its `contract`, when given, is resolved against its folder.
///
/// # Errors
/// The file cannot be read or is not a valid definition.
pub fn read(path: &Path, source: DefinitionSource) -> Result<AgentDefinition, DefinitionError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| error_at(path, format!("cannot read the definition: {e}")))?;
    let mut def = definition::parse(&text, source, &path.display().to_string())?;
    if let (Some(contract), Some(dir)) = (&def.settings.contract, path.parent()) {
        def.settings.contract = Some(dir.join(contract));
    }
    Ok(def)
}

/// The definitions of one folder.
pub(crate) fn layer(
    folder: &Path,
    source: impl Fn(PathBuf) -> DefinitionSource,
) -> Result<Vec<AgentDefinition>, DefinitionError> {
    definition_files(folder)?
        .into_iter()
        .map(|path| read(&path, source(path.clone())))
        .collect()
}

/// The names of the agents defined in the files of `folders`, leniently: a file that does
/// not parse is skipped here (the commands that use agents report it). For configuration
/// checks that name agents.
pub fn defined_names(folders: &[PathBuf]) -> Vec<String> {
    folders
        .iter()
        .flat_map(|folder| definition_files(folder).unwrap_or_default())
        .filter_map(|path| read(&path, DefinitionSource::Project { path: path.clone() }).ok())
        .map(|def| def.name().to_string())
        .collect()
}
