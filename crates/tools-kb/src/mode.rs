//! Query modes: what a query retrieves and how the answer is written ([`ModeConfig`]), the
//! built-in modes (grounded, insight, hybrid), and the validation of a mode an agent composes.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{KbError, Result};
use crate::retrieve::Profile;

/// Local retrieval settings of a mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LocalPolicy {
    /// Whether the knowledge base is searched at all.
    pub enabled: bool,
    /// Below this relevance (0..1) the LLM is not asked: the answer lists the closest
    /// excerpts instead.
    pub min_relevance: f32,
    /// Sources kept after post-processing.
    pub k: usize,
}

impl Default for LocalPolicy {
    fn default() -> Self {
        LocalPolicy {
            enabled: true,
            min_relevance: 0.25,
            k: 12,
        }
    }
}

/// Remote-source settings of a mode. Remote sources are used only when this is enabled
/// **and** the sandbox allows URL access.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RemotePolicy {
    /// Whether remote sources are queried.
    pub enabled: bool,
    /// How remote results are merged with local ones (`weighted`, `interleave`).
    pub rank_strategy: String,
    /// Most remote results kept.
    pub max_results: usize,
    /// Which configured remote providers to ask (empty: all).
    pub remote_providers: Vec<String>,
}

impl Default for RemotePolicy {
    fn default() -> Self {
        RemotePolicy {
            enabled: false,
            rank_strategy: "weighted".into(),
            max_results: 5,
            remote_providers: Vec::new(),
        }
    }
}

/// Whether the answer may use the model's own knowledge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ModelKnowledgePolicy {
    /// Allowed.
    pub enabled: bool,
    /// Such statements must be marked `[model knowledge]`.
    pub require_label: bool,
}

impl Default for ModelKnowledgePolicy {
    fn default() -> Self {
        ModelKnowledgePolicy {
            enabled: false,
            require_label: true,
        }
    }
}

/// A query mode (REFERENCE "Query pipeline"): retrieval profile, local/remote/model-knowledge
/// policies, synthesis style and instructions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ModeConfig {
    /// `lexical`, `dense_only`, `hybrid_rrf` or `llm_rerank`.
    pub retrieval_profile: String,
    /// Local retrieval.
    pub local_policy: LocalPolicy,
    /// Remote sources.
    pub remote_policy: RemotePolicy,
    /// Model knowledge.
    pub model_knowledge_policy: ModelKnowledgePolicy,
    /// `grounded` (only what the sources say) or `insight` (connect, compare, infer).
    pub synthesis_style: String,
    /// Extra instructions appended to the synthesis prompt.
    pub synthesis_instructions: Option<String>,
}

impl Default for ModeConfig {
    fn default() -> Self {
        grounded()
    }
}

/// `grounded`: hybrid retrieval, relevance ≥ 0.25, 12 sources, no remote, no model knowledge.
pub fn grounded() -> ModeConfig {
    ModeConfig {
        retrieval_profile: "hybrid_rrf".into(),
        local_policy: LocalPolicy {
            enabled: true,
            min_relevance: 0.25,
            k: 12,
        },
        remote_policy: RemotePolicy::default(),
        model_knowledge_policy: ModelKnowledgePolicy {
            enabled: false,
            require_label: true,
        },
        synthesis_style: "grounded".into(),
        synthesis_instructions: None,
    }
}

/// `insight`: no relevance floor, 8 sources, remote and model knowledge on.
pub fn insight() -> ModeConfig {
    ModeConfig {
        retrieval_profile: "hybrid_rrf".into(),
        local_policy: LocalPolicy {
            enabled: true,
            min_relevance: 0.0,
            k: 8,
        },
        remote_policy: RemotePolicy {
            enabled: true,
            ..RemotePolicy::default()
        },
        model_knowledge_policy: ModelKnowledgePolicy {
            enabled: true,
            require_label: true,
        },
        synthesis_style: "insight".into(),
        synthesis_instructions: None,
    }
}

/// `hybrid`: relevance ≥ 0.15, 12 sources, remote and model knowledge on.
pub fn hybrid() -> ModeConfig {
    ModeConfig {
        retrieval_profile: "hybrid_rrf".into(),
        local_policy: LocalPolicy {
            enabled: true,
            min_relevance: 0.15,
            k: 12,
        },
        remote_policy: RemotePolicy {
            enabled: true,
            ..RemotePolicy::default()
        },
        model_knowledge_policy: ModelKnowledgePolicy {
            enabled: true,
            require_label: true,
        },
        synthesis_style: "grounded".into(),
        synthesis_instructions: None,
    }
}

/// The built-in modes by name.
pub fn built_in_modes() -> BTreeMap<String, ModeConfig> {
    [
        ("grounded", grounded()),
        ("insight", insight()),
        ("hybrid", hybrid()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// A mode as a request gives it: a name, or a whole [`ModeConfig`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ModeSpec {
    /// A built-in or configured mode's name.
    Name(String),
    /// A mode composed by the caller.
    Config(Box<ModeConfig>),
}

/// What a composed mode may ask for: checked before any tool that takes a mode runs
/// (seed 002 §13.2), by the harness and again by the tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModePolicy {
    /// Retrieval profiles a mode may name.
    pub allowed_profiles: Vec<String>,
    /// Whether the sandbox allows URL access (needed for remote sources).
    pub allow_url_access: bool,
}

impl ModePolicy {
    /// Every profile allowed when `allowed` is empty.
    pub fn new(allowed: &[String], allow_url_access: bool) -> Self {
        let allowed_profiles = if allowed.is_empty() {
            Profile::ALL
                .iter()
                .map(|p| p.as_str().to_string())
                .collect()
        } else {
            allowed.to_vec()
        };
        ModePolicy {
            allowed_profiles,
            allow_url_access,
        }
    }

    /// Check `mode` against the policy.
    ///
    /// # Errors
    /// [`KbError::InvalidRequest`] saying which field is refused and why.
    pub fn validate(&self, mode: &ModeConfig) -> Result<()> {
        let profile = Profile::parse(&mode.retrieval_profile)?;
        if !self.allowed_profiles.iter().any(|p| p == profile.as_str()) {
            return Err(KbError::InvalidRequest(format!(
                "mode refused: retrieval_profile '{}' is not allowed here (allowed: {})",
                mode.retrieval_profile,
                self.allowed_profiles.join(", ")
            )));
        }
        if mode.remote_policy.enabled && !self.allow_url_access {
            return Err(KbError::InvalidRequest(
                "mode refused: remote_policy.enabled needs URL access, which the sandbox does not \
                 allow (sandbox.allow_url_access = false); set remote_policy.enabled = false"
                    .into(),
            ));
        }
        if !(0.0..=1.0).contains(&mode.local_policy.min_relevance) {
            return Err(KbError::InvalidRequest(format!(
                "mode refused: local_policy.min_relevance must be between 0 and 1, not {}",
                mode.local_policy.min_relevance
            )));
        }
        if mode.local_policy.k == 0 || mode.local_policy.k > 100 {
            return Err(KbError::InvalidRequest(format!(
                "mode refused: local_policy.k must be between 1 and 100, not {}",
                mode.local_policy.k
            )));
        }
        Ok(())
    }
}

/// Resolve a mode: a name is looked up among the configured modes, then the built-ins.
///
/// # Errors
/// [`KbError::InvalidRequest`] for an unknown name.
pub fn resolve(spec: &ModeSpec, custom: &BTreeMap<String, ModeConfig>) -> Result<ModeConfig> {
    match spec {
        ModeSpec::Config(m) => Ok((**m).clone()),
        ModeSpec::Name(name) => {
            if let Some(m) = custom.get(name) {
                return Ok(m.clone());
            }
            let built = built_in_modes();
            built.get(name).cloned().ok_or_else(|| {
                let mut names: Vec<String> = built.keys().cloned().collect();
                names.extend(custom.keys().cloned());
                names.sort();
                KbError::InvalidRequest(format!(
                    "unknown mode '{name}'; available: {}",
                    names.join(", ")
                ))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_modes_match_the_reference() {
        let g = grounded();
        assert_eq!(
            (
                g.retrieval_profile.as_str(),
                g.local_policy.min_relevance,
                g.local_policy.k
            ),
            ("hybrid_rrf", 0.25, 12)
        );
        assert!(!g.remote_policy.enabled && !g.model_knowledge_policy.enabled);
        let i = insight();
        assert_eq!((i.local_policy.min_relevance, i.local_policy.k), (0.0, 8));
        assert!(i.remote_policy.enabled && i.model_knowledge_policy.enabled);
        let h = hybrid();
        assert_eq!((h.local_policy.min_relevance, h.local_policy.k), (0.15, 12));
        assert!(h.remote_policy.enabled && h.model_knowledge_policy.enabled);
    }

    #[test]
    fn names_resolve_custom_first_then_built_in() {
        let mut custom = BTreeMap::new();
        let mut mine = grounded();
        mine.local_policy.k = 3;
        custom.insert("mine".to_string(), mine.clone());
        assert_eq!(
            resolve(&ModeSpec::Name("mine".into()), &custom).unwrap(),
            mine
        );
        assert_eq!(
            resolve(&ModeSpec::Name("insight".into()), &custom).unwrap(),
            insight()
        );
        let e = resolve(&ModeSpec::Name("nope".into()), &custom)
            .unwrap_err()
            .to_string();
        assert!(e.contains("grounded") && e.contains("mine"), "{e}");
    }

    #[test]
    fn a_mode_is_a_name_or_an_object_on_the_wire() {
        let n: ModeSpec = serde_json::from_value(serde_json::json!("grounded")).unwrap();
        assert_eq!(n, ModeSpec::Name("grounded".into()));
        let c: ModeSpec = serde_json::from_value(
            serde_json::json!({"retrieval_profile": "lexical", "local_policy": {"k": 2}}),
        )
        .unwrap();
        let ModeSpec::Config(m) = c else {
            panic!("not a config")
        };
        assert_eq!(m.retrieval_profile, "lexical");
        assert_eq!(m.local_policy.k, 2);
        assert_eq!(m.local_policy.min_relevance, 0.25);
    }

    #[test]
    fn validation_refuses_disallowed_profiles_and_remote_without_url_access() {
        let policy = ModePolicy::new(&["lexical".to_string(), "hybrid_rrf".to_string()], false);
        assert!(policy.validate(&grounded()).is_ok());
        let mut m = grounded();
        m.retrieval_profile = "llm_rerank".into();
        assert!(
            policy
                .validate(&m)
                .unwrap_err()
                .to_string()
                .contains("not allowed")
        );
        m.retrieval_profile = "made_up".into();
        assert!(
            policy
                .validate(&m)
                .unwrap_err()
                .to_string()
                .contains("made_up")
        );
        let e = policy.validate(&insight()).unwrap_err().to_string();
        assert!(e.contains("allow_url_access"), "{e}");
        assert!(ModePolicy::new(&[], true).validate(&insight()).is_ok());
        let mut bad_k = grounded();
        bad_k.local_policy.k = 0;
        assert!(policy.validate(&bad_k).is_err());
    }
}
