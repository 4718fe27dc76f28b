//! Answering a run's requests in the foreground of `lsm agent run`.
//!
//! A request is shown on stderr the moment it is posted — and showing it acknowledges it, so
//! it no longer times out while the person reads — then the answer is read from stdin: `y`
//! approve, `n` deny, `a` approve for the rest of the run, or free text for a question.
//! When stdin is not a terminal nobody can answer, and nobody is waited for: a permission
//! request is denied at once and a question gets a denial (with `auto_continue`, the channel
//! already answered it). `--yes` approves permission requests. Each answer is recorded with
//! who gave it.

use std::io::Write;
use std::sync::Arc;

use lsm_app::run::answer::{self, Answerer, UNATTENDED};
use lsm_interaction::{
    AUTO_CONTINUE_REPLY, Decision, InteractionChannel, InteractionRequest, RequestType,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// Who answers this run's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// `--yes`: approve permission requests automatically.
    pub auto_approve: bool,
    /// Whether a person can type answers (stdin is a terminal).
    pub interactive: bool,
}

/// Lines typed by the person, read on a thread of their own (a blocked read must not hold
/// the async runtime, nor keep the process alive after the run).
pub fn stdin_lines() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    let spawned = std::thread::Builder::new()
        .name("lsm-stdin".into())
        .spawn(move || {
            for line in std::io::stdin().lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot read answers from stdin: {e}");
    }
    rx
}

/// Answer `channel`'s requests in the foreground: on the terminal when stdin is one,
/// otherwise at once without anyone (denied, or approved with `--yes`). The run's transcript
/// is connected separately (`lsm_app::wiring::interaction::record_interactions`). Abort the
/// returned task when the run ends.
pub fn answer_in_foreground(
    channel: &Arc<InteractionChannel>,
    auto_approve: bool,
) -> JoinHandle<()> {
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let input = interactive.then(stdin_lines);
    spawn(
        Arc::clone(channel),
        Policy {
            auto_approve,
            interactive,
        },
        input,
        std::io::stderr(),
    )
}

/// Answer `channel`'s requests per `policy` until the channel's run ends (abort the task).
/// `input` is the person's lines (`None`: nobody types); prompts go to `out`.
pub fn spawn<W: Write + Send + 'static>(
    channel: Arc<InteractionChannel>,
    policy: Policy,
    input: Option<mpsc::UnboundedReceiver<String>>,
    out: W,
) -> JoinHandle<()> {
    answer::spawn(channel, Terminal { policy, input, out })
}

/// A person at the terminal, when there is one.
struct Terminal<W> {
    policy: Policy,
    input: Option<mpsc::UnboundedReceiver<String>>,
    out: W,
}

impl<W: Write + Send + 'static> Answerer for Terminal<W> {
    async fn answer(
        &mut self,
        channel: &InteractionChannel,
        pending: &mut watch::Receiver<Option<InteractionRequest>>,
        request: &InteractionRequest,
    ) {
        let policy = self.policy;
        let approved_by_flag =
            request.request_type == RequestType::Permission && policy.auto_approve;
        let result = match self.input.as_mut().filter(|_| policy.interactive) {
            Some(lines) if !approved_by_flag => {
                match ask_person(channel, lines, &mut self.out, pending, request).await {
                    Asked::Done => Ok(()),
                    Asked::InputClosed => {
                        self.input = None;
                        answer::answer_unattended(
                            channel,
                            request,
                            policy.auto_approve,
                            "stdin was closed",
                        )
                    }
                }
            }
            _ => answer::answer_unattended(channel, request, policy.auto_approve, UNATTENDED),
        };
        if let Err(e) = result {
            // Answered by someone else in the meantime (a timeout, a stop): nothing to do.
            tracing::debug!("request {} was not answered here: {e}", request.request_id);
        }
    }
}

enum Asked {
    Done,
    InputClosed,
}

/// Show the request (acknowledging it), then read answers until one is valid or the request
/// is answered elsewhere.
async fn ask_person<W: Write>(
    channel: &InteractionChannel,
    lines: &mut mpsc::UnboundedReceiver<String>,
    out: &mut W,
    pending: &mut watch::Receiver<Option<InteractionRequest>>,
    request: &InteractionRequest,
) -> Asked {
    // Lines typed before the request existed answer nothing.
    while lines.try_recv().is_ok() {}
    // Acknowledged as it is shown (first, so the progress line of the acknowledgement comes
    // before the prompt, not in the middle of the answer being typed).
    if let Err(e) = channel.acknowledge_request(&request.request_id) {
        tracing::debug!("{e}");
    }
    let _ = out.write_all(render(request).as_bytes());
    let _ = out.flush();
    loop {
        tokio::select! {
            line = lines.recv() => {
                let Some(line) = line else { return Asked::InputClosed };
                match parse_answer(request.request_type, &line) {
                    Some((decision, message)) => {
                        match channel.respond(&request.request_id, decision, message) {
                            Ok(()) => {}
                            Err(e) => { let _ = writeln!(out, "  ({e})"); }
                        }
                        let _ = out.flush();
                        return Asked::Done;
                    }
                    None => {
                        let _ = write!(out, "{}", answer_hint(request.request_type));
                        let _ = out.flush();
                    }
                }
            }
            changed = pending.changed() => {
                let still = changed.is_ok() && pending
                    .borrow()
                    .as_ref()
                    .is_some_and(|r| r.request_id == request.request_id);
                if !still {
                    let _ = writeln!(out, "\n  (request {} was answered elsewhere or timed out)", request.request_id);
                    let _ = out.flush();
                    return Asked::Done;
                }
            }
        }
    }
}

/// The request as shown on the terminal, ending with the answer prompt. A question, a reason
/// and a diff hold a model's or a file's text: shown, never obeyed, so nothing in them can
/// move the cursor over the request and make it read as something else.
pub fn render(request: &InteractionRequest) -> String {
    use super::text::{one_line, terminal_text};
    let mut s = String::new();
    let title = match request.request_type {
        RequestType::Permission => "permission request",
        RequestType::Clarification => "question from the agent",
        RequestType::Feedback => "feedback request",
        RequestType::Confirmation => "confirmation request",
    };
    s.push_str(&format!("\n---- {title} {} ----\n", request.request_id));
    s.push_str(&format!("{}\n", terminal_text(&request.prompt)));
    if !request.reason.is_empty() {
        s.push_str(&format!("  reason: {}\n", one_line(request.reason.clone())));
    }
    match &request.preview {
        // The diff says what the arguments would do; they would only repeat it.
        Some(preview) => {
            s.push_str("  what it would change:\n");
            for line in preview.lines() {
                s.push_str(&format!("    {}\n", one_line(line.to_string())));
            }
        }
        None if !request.args_summary.is_empty() => {
            s.push_str(&format!(
                "  arguments: {}\n",
                one_line(request.args_summary.clone())
            ));
        }
        None => {}
    }
    s.push_str(answer_hint(request.request_type));
    s
}

fn answer_hint(request_type: RequestType) -> &'static str {
    if request_type.takes_reply() {
        "Type your answer (an empty line: let the agent decide) > "
    } else if request_type == RequestType::Permission {
        "Answer [y] approve, [n] deny, [a] approve for the rest of the run > "
    } else {
        "Answer [y] yes, [n] no > "
    }
}

/// A typed line as an answer to a request of `request_type`, or `None` when it is not one.
/// `n <why>` denies with a reason.
pub fn parse_answer(request_type: RequestType, line: &str) -> Option<(Decision, String)> {
    let line = line.trim();
    if request_type.takes_reply() {
        let text = if line.is_empty() {
            AUTO_CONTINUE_REPLY
        } else {
            line
        };
        return Some((Decision::Reply, text.to_string()));
    }
    let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
    let decision = match word.to_ascii_lowercase().as_str() {
        "y" | "yes" => Decision::Approve,
        "n" | "no" => Decision::Deny,
        "a" | "always" if request_type == RequestType::Permission => Decision::ApproveSession,
        _ => return None,
    };
    Some((decision, rest.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use lsm_interaction::{AnswerSource, InteractionConfig, InteractionEvent, InteractionObserver};
    use lsm_sandbox::{PermissionRequest, RiskLevel};

    use super::*;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl Buf {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    #[derive(Default)]
    struct Events(Mutex<Vec<InteractionEvent>>);
    impl InteractionObserver for Events {
        fn on_event(&self, e: &InteractionEvent) {
            self.0.lock().unwrap().push(e.clone());
        }
    }

    fn perm() -> PermissionRequest {
        PermissionRequest {
            tool_name: "write_file".into(),
            risk_level: RiskLevel::WritesWorkspace,
            reason: "tool 'write_file' needs permission by default".into(),
            args_summary: r#"{"path":"out.md"}"#.into(),
            preview: None,
        }
    }

    #[test]
    fn a_write_request_shows_the_diff_it_would_make() {
        let mut request = perm();
        request.preview = Some(lsm_sandbox::preview::file_diff(
            "out.md",
            "# Notes\nold line\nkept\n",
            "# Notes\nnew line\nkept\n",
        ));
        let mut shown = render(&InteractionRequest::permission(&request));
        // The id is random.
        shown = shown.replace(
            shown.split_whitespace().nth(3).unwrap_or_default(),
            "perm-ID",
        );
        insta::assert_snapshot!(shown);
    }

    #[test]
    fn a_request_shows_a_question_a_reason_or_a_diff_without_obeying_them() {
        let mut request = perm();
        request.reason = "needs permission \u{1b}[1A".into();
        request.preview = Some(lsm_sandbox::preview::file_diff(
            "out.md",
            "kept\n",
            "kept\n\u{1b}[2A\u{1b}[2Knothing to see\r\n",
        ));
        let shown = render(&InteractionRequest::permission(&request));
        let question = render(&InteractionRequest::clarification(
            "ask_user",
            "Which file?\u{1b}]0;owned\u{7}\nnotes.md or todo.md?",
            Some("the \u{1b}[8m part"),
        ));
        for text in [&shown, &question] {
            assert!(
                !text.contains(|c: char| c.is_control() && c != '\n'),
                "{text:?}"
            );
        }
        assert!(shown.contains("�[2A�[2Knothing to see"), "{shown}");
        assert!(shown.contains("reason: needs permission �[1A"), "{shown}");
        assert!(
            question.contains("Which file?�]0;owned�\nnotes.md or todo.md?")
                && question.contains("reason: the �[8m part"),
            "{question}"
        );
    }

    fn setup(config: InteractionConfig) -> (Arc<InteractionChannel>, Arc<Events>) {
        let ch = Arc::new(InteractionChannel::new(&config).unwrap());
        let events = Arc::new(Events::default());
        ch.set_observer(events.clone());
        (ch, events)
    }

    #[test]
    fn answers_parse_per_request_type() {
        use Decision::*;
        let p = RequestType::Permission;
        assert_eq!(parse_answer(p, "y"), Some((Approve, String::new())));
        assert_eq!(parse_answer(p, " YES "), Some((Approve, String::new())));
        assert_eq!(
            parse_answer(p, "n too risky"),
            Some((Deny, "too risky".into()))
        );
        assert_eq!(parse_answer(p, "a"), Some((ApproveSession, String::new())));
        assert_eq!(parse_answer(p, "maybe"), None);
        assert_eq!(parse_answer(p, ""), None);
        let c = RequestType::Clarification;
        assert_eq!(
            parse_answer(c, "notes.md"),
            Some((Reply, "notes.md".into()))
        );
        assert_eq!(
            parse_answer(c, ""),
            Some((Reply, "Continue with your best judgment.".into()))
        );
        assert_eq!(parse_answer(RequestType::Confirmation, "a"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_shown_request_is_acknowledged_and_answered_from_typed_lines() {
        let (ch, events) = setup(InteractionConfig::default());
        let (tx, rx) = mpsc::unbounded_channel();
        let out = Buf::default();
        let task = spawn(
            Arc::clone(&ch),
            Policy {
                auto_approve: false,
                interactive: true,
            },
            Some(rx),
            out.clone(),
        );
        let asked = {
            let ch = Arc::clone(&ch);
            tokio::spawn(async move { ch.ask_permission(&perm()).await })
        };
        // Shown and acknowledged the moment it is posted: a day later it still waits.
        tokio::time::sleep(std::time::Duration::from_secs(86_400)).await;
        assert!(!asked.is_finished());
        let shown = out.text();
        assert!(
            shown.contains("Allow tool 'write_file' (risk: writes_workspace)?"),
            "{shown}"
        );
        assert!(
            shown.contains("[a] approve for the rest of the run"),
            "{shown}"
        );
        assert!(ch.pending().unwrap().acknowledged_at.is_some());
        tx.send("what?".into()).unwrap();
        tx.send("a".into()).unwrap();
        let d = asked.await.unwrap();
        assert!(d.allowed, "{d:?}");
        assert!(ch.is_session_approved("write_file"));
        let names: Vec<_> = events.0.lock().unwrap().iter().map(|e| e.name()).collect();
        assert_eq!(
            names,
            [
                "interaction_request",
                "interaction_acknowledged",
                "interaction_response"
            ]
        );
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn unattended_permission_is_denied_at_once_and_recorded_as_such() {
        let (ch, events) = setup(InteractionConfig::default());
        let task = spawn(
            Arc::clone(&ch),
            Policy {
                auto_approve: false,
                interactive: false,
            },
            None,
            Buf::default(),
        );
        let started = tokio::time::Instant::now();
        let d = ch.ask_permission(&perm()).await;
        assert_eq!(started.elapsed(), std::time::Duration::ZERO, "it waited");
        assert!(!d.allowed);
        assert!(
            d.reason.contains("no one can answer") && d.reason.contains("--yes"),
            "{}",
            d.reason
        );
        let last = events.0.lock().unwrap().last().unwrap().clone();
        assert_eq!(last.fields()["source"], "unattended");
        // A question is denied the same way.
        let e = ch
            .ask_clarification("ask_user", "Which?", None)
            .await
            .unwrap();
        assert_eq!(e.response.decision, Decision::Deny);
        assert_eq!(e.source, AnswerSource::Unattended);
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn yes_approves_permission_and_says_so() {
        let (ch, events) = setup(InteractionConfig::default());
        let task = spawn(
            Arc::clone(&ch),
            Policy {
                auto_approve: true,
                interactive: false,
            },
            None,
            Buf::default(),
        );
        let d = ch.ask_permission(&perm()).await;
        assert!(d.allowed);
        assert!(d.reason.contains("--yes"), "{}", d.reason);
        let last = events.0.lock().unwrap().last().unwrap().clone();
        assert_eq!(last.fields()["source"], "auto_approve");
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_posted_while_the_last_one_was_on_screen_is_shown_too() {
        let (ch, _events) = setup(InteractionConfig::default());
        let (tx, rx) = mpsc::unbounded_channel();
        let out = Buf::default();
        let task = spawn(
            Arc::clone(&ch),
            Policy {
                auto_approve: false,
                interactive: true,
            },
            Some(rx),
            out.clone(),
        );
        let first = {
            let ch = Arc::clone(&ch);
            tokio::spawn(async move { ch.ask_permission(&perm()).await })
        };
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert!(out.text().contains("Allow tool"));
        // The shown request ends and the next is posted before the prompt notices.
        ch.cancel_pending("a stop");
        let question = InteractionRequest::clarification("ask_user", "Which one?", None);
        let id = question.request_id.clone();
        let mut second = Box::pin(ch.post_request(question));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        assert!(!first.await.unwrap().allowed);
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert!(out.text().contains("Which one?"), "{}", out.text());
        assert!(ch.pending().unwrap().acknowledged_at.is_some());
        tx.send("the left one".into()).unwrap();
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        let std::task::Poll::Ready(answer) = second.as_mut().poll(&mut cx) else {
            panic!("the second request was not answered");
        };
        let answer = answer.unwrap();
        assert_eq!(answer.response.request_id, id);
        assert_eq!(answer.response.user_message, "the left one");
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn closed_stdin_falls_back_to_failing_closed() {
        let (ch, _events) = setup(InteractionConfig::default());
        let (tx, rx) = mpsc::unbounded_channel::<String>();
        drop(tx);
        let task = spawn(
            Arc::clone(&ch),
            Policy {
                auto_approve: false,
                interactive: true,
            },
            Some(rx),
            Buf::default(),
        );
        let d = ch.ask_permission(&perm()).await;
        assert!(
            !d.allowed && d.reason.contains("stdin was closed"),
            "{}",
            d.reason
        );
        task.abort();
    }
}
