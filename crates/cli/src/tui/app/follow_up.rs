//! The TUI's chat with a run: `c` on a finished run opens a line for a follow-up message,
//! and Enter starts a new turn that continues that run's conversation (`--continue`), shown
//! as a run of its own, selected, its log following. Above the log of a run that is a turn
//! of such a conversation, the conversation pane shows its turns: each message and answer.

use super::*;

impl App {
    /// `c`: start typing a follow-up to the selected run, if it has finished.
    pub(super) fn follow_up(&mut self, runs: &dyn Runs) {
        let Some(run) = self.selected_run(runs) else {
            self.message = "no run selected".into();
            return;
        };
        match (&run.end, &run.record_id) {
            (None, _) => {
                self.message = format!(
                    "{}: not finished; a follow-up continues a finished run",
                    run.run_id
                );
            }
            (Some(_), None) => {
                self.message = format!("{}: no records to continue", run.run_id);
            }
            (Some(_), Some(record)) => {
                self.input = Input::FollowUp {
                    from: run.run_id.clone(),
                    agent: run.agent.clone(),
                    run: record.clone(),
                    text: String::new(),
                };
            }
        }
    }

    /// Enter on a follow-up: the new turn starts.
    pub(super) fn send_follow_up(
        &mut self,
        runs: &dyn Runs,
        from: &str,
        agent: &str,
        run: &str,
        text: &str,
    ) {
        let text = text.trim();
        if text.is_empty() {
            self.message = "a follow-up needs a message".into();
            return;
        }
        let input = self
            .agents
            .iter()
            .find(|a| a.name == agent)
            .map_or("task", |a| a.input);
        let request = RunRequest {
            continue_run: Some(run.to_string()),
            ..self.request.clone()
        }
        .of_agent(agent, input, text);
        self.message = match runs.start(request) {
            Ok(id) => {
                self.turns.insert(id.clone(), from.to_string());
                self.selected = runs.list().len().saturating_sub(1);
                self.scroll_back = 0;
                format!("{id}: continues {run}")
            }
            Err(e) => e.to_string(),
        };
    }

    /// The conversation `run` is a turn of, oldest turn first: empty when it is none.
    fn conversation<'a>(&self, view: &'a View, run: &'a RunInfo) -> Vec<&'a RunInfo> {
        let mut chain = vec![run];
        let mut at = run.run_id.as_str();
        while let Some(previous) = self.turns.get(at) {
            match view.runs.iter().find(|r| &r.run_id == previous) {
                Some(r) if chain.len() <= view.runs.len() => {
                    chain.push(r);
                    at = r.run_id.as_str();
                }
                _ => break,
            }
        }
        if chain.len() == 1 {
            return Vec::new();
        }
        chain.reverse();
        chain
    }

    /// The conversation pane above the log of the selected run, when it is a turn of one;
    /// the area left for the log.
    pub(super) fn draw_conversation(&self, f: &mut Frame<'_>, area: Rect, view: &View) -> Rect {
        let Some(run) = view.selected(self) else {
            return area;
        };
        let turns = self.conversation(view, run);
        if turns.is_empty() {
            return area;
        }
        let mut lines = Vec::new();
        for turn in &turns {
            lines.push(Line::styled(
                format!("you: {}", clip(&turn.task, 200)),
                Style::new().add_modifier(Modifier::BOLD),
            ));
            let answer = turn
                .end
                .as_ref()
                .map_or_else(|| "…".to_string(), |e| clip(&e.final_text, 400));
            lines.push(Line::from(format!("{}: {answer}", turn.agent)));
        }
        let height = u16::try_from(lines.len() + 2)
            .unwrap_or(u16::MAX)
            .min(area.height / 2);
        let [pane, rest] =
            Layout::vertical([Constraint::Length(height), Constraint::Min(3)]).areas(area);
        // The latest turns when they do not all fit.
        let shown = usize::from(height.saturating_sub(2));
        let skip = lines.len().saturating_sub(shown);
        f.render_widget(
            Paragraph::new(lines.split_off(skip))
                .block(Block::bordered().title(format!(" Conversation ({} turns) ", turns.len())))
                .wrap(Wrap { trim: false }),
            pane,
        );
        rest
    }
}
