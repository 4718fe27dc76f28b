use super::*;
use crate::task_steps::tests::tool;
use crate::{Message, ToolCall};
use serde_json::json;

fn request(task: &str, tools: &[&str], history: Vec<Message>) -> LlmRequest {
    let mut messages = vec![Message::system("Be careful."), Message::user(task)];
    messages.extend(history);
    LlmRequest {
        messages: messages.into_iter().map(std::sync::Arc::new).collect(),
        tools: tools.iter().map(|t| tool(t)).collect(),
        ..Default::default()
    }
}

fn names(r: &LlmRequest) -> Vec<&str> {
    r.tools.iter().map(|t| t.name.as_str()).collect()
}

const GENERAL: &[&str] = &[
    "append_file",
    "ask_user",
    "edit_file",
    "find_file",
    "hash_file",
    "read_file",
    "read_folder",
    "write_file",
    "complete",
];

/// A call of `name` and its result.
fn called(id: &str, name: &str, arguments: serde_json::Value, result: &str) -> [Message; 2] {
    [
        Message::assistant(
            "",
            vec![ToolCall {
                id: id.into(),
                name: name.into(),
                arguments,
            }],
        ),
        Message::tool_result(id, result),
    ]
}

#[test]
fn a_small_model_is_offered_the_tools_its_task_names_with_their_files() {
    let task = "Read notes.md, then write a one-line summary of it to summary.md.";
    let path_enum = |r: &LlmRequest, name: &str| {
        r.tools.iter().find(|t| t.name == name).unwrap().parameters["properties"]["path"]["enum"]
            .clone()
    };
    // First the reading step, on the file named for it.
    let r = small_model_request(&request(task, GENERAL, Vec::new()));
    assert_eq!(names(&r), ["read_file", "read_folder"]);
    assert_eq!(path_enum(&r, "read_file"), json!(["notes.md"]));
    // The conversation itself is untouched.
    assert_eq!(r.messages.len(), 2);
    // Once it succeeded, the writing step, on its own file.
    let read = called("c1", "read_file", json!({"path": "notes.md"}), "# Notes").to_vec();
    let r = small_model_request(&request(task, GENERAL, read.clone()));
    assert_eq!(names(&r), ["write_file"]);
    assert_eq!(path_enum(&r, "write_file"), json!(["summary.md"]));
    // Once every step succeeded, no tool: the model answers in text.
    let mut both = read;
    both.extend(called(
        "c2",
        "write_file",
        json!({"path": "summary.md", "content": "Notes."}),
        "Wrote 6 bytes",
    ));
    let r = small_model_request(&request(task, GENERAL, both));
    assert!(r.tools.is_empty(), "{:?}", names(&r));
}

#[test]
fn the_step_due_is_offered_and_control_tools_never_are() {
    let history = called("c1", "hash_file", json!({"path": "a.txt"}), "abc123").to_vec();
    let r = small_model_request(&request(
        "Append the line milk to list.txt.",
        GENERAL,
        history,
    ));
    // The step due is the append: the other tool that succeeded is not offered now.
    assert_eq!(names(&r), ["append_file"]);
    // Only control tools offered: none is left, so the call is a plain-text answer.
    let r = small_model_request(&request("Finish.", &["complete", "ask_user"], Vec::new()));
    assert!(r.tools.is_empty());
    assert!(
        model_messages(&r, false)
            .iter()
            .all(|(_, m)| !m.contains("Example answer"))
    );
}
