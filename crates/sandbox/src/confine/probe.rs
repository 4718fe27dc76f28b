//! Finding out, once per helper, what the kernel lets the helper apply.
//!
//! The probe starts the helper with a plan that runs nothing: it applies every layer it can,
//! as it would for a program, and reports. A helper that cannot apply Landlock fails the
//! probe; one whose user namespace was refused reports that, and the policy decides whether
//! the namespace was needed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::HELPER_ARG;
use super::plan::Plan;

/// What the helper could apply on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Probe {
    /// The Landlock ABI in force.
    pub landlock_abi: i32,
    /// Whether a user namespace could be entered.
    pub namespaces: bool,
    /// Why not, when it could not.
    pub namespace_error: Option<String>,
}

impl Probe {
    /// `landlock abi 7 + user/mount/pid/net namespaces + seccomp + rlimits`.
    pub(crate) fn describe(&self, plan: &Plan) -> String {
        let mut parts = vec![format!("landlock abi {}", self.landlock_abi)];
        if self.namespaces {
            parts.push(if plan.allow_network {
                "user/mount/pid namespaces".into()
            } else {
                "user/mount/pid/net namespaces".into()
            });
        }
        parts.push("seccomp".into());
        parts.push("rlimits".into());
        parts.join(" + ")
    }
}

/// Why the helper could not be probed: the OS sandbox is then unavailable. Kept for the
/// life of the process (the probe is not repeated), so it is cheap to clone.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ProbeError {
    /// The probe's plan could not be serialised (a bug, not a property of the machine).
    #[error("could not describe the probe: {0}")]
    Describe(Arc<serde_json::Error>),
    /// The helper executable could not be started: check that it exists and is executable.
    #[error("could not start the sandbox helper {}: {error}", .helper.display())]
    Start {
        /// The helper.
        helper: PathBuf,
        /// Why it did not start.
        error: Arc<std::io::Error>,
    },
    /// The helper ran and could not apply the sandbox; its own explanation (what the kernel
    /// lacks or refused).
    #[error("{0}")]
    Refused(String),
    /// The helper answered with something that is not a probe report: most likely a helper
    /// of another version. Use the helper built with this program.
    #[error(
        "the sandbox helper {} answered the probe with something else ({error}); is it this version's helper?",
        .helper.display()
    )]
    Answer {
        /// The helper.
        helper: PathBuf,
        /// Why its answer did not parse.
        error: Arc<serde_json::Error>,
    },
}

static PROBES: Mutex<Option<HashMap<PathBuf, Result<Probe, ProbeError>>>> = Mutex::new(None);

/// The probe of `helper`, run on first use and remembered.
pub(crate) fn probe(helper: &Path) -> Result<Probe, ProbeError> {
    let mut probes = PROBES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let probes = probes.get_or_insert_with(HashMap::new);
    if let Some(known) = probes.get(helper) {
        return known.clone();
    }
    let result = run_probe(helper);
    if let Err(reason) = &result {
        tracing::warn!(helper = %helper.display(), %reason, "the OS sandbox is unavailable");
    }
    probes.insert(helper.to_path_buf(), result.clone());
    result
}

fn run_probe(helper: &Path) -> Result<Probe, ProbeError> {
    let plan =
        serde_json::to_string(&Plan::default()).map_err(|e| ProbeError::Describe(Arc::new(e)))?;
    let output = std::process::Command::new(helper)
        .arg(HELPER_ARG)
        .arg(plan)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| ProbeError::Start {
            helper: helper.to_path_buf(),
            error: Arc::new(e),
        })?;
    if !output.status.success() {
        return Err(ProbeError::Refused(
            String::from_utf8_lossy(&output.stderr).trim().to_string(),
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| ProbeError::Answer {
        helper: helper.to_path_buf(),
        error: Arc::new(e),
    })
}
