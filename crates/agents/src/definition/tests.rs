//! Definition files: the built-ins parse, a good file becomes the definition it says, and
//! every kind of bad file is refused with the file, the line and what to do.

use std::path::PathBuf;

use super::{DefinitionSource, IfEmpty, ListRef, Program, StopMode, builtin, parse};
use crate::TaskInput;

fn project(text: &str) -> Result<super::AgentDefinition, super::DefinitionError> {
    parse(
        text,
        DefinitionSource::Project {
            path: PathBuf::from("lsm-agents/reviewer.md"),
        },
        "unused",
    )
}

const GOOD: &str = r#"+++
name = "reviewer"
description = "Reviews src/ and writes review.md."
tools = ["read_file", "read_folder", "write_file"]
tier = "complex"
model = "gpt-4o"
max_iterations = 12
stop_mode = "strict_automation"
work_items = true
contract = "review.contract.toml"

[[phases]]
name = "survey"
tools = ["read_folder"]
max_iterations = 2
prompt = "List the files of src/ to review for: {{task}}. One per line."

[[phases]]
name = "review"
for_each = "survey"
max_items = 5
context = "file:{{item}}"
continue_context = false
tools = ["read_file"]
prompt = "Review {{item}} ({{round}}). Earlier: {{previous}}"

[[phases]]
name = "report"
tools = ["write_file"]
save_as = "review"
prompt = """
Write review.md from:
{{phases.review}}
"""
+++
You review code following the house rules.
"#;

#[test]
fn every_builtin_definition_parses_in_list_order() {
    let names: Vec<&str> = builtin().iter().map(|d| d.name()).collect();
    assert_eq!(
        names,
        [
            "general",
            "research",
            "synthesis",
            "curator",
            "writing",
            "librarian",
            "manuscript_editor",
            "assistant",
            "conductor",
            "researcher",
            "terminal"
        ]
    );
    for name in [
        "general",
        "research",
        "synthesis",
        "librarian",
        "manuscript_editor",
        "researcher",
        "terminal",
    ] {
        let def = crate::find(name).unwrap();
        assert!(
            matches!(def.program, Program::Phases(_)),
            "{name} is a definition"
        );
        assert!(!def.spec.system_prompt.contains('\n'), "{name}");
    }
    for name in ["curator", "writing", "assistant", "conductor"] {
        assert_eq!(crate::find(name).unwrap().program, Program::Code, "{name}");
    }
    let research = crate::find("research").unwrap();
    let phases: Vec<&str> = research.phases().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(phases, ["decompose", "research", "synthesize", "review"]);
    assert!(research.repeats());
    assert_eq!(research.spec.input, TaskInput::Topic);
}

#[test]
fn a_good_file_becomes_the_definition_it_says() {
    let def = project(GOOD).unwrap();
    assert_eq!(def.name(), "reviewer");
    assert_eq!(def.spec.tier, lsm_phase::LlmTier::Complex);
    assert_eq!(def.spec.tools, ["read_file", "read_folder", "write_file"]);
    assert_eq!(
        def.spec.system_prompt,
        "You review code following the house rules."
    );
    assert_eq!(def.settings.model.as_deref(), Some("gpt-4o"));
    assert_eq!(def.settings.max_iterations, Some(12));
    assert_eq!(def.settings.stop_mode, Some(StopMode::StrictAutomation));
    assert!(def.settings.work_items);
    assert_eq!(
        def.settings.contract,
        Some(PathBuf::from("review.contract.toml"))
    );
    let p = def.phases();
    assert_eq!(p.len(), 3);
    assert_eq!(
        p[1].for_each,
        Some(ListRef {
            phase: "survey".into(),
            field: None
        })
    );
    assert_eq!(p[1].max_items, 5);
    assert_eq!(p[1].if_empty, IfEmpty::Skip);
    assert!(!p[1].continue_context);
    assert_eq!(p[1].context.as_ref().unwrap().source(), "file:{{item}}");
    assert!(
        p[2].completes_task && !p[0].completes_task && !p[1].completes_task,
        "the last phase completes the task when none says"
    );
    assert_eq!(p[2].save_as.as_ref().unwrap().source(), "review");
    assert!(
        def.check_tools(&[
            "read_file".into(),
            "read_folder".into(),
            "write_file".into()
        ])
        .is_ok()
    );
}

#[test]
fn an_unregistered_tool_is_named_with_its_line_and_the_registered_ones() {
    let def = project(GOOD).unwrap();
    let err = def
        .check_tools(&["read_file".into(), "write_file".into(), "bash".into()])
        .unwrap_err();
    assert_eq!(err.file, "lsm-agents/reviewer.md");
    assert_eq!(err.line, 4, "the line of the tools array");
    insta::assert_snapshot!(err.to_string(), @"lsm-agents/reviewer.md:4: unknown tool 'read_folder': no tool of that name is registered in this configuration; the tools are: bash, read_file, write_file");
}

/// Each bad file and the error it gets.
const BAD: &[(&str, &str)] = &[
    ("no front matter", "You are an agent.\n"),
    (
        "unclosed",
        "+++\nname = \"x\"\ndescription = \"d\"\nprompt\n",
    ),
    (
        "toml syntax",
        "+++\nname = \"x\"\ndescription = \"d\nx\n+++\nbody\n",
    ),
    ("missing name", "+++\ndescription = \"d\"\n+++\nbody\n"),
    (
        "unknown key",
        "+++\nname = \"x\"\ndescription = \"d\"\ncolour = \"blue\"\n+++\nbody\n",
    ),
    (
        "budget key",
        "+++\nname = \"x\"\ndescription = \"d\"\nmax_tokens_budget = 10000000\n+++\nbody\n",
    ),
    (
        "sandbox key",
        "+++\nname = \"x\"\ndescription = \"d\"\n[sandbox]\nallow_url_access = true\n+++\nbody\n",
    ),
    (
        "unknown phase key",
        "+++\nname = \"x\"\ndescription = \"d\"\n[[phases]]\nname = \"a\"\nprompt = \"p\"\nallow_network = true\n+++\nbody\n",
    ),
    (
        "bad name",
        "+++\nname = \"../evil\"\ndescription = \"d\"\n+++\nbody\n",
    ),
    (
        "name with a space",
        "+++\nname = \"my agent\"\ndescription = \"d\"\n+++\nbody\n",
    ),
    (
        "bad tier",
        "+++\nname = \"x\"\ndescription = \"d\"\ntier = \"huge\"\n+++\nbody\n",
    ),
    (
        "bad input",
        "+++\nname = \"x\"\ndescription = \"d\"\ninput = \"question\"\n+++\nbody\n",
    ),
    (
        "bad stop mode",
        "+++\nname = \"x\"\ndescription = \"d\"\nstop_mode = \"lenient\"\n+++\nbody\n",
    ),
    (
        "empty description",
        "+++\nname = \"x\"\ndescription = \"  \"\n+++\nbody\n",
    ),
    (
        "zero iterations",
        "+++\nname = \"x\"\ndescription = \"d\"\nmax_iterations = 0\n+++\nbody\n",
    ),
    (
        "empty prompt",
        "+++\nname = \"x\"\ndescription = \"d\"\n+++\n\n  \n",
    ),
    (
        "for_each unknown",
        "+++\nname = \"x\"\ndescription = \"d\"\n[[phases]]\nname = \"a\"\nprompt = \"p\"\n[[phases]]\nname = \"b\"\nfor_each = \"plan\"\nprompt = \"{{item}}\"\n+++\nbody\n",
    ),
    (
        "for_each later",
        "+++\nname = \"x\"\ndescription = \"d\"\n[[phases]]\nname = \"a\"\nfor_each = \"b\"\nprompt = \"{{item}}\"\n[[phases]]\nname = \"b\"\nprompt = \"p\"\n+++\nbody\n",
    ),
    (
        "undefined variable",
        "+++\nname = \"x\"\ndescription = \"d\"\n[[phases]]\nname = \"a\"\nprompt = \"\"\"\nDo {{task}}.\nThen {{ tsk }}.\n\"\"\"\n+++\nbody\n",
    ),
    (
        "item without for_each",
        "+++\nname = \"x\"\ndescription = \"d\"\n[[phases]]\nname = \"a\"\nprompt = \"{{item}}\"\n+++\nbody\n",
    ),
    (
        "previous in the first phase",
        "+++\nname = \"x\"\ndescription = \"d\"\n[[phases]]\nname = \"a\"\nprompt = \"{{previous}}\"\n+++\nbody\n",
    ),
    (
        "a later phase's answer",
        "+++\nname = \"x\"\ndescription = \"d\"\n[[phases]]\nname = \"a\"\nprompt = \"{{phases.b}}\"\n[[phases]]\nname = \"b\"\nprompt = \"p\"\n+++\nbody\n",
    ),
    (
        "phase tool not the agent's",
        "+++\nname = \"x\"\ndescription = \"d\"\ntools = [\"read_file\"]\n[[phases]]\nname = \"a\"\ntools = [\"write_file\"]\nprompt = \"p\"\n+++\nbody\n",
    ),
    (
        "duplicate phase",
        "+++\nname = \"x\"\ndescription = \"d\"\n[[phases]]\nname = \"a\"\nprompt = \"p\"\n[[phases]]\nname = \"a\"\nprompt = \"q\"\n+++\nbody\n",
    ),
    (
        "repeat from a phase without for_each",
        "+++\nname = \"x\"\ndescription = \"d\"\n[[phases]]\nname = \"a\"\nprompt = \"p\"\n[[phases]]\nname = \"b\"\nprompt = \"q\"\nrepeat = { from = \"a\", items = \"more\" }\n+++\nbody\n",
    ),
    (
        "top-level save_as with phases",
        "+++\nname = \"x\"\ndescription = \"d\"\nsave_as = \"r\"\n[[phases]]\nname = \"a\"\nprompt = \"p\"\n+++\nbody\n",
    ),
    (
        "a variable in the top-level save_as",
        "+++\nname = \"x\"\ndescription = \"d\"\nsave_as = \"{{item}}\"\n+++\nbody\n",
    ),
];

#[test]
fn every_bad_file_is_refused_with_file_line_and_what_to_do() {
    let mut report = String::new();
    for (what, text) in BAD {
        let err = project(text).expect_err(what);
        assert_eq!(err.file, "lsm-agents/reviewer.md", "{what}");
        assert!(err.line >= 1, "{what}");
        report.push_str(&format!("{what}:\n  {err}\n"));
    }
    insta::assert_snapshot!(report);
}

#[test]
fn a_definition_asking_for_more_than_the_configuration_allows_is_refused() {
    for key in [
        "max_tokens_budget = 1000000",
        "max_cost_usd = 100.0",
        "allow_url_access = true",
        "write_paths = [\"/\"]",
        "auto_approve = true",
    ] {
        let text = format!("+++\nname = \"x\"\ndescription = \"d\"\n{key}\n+++\nbody\n");
        let err = project(&text).expect_err(key);
        assert_eq!(err.line, 4, "{key}");
        assert!(
            err.message.contains("unknown field"),
            "{key}: {}",
            err.message
        );
    }
    let err = project("+++\nname = \"x\"\ndescription = \"d\"\nmax_tokens_budget = 1\n+++\nb\n")
        .unwrap_err();
    assert!(
        err.message
            .contains("budgets, sandbox rules and permissions come only from the configuration"),
        "{err}"
    );
}

#[test]
fn a_dashed_fence_with_toml_is_read_too_and_lines_count_from_the_file() {
    let text = "---\nname = \"x\"\ndescription = \"d\"\n\n[[phases]]\nname = \"a\"\nprompt = \"\"\"\nline one\nline two {{nope}}\n\"\"\"\n---\nbody\n";
    let err = project(text).unwrap_err();
    assert_eq!(err.line, 9, "{err}");
}

#[test]
fn the_examples_in_docs_agents_md_and_the_readme_are_valid_definitions() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/AGENTS.md")).unwrap()
        + &std::fs::read_to_string(root.join("README.md")).unwrap();
    let blocks: Vec<&str> = doc
        .split("```markdown\n")
        .skip(1)
        .filter_map(|rest| rest.split("\n```").next())
        .filter(|block| block.starts_with("+++"))
        .collect();
    assert!(
        blocks.len() >= 3,
        "AGENTS.md's two and README's one: {}",
        blocks.len()
    );
    for block in blocks {
        let def = project(block).unwrap_or_else(|e| panic!("{e}\n{block}"));
        assert!(!def.spec.system_prompt.is_empty());
    }
}
