use super::*;

fn graph(edges: &[(&str, &str)]) -> Graph {
    let mut graph = Graph::new();
    for (from, to) in edges {
        graph
            .entry((*from).into())
            .or_default()
            .insert((*to).into());
        graph.entry((*to).into()).or_default();
    }
    graph
}

fn path(p: &str) -> Vec<String> {
    p.split("::").map(str::to_owned).collect()
}

#[test]
fn imports_are_read_from_use_lines_nested_groups_inline_paths_and_super() {
    let text = "use crate::config::Config;\nuse crate::{exit, wiring::{a, b}, text};\n\
                    // crate::commented\nfn f() { crate::secrets::clean(\"\"); \
                    my_crate::not_ours(); $crate::macro_path(); }\nuse super::root_sibling;";
    let names: Vec<String> = named_modules(text, &path("top")).into_iter().collect();
    assert_eq!(
        names,
        [
            "config",
            "exit",
            "root_sibling",
            "secrets",
            "text",
            "wiring"
        ]
    );
    // One level down, `super::` stays inside the module; two levels up leaves it.
    let inner = "use super::x;\nuse super::super::other::y;";
    let names: Vec<String> = named_modules(inner, &path("top::inner"))
        .into_iter()
        .collect();
    assert_eq!(names, ["other"]);
}

#[test]
fn code_in_the_trailing_test_module_counts_as_lines_but_is_not_an_import() {
    let text = "use crate::a;\nfn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\n";
    assert_eq!(counted_lines(text), 6);
    let names: Vec<String> = named_modules(text, &path("m")).into_iter().collect();
    assert_eq!(names, ["a"]);
}

#[test]
fn a_result_with_a_string_error_is_found_but_not_in_comments_tests_or_other_types() {
    let text = "fn a() -> Result<(), String> {}\n\
                    fn b() -> Result<Vec<(u8, String)>, MyError> {}\n\
                    // fn c() -> Result<(), String>\n\
                    fn d() -> std::result::Result<HashMap<&'static str, String>, String> {}\n\
                    fn e() -> MyResult<u8, String> {}\n\
                    #[cfg(test)]\nmod tests {\n    fn t() -> Result<(), String> {}\n}\n";
    assert_eq!(string_error_lines(text), vec![1, 4]);
}

#[test]
fn anyhow_is_found_among_the_dependencies_only() {
    assert!(depends_on_anyhow(
        "[package]\nname = \"x\"\n[dependencies]\nanyhow.workspace = true\n"
    ));
    assert!(depends_on_anyhow("[dependencies]\nanyhow = \"1\"\n"));
    assert!(!depends_on_anyhow(
        "[dependencies]\nserde = \"1\"\n[dev-dependencies]\nanyhow = \"1\"\n"
    ));
    assert!(!depends_on_anyhow("[dependencies]\nanyhowish = \"1\"\n"));
}

#[test]
fn every_circle_is_found_as_one_group() {
    let g = graph(&[
        ("a", "b"),
        ("b", "c"),
        ("c", "a"),
        ("c", "d"),
        ("e", "f"),
        ("f", "e"),
    ]);
    assert_eq!(
        circles(&g),
        vec![vec!["a", "b", "c"], vec!["e", "f"]]
            .into_iter()
            .map(|g| g.into_iter().map(String::from).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
    let acyclic = graph(&[("a", "b"), ("b", "c"), ("a", "c")]);
    assert!(circles(&acyclic).is_empty());
}

#[test]
fn a_crate_with_a_circle_and_a_long_file_fails_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("crates/demo/src");
    std::fs::create_dir_all(src.join("b")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::b::Thing;\n").unwrap();
    std::fs::write(src.join("b/mod.rs"), "mod inner;\n").unwrap();
    // b reaches a through a name the root re-exports.
    std::fs::write(
        src.join("lib.rs"),
        "mod a;\nmod b;\npub use a::{Other, x as Alias};\n",
    )
    .unwrap();
    std::fs::write(
        src.join("b/inner.rs"),
        "fn f() -> crate::Other { todo() }\n",
    )
    .unwrap();
    let long = "fn f() {}\n".repeat(MAX_LINES + 1);
    std::fs::write(src.join("long.rs"), &long).unwrap();
    // A test file may be long.
    std::fs::write(src.join("tests.rs"), &long).unwrap();
    std::fs::write(
        src.join("tested.rs"),
        "fn f() {}\n#[cfg(test)]\nmod tests;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("errors.rs"),
        "pub fn f() -> Result<(), String> {}\n",
    )
    .unwrap();
    let manifest = root.join("crates/demo/Cargo.toml");
    std::fs::write(&manifest, "[dependencies]\nanyhow = \"1\"\n").unwrap();

    let found = findings(root).unwrap();
    assert_eq!(
        found,
        vec![
            Finding::Anyhow {
                manifest: "crates/demo/Cargo.toml".into()
            },
            Finding::StringError {
                file: "crates/demo/src/errors.rs".into(),
                line: 1
            },
            Finding::TooLong {
                file: "crates/demo/src/long.rs".into(),
                lines: MAX_LINES + 1
            },
            Finding::Circle {
                src: "crates/demo/src".into(),
                modules: vec!["a".into(), "b".into()]
            },
        ]
    );
    assert!(check_sources(root).is_err());

    std::fs::write(src.join("b/inner.rs"), "pub struct Other;\n").unwrap();
    std::fs::write(src.join("long.rs"), "fn f() {}\n").unwrap();
    std::fs::write(src.join("errors.rs"), "pub fn f() -> Result<(), E> {}\n").unwrap();
    std::fs::write(&manifest, "[dependencies]\nthiserror = \"2\"\n").unwrap();
    assert!(findings(root).unwrap().is_empty());
    assert!(check_sources(root).is_ok());
}
