//! The dependency graph the layer rules are checked against.
//!
//! [`Graph`] is deliberately small: package name → the names of its *normal* dependencies
//! (dev- and build-dependencies are left out: they never end up in the linked library), plus,
//! for workspace members, where the package lives and which kinds of targets it has. It is
//! built from `cargo metadata` by [`Graph::from_metadata`], or by hand in unit tests.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cargo_metadata::{DependencyKind, Metadata, PackageId, TargetKind};

/// What we know about a workspace member besides its dependencies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The package directory, relative to the workspace root (e.g. `crates/agents`).
    pub dir: PathBuf,
    /// The package has a library target (`lib`, `rlib`, `proc-macro`, …).
    pub has_lib: bool,
    /// The package has at least one binary target.
    pub has_bin: bool,
}

/// One package of the resolved graph.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Package {
    /// Names of its normal dependencies (resolved, for any target platform, all features).
    pub deps: BTreeSet<String>,
    /// `Some` for a workspace member.
    pub member: Option<Member>,
}

/// Package name → package. Two versions of one external crate are merged under one name,
/// which can only add edges, so a check over this graph is never more lenient than the real one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    /// Every package of the resolved graph, by name.
    pub packages: BTreeMap<String, Package>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or updates) a workspace member.
    pub fn add_member(&mut self, name: &str, dir: impl AsRef<Path>, has_lib: bool, has_bin: bool) {
        self.packages.entry(name.to_owned()).or_default().member = Some(Member {
            dir: dir.as_ref().to_path_buf(),
            has_lib,
            has_bin,
        });
    }

    /// Adds a normal dependency edge `from -> to`, creating either package if needed.
    pub fn add_dep(&mut self, from: &str, to: &str) {
        self.packages.entry(to.to_owned()).or_default();
        self.packages
            .entry(from.to_owned())
            .or_default()
            .deps
            .insert(to.to_owned());
    }

    /// The workspace members, by name.
    pub fn members(&self) -> impl Iterator<Item = (&str, &Member)> {
        self.packages
            .iter()
            .filter_map(|(name, pkg)| pkg.member.as_ref().map(|m| (name.as_str(), m)))
    }

    /// The workspace member called `name`, if any.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.packages.get(name).and_then(|p| p.member.as_ref())
    }

    /// Every package reachable from `start` through normal dependencies (never `start`
    /// itself), each with a shortest path `start -> … -> package`.
    pub fn reachable_from(&self, start: &str) -> BTreeMap<String, Vec<String>> {
        let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        let mut seen = BTreeSet::from([start]);
        while let Some(current) = queue.pop_front() {
            let Some(pkg) = self.packages.get(current) else {
                continue;
            };
            for dep in &pkg.deps {
                if seen.insert(dep.as_str()) {
                    parent.insert(dep.as_str(), current);
                    queue.push_back(dep.as_str());
                }
            }
        }
        parent
            .keys()
            .map(|&reached| {
                let mut path = vec![reached.to_owned()];
                let mut at = reached;
                while let Some(&up) = parent.get(at) {
                    path.push(up.to_owned());
                    at = up;
                }
                path.reverse();
                (reached.to_owned(), path)
            })
            .collect()
    }

    /// Builds the graph from `cargo metadata` output (which must include the resolve graph,
    /// i.e. not be run with `--no-deps`).
    pub fn from_metadata(meta: &Metadata) -> Result<Self> {
        let resolve = meta.resolve.as_ref().context(
            "`cargo metadata` returned no dependency resolution (was it run with --no-deps?)",
        )?;
        let names: BTreeMap<&PackageId, &str> = meta
            .packages
            .iter()
            .map(|p| (&p.id, p.name.as_str()))
            .collect();
        let name_of = |id: &PackageId| -> Result<&str> {
            names
                .get(id)
                .copied()
                .with_context(|| format!("`cargo metadata` resolves unknown package id {id}"))
        };

        let mut graph = Graph::new();
        for node in &resolve.nodes {
            let from = name_of(&node.id)?;
            graph.packages.entry(from.to_owned()).or_default();
            for dep in &node.deps {
                if dep
                    .dep_kinds
                    .iter()
                    .any(|k| k.kind == DependencyKind::Normal)
                {
                    graph.add_dep(from, name_of(&dep.pkg)?);
                }
            }
        }

        let root = meta.workspace_root.as_std_path();
        for id in &meta.workspace_members {
            let pkg = &meta[id];
            let manifest_dir = pkg
                .manifest_path
                .parent()
                .with_context(|| format!("manifest path {} has no parent", pkg.manifest_path))?
                .as_std_path();
            let dir = manifest_dir.strip_prefix(root).unwrap_or(manifest_dir);
            let has = |kinds: &[TargetKind]| {
                pkg.targets
                    .iter()
                    .any(|t| t.kind.iter().any(|k| kinds.contains(k)))
            };
            let has_lib = has(&[
                TargetKind::Lib,
                TargetKind::RLib,
                TargetKind::DyLib,
                TargetKind::CDyLib,
                TargetKind::StaticLib,
                TargetKind::ProcMacro,
            ]);
            let has_bin = has(&[TargetKind::Bin]);
            graph.add_member(pkg.name.as_str(), dir, has_lib, has_bin);
        }
        Ok(graph)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reachable_from_gives_shortest_paths() {
        let mut g = Graph::new();
        g.add_dep("a", "b");
        g.add_dep("b", "c");
        g.add_dep("a", "c");
        g.add_dep("c", "d");
        let reach = g.reachable_from("a");
        assert_eq!(reach["b"], ["a", "b"]);
        assert_eq!(reach["c"], ["a", "c"]);
        assert_eq!(reach["d"], ["a", "c", "d"]);
        assert!(!reach.contains_key("a"));
    }

    #[test]
    fn reachable_from_terminates_on_cycles() {
        let mut g = Graph::new();
        g.add_dep("a", "b");
        g.add_dep("b", "a");
        let reach = g.reachable_from("a");
        assert_eq!(reach["b"], ["a", "b"]);
        assert_eq!(reach.len(), 1);
    }

    fn metadata_of(manifest: &Path) -> Metadata {
        cargo_metadata::MetadataCommand::new()
            .manifest_path(manifest)
            .features(cargo_metadata::CargoOpt::AllFeatures)
            .exec()
            .unwrap()
    }

    #[test]
    fn the_real_workspace_is_read_with_members_targets_and_normal_deps_only() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let g = Graph::from_metadata(&metadata_of(&root.join("Cargo.toml"))).unwrap();
        let agents = g.member("lsm-agents").unwrap();
        assert_eq!(agents.dir, Path::new("crates/agents"));
        assert!(agents.has_lib && !agents.has_bin);
        assert!(g.member("lsm-cli").unwrap().has_bin);
        assert_eq!(g.member("lsm-e2e").unwrap().dir, Path::new("tests"));
        assert!(g.packages["lsm-agents"].deps.contains("lsm-phase"));
        // proptest is a dev-dependency of lsm-phase: not part of the layering.
        assert!(!g.packages["lsm-phase"].deps.contains("proptest"));
        assert!(g.member("serde").is_none());
    }

    /// A throwaway workspace, read through real `cargo metadata`, with a transitive breach
    /// (agents -> tools-kb -> sandbox) and a dev-dependency that must not count
    /// (phase -[dev]-> sandbox).
    #[test]
    fn a_transitive_breach_in_a_real_workspace_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let krate = |name: &str, sub: &str, deps: &str, dev_deps: &str| {
            let d = root.join("crates").join(sub);
            std::fs::create_dir_all(d.join("src")).unwrap();
            std::fs::write(d.join("src/lib.rs"), "").unwrap();
            std::fs::write(
                d.join("Cargo.toml"),
                format!(
                    "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
                     [dependencies]\n{deps}\n[dev-dependencies]\n{dev_deps}\n"
                ),
            )
            .unwrap();
        };
        krate(
            "lsm-phase",
            "phase",
            "",
            "lsm-sandbox = { path = \"../sandbox\" }",
        );
        krate("lsm-sandbox", "sandbox", "", "");
        krate(
            "lsm-tools-kb",
            "tools-kb",
            "lsm-sandbox = { path = \"../sandbox\" }",
            "",
        );
        krate(
            "lsm-agents",
            "agents",
            "lsm-phase = { path = \"../phase\" }\nlsm-tools-kb = { path = \"../tools-kb\" }",
            "",
        );
        std::fs::write(
            root.join("Cargo.toml"),
            "[workspace]\nresolver = \"2\"\nmembers = [\"crates/*\"]\n",
        )
        .unwrap();

        let g = Graph::from_metadata(&metadata_of(&root.join("Cargo.toml"))).unwrap();
        let violations: Vec<_> = crate::layers::check(&g)
            .into_iter()
            .filter(|v| v.rule != crate::layers::TABLE_RULE)
            .collect();
        let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
        assert!(
            lines.contains(
                &"rule 1: lsm-agents must depend on lsm-phase only, but reaches lsm-sandbox \
                  via lsm-agents -> lsm-tools-kb -> lsm-sandbox"
                    .to_owned()
            ),
            "{lines:#?}"
        );
        assert!(violations.iter().all(|v| v.rule == "rule 1"), "{lines:#?}");
        assert_eq!(violations.len(), 2, "{lines:#?}");
    }
}
