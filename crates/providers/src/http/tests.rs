use super::*;

#[test]
fn the_headers_built_once_carry_the_key_as_sensitive() {
    let h = request_headers(ProviderKind::OpenAi, Some("sk-x"), false);
    let auth = &h[reqwest::header::AUTHORIZATION];
    assert_eq!(auth, "Bearer sk-x");
    assert!(auth.is_sensitive());
    assert_eq!(h[reqwest::header::CONTENT_TYPE], "application/json");
    assert!(h.get(reqwest::header::ACCEPT).is_none());

    let h = request_headers(ProviderKind::Anthropic, Some("sk-ant"), true);
    assert!(h["x-api-key"].is_sensitive());
    assert_eq!(h["anthropic-version"], "2023-06-01");
    assert_eq!(h[reqwest::header::ACCEPT], "text/event-stream");
    assert!(h.get(reqwest::header::AUTHORIZATION).is_none());

    let h = request_headers(ProviderKind::Compatible, None, false);
    assert!(h.get(reqwest::header::AUTHORIZATION).is_none());
}

/// The body a call sent comes back from the HTTP client (nothing else holds it once the
/// answer is read), so the next call builds on it; after a second call over a longer
/// history, the body kept is that call's.
#[tokio::test]
async fn a_sent_body_comes_back_from_the_client_to_be_built_on() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "choices": [{"message": {"role": "assistant", "content": "ok"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}
        })))
        .mount(&server)
        .await;
    let mut config = crate::ProviderConfig::new(ProviderKind::Compatible, "m");
    config.base_url = Some(format!("{}/v1", server.uri()));
    let p = config.build_http(&|_| None).unwrap();
    let mut request = LlmRequest {
        messages: vec![crate::Message::user("hello").into()],
        tools: vec![],
        options: crate::CallOptions::default(),
    };
    p.complete(&request).await.unwrap();
    let first = lock(&p.kept_body).bytes.clone();
    assert_eq!(first, p.request_body(&request, true), "kept after the call");
    request
        .messages
        .push(crate::Message::assistant("ok", vec![]).into());
    p.complete(&request).await.unwrap();
    let kept = lock(&p.kept_body);
    assert_eq!(kept.bytes, p.request_body(&request, true));
    assert!(kept.bytes.len() > first.len());
}

/// A phase offers the same tools call after call, and the body copies their array as it
/// was last written; when the tools change (one dropped, the order changed, a definition
/// replaced), the array is written again: each body is the one a new provider makes.
#[test]
fn the_tools_array_is_kept_while_the_tools_are_the_same() {
    use std::sync::Arc;
    let tool = |name: &str, description: &str| {
        Arc::new(crate::ToolDefinition {
            name: name.into(),
            description: description.into(),
            parameters: serde_json::json!({"type": "object", "properties": {}}),
        })
    };
    let (a, b) = (
        tool("read_file", "Read a file."),
        tool("block", "Say why not."),
    );
    let a_edited = tool("read_file", "Read a file, or a part of one.");
    let lists = [
        vec![Arc::clone(&a), Arc::clone(&b)],
        vec![Arc::clone(&a), Arc::clone(&b)],
        vec![Arc::clone(&b)],
        vec![Arc::clone(&b), Arc::clone(&a)],
        vec![],
        vec![Arc::clone(&a), Arc::clone(&b)],
        vec![Arc::clone(&a_edited), Arc::clone(&b)],
    ];
    for kind in [
        ProviderKind::Compatible,
        ProviderKind::OpenAiResponses,
        ProviderKind::Anthropic,
    ] {
        let build = || {
            let mut config = crate::ProviderConfig::new(kind, "m");
            config.base_url = Some("http://127.0.0.1:9/v1".into());
            config.build_http(&|_| Some("k".into())).unwrap()
        };
        let p = build();
        for tools in &lists {
            let request = LlmRequest {
                messages: vec![crate::Message::user("hello").into()],
                tools: tools.clone(),
                options: crate::CallOptions::default(),
            };
            let body = p.request_body(&request, false);
            assert_eq!(
                String::from_utf8_lossy(&body),
                String::from_utf8_lossy(&build().request_body(&request, false)),
                "{kind:?} with {} tool(s)",
                tools.len()
            );
        }
    }
}

#[test]
fn retry_after_forms() {
    let mut h = HeaderMap::new();
    assert_eq!(retry_after_ms(&h), None);
    h.insert("retry-after", HeaderValue::from_static("2"));
    assert_eq!(retry_after_ms(&h), Some(2000));
    h.insert("retry-after-ms", HeaderValue::from_static("150.5"));
    assert_eq!(retry_after_ms(&h), Some(150));
    let mut h = HeaderMap::new();
    h.insert(
        "retry-after",
        HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
    );
    assert_eq!(retry_after_ms(&h), Some(0), "a date in the past means now");
}

#[test]
fn server_messages_are_extracted() {
    let (m, c) = server_message(
        400,
        r#"{"error": {"message": "bad thing", "type": "invalid_request_error", "code": "x"}}"#,
    );
    assert_eq!((m.as_str(), c.as_deref()), ("bad thing", Some("x")));
    let (m, c) = server_message(
        529,
        r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
    );
    assert_eq!(
        (m.as_str(), c.as_deref()),
        ("Overloaded", Some("overloaded_error"))
    );
    assert_eq!(server_message(502, "").0, "Bad Gateway (empty body)");
    assert_eq!(
        server_message(500, "<html>oops</html>").0,
        "<html>oops</html>"
    );
}
