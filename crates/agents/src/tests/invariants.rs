//! Seed 001 §6.3 layers 3 and 6, security invariants, in Rust terms. The seeds asserted
//! `AttributeError` on `_tokens_used` and inspected the AST for direct sandbox or provider
//! calls; here the layering makes those calls impossible to write (`cargo xtask
//! check-layers`), and these tests keep the rest true:
//!
//! - no signature, field or type of this crate names accounting data;
//! - only `AgentCore` drives an executor, and only it touches the file system;
//! - nothing in the crate can start a process or open a connection;
//! - what a run returns has no accounting field on the wire.

use std::path::{Path, PathBuf};

use quote::ToTokens;

use crate::{AgentOutput, RunOutcome, StopReason};

/// Words that would mean accounting data reached the agent layer.
const ACCOUNTING: &[&str] = &[
    "token", "cost", "budget", "usage", "price", "spend", "billing",
];

/// Every non-test source file of this crate.
fn sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            if name == "tests" || name == "tests.rs" {
                continue;
            }
            if path.is_dir() {
                walk(&path, out);
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    assert!(out.len() >= 9, "the scan found the sources: {out:?}");
    out
}

/// The identifiers in a piece of Rust syntax.
fn idents(tokens: impl ToTokens) -> Vec<String> {
    tokens
        .to_token_stream()
        .to_string()
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `(what, identifiers)` for every signature, field, variant and item name in `items`.
fn declarations(items: &[syn::Item], out: &mut Vec<(String, Vec<String>)>) {
    for item in items {
        match item {
            syn::Item::Fn(f) => out.push((format!("fn {}", f.sig.ident), idents(&f.sig))),
            syn::Item::Struct(s) => {
                out.push((format!("struct {}", s.ident), idents(&s.ident)));
                for field in &s.fields {
                    out.push((format!("field of {}", s.ident), idents(field)));
                }
            }
            syn::Item::Enum(e) => {
                out.push((format!("enum {}", e.ident), idents(&e.ident)));
                for v in &e.variants {
                    out.push((format!("variant of {}", e.ident), idents(v)));
                }
            }
            syn::Item::Trait(t) => {
                out.push((format!("trait {}", t.ident), idents(&t.ident)));
                for ti in &t.items {
                    if let syn::TraitItem::Fn(f) = ti {
                        out.push((format!("{}::{}", t.ident, f.sig.ident), idents(&f.sig)));
                    }
                }
            }
            syn::Item::Impl(i) => {
                for ii in &i.items {
                    if let syn::ImplItem::Fn(f) = ii {
                        out.push((format!("method {}", f.sig.ident), idents(&f.sig)));
                    }
                }
            }
            syn::Item::Const(c) => out.push((format!("const {}", c.ident), idents(&c.ident))),
            syn::Item::Static(s) => out.push((format!("static {}", s.ident), idents(&s.ident))),
            syn::Item::Type(t) => out.push((format!("type {}", t.ident), idents(t))),
            syn::Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    declarations(inner, out);
                }
            }
            syn::Item::Use(u) => out.push(("use".to_string(), idents(u))),
            _ => {}
        }
    }
}

#[test]
fn no_signature_field_or_type_of_the_agent_layer_names_accounting_data() {
    let mut decls = Vec::new();
    for path in sources() {
        let file = syn::parse_file(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        declarations(&file.items, &mut decls);
    }
    assert!(
        decls.iter().any(|(what, _)| what == "method run_phase"),
        "the scan sees AgentCore"
    );
    assert!(
        decls.iter().any(|(what, _)| what == "Agent::run"),
        "the scan sees the Agent trait"
    );
    for (what, names) in &decls {
        for name in names {
            let lower = name.to_lowercase();
            assert!(
                !ACCOUNTING.iter().any(|w| lower.contains(w)),
                "{what} names `{name}`: the agent layer must neither return nor accept accounting data"
            );
        }
    }
}

/// The code of a file without comment lines.
fn code_of(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn only_agent_core_drives_an_executor_or_touches_the_file_system() {
    let mut checked = 0;
    for path in sources() {
        if path.file_name().unwrap() == "core.rs" {
            continue;
        }
        let code = code_of(&path);
        for needle in [
            "run_bounded",
            "PhaseExecutor",
            "ExecutorFactory",
            "factory",
            "record_artifact",
            ".finish(",
            "std::fs",
            "File::",
            "OpenOptions",
        ] {
            assert!(
                !code.contains(needle),
                "{} uses `{needle}`: only AgentCore may drive an executor or write files \
                 (agents use run_phase, save_artifact and log)",
                path.display()
            );
        }
        checked += 1;
    }
    assert!(checked >= 8, "every agent module was checked");
}

#[test]
fn nothing_in_the_agent_layer_can_run_a_program_or_open_a_connection() {
    for path in sources() {
        let code = code_of(&path);
        for needle in [
            "std::process",
            "Command::new",
            "std::net",
            "TcpStream",
            "UdpSocket",
            "unsafe",
        ] {
            assert!(!code.contains(needle), "{} uses `{needle}`", path.display());
        }
    }
}

#[test]
fn the_crate_depends_on_lsm_phase_and_no_other_lsm_crate() {
    // `cargo xtask check-layers` checks the resolved graph (transitively); this is the quick
    // local guard, on the manifest.
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let lsm: Vec<&str> = manifest
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("lsm-"))
        .map(|l| l.split(['.', ' ', '=']).next().unwrap())
        .collect();
    assert_eq!(lsm, ["lsm-phase"]);
}

#[test]
fn a_runs_output_has_no_accounting_field_on_the_wire() {
    let out = AgentOutput {
        outcome: RunOutcome::Stopped(StopReason::BudgetExhausted),
        stop_reason: Some(StopReason::BudgetExhausted),
        text: "t".into(),
        artifacts: vec!["a.md".into()],
        log_file: None,
        error: None,
        report: Some(crate::TurnReport {
            summary: "s".into(),
            success: true,
            findings: vec![crate::Finding {
                claim: "c".into(),
                confidence: 0.5,
                evidence_refs: vec!["call_1_0".into()],
            }],
            ..crate::TurnReport::default()
        }),
    };
    let v = serde_json::to_value(&out).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "artifacts",
            "error",
            "log_file",
            "outcome",
            "report",
            "stop_reason",
            "text"
        ]
    );
    let mut report_keys: Vec<&str> = v["report"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    report_keys.sort_unstable();
    assert_eq!(
        report_keys,
        ["escalations", "findings", "learnings", "success", "summary"],
        "a report carries no accounting either"
    );
    assert_eq!(
        v["stop_reason"], "budget_exhausted",
        "the reason, never the amount"
    );
}
