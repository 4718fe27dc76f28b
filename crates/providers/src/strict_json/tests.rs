use super::*;
use crate::{ScriptedProvider, ScriptedResponse, ToolDefinition};

fn answer(text: &str) -> LlmResponse {
    from_protocol_answer(
        LlmResponse {
            text: text.into(),
            ..Default::default()
        },
        1,
    )
}

#[test]
fn an_action_becomes_one_tool_call() {
    let r = answer(
        r#"{"response": "reading", "action": "read_file", "action_arguments": {"path": "a.md"}}"#,
    );
    assert_eq!(r.text, "reading");
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].name, "read_file");
    assert_eq!(r.tool_calls[0].arguments, json!({"path": "a.md"}));
    let fenced = answer(
        "```json\n{\"response\": \"\", \"action\": \"read_file\", \"action_arguments\": \"{\\\"path\\\": \\\"b\\\"}\"}\n```",
    );
    assert_eq!(fenced.tool_calls[0].arguments, json!({"path": "b"}));
}

#[test]
fn done_missing_action_and_non_json_end_the_phase() {
    for text in [
        r#"{"response": "all done", "action": "DONE"}"#,
        r#"{"response": "all done", "action": "done", "action_arguments": {}}"#,
        r#"{"response": "all done"}"#,
    ] {
        let r = answer(text);
        assert!(r.tool_calls.is_empty(), "{text}");
        assert_eq!(r.text, "all done");
    }
    let prose = "Sure. I would run {\"action\": \"write_file\", \"action_arguments\": {}} next.";
    let r = answer(prose);
    assert!(r.tool_calls.is_empty(), "JSON inside prose is not executed");
    assert_eq!(r.text, prose);
    assert!(answer("[1, 2]").tool_calls.is_empty());
}

#[tokio::test]
async fn json_in_the_users_text_is_never_executed_and_history_is_replayed_as_text() {
    let inner = ScriptedProvider::new(vec![ScriptedResponse::text(
        "I will not do that without being asked properly.",
    )]);
    let p = StrictJsonProvider::new(inner);
    let request = LlmRequest {
        messages: vec![
            Message::system("Be careful.").into(),
            Message::user(
                r#"{"response": "", "action": "write_file", "action_arguments": {"path": "x"}}"#,
            )
            .into(),
            Message::assistant(
                "looking",
                vec![ToolCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "n.md"}),
                }],
            )
            .into(),
            Message::tool_result("c1", "file text").into(),
        ],
        tools: vec![
            ToolDefinition {
                name: "read_file".into(),
                description: "Read a file.".into(),
                parameters: json!({"type": "object"}),
            }
            .into(),
        ],
        ..Default::default()
    };
    let r = p.complete(&request).await.unwrap();
    assert!(r.tool_calls.is_empty());
    let sent = &p.inner().requests()[0];
    assert!(sent.tools.is_empty(), "no native tools are sent");
    assert!(sent.messages[0].content.starts_with("Be careful."));
    assert!(
        sent.messages[0]
            .content
            .contains("- read_file: Read a file.")
    );
    assert_eq!(
        serde_json::from_str::<Value>(&sent.messages[2].content).unwrap()["action"],
        "read_file"
    );
    assert_eq!(sent.messages[3].role, Role::User);
    // The example decision comes last, after the result: here DONE, the task (the
    // first user message) naming no tool or file, and a tool having succeeded.
    assert_eq!(
        sent.messages[3].content,
        "Result of read_file:\nfile text\n\nExample answer:\n{\"action\": \"DONE\", \"action_arguments\": {}}"
    );
}

#[tokio::test]
async fn a_request_without_tools_is_plain_text_both_ways() {
    let decision_like =
        r#"{"response": "x", "action": "write_file", "action_arguments": {"path": "p"}}"#;
    let inner = ScriptedProvider::new(vec![ScriptedResponse::text(decision_like)]);
    let p = StrictJsonProvider::new(inner);
    let request = LlmRequest {
        messages: vec![
            Message::system("Answer briefly.").into(),
            Message::user("Hi").into(),
        ],
        ..Default::default()
    };
    let r = p.complete(&request).await.unwrap();
    assert!(
        r.tool_calls.is_empty(),
        "no tools were offered: nothing to call"
    );
    assert_eq!(r.text, decision_like, "the answer is returned as it is");
    let sent = &p.inner().requests()[0];
    assert_eq!(sent.messages, request.messages, "no protocol instructions");
}

fn tool(name: &str) -> Arc<ToolDefinition> {
    ToolDefinition {
        name: name.into(),
        description: format!("The {name} tool."),
        parameters: json!({"type": "object"}),
    }
    .into()
}

fn call(id: &str, name: &str, path: &str) -> Arc<Message> {
    Message::assistant(
        "",
        vec![ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: json!({ "path": path }),
        }],
    )
    .into()
}

fn request(messages: &[Arc<Message>], tools: &[Arc<ToolDefinition>]) -> LlmRequest {
    LlmRequest {
        messages: messages.to_vec(),
        tools: tools.to_vec(),
        ..Default::default()
    }
}

#[tokio::test]
async fn an_unchanged_history_is_sent_as_the_same_messages() {
    let done = r#"{"response": "", "action": "DONE"}"#;
    let inner = ScriptedProvider::new(vec![
        ScriptedResponse::text(done),
        ScriptedResponse::text(done),
    ]);
    let p = StrictJsonProvider::new(inner);
    let tools = [tool("read_file")];
    let mut history: Vec<Arc<Message>> = vec![
        Message::system("Be careful.").into(),
        Message::user("Read a.md and b.md.").into(),
        call("c1", "read_file", "a.md"),
        Message::tool_result("c1", "A").into(),
    ];
    let first = request(&history, &tools);
    // The estimates convert the same request before the call does.
    p.estimate_prompt_tokens(&first);
    p.complete(&first).await.unwrap();
    history.extend([
        call("c2", "read_file", "b.md"),
        Message::tool_result("c2", "B").into(),
    ]);
    let second = request(&history, &tools);
    p.complete(&second).await.unwrap();
    let sent = p.inner().requests();
    // Every converted message but the one that carried the example is the very one
    // sent before, so the wrapped provider's caches find it.
    for i in 0..3 {
        assert!(
            Arc::ptr_eq(&sent[0].messages[i], &sent[1].messages[i]),
            "message {i} was converted again"
        );
    }
    assert!(sent[0].messages[3].content.contains("Example answer"));
    assert_eq!(sent[1].messages[3].content, "Result of read_file:\nA");
    assert_eq!(sent[0], to_protocol_request(&first));
    assert_eq!(sent[1], to_protocol_request(&second));
}

#[test]
fn a_kept_conversion_follows_the_history_it_is_given() {
    let mut kept = Conversions::default();
    let system: Arc<Message> = Message::system("Be careful.").into();
    let task: Arc<Message> = Message::user("Read a.md, then write b.md.").into();
    let read = call("c1", "read_file", "a.md");
    let result: Arc<Message> = Message::tool_result("c1", "A").into();
    let two = [tool("read_file"), tool("write_file")];
    let mut steps = vec![
        request(&[Arc::clone(&system), Arc::clone(&task)], &two),
        request(
            &[
                Arc::clone(&system),
                Arc::clone(&task),
                Arc::clone(&read),
                Arc::clone(&result),
            ],
            &two,
        ),
    ];
    // The same result, now answering a call of another tool.
    steps.push(request(
        &[
            Arc::clone(&system),
            Arc::clone(&task),
            call("c1", "write_file", "b.md"),
            Arc::clone(&result),
        ],
        &two,
    ));
    // Another tool list (another system prompt), then no tools at all.
    steps.push(request(
        &[
            Arc::clone(&system),
            Arc::clone(&task),
            Arc::clone(&read),
            Arc::clone(&result),
        ],
        &two[..1],
    ));
    steps.push(request(&[Arc::clone(&system), Arc::clone(&task)], &[]));
    // The history cut, then grown again.
    steps.push(request(&[Arc::clone(&task), Arc::clone(&result)], &two));
    steps.push(request(
        &[
            Arc::clone(&system),
            Arc::clone(&task),
            Arc::clone(&read),
            Arc::clone(&result),
        ],
        &two,
    ));
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(
            convert(step, &mut kept),
            to_protocol_request(step),
            "step {i}"
        );
    }
    let named = convert(&steps[2], &mut kept);
    assert!(
        named.messages[3]
            .content
            .starts_with("Result of write_file:")
    );
}

#[test]
fn a_result_names_the_latest_call_with_its_id() {
    let tools = [tool("read_file"), tool("write_file")];
    let converted = to_protocol_request(&request(
        &[
            Message::system("Be careful.").into(),
            Message::user("Read a.md.").into(),
            call("c1", "read_file", "a.md"),
            call("c2", "write_file", "b.md"),
            // Answers the call before the last message with calls.
            Message::tool_result("c1", "A").into(),
            Message::tool_result("c2", "Error: no room").into(),
            Message::tool_result("c9", "?").into(),
            // The id used again by a later call of another tool.
            call("c1", "write_file", "c.md"),
            Message::tool_result("c1", "written").into(),
        ],
        &tools,
    ));
    let said: Vec<&str> = converted
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.content.lines().next().unwrap_or(""))
        .collect();
    assert_eq!(
        said,
        [
            "Read a.md.",
            "Result of read_file:",
            "Result of write_file:",
            "Result of the tool:",
            "Result of write_file:",
        ]
    );
}
