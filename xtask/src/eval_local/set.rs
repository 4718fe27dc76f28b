//! The eval's tasks: [`TASKS`] (the demo task first), [`HELD_OUT`], the knowledge base of
//! the query tasks ([`KB_DOCS`]), and the checker of each task's outcome.

use std::collections::BTreeMap;

/// What a task runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `lsm agent run general --task <prompt>` in a workspace holding the task's files.
    Agent,
    /// The same, with the knowledge base of [`KB_DOCS`] ingested first (its tools offered).
    AgentWithKb,
    /// `lsm query <prompt>` over the knowledge base of [`KB_DOCS`].
    Query,
}

/// What a run left behind, as the checkers see it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// `lsm`'s exit code (`None`: killed by a signal or the time limit).
    pub exit_code: Option<i32>,
    /// The agent's final answer, or the answer `lsm query` printed (before its sources).
    pub answer: String,
    /// Every file in the workspace afterwards, by name, with its text.
    pub files: BTreeMap<String, String>,
    /// The tools the run called, in order.
    pub tools: Vec<String>,
    /// Whether `lsm query` listed sources the answer cited.
    pub cited: bool,
}

/// One task: files, prompt, checker.
pub struct Task {
    /// Short name, for the report.
    pub name: &'static str,
    /// How it runs.
    pub kind: Kind,
    /// Files of the workspace before the run.
    pub files: &'static [(&'static str, &'static str)],
    /// The task (or the question).
    pub prompt: &'static str,
    /// `Ok` when the outcome is right, else why not.
    pub check: fn(&Outcome) -> Result<(), String>,
}

pub(super) const NOTES: &str = "# Meeting notes\n\n\
- The index must be rebuilt after every schema change.\n\
- Budgets are enforced by the harness, never by the agent.\n\
- Permission requests must not time out while someone is reading them.\n";

/// The demo's task: the first of [`TASKS`].
pub const DEMO_TASK: &str = "Read notes.md, then write a one-line summary of it to summary.md.";

/// The knowledge base of the query tasks: small documents with one distinctive fact each.
pub const KB_DOCS: &[(&str, &str)] = &[
    (
        "mascot.md",
        "# The mascot\n\nThe project's mascot is an orange crab named Pinchy. Pinchy appears \
         on the project's stickers and on the first page of the manual.\n",
    ),
    (
        "release.md",
        "# Releases\n\nA new version is released every six weeks, on a Tuesday. Each release \
         is announced on the mailing list.\n",
    ),
    (
        "office.md",
        "# The office\n\nThe team's office is on the fourth floor of the old mill, next to \
         the river. Visitors sign in at the front desk.\n",
    ),
];

/// The fixed task set, demo task first. `--quick` runs [`QUICK`].
pub const TASKS: &[Task] = &[
    Task {
        name: "summary",
        kind: Kind::Agent,
        files: &[("notes.md", NOTES)],
        prompt: DEMO_TASK,
        check: |o| one_line_summary(o, "summary.md", NOTES),
    },
    Task {
        name: "first_line",
        kind: Kind::Agent,
        files: &[("notes.md", NOTES)],
        prompt: "Read notes.md and write its first line to first.txt.",
        check: |o| holds_text(o, "first.txt", lines(NOTES)[0]),
    },
    Task {
        name: "append_line",
        kind: Kind::Agent,
        files: &[("shopping.txt", "eggs\nbread\n")],
        prompt: "Append the line milk to shopping.txt.",
        check: |o| holds_lines(o, "shopping.txt", &["eggs", "bread", "milk"]),
    },
    Task {
        name: "write_word",
        kind: Kind::Agent,
        files: &[],
        prompt: "Write the word hello to hello.txt.",
        check: |o| holds_words(o, "hello.txt", "hello"),
    },
    Task {
        name: "copy_file",
        kind: Kind::Agent,
        files: &[(
            "source.txt",
            "The quick brown fox jumps over the lazy dog.\n",
        )],
        prompt: "Read source.txt and write the same text to copy.txt.",
        check: |o| {
            holds_text(
                o,
                "copy.txt",
                "The quick brown fox jumps over the lazy dog.",
            )
        },
    },
    Task {
        name: "nothing_to_do",
        kind: Kind::Agent,
        files: &[("notes.md", NOTES)],
        prompt: "Nothing needs to be done: answer DONE.",
        check: |o| changed_nothing(o, &[("notes.md", NOTES)]),
    },
    Task {
        name: "read_fact",
        kind: Kind::Agent,
        files: &[("config.txt", CONFIG)],
        prompt: "Read config.txt and answer: which port is configured?",
        check: |o| answers(o, "8421"),
    },
    Task {
        name: "kb_agent",
        kind: Kind::AgentWithKb,
        files: &[],
        prompt: "Use query_and_synthesize to find out what the project's mascot is called, then answer.",
        check: |o| kb_answers(o, &["Pinchy"]),
    },
    Task {
        name: "kb_query",
        kind: Kind::Query,
        files: &[],
        prompt: "What is the name of the project's mascot?",
        check: |o| cited_answer(o, &["Pinchy"]),
    },
    Task {
        name: "kb_query_release",
        kind: Kind::Query,
        files: &[],
        prompt: "How often is a new version released?",
        check: |o| cited_answer(o, &["six weeks", "6 weeks"]),
    },
];

/// The names of the tasks `--quick` runs: the demo's task, a task that needs no tool, and
/// the plain-text answer of `lsm query`.
pub const QUICK: &[&str] = &["summary", "nothing_to_do", "kb_query"];

pub(super) fn done(o: &Outcome) -> Result<(), String> {
    match o.exit_code {
        Some(0) => Ok(()),
        Some(c) => Err(format!("the run did not end done (exit {c})")),
        None => Err("the run was killed".into()),
    }
}

pub(super) fn file<'a>(o: &'a Outcome, name: &str) -> Result<&'a str, String> {
    o.files
        .get(name)
        .map(String::as_str)
        .ok_or_else(|| format!("{name} was not written"))
}

/// Non-empty trimmed lines.
pub(super) fn lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

/// Lowercase words of at least five letters.
pub(super) fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphabetic())
        .filter(|w| w.len() >= 5)
        .map(str::to_lowercase)
        .collect()
}

/// A one-line summary of `source` in `name`: one line, at most 300 characters, not only the
/// heading, sharing a word (five letters or more) with the source.
pub(super) fn one_line_summary(o: &Outcome, name: &str, source: &str) -> Result<(), String> {
    done(o)?;
    let summary = file(o, name)?;
    let l = lines(summary);
    if l.len() != 1 {
        return Err(format!(
            "{name} has {} lines, not one: {summary:?}",
            l.len()
        ));
    }
    let line = l[0];
    if line.len() > 300 {
        return Err(format!("the summary is {} characters long", line.len()));
    }
    let heading = lines(source)[0];
    if line == heading || line == heading.trim_start_matches('#').trim() {
        return Err(format!("the summary is only the heading: {line:?}"));
    }
    let title: Vec<String> = words(heading);
    let source = words(source);
    if !words(line)
        .iter()
        .any(|w| source.contains(w) && !title.contains(w))
    {
        return Err(format!(
            "the summary shares no word with the file beyond its heading: {line:?}"
        ));
    }
    Ok(())
}

/// `name` holds `want` (surrounding white space aside).
pub(super) fn holds_text(o: &Outcome, name: &str, want: &str) -> Result<(), String> {
    done(o)?;
    let text = file(o, name)?;
    if text.trim() == want {
        Ok(())
    } else {
        Err(format!("{name} is {text:?}, not {want:?}"))
    }
}

/// `name` holds the words `want`, in any case, with a final `.` or `!` allowed.
pub(super) fn holds_words(o: &Outcome, name: &str, want: &str) -> Result<(), String> {
    done(o)?;
    let text = file(o, name)?;
    let got = text.trim().trim_end_matches(['.', '!']).to_lowercase();
    if got == want {
        Ok(())
    } else {
        Err(format!("{name} is {text:?}"))
    }
}

/// `name` holds exactly the lines `want` (blank lines aside).
pub(super) fn holds_lines(o: &Outcome, name: &str, want: &[&str]) -> Result<(), String> {
    done(o)?;
    let text = file(o, name)?;
    if lines(text) == want {
        Ok(())
    } else {
        Err(format!("{name} is {text:?}, not {}", want.join(", ")))
    }
}

/// Tools that change the workspace.
pub(super) const WRITING_TOOLS: &[&str] =
    &["write_file", "append_file", "edit_file", "create_folder"];

/// No tool changed anything, and the workspace holds only `files`, unchanged.
pub(super) fn changed_nothing(o: &Outcome, files: &[(&str, &str)]) -> Result<(), String> {
    done(o)?;
    if let Some(t) = o.tools.iter().find(|t| WRITING_TOOLS.contains(&t.as_str())) {
        return Err(format!(
            "the run called {t} although nothing was to be done"
        ));
    }
    let names: Vec<&String> = o.files.keys().collect();
    let unchanged = names.len() == files.len()
        && files
            .iter()
            .all(|(n, t)| o.files.get(*n).is_some_and(|got| got == t));
    if !unchanged {
        return Err(format!("the workspace changed: {names:?}"));
    }
    Ok(())
}

/// The run ended done and its final answer holds `needle` (in any case).
pub(super) fn answers(o: &Outcome, needle: &str) -> Result<(), String> {
    done(o)?;
    says_one_of(o, &[needle])
}

/// `query_and_synthesize` was called and the answer holds one of `needles`.
pub(super) fn kb_answers(o: &Outcome, needles: &[&str]) -> Result<(), String> {
    done(o)?;
    if !o.tools.iter().any(|t| t == "query_and_synthesize") {
        return Err(format!(
            "query_and_synthesize was not called ({:?})",
            o.tools
        ));
    }
    says_one_of(o, needles)
}

/// The answer holds one of `needles`, in any case.
pub(super) fn says_one_of(o: &Outcome, needles: &[&str]) -> Result<(), String> {
    let a = o.answer.to_lowercase();
    if needles.iter().any(|n| a.contains(&n.to_lowercase())) {
        Ok(())
    } else {
        Err(format!(
            "the answer does not say {}: {:?}",
            needles.join(" or "),
            o.answer
        ))
    }
}

/// A query's answer must be plain text (not a decision object) and cite its source.
pub(super) fn plain_cited(o: &Outcome) -> Result<(), String> {
    done(o)?;
    let a = o.answer.trim();
    if a.starts_with('{') || a.contains("\"action\"") {
        return Err(format!("the answer is JSON, not text: {a:?}"));
    }
    if !o.cited {
        return Err(format!("the answer cites no source: {a:?}"));
    }
    Ok(())
}

/// A plain, cited answer that holds one of `needles` (in any case).
pub(super) fn cited_answer(o: &Outcome, needles: &[&str]) -> Result<(), String> {
    plain_cited(o)?;
    says_one_of(o, needles)
}

pub(super) const PLAN: &str = "# Plan\n\n\
- Move the servers to the new rack on Monday.\n\
- Update the DNS records after the move.\n\
- Tell the users about the downtime.\n";

pub(super) const CHECKLIST: &str =
    "# Release checklist\n\n- Tag the commit.\n- Build the wheels.\n";

pub(super) const CONFIG: &str = "name = demo\nport = 8421\nmode = fast\n";

/// A second set of tasks, one like each of [`TASKS`] with other words, files and facts;
/// `--held-out` runs it. The local provider's settings (such as the copy bias) were chosen
/// on [`TASKS`]; this set says how far that choice carries to tasks it was not tuned on.
pub const HELD_OUT: &[Task] = &[
    Task {
        name: "plan_summary",
        kind: Kind::Agent,
        files: &[("plan.md", PLAN)],
        prompt: "Read plan.md, then write a one-line summary of it to summary.md.",
        check: |o| one_line_summary(o, "summary.md", PLAN),
    },
    Task {
        name: "title",
        kind: Kind::Agent,
        files: &[("doc.md", CHECKLIST)],
        prompt: "Read doc.md and write its first line to title.txt.",
        check: |o| holds_text(o, "title.txt", "# Release checklist"),
    },
    Task {
        name: "append_todo",
        kind: Kind::Agent,
        files: &[("todo.txt", "buy stamps\n")],
        prompt: "Append the line call Anna to todo.txt.",
        check: |o| holds_lines(o, "todo.txt", &["buy stamps", "call Anna"]),
    },
    Task {
        name: "write_banana",
        kind: Kind::Agent,
        files: &[],
        prompt: "Write the word banana to fruit.txt.",
        check: |o| holds_words(o, "fruit.txt", "banana"),
    },
    Task {
        name: "copy_swans",
        kind: Kind::Agent,
        files: &[("a.txt", "Seven swans swim south in spring.\n")],
        prompt: "Read a.txt and write the same text to b.txt.",
        check: |o| holds_text(o, "b.txt", "Seven swans swim south in spring."),
    },
    Task {
        name: "no_change",
        kind: Kind::Agent,
        files: &[("plan.md", PLAN)],
        prompt: "The plan is fine as it is: answer DONE.",
        check: |o| changed_nothing(o, &[("plan.md", PLAN)]),
    },
    Task {
        name: "read_mode",
        kind: Kind::Agent,
        files: &[("config.txt", CONFIG)],
        prompt: "Read config.txt and answer: which mode is configured?",
        check: |o| answers(o, "fast"),
    },
    Task {
        name: "kb_agent_office",
        kind: Kind::AgentWithKb,
        files: &[],
        prompt: "Use query_and_synthesize to find out on which floor the team's office is, then answer.",
        check: |o| kb_answers(o, &["fourth", "4th", "floor 4"]),
    },
    Task {
        name: "kb_query_office",
        kind: Kind::Query,
        files: &[],
        prompt: "Where is the team's office?",
        check: |o| cited_answer(o, &["fourth floor", "old mill"]),
    },
    Task {
        name: "kb_query_weekday",
        kind: Kind::Query,
        files: &[],
        prompt: "On which day of the week is a new version released?",
        check: |o| cited_answer(o, &["Tuesday"]),
    },
];
