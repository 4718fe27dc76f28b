//! The [`Tool`] trait: what a tool declares about itself, and how it is called.

use crate::call::{PathArg, RiskLevel, ToolOutput};
use crate::{ToolContext, ToolError};

/// A tool an agent can call. Executed only through [`crate::Sandbox::execute`].
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    /// Unique name (`read_file`).
    fn name(&self) -> &str;

    /// One or two sentences for the model.
    fn description(&self) -> &str;

    /// JSON schema of the arguments object; derive it with [`schema_for`].
    fn parameters(&self) -> serde_json::Value;

    /// Risk level.
    fn risk(&self) -> RiskLevel;

    /// Whether a person must approve a call unless configuration says otherwise.
    fn needs_permission(&self) -> bool {
        false
    }

    /// Whether a call waits for a person (the `ask_user` tool). Such a call is exempt from
    /// the sandbox's `timeout_seconds`: how long a person may take is the interaction
    /// channel's business (its own two-phase timeout), not the runner's.
    fn waits_for_person(&self) -> bool {
        false
    }

    /// Whether the tool is handled outside `lsm` (a deferred tool): a call of it is never
    /// executed here; the run pauses until its result is supplied (`lsm runs resume
    /// --tool-result`).
    fn deferred(&self) -> bool {
        false
    }

    /// Whether a call is bounded by limits of its own rather than by the sandbox's
    /// `timeout_seconds`: a tool that waits for a person (bounded by the interaction
    /// channel's timeout), one that runs a whole agent (bounded by that run's token budget
    /// and iteration limits, and stopped with it), or one that enforces
    /// [`ToolContext::timeout`] itself so that it can clean up before it returns (`bash`
    /// ends every process the call started; it returns [`crate::ToolError::TimedOut`]).
    fn bounds_itself(&self) -> bool {
        self.waits_for_person()
    }

    /// Arguments that are paths. Every one is confined by the sandbox before the call, and the
    /// tool gets the resolved path from [`ToolContext::path`].
    fn path_args(&self) -> &[PathArg] {
        &[]
    }

    /// The argument that holds a command line, if this tool executes one. The sandbox parses
    /// and checks it; the tool gets it from [`ToolContext::command`].
    fn command_arg(&self) -> Option<&'static str> {
        None
    }

    /// The arguments that identify a call, for the harness's stall detection (its progress
    /// fingerprint): two calls with equal values of these are the same call, whatever their
    /// other (cosmetic) arguments say. `None`, the default: every argument counts.
    fn identity_args(&self) -> Option<&[&'static str]> {
        None
    }

    /// What the call would change, for the person asked to approve it: a unified diff of the
    /// file it would write (see [`crate::preview::file_diff`]). Called only with validated
    /// arguments and confined paths, before the permission question; it must not change
    /// anything. `None`, the default: nothing to show beyond the arguments.
    fn preview(&self, ctx: &ToolContext) -> Option<String> {
        let _ = ctx;
        None
    }

    /// Run the call. Arguments have been validated against [`Tool::parameters`].
    ///
    /// # Errors
    /// A [`ToolError`] the model will see as the tool's failure.
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError>;
}

/// The JSON schema of `T` as a `serde_json::Value`, for [`Tool::parameters`].
///
/// Use `#[serde(deny_unknown_fields)]` on `T` so unexpected arguments are refused.
pub fn schema_for<T: schemars::JsonSchema>() -> serde_json::Value {
    let mut v = schemars::schema_for!(T).to_value();
    if let Some(obj) = v.as_object_mut() {
        // The model does not need these and they only cost tokens.
        obj.remove("$schema");
        obj.remove("title");
    }
    v
}
