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

/// A crate and the packages (of any kind, `lsm-*` or not) its normal-dependency closure must
/// not contain.
#[derive(Debug)]
pub struct ExcludeRule {
    /// The rule's label, as printed.
    pub rule: &'static str,
    /// The constrained crate.
    pub krate: &'static str,
    /// The packages it must not reach, directly or transitively.
    pub forbidden: &'static [&'static str],
    /// The rule in words, as printed before "but …".
    pub summary: &'static str,
}

/// Rules 1, 2, 5 and 7: what a crate may reach.
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
    // (lsm-phase, the leaf, is reached through the sandbox: its text helpers.)
    ReachRule {
        rule: "rule 5",
        krate: "lsm-mcp",
        allowed: &["lsm-sandbox", "lsm-phase"],
        summary: "lsm-mcp must depend on lsm-sandbox (and the leaf lsm-phase) only",
    },
    // Rule 7: the run's pure core decides and does no I/O; it can name neither a provider
    // client nor the sandbox nor the driver.
    ReachRule {
        rule: "rule 7",
        krate: "lsm-run",
        allowed: &["lsm-phase"],
        summary: "lsm-run must depend on lsm-phase only",
    },
];

/// Rule 7: the pure core reaches no async runtime (nor, so, its I/O). The sources' side of
/// the rule (no `std::fs`, `std::net`, `std::process`, `tokio` or clock read outside tests)
/// is [`crate::purity`].
pub const EXCLUDE_RULES: &[ExcludeRule] = &[ExcludeRule {
    rule: "rule 7",
    krate: "lsm-run",
    forbidden: &["tokio", "tokio-util"],
    summary: "lsm-run must not reach tokio or tokio-util",
}];

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

/// Rule 8: front ends use the composition root. Today's `lsm` binary still names the types
/// of these lower crates directly (the interaction requests it answers, the agents' cards it
/// shows, the knowledge base and memory it lists, exit codes from stop reasons, the
/// sandbox's confinement helper at start-up); never the harness, a provider or MCP.
pub const FRONT_END_RULE: FrontEndRule = FrontEndRule {
    rule: "rule 8",
    root: ROOT,
    types: &[
        "lsm-phase",
        "lsm-run",
        "lsm-interaction",
        "lsm-sandbox",
        "lsm-agents",
        "lsm-memory",
        "lsm-tools-kb",
    ],
    summary: "a front end (a crate depending on lsm-app) may depend directly only on lsm-app \
              and lsm-phase, lsm-run, lsm-interaction, lsm-sandbox, lsm-agents, lsm-memory, \
              lsm-tools-kb",
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
    /// The rule's label (`rule 1` … `rule 8`, [`LAYOUT_RULE`], [`TABLE_RULE`]).
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
    for rule in EXCLUDE_RULES {
        check_excluded(graph, rule, &mut out);
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
        .chain(EXCLUDE_RULES.iter().map(|r| (r.rule, r.krate, &[][..])))
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

fn check_excluded(graph: &Graph, rule: &ExcludeRule, out: &mut Vec<Violation>) {
    let reached = graph.reachable_from(rule.krate);
    for forbidden in rule.forbidden {
        if let Some(path) = reached.get(*forbidden) {
            out.push(Violation {
                rule: rule.rule,
                krate: rule.krate.to_owned(),
                message: format!(
                    "{}, but reaches {forbidden} via {}",
                    rule.summary,
                    path.join(" -> ")
                ),
                path: path.clone(),
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
mod tests;
