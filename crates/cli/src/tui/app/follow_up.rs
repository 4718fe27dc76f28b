//! The TUI's chat with a run: `c` on a finished run opens a line for a follow-up message,
//! and Enter starts a new turn that continues that run's conversation (`--continue`), shown
//! as a run of its own, selected, its log following.

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
                    agent: run.agent.clone(),
                    run: record.clone(),
                    text: String::new(),
                };
            }
        }
    }

    /// Enter on a follow-up: the new turn starts.
    pub(super) fn send_follow_up(&mut self, runs: &dyn Runs, agent: &str, run: &str, text: &str) {
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
                self.selected = runs.list().len().saturating_sub(1);
                self.scroll_back = 0;
                format!("{id}: continues {run}")
            }
            Err(e) => e.to_string(),
        };
    }
}
