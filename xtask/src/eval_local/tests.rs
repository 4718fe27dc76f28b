use super::*;

fn task(name: &str) -> &'static Task {
    TASKS
        .iter()
        .chain(HELD_OUT)
        .find(|t| t.name == name)
        .unwrap()
}

fn outcome(files: &[(&str, &str)]) -> Outcome {
    Outcome {
        exit_code: Some(0),
        files: files
            .iter()
            .map(|(n, t)| ((*n).to_string(), (*t).to_string()))
            .collect(),
        ..Outcome::default()
    }
}

fn check(name: &str, o: &Outcome) -> Result<(), String> {
    (task(name).check)(o)
}

#[test]
fn there_are_at_least_ten_tasks_with_unique_names_and_quick_names_three() {
    assert!(TASKS.len() >= 10);
    let mut names: Vec<&str> = TASKS.iter().map(|t| t.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), TASKS.len());
    assert_eq!(QUICK.len(), 3);
    assert!(QUICK.iter().all(|q| names.contains(q)));
    assert_eq!(TASKS[0].prompt, DEMO_TASK);
}

#[test]
fn the_held_out_set_is_one_task_like_each_with_other_names_and_prompts() {
    assert_eq!(HELD_OUT.len(), TASKS.len());
    for (held, tuned) in HELD_OUT.iter().zip(TASKS) {
        assert_eq!(held.kind, tuned.kind, "{}", held.name);
        assert_ne!(held.prompt, tuned.prompt);
        assert!(TASKS.iter().all(|t| t.name != held.name), "{}", held.name);
    }
}

#[test]
fn held_out_checkers() {
    let with_plan = |summary: &str| outcome(&[("plan.md", PLAN), ("summary.md", summary)]);
    let file_cases: [(&str, Outcome, Outcome); 6] = [
        (
            "plan_summary",
            with_plan("The servers move on Monday, then DNS is updated.\n"),
            with_plan("Plan\n"),
        ),
        (
            "title",
            outcome(&[
                ("doc.md", CHECKLIST),
                ("title.txt", "# Release checklist\n"),
            ]),
            outcome(&[("doc.md", CHECKLIST), ("title.txt", "Release checklist")]),
        ),
        (
            "append_todo",
            outcome(&[("todo.txt", "buy stamps\ncall Anna\n")]),
            outcome(&[("todo.txt", "buy stamps\ntodo.txt")]),
        ),
        (
            "write_banana",
            outcome(&[("fruit.txt", "Banana!\n")]),
            outcome(&[("fruit.txt", "Hello, World!")]),
        ),
        (
            "copy_swans",
            outcome(&[
                ("a.txt", "x"),
                ("b.txt", "Seven swans swim south in spring.\n"),
            ]),
            outcome(&[
                ("a.txt", "x"),
                ("b.txt", "Seven swans swim south in spring"),
            ]),
        ),
        (
            "no_change",
            outcome(&[("plan.md", PLAN)]),
            outcome(&[("plan.md", PLAN), ("done.txt", "DONE")]),
        ),
    ];
    for (name, good, bad) in file_cases {
        assert_eq!(check(name, &good), Ok(()), "{name}");
        assert!(check(name, &bad).is_err(), "{name}");
        let failed = Outcome {
            exit_code: Some(6),
            ..good
        };
        assert!(check(name, &failed).is_err(), "{name}: not done");
    }
    let answer = |a: &str, tools: &[&str], cited: bool| Outcome {
        exit_code: Some(0),
        answer: a.into(),
        tools: tools.iter().map(|t| (*t).to_string()).collect(),
        cited,
        ..Outcome::default()
    };
    let kb = ["query_and_synthesize"];
    let answer_cases = [
        (
            "read_mode",
            answer("The mode is fast.", &[], false),
            answer("The mode is demo.", &[], false),
        ),
        (
            "kb_agent_office",
            answer("On the fourth floor.", &kb, false),
            answer("On the fourth floor.", &[], false),
        ),
        (
            "kb_query_office",
            answer("In the old mill [S3].", &[], true),
            answer("In the old mill.", &[], false),
        ),
        (
            "kb_query_weekday",
            answer("On a tuesday [S2].", &[], true),
            answer("On a Monday [S2].", &[], true),
        ),
    ];
    for (name, good, bad) in answer_cases {
        assert_eq!(check(name, &good), Ok(()), "{name}");
        assert!(check(name, &bad).is_err(), "{name}");
    }
}

#[test]
fn summary_checker() {
    let good = outcome(&[
        ("notes.md", NOTES),
        (
            "summary.md",
            "Budgets are enforced by the harness and the index is rebuilt.\n",
        ),
    ]);
    assert_eq!(check("summary", &good), Ok(()));
    let bad = [
        outcome(&[("notes.md", NOTES)]),
        outcome(&[("notes.md", NOTES), ("summary.md", "line one\nline two\n")]),
        outcome(&[("notes.md", NOTES), ("summary.md", "# Meeting notes\n")]),
        // Only the heading's words.
        outcome(&[
            ("notes.md", NOTES),
            ("summary.md", "Notes of the meeting.\n"),
        ]),
        outcome(&[
            ("notes.md", NOTES),
            ("summary.md", "The complete new content of the file."),
        ]),
        Outcome {
            exit_code: Some(6),
            ..good.clone()
        },
    ];
    for b in bad {
        assert!(check("summary", &b).is_err(), "{b:?}");
    }
}

#[test]
fn file_checkers() {
    let cases: [(&str, &str, &str, &str); 4] = [
        (
            "first_line",
            "first.txt",
            "# Meeting notes\n",
            "Meeting notes, a summary",
        ),
        (
            "append_line",
            "shopping.txt",
            "eggs\nbread\nmilk\n",
            "eggs\nbread\n",
        ),
        ("write_word", "hello.txt", "Hello.\n", "hello world"),
        (
            "copy_file",
            "copy.txt",
            "The quick brown fox jumps over the lazy dog.",
            "The quick brown fox.",
        ),
    ];
    for (name, path, good, bad) in cases {
        assert_eq!(check(name, &outcome(&[(path, good)])), Ok(()), "{name}");
        assert!(check(name, &outcome(&[(path, bad)])).is_err(), "{name}");
        assert!(
            check(name, &outcome(&[])).is_err(),
            "{name}: nothing written"
        );
        let killed = Outcome {
            exit_code: None,
            ..outcome(&[(path, good)])
        };
        assert!(check(name, &killed).is_err(), "{name}: killed");
    }
}

#[test]
fn nothing_to_do_checker() {
    let good = outcome(&[("notes.md", NOTES)]);
    assert_eq!(check("nothing_to_do", &good), Ok(()));
    let read = Outcome {
        tools: vec!["read_file".into()],
        ..good.clone()
    };
    assert_eq!(
        check("nothing_to_do", &read),
        Ok(()),
        "reading changes nothing"
    );
    let wrote = Outcome {
        tools: vec!["write_file".into()],
        ..good.clone()
    };
    assert!(check("nothing_to_do", &wrote).is_err());
    assert!(check("nothing_to_do", &outcome(&[("notes.md", NOTES), ("x", "")])).is_err());
    assert!(check("nothing_to_do", &outcome(&[("notes.md", "changed")])).is_err());
}

#[test]
fn answer_checkers() {
    let answer = |a: &str, tools: &[&str], cited: bool| Outcome {
        exit_code: Some(0),
        answer: a.into(),
        tools: tools.iter().map(|t| (*t).to_string()).collect(),
        cited,
        ..Outcome::default()
    };
    assert_eq!(
        check(
            "read_fact",
            &answer("The port is 8421.", &["read_file"], false)
        ),
        Ok(())
    );
    assert!(
        check(
            "read_fact",
            &answer("The port is 8080.", &["read_file"], false)
        )
        .is_err()
    );

    let kb = ["query_and_synthesize"];
    assert_eq!(
        check("kb_agent", &answer("It is Pinchy, a crab.", &kb, false)),
        Ok(())
    );
    assert!(check("kb_agent", &answer("It is Pinchy.", &[], false)).is_err());
    assert!(check("kb_agent", &answer("A crab.", &kb, false)).is_err());

    assert_eq!(
        check("kb_query", &answer("The mascot is Pinchy [S1].", &[], true)),
        Ok(())
    );
    assert!(check("kb_query", &answer("The mascot is Pinchy.", &[], false)).is_err());
    assert!(
        check(
            "kb_query",
            &answer(r#"{"action": "DONE", "response": "Pinchy"}"#, &[], true)
        )
        .is_err()
    );
    assert!(check("kb_query", &answer("I do not know [S1].", &[], true)).is_err());
    assert_eq!(
        check(
            "kb_query_release",
            &answer("Every six weeks [S2].", &[], true)
        ),
        Ok(())
    );
    assert!(check("kb_query_release", &answer("Every month [S2].", &[], true)).is_err());
}

#[test]
fn the_task_config_is_valid_toml() {
    let text = task_config(Path::new("/m/\"x\".gguf"), 6);
    let table: toml::Table = text.parse().unwrap();
    assert_eq!(table["llm"]["model_path"].as_str(), Some("/m/\"x\".gguf"));
    assert_eq!(table["agents"]["max_iterations"].as_integer(), Some(6));
}
