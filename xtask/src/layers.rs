//! The crate layering rules of DESIGN.md ("Dependency rules"), as data, and a pure check of a
//! [`Graph`] against them.
//!
//! The layering is the security model: an agent cannot call a provider, a tool or the harness
//! because its crate cannot even *name* them. These rules keep it that way as the code grows.
//! Only normal dependencies count (dev-dependencies are test wiring, build-dependencies run
//! at build time); they count transitively where the rule says so.

use std::fmt;
use std::path::Path;

use crate::graph::Graph;

/// A crate and the only `lsm-*` crates it may reach through normal dependencies, directly or
/// transitively.
#[derive(Debug)]
pub struct ReachRule {
    /// The rule's label, as printed.
    pub rule: &'static str,
    /// The constrained crate.
    pub krate: &'static str,
    /// The only `lsm-*` crates it may reach.
    pub allowed: &'static [&'static str],
    /// The rule in words, as printed before "but …".
    pub summary: &'static str,
}

/// A crate and the only workspace crates that may depend on it.
#[derive(Debug)]
pub struct DependentRule {
    /// The rule's label, as printed.
    pub rule: &'static str,
    /// The protected crate.
    pub krate: &'static str,
    /// The only crates that may depend on it.
    pub allowed: &'static [&'static str],
    /// Whether reaching it through other crates counts too, or only a direct dependency.
    pub transitive: bool,
    /// With `transitive`: the crates through which any crate may reach it (a front end
    /// reaches the harness through the composition root, `lsm-app`).
    pub through: &'static [&'static str],
    /// The rule in words, as printed before "but …".
    pub summary: &'static str,
}

/// The front ends' rule: a crate that depends on [`FrontEndRule::root`] (a front end: the
/// `lsm` binary, a web console) may depend directly on no `lsm-*` crate but the root and
/// the crates of [`FrontEndRule::types`], whose types it still names.
#[derive(Debug)]
pub struct FrontEndRule {
    /// The rule's label, as printed.
    pub rule: &'static str,
    /// The composition root.
    pub root: &'static str,
    /// The lower crates a front end may still name directly.
    pub types: &'static [&'static str],
    /// The rule in words, as printed before "but …".
    pub summary: &'static str,
}

/// Rules 1, 2 and 5: what a crate may reach.
pub const REACH_RULES: &[ReachRule] = &[
    ReachRule {
        rule: "rule 1",
        krate: "lsm-agents",
        allowed: &["lsm-phase"],
        summary: "lsm-agents must depend on lsm-phase only",
    },
    ReachRule {
        rule: "rule 2",
        krate: "lsm-phase",
        allowed: &[],
        summary: "lsm-phase must depend on no lsm-* crate",
    },
    // Rule 5: the MCP client turns a server's tools into sandbox tools; it must not be able
    // to reach a provider, the harness or an agent (an MCP tool is as untrusted as any tool).
    ReachRule {
        rule: "rule 5",
        krate: "lsm-mcp",
        allowed: &["lsm-sandbox"],
        summary: "lsm-mcp must depend on lsm-sandbox only",
    },
];

/// The composition root: the one library that wires the concrete crates together.
pub const ROOT: &str = "lsm-app";

/// Rules 3 to 6: who may depend on a crate.
pub const DEPENDENT_RULES: &[DependentRule] = &[
    // Rule 3: lsm-harness calls providers for agents, lsm-tools-kb for synthesis inside a
    // tool; the composition root constructs the concrete providers it hands to them.
    DependentRule {
        rule: "rule 3",
        krate: "lsm-providers",
        allowed: &["lsm-harness", "lsm-tools-kb", ROOT],
        transitive: false,
        through: &[],
        summary: "only lsm-harness and lsm-tools-kb (and lsm-app, the composition root, which \
                  constructs providers) may depend on lsm-providers",
    },
    // Rule 4: only the composition root wires the harness in; everything else (a front end,
    // binary or not) reaches it only through the root.
    DependentRule {
        rule: "rule 4",
        krate: "lsm-harness",
        allowed: &[ROOT],
        transitive: true,
        through: &[ROOT],
        summary: "only lsm-app (the composition root) may depend on lsm-harness; other crates \
                  reach it only through lsm-app",
    },
    // Rule 5: MCP servers are wired into runs, and served, by the composition root only.
    DependentRule {
        rule: "rule 5",
        krate: "lsm-mcp",
        allowed: &[ROOT],
        transitive: true,
        through: &[ROOT],
        summary: "only lsm-app (the composition root) may depend on lsm-mcp; other crates \
                  reach it only through lsm-app",
    },
    // Rule 6: the shared test doubles are dev-dependencies only, so no double (an asker that
    // approves everything) can reach a shipped program.
    DependentRule {
        rule: "rule 6",
        krate: "lsm-test-support",
        allowed: &[],
        transitive: true,
        through: &[],
        summary: "lsm-test-support is a dev-dependency only: no crate may depend on it",
    },
];

/// Rule 7: front ends use the composition root. Today's `lsm` binary still names the types
/// of these lower crates directly (the interaction requests it answers, the agents' cards it
/// shows, the knowledge base and memory it lists, exit codes from stop reasons, the
/// sandbox's confinement helper at start-up); never the harness, a provider or MCP.
pub const FRONT_END_RULE: FrontEndRule = FrontEndRule {
    rule: "rule 7",
    root: ROOT,
    types: &[
        "lsm-phase",
        "lsm-interaction",
        "lsm-sandbox",
        "lsm-agents",
        "lsm-memory",
        "lsm-tools-kb",
    ],
    summary: "a front end (a crate depending on lsm-app) may depend directly only on lsm-app \
              and lsm-phase, lsm-interaction, lsm-sandbox, lsm-agents, lsm-memory, lsm-tools-kb",
};

/// Test and tooling crates: outside rules 3 to 6 ("only the composition root, and tests,
/// wire concrete crates together"), unless they have a binary target: a program links the
/// harness only through lsm-app. `lsm-test-support` (the shared test doubles) is one: it
/// builds scripted providers and sandboxes for tests, and rule 6 keeps it out of every
/// normal dependency graph.
pub const TEST_CRATES: &[&str] = &["lsm-e2e", "lsm-test-support", "xtask"];

/// Label of the rule that every `lsm-*` library crate lives under `crates/`.
pub const LAYOUT_RULE: &str = "layout";
/// The directory the `lsm-*` crates live in.
pub const CRATES_DIR: &str = "crates";
/// `lsm-*` workspace members that live elsewhere: the end-to-end tests in `tests/`, the
/// runnable library examples in `examples/library/`. Only the layout rule exempts them: the
/// examples wire concrete crates through dev-dependencies, and a normal dependency of theirs
/// on the harness or a provider breaks rules 3 and 4 like any other crate's.
pub const LAYOUT_EXEMPT: &[&str] = &["lsm-e2e", "lsm-examples"];

/// Label of the check that every crate the rules name exists (so a rename cannot silently
/// switch a rule off).
pub const TABLE_RULE: &str = "rule table";

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule's label (`rule 1` … `rule 7`, [`LAYOUT_RULE`], [`TABLE_RULE`]).
    pub rule: &'static str,
    /// The crate that breaks the rule.
    pub krate: String,
    /// The offending dependency path, `krate -> … -> forbidden crate` (empty for layout and
    /// table violations).
    pub path: Vec<String>,
    /// The whole explanation, without the rule label.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.rule, self.message)
    }
}

fn is_lsm(name: &str) -> bool {
    name.starts_with("lsm-")
}

/// Checks `graph` against every rule; returns the violations (empty when the graph is fine).
pub fn check(graph: &Graph) -> Vec<Violation> {
    let mut out = Vec::new();
    check_table(graph, &mut out);
    for rule in REACH_RULES {
        check_reach(graph, rule, &mut out);
    }
    for rule in DEPENDENT_RULES {
        check_dependents(graph, rule, &mut out);
    }
    check_front_ends(graph, &FRONT_END_RULE, &mut out);
    check_layout(graph, &mut out);
    out
}

fn check_table(graph: &Graph, out: &mut Vec<Violation>) {
    let front = &FRONT_END_RULE;
    let named = REACH_RULES
        .iter()
        .map(|r| (r.rule, r.krate, r.allowed))
        .chain(DEPENDENT_RULES.iter().map(|r| (r.rule, r.krate, r.allowed)))
        .chain(std::iter::once((front.rule, front.root, front.types)));
    for (rule, krate, allowed) in named {
        for name in std::iter::once(&krate).chain(allowed) {
            if graph.member(name).is_none() {
                out.push(Violation {
                    rule: TABLE_RULE,
                    krate: (*name).to_owned(),
                    path: Vec::new(),
                    message: format!(
                        "{rule} names {name}, which is not a workspace member \
                         (renamed or removed? update xtask/src/layers.rs)"
                    ),
                });
            }
        }
    }
}

fn check_reach(graph: &Graph, rule: &ReachRule, out: &mut Vec<Violation>) {
    for (reached, path) in graph.reachable_from(rule.krate) {
        if is_lsm(&reached) && reached != rule.krate && !rule.allowed.contains(&reached.as_str()) {
            out.push(Violation {
                rule: rule.rule,
                krate: rule.krate.to_owned(),
                message: format!(
                    "{}, but reaches {reached} via {}",
                    rule.summary,
                    path.join(" -> ")
                ),
                path,
            });
        }
    }
}

fn check_dependents(graph: &Graph, rule: &DependentRule, out: &mut Vec<Violation>) {
    for (name, member) in graph.members() {
        if name == rule.krate || rule.allowed.contains(&name) {
            continue;
        }
        if TEST_CRATES.contains(&name) && !member.has_bin {
            continue;
        }
        let path = if rule.transitive {
            reachable_avoiding(graph, name, rule.through).remove(rule.krate)
        } else {
            graph
                .packages
                .get(name)
                .filter(|p| p.deps.contains(rule.krate))
                .map(|_| vec![name.to_owned(), rule.krate.to_owned()])
        };
        let Some(path) = path else { continue };
        let what = if member.has_bin {
            format!("{name} (a crate with a binary)")
        } else {
            name.to_owned()
        };
        out.push(Violation {
            rule: rule.rule,
            krate: name.to_owned(),
            message: format!(
                "{}, but {what} reaches {} via {}",
                rule.summary,
                rule.krate,
                path.join(" -> ")
            ),
            path,
        });
    }
}

/// Every package reachable from `start` without passing through `avoid` (never `start`
/// itself), each with a shortest path: [`Graph::reachable_from`] on the graph without them.
fn reachable_avoiding(
    graph: &Graph,
    start: &str,
    avoid: &[&str],
) -> std::collections::BTreeMap<String, Vec<String>> {
    if avoid.is_empty() {
        return graph.reachable_from(start);
    }
    let mut cut = graph.clone();
    for name in avoid {
        if *name != start
            && let Some(pkg) = cut.packages.get_mut(*name)
        {
            pkg.deps.clear();
        }
    }
    cut.reachable_from(start)
        .into_iter()
        .filter(|(reached, _)| !avoid.contains(&reached.as_str()))
        .collect()
}

fn check_front_ends(graph: &Graph, rule: &FrontEndRule, out: &mut Vec<Violation>) {
    for (name, member) in graph.members() {
        let Some(pkg) = graph.packages.get(name) else {
            continue;
        };
        if name == rule.root || !pkg.deps.contains(rule.root) {
            continue;
        }
        if TEST_CRATES.contains(&name) && !member.has_bin {
            continue;
        }
        for dep in &pkg.deps {
            if is_lsm(dep) && dep != rule.root && !rule.types.contains(&dep.as_str()) {
                out.push(Violation {
                    rule: rule.rule,
                    krate: name.to_owned(),
                    path: vec![name.to_owned(), dep.clone()],
                    message: format!("{}, but {name} depends on {dep}", rule.summary),
                });
            }
        }
    }
}

fn check_layout(graph: &Graph, out: &mut Vec<Violation>) {
    for (name, member) in graph.members() {
        if !is_lsm(name) || LAYOUT_EXEMPT.contains(&name) {
            continue;
        }
        let dir = &member.dir;
        if !dir.starts_with(CRATES_DIR) || dir == Path::new(CRATES_DIR) {
            out.push(Violation {
                rule: LAYOUT_RULE,
                krate: name.to_owned(),
                path: Vec::new(),
                message: format!(
                    "every lsm-* crate except {} must live under {CRATES_DIR}/, but {name} is at {}",
                    LAYOUT_EXEMPT.join(", "),
                    dir.display()
                ),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The workspace as DESIGN.md lays it out (and as it is today), with a few external
    /// crates so that paths through non-lsm crates are exercised.
    fn good_graph() -> Graph {
        let mut g = Graph::new();
        for (name, dir, lib, bin) in [
            ("lsm-phase", "crates/phase", true, false),
            ("lsm-interaction", "crates/interaction", true, false),
            ("lsm-sandbox", "crates/sandbox", true, false),
            ("lsm-providers", "crates/providers", true, false),
            ("lsm-harness", "crates/harness", true, false),
            ("lsm-tools-kb", "crates/tools-kb", true, false),
            ("lsm-memory", "crates/memory", true, false),
            ("lsm-agents", "crates/agents", true, false),
            ("lsm-mcp", "crates/mcp", true, true),
            ("lsm-app", "crates/app", true, false),
            ("lsm-cli", "crates/cli", false, true),
            ("lsm-e2e", "tests", true, false),
            ("lsm-examples", "examples/library", true, false),
            ("lsm-test-support", "crates/test-support", true, false),
            ("xtask", "xtask", false, true),
        ] {
            g.add_member(name, dir, lib, bin);
        }
        for (from, to) in [
            ("lsm-phase", "serde"),
            ("lsm-phase", "async-trait"),
            ("lsm-interaction", "serde"),
            ("lsm-sandbox", "serde"),
            ("lsm-sandbox", "tokio"),
            ("lsm-providers", "serde"),
            ("lsm-harness", "lsm-phase"),
            ("lsm-harness", "lsm-providers"),
            ("lsm-harness", "lsm-sandbox"),
            ("lsm-harness", "tokio"),
            ("lsm-tools-kb", "lsm-sandbox"),
            ("lsm-tools-kb", "lsm-providers"),
            ("lsm-memory", "lsm-sandbox"),
            ("lsm-memory", "rusqlite"),
            ("lsm-agents", "lsm-phase"),
            ("lsm-mcp", "lsm-sandbox"),
            ("lsm-mcp", "rmcp"),
            ("lsm-app", "lsm-phase"),
            ("lsm-app", "lsm-mcp"),
            ("lsm-app", "lsm-providers"),
            ("lsm-app", "lsm-sandbox"),
            ("lsm-app", "lsm-harness"),
            ("lsm-app", "lsm-agents"),
            ("lsm-app", "lsm-memory"),
            ("lsm-app", "clap"),
            ("lsm-cli", "lsm-app"),
            ("lsm-cli", "lsm-phase"),
            ("lsm-cli", "lsm-sandbox"),
            ("lsm-cli", "lsm-agents"),
            ("lsm-cli", "lsm-memory"),
            ("lsm-cli", "clap"),
            ("xtask", "cargo_metadata"),
            ("cargo_metadata", "serde"),
        ] {
            g.add_dep(from, to);
        }
        g
    }

    fn find<'a>(violations: &'a [Violation], rule: &str, to: &str) -> &'a Violation {
        violations
            .iter()
            .find(|v| v.rule == rule && v.path.last().map(String::as_str) == Some(to))
            .unwrap_or_else(|| panic!("no `{rule}` violation reaching {to} in {violations:#?}"))
    }

    #[test]
    fn the_designed_graph_passes() {
        assert_eq!(check(&good_graph()), Vec::new());
    }

    #[test]
    fn agents_depending_on_sandbox_directly_breaks_rule_1() {
        let mut g = good_graph();
        g.add_dep("lsm-agents", "lsm-sandbox");
        let v = check(&g);
        let hit = find(&v, "rule 1", "lsm-sandbox");
        assert_eq!(hit.krate, "lsm-agents");
        assert_eq!(hit.path, ["lsm-agents", "lsm-sandbox"]);
        assert_eq!(
            hit.to_string(),
            "rule 1: lsm-agents must depend on lsm-phase only, but reaches lsm-sandbox \
             via lsm-agents -> lsm-sandbox"
        );
        assert_eq!(v.len(), 1, "{v:#?}");
    }

    #[test]
    fn agents_depending_on_the_memory_store_breaks_rule_1() {
        let mut g = good_graph();
        g.add_dep("lsm-agents", "lsm-memory");
        let v = check(&g);
        assert_eq!(
            find(&v, "rule 1", "lsm-memory").path,
            ["lsm-agents", "lsm-memory"]
        );
        // And through it, the sandbox.
        find(&v, "rule 1", "lsm-sandbox");
    }

    #[test]
    fn the_memory_store_implementing_the_harness_trait_itself_breaks_rule_4() {
        let mut g = good_graph();
        g.add_dep("lsm-memory", "lsm-harness");
        let v = check(&g);
        let breaking: Vec<&str> = v
            .iter()
            .filter(|v| v.rule == "rule 4")
            .map(|v| v.krate.as_str())
            .collect();
        // lsm-memory directly; the binary through it (not through the root).
        assert_eq!(breaking, ["lsm-cli", "lsm-memory"], "{v:#?}");
    }

    #[test]
    fn agents_reaching_sandbox_through_tools_kb_breaks_rule_1() {
        let mut g = good_graph();
        g.add_dep("lsm-agents", "lsm-tools-kb");
        let v = check(&g);
        let hit = find(&v, "rule 1", "lsm-sandbox");
        assert_eq!(hit.krate, "lsm-agents");
        assert_eq!(hit.path, ["lsm-agents", "lsm-tools-kb", "lsm-sandbox"]);
        assert_eq!(
            hit.to_string(),
            "rule 1: lsm-agents must depend on lsm-phase only, but reaches lsm-sandbox \
             via lsm-agents -> lsm-tools-kb -> lsm-sandbox"
        );
        // The direct edge and the providers reached through it are reported too.
        find(&v, "rule 1", "lsm-tools-kb");
        find(&v, "rule 1", "lsm-providers");
    }

    #[test]
    fn agents_reaching_an_lsm_crate_through_a_non_lsm_crate_breaks_rule_1() {
        let mut g = good_graph();
        g.add_dep("lsm-agents", "some-helper");
        g.add_dep("some-helper", "lsm-harness");
        let v = check(&g);
        let hit = find(&v, "rule 1", "lsm-harness");
        assert_eq!(hit.path, ["lsm-agents", "some-helper", "lsm-harness"]);
    }

    #[test]
    fn agents_depending_on_providers_breaks_rules_1_and_3() {
        let mut g = good_graph();
        g.add_dep("lsm-agents", "lsm-providers");
        let v = check(&g);
        assert_eq!(
            find(&v, "rule 1", "lsm-providers").path,
            ["lsm-agents", "lsm-providers"]
        );
        let hit = find(&v, "rule 3", "lsm-providers");
        assert_eq!(hit.krate, "lsm-agents");
        assert_eq!(hit.path, ["lsm-agents", "lsm-providers"]);
        assert_eq!(v.len(), 2, "{v:#?}");
    }

    #[test]
    fn agents_depending_on_mcp_breaks_rules_1_and_5() {
        let mut g = good_graph();
        g.add_dep("lsm-agents", "lsm-mcp");
        let v = check(&g);
        assert_eq!(
            find(&v, "rule 1", "lsm-mcp").path,
            ["lsm-agents", "lsm-mcp"]
        );
        // And through it, the sandbox.
        find(&v, "rule 1", "lsm-sandbox");
        let hit = find(&v, "rule 5", "lsm-mcp");
        assert_eq!(hit.krate, "lsm-agents");
        assert_eq!(
            hit.to_string(),
            "rule 5: only lsm-app (the composition root) may depend on lsm-mcp; other crates \
             reach it only through lsm-app, but lsm-agents reaches lsm-mcp via \
             lsm-agents -> lsm-mcp"
        );
    }

    #[test]
    fn mcp_reaching_providers_or_the_harness_breaks_rule_5() {
        for (other, extra_rule) in [("lsm-providers", "rule 3"), ("lsm-harness", "rule 4")] {
            let mut g = good_graph();
            g.add_dep("lsm-mcp", other);
            let v = check(&g);
            let hit = find(&v, "rule 5", other);
            assert_eq!(hit.krate, "lsm-mcp");
            assert_eq!(hit.path, ["lsm-mcp", other]);
            assert!(
                hit.to_string()
                    .starts_with("rule 5: lsm-mcp must depend on lsm-sandbox only, but reaches"),
                "{hit}"
            );
            assert_eq!(find(&v, extra_rule, other).krate, "lsm-mcp");
        }
        let mut g = good_graph();
        g.add_dep("lsm-mcp", "lsm-agents");
        assert_eq!(find(&check(&g), "rule 5", "lsm-agents").krate, "lsm-mcp");
    }

    #[test]
    fn a_library_wiring_mcp_breaks_rule_5() {
        let mut g = good_graph();
        g.add_dep("lsm-tools-kb", "lsm-mcp");
        let v = check(&g);
        assert_eq!(find(&v, "rule 5", "lsm-mcp").krate, "lsm-tools-kb");
    }

    #[test]
    fn phase_depending_on_any_lsm_crate_breaks_rule_2() {
        for other in [
            "lsm-interaction",
            "lsm-sandbox",
            "lsm-providers",
            "lsm-harness",
            "lsm-tools-kb",
            "lsm-agents",
            "lsm-cli",
        ] {
            let mut g = good_graph();
            g.add_dep("lsm-phase", other);
            let v = check(&g);
            let hit = find(&v, "rule 2", other);
            assert_eq!(hit.krate, "lsm-phase");
            assert_eq!(hit.path, ["lsm-phase", other]);
            assert!(
                hit.to_string()
                    .starts_with("rule 2: lsm-phase must depend on no lsm-* crate, but reaches"),
                "{hit}"
            );
        }
    }

    #[test]
    fn phase_reaching_an_lsm_crate_transitively_breaks_rule_2() {
        let mut g = good_graph();
        g.add_dep("lsm-phase", "serde");
        g.add_dep("serde", "lsm-interaction");
        let v = check(&g);
        assert_eq!(
            find(&v, "rule 2", "lsm-interaction").path,
            ["lsm-phase", "serde", "lsm-interaction"]
        );
    }

    #[test]
    fn a_library_calling_providers_breaks_rule_3() {
        let mut g = good_graph();
        g.add_dep("lsm-interaction", "lsm-providers");
        let v = check(&g);
        let hit = find(&v, "rule 3", "lsm-providers");
        assert_eq!(hit.krate, "lsm-interaction");
        assert_eq!(v.len(), 1, "{v:#?}");
    }

    #[test]
    fn rule_3_is_about_direct_dependencies_only() {
        // lsm-interaction -> lsm-tools-kb -> lsm-providers: it uses the KB tools, which may
        // call a provider; it does not call one itself.
        let mut g = good_graph();
        g.add_dep("lsm-interaction", "lsm-tools-kb");
        assert_eq!(check(&g), Vec::new());
    }

    #[test]
    fn a_library_depending_on_harness_breaks_rule_4() {
        let mut g = good_graph();
        g.add_dep("lsm-tools-kb", "lsm-harness");
        let v = check(&g);
        let hit = find(&v, "rule 4", "lsm-harness");
        assert_eq!(hit.krate, "lsm-tools-kb");
        assert_eq!(hit.path, ["lsm-tools-kb", "lsm-harness"]);
        assert_eq!(
            hit.to_string(),
            "rule 4: only lsm-app (the composition root) may depend on lsm-harness; other \
             crates reach it only through lsm-app, but lsm-tools-kb reaches lsm-harness via \
             lsm-tools-kb -> lsm-harness"
        );
    }

    #[test]
    fn a_library_reaching_harness_transitively_breaks_rule_4() {
        let mut g = good_graph();
        g.add_dep("lsm-interaction", "some-helper");
        g.add_dep("some-helper", "lsm-harness");
        let v = check(&g);
        let hit = find(&v, "rule 4", "lsm-harness");
        assert_eq!(hit.krate, "lsm-interaction");
        assert_eq!(hit.path, ["lsm-interaction", "some-helper", "lsm-harness"]);
    }

    #[test]
    fn a_new_front_end_uses_the_root_and_may_not_wire_the_harness_mcp_or_providers_itself() {
        // A web console beside the binary, through lsm-app: it reaches the harness, MCP and
        // the providers only through the root, which is allowed.
        let mut g = good_graph();
        g.add_member("lsm-web", "crates/web", false, true);
        g.add_dep("lsm-web", "lsm-app");
        g.add_dep("lsm-web", "lsm-interaction");
        assert_eq!(check(&g), Vec::new());
        // Depending on the harness itself: refused (rule 4), and not a type crate (rule 7).
        g.add_dep("lsm-web", "lsm-harness");
        let v = check(&g);
        let hit = find(&v, "rule 4", "lsm-harness");
        assert_eq!(hit.krate, "lsm-web");
        assert_eq!(hit.path, ["lsm-web", "lsm-harness"]);
        assert!(
            hit.message.contains("lsm-web (a crate with a binary)"),
            "{hit}"
        );
        assert_eq!(find(&v, "rule 7", "lsm-harness").krate, "lsm-web");
        assert_eq!(v.len(), 2, "{v:#?}");
        // Through another crate than the root: refused too.
        let mut g = good_graph();
        g.add_member("lsm-web", "crates/web", false, true);
        g.add_dep("lsm-web", "lsm-app");
        g.add_dep("lsm-web", "some-helper");
        g.add_dep("some-helper", "lsm-mcp");
        let v = check(&g);
        assert_eq!(
            find(&v, "rule 5", "lsm-mcp").path,
            ["lsm-web", "some-helper", "lsm-mcp"]
        );
    }

    #[test]
    fn the_binary_naming_the_harness_mcp_a_provider_or_an_unlisted_crate_breaks_rule_7() {
        for (other, also) in [
            ("lsm-harness", Some("rule 4")),
            ("lsm-mcp", Some("rule 5")),
            ("lsm-providers", Some("rule 3")),
            ("lsm-store-pg", None),
        ] {
            let mut g = good_graph();
            g.add_member("lsm-store-pg", "crates/store-pg", true, false);
            g.add_dep("lsm-app", "lsm-store-pg");
            assert_eq!(check(&g), Vec::new());
            g.add_dep("lsm-cli", other);
            let v = check(&g);
            let hit = find(&v, "rule 7", other);
            assert_eq!(hit.krate, "lsm-cli");
            assert_eq!(
                hit.to_string(),
                format!(
                    "rule 7: a front end (a crate depending on lsm-app) may depend directly \
                     only on lsm-app and lsm-phase, lsm-interaction, lsm-sandbox, lsm-agents, \
                     lsm-memory, lsm-tools-kb, but lsm-cli depends on {other}"
                )
            );
            if let Some(rule) = also {
                assert_eq!(find(&v, rule, other).krate, "lsm-cli");
            }
            assert_eq!(v.len(), 1 + usize::from(also.is_some()), "{v:#?}");
        }
    }

    #[test]
    fn a_new_library_crate_depending_on_harness_breaks_rule_4() {
        let mut g = good_graph();
        g.add_member("lsm-server", "crates/server", true, false);
        g.add_dep("lsm-server", "lsm-harness");
        let v = check(&g);
        assert_eq!(find(&v, "rule 4", "lsm-harness").krate, "lsm-server");
    }

    #[test]
    fn another_binary_linking_harness_breaks_rule_4_even_for_tooling() {
        let mut g = good_graph();
        g.add_dep("xtask", "lsm-harness");
        let v = check(&g);
        let hit = find(&v, "rule 4", "lsm-harness");
        assert_eq!(hit.krate, "xtask");
        assert!(
            hit.message.contains("xtask (a crate with a binary)"),
            "{hit}"
        );
    }

    #[test]
    fn test_support_may_build_providers_and_sandboxes_but_nothing_may_depend_on_it() {
        let mut g = good_graph();
        g.add_dep("lsm-test-support", "lsm-providers");
        g.add_dep("lsm-test-support", "lsm-sandbox");
        assert_eq!(check(&g), Vec::new());
        g.add_dep("lsm-memory", "lsm-test-support");
        let v = check(&g);
        let breaking: Vec<&str> = v
            .iter()
            .filter(|v| v.rule == "rule 6")
            .map(|v| v.krate.as_str())
            .collect();
        // lsm-memory directly, lsm-app and lsm-cli through it (-> lsm-memory ->
        // lsm-test-support).
        assert!(breaking.contains(&"lsm-memory"), "{v:#?}");
        assert!(breaking.contains(&"lsm-cli"), "{v:#?}");
        assert_eq!(find(&v, "rule 6", "lsm-test-support").rule, "rule 6");
    }

    #[test]
    fn the_test_crate_may_wire_concrete_crates() {
        let mut g = good_graph();
        g.add_dep("lsm-e2e", "lsm-harness");
        g.add_dep("lsm-e2e", "lsm-providers");
        assert_eq!(check(&g), Vec::new());
    }

    #[test]
    fn the_examples_crate_lives_outside_crates_dir_but_wires_through_dev_dependencies_only() {
        // Its dev-dependencies are not in the graph; a normal dependency would be.
        assert_eq!(check(&good_graph()), Vec::new());
        let mut g = good_graph();
        g.add_dep("lsm-examples", "lsm-harness");
        g.add_dep("lsm-examples", "lsm-providers");
        let v = check(&g);
        assert_eq!(find(&v, "rule 4", "lsm-harness").krate, "lsm-examples");
        assert_eq!(find(&v, "rule 3", "lsm-providers").krate, "lsm-examples");
    }

    #[test]
    fn an_lsm_crate_outside_crates_dir_breaks_layout() {
        let mut g = good_graph();
        g.add_member("lsm-extra", "extra", true, false);
        let v = check(&g);
        let hit = v
            .iter()
            .find(|v| v.rule == LAYOUT_RULE)
            .unwrap_or_else(|| panic!("no layout violation in {v:#?}"));
        assert_eq!(hit.krate, "lsm-extra");
        assert!(hit.to_string().contains("lsm-extra is at extra"), "{hit}");
        assert_eq!(v.len(), 1, "{v:#?}");
    }

    #[test]
    fn a_renamed_crate_named_by_the_rules_is_reported() {
        let mut g = good_graph();
        g.packages.remove("lsm-agents");
        let v = check(&g);
        let hit = v
            .iter()
            .find(|v| v.rule == TABLE_RULE)
            .unwrap_or_else(|| panic!("no rule-table violation in {v:#?}"));
        assert_eq!(hit.krate, "lsm-agents");
    }
}
