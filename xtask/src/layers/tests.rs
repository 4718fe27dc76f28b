use super::*;

/// The workspace as DESIGN.md lays it out (and as it is today), with a few external
/// crates so that paths through non-lsm crates are exercised.
fn good_graph() -> Graph {
    let mut g = Graph::new();
    for (name, dir, lib, bin) in [
        ("lsm-phase", "crates/phase", true, false),
        ("lsm-run", "crates/run", true, false),
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
        ("lsm-run", "lsm-phase"),
        ("lsm-run", "serde"),
        ("lsm-run", "globset"),
        ("globset", "regex"),
        ("lsm-sandbox", "lsm-phase"),
        ("lsm-sandbox", "serde"),
        ("lsm-sandbox", "tokio"),
        ("lsm-providers", "lsm-run"),
        ("lsm-providers", "serde"),
        ("lsm-providers", "tokio"),
        ("lsm-harness", "lsm-phase"),
        ("lsm-harness", "lsm-run"),
        ("lsm-harness", "lsm-providers"),
        ("lsm-harness", "lsm-sandbox"),
        ("lsm-harness", "tokio"),
        ("lsm-harness", "tokio-util"),
        ("tokio-util", "tokio"),
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
    // And through it, the run crate its message types come from.
    assert_eq!(
        find(&v, "rule 1", "lsm-run").path,
        ["lsm-agents", "lsm-providers", "lsm-run"]
    );
    let hit = find(&v, "rule 3", "lsm-providers");
    assert_eq!(hit.krate, "lsm-agents");
    assert_eq!(hit.path, ["lsm-agents", "lsm-providers"]);
    assert_eq!(v.len(), 3, "{v:#?}");
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
            hit.to_string().starts_with(
                "rule 5: lsm-mcp must depend on lsm-sandbox (and the leaf lsm-phase) \
                         only, but reaches"
            ),
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
        "lsm-run",
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
    // Depending on the harness itself: refused (rule 4), and not a type crate (rule 8).
    g.add_dep("lsm-web", "lsm-harness");
    let v = check(&g);
    let hit = find(&v, "rule 4", "lsm-harness");
    assert_eq!(hit.krate, "lsm-web");
    assert_eq!(hit.path, ["lsm-web", "lsm-harness"]);
    assert!(
        hit.message.contains("lsm-web (a crate with a binary)"),
        "{hit}"
    );
    assert_eq!(find(&v, "rule 8", "lsm-harness").krate, "lsm-web");
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
fn the_binary_naming_the_harness_mcp_a_provider_or_an_unlisted_crate_breaks_rule_8() {
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
        let hit = find(&v, "rule 8", other);
        assert_eq!(hit.krate, "lsm-cli");
        assert_eq!(
            hit.to_string(),
            format!(
                "rule 8: a front end (a crate depending on lsm-app) may depend directly \
                 only on lsm-app and lsm-phase, lsm-run, lsm-interaction, lsm-sandbox, \
                 lsm-agents, lsm-memory, lsm-tools-kb, but lsm-cli depends on {other}"
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

#[test]
fn run_depending_on_sandbox_breaks_rule_7() {
    let mut g = good_graph();
    g.add_dep("lsm-run", "lsm-sandbox");
    let v = check(&g);
    let hit = find(&v, "rule 7", "lsm-sandbox");
    assert_eq!(hit.krate, "lsm-run");
    assert_eq!(
        hit.to_string(),
        "rule 7: lsm-run must depend on lsm-phase only, but reaches lsm-sandbox \
             via lsm-run -> lsm-sandbox"
    );
    // And through the sandbox, tokio.
    let hit = find(&v, "rule 7", "tokio");
    assert_eq!(hit.path, ["lsm-run", "lsm-sandbox", "tokio"]);
    assert_eq!(v.len(), 2, "{v:#?}");
}

#[test]
fn run_depending_on_providers_or_the_harness_breaks_rule_7() {
    for other in ["lsm-providers", "lsm-harness"] {
        let mut g = good_graph();
        g.add_dep("lsm-run", other);
        let v = check(&g);
        assert_eq!(find(&v, "rule 7", other).path, ["lsm-run", other]);
    }
}

#[test]
fn run_reaching_tokio_through_a_dependency_breaks_rule_7() {
    let mut g = good_graph();
    g.add_dep("regex", "some-runtime-helper");
    g.add_dep("some-runtime-helper", "tokio-util");
    g.add_dep("tokio-util", "tokio");
    let v = check(&g);
    let hit = find(&v, "rule 7", "tokio-util");
    assert_eq!(
        hit.path,
        [
            "lsm-run",
            "globset",
            "regex",
            "some-runtime-helper",
            "tokio-util"
        ]
    );
    assert_eq!(
        find(&v, "rule 7", "tokio").to_string(),
        "rule 7: lsm-run must not reach tokio or tokio-util, but reaches tokio via \
             lsm-run -> globset -> regex -> some-runtime-helper -> tokio-util -> tokio"
    );
    // Only the run crate is held to it: the harness reaches tokio as it should.
    assert!(v.iter().all(|v| v.krate == "lsm-run"), "{v:#?}");
    assert_eq!(v.len(), 2, "{v:#?}");
}

#[test]
fn run_depending_on_tokio_directly_breaks_rule_7() {
    let mut g = good_graph();
    g.add_dep("lsm-run", "tokio");
    let v = check(&g);
    assert_eq!(find(&v, "rule 7", "tokio").path, ["lsm-run", "tokio"]);
    assert_eq!(v.len(), 1, "{v:#?}");
}
