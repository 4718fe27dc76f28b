//! The TUI's state, key handling and drawing — independent of the real terminal, so tests
//! drive it on a `TestBackend` against a fake set of runs.

use std::collections::HashSet;

use lsm_interaction::{Decision, PendingView, RequestType};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};

use crate::terminal::text::clip;
use lsm_app::run::RunRequest;
use lsm_app::runtime::{AgentRuntimeManager, LogSnapshot, ManagerError, RunInfo};

mod follow_up;
mod manager;

/// What the TUI needs from the runtime. [`AgentRuntimeManager`] is the real one.
pub trait Runs {
    /// Every run with its status.
    fn list(&self) -> Vec<RunInfo>;
    /// A run's pending request.
    fn pending(&self, run_id: &str) -> Option<PendingView>;
    /// A run's live log.
    fn logs(&self, run_id: &str) -> LogSnapshot;
    /// The request is on screen.
    ///
    /// # Errors
    /// As [`AgentRuntimeManager::acknowledge_interaction`].
    fn acknowledge(&self, run_id: &str, request_id: &str) -> Result<bool, ManagerError>;
    /// A person's answer.
    ///
    /// # Errors
    /// As [`AgentRuntimeManager::respond`].
    fn respond(
        &self,
        run_id: &str,
        request_id: &str,
        decision: Decision,
        message: &str,
    ) -> Result<(), ManagerError>;
    /// Stop a run.
    ///
    /// # Errors
    /// As [`AgentRuntimeManager::stop`].
    fn stop(&self, run_id: &str) -> Result<(), ManagerError>;
    /// Start the run `request` asks for.
    ///
    /// # Errors
    /// As [`AgentRuntimeManager::start`].
    fn start(&self, request: RunRequest) -> Result<String, ManagerError>;
}

/// What is being typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Keys are commands.
    Keys,
    /// A reply to the selected run's question.
    Reply(String),
    /// The task of a new run.
    Task(String),
    /// A follow-up to the finished run `run` (its records' id) of `agent`: a new turn of its
    /// conversation.
    FollowUp {
        /// The run it follows (the manager's id).
        from: String,
        /// The agent.
        agent: String,
        /// The run it continues.
        run: String,
        /// The message.
        text: String,
    },
}

/// One refresh's worth of what is on screen.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Every run.
    pub runs: Vec<RunInfo>,
    /// The selected run's pending request.
    pub pending: Option<PendingView>,
    /// The selected run's log.
    pub log: LogSnapshot,
}

impl View {
    fn selected<'a>(&'a self, app: &App) -> Option<&'a RunInfo> {
        self.runs.get(app.selected)
    }
}

/// An agent new runs can start, and what it takes (`task` or `topic`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentChoice {
    /// Its name.
    pub name: String,
    /// `task` or `topic`.
    pub input: &'static str,
}

impl AgentChoice {
    /// Every agent of `catalog`, in its order.
    pub fn of(catalog: &lsm_agents::Catalog) -> Vec<AgentChoice> {
        catalog
            .iter()
            .map(|d| AgentChoice {
                name: d.name().to_string(),
                input: d.spec.input.as_str(),
            })
            .collect()
    }
}

/// The TUI's state.
#[derive(Debug)]
pub struct App {
    /// The agent new runs start (`g` picks the next one).
    agent: String,
    /// The agents `g` cycles through: the project's catalog (the built-ins by default).
    agents: Vec<AgentChoice>,
    /// What every run started here starts from (the provider, the agents folder).
    request: RunRequest,
    /// How far the log is scrolled back from its end, in screen lines (0: follow the end).
    scroll_back: usize,
    selected: usize,
    input: Input,
    acknowledged: HashSet<String>,
    /// The turns started here as follow-ups: new run → the run it continues (the
    /// manager's ids).
    turns: std::collections::HashMap<String, String>,
    message: String,
    /// Set when the person asked to quit.
    pub quit: bool,
}

impl App {
    /// A TUI that starts `agent` for new tasks.
    pub fn new(agent: &str) -> Self {
        App {
            agent: agent.to_string(),
            agents: AgentChoice::of(&lsm_agents::Catalog::builtin()),
            request: RunRequest::default(),
            scroll_back: 0,
            selected: 0,
            input: Input::Keys,
            acknowledged: HashSet::new(),
            turns: std::collections::HashMap::new(),
            message: String::new(),
            quit: false,
        }
    }

    /// The agent after the current one in `agents` (wrapping around).
    fn next_agent(&self) -> String {
        let at = self
            .agents
            .iter()
            .position(|a| a.name == self.agent)
            .map_or(0, |i| i + 1);
        self.agents
            .get(at % self.agents.len().max(1))
            .map_or_else(|| self.agent.clone(), |a| a.name.clone())
    }

    /// `task` or `topic`: what the current agent takes.
    fn input_kind(&self) -> &'static str {
        self.agents
            .iter()
            .find(|a| a.name == self.agent)
            .map_or("task", |a| a.input)
    }

    /// Every run starts from `request` (its agent and task are the TUI's).
    pub fn with_request(mut self, request: RunRequest) -> Self {
        self.request = request;
        self
    }

    /// `g` cycles through `agents` (the project's and the user's definitions included).
    pub fn with_agents(mut self, agents: Vec<AgentChoice>) -> Self {
        if !agents.is_empty() {
            self.agents = agents;
        }
        self
    }

    /// What is being typed.
    #[cfg(test)]
    pub fn input(&self) -> &Input {
        &self.input
    }

    /// Gather what to show now.
    pub fn refresh(&mut self, runs: &dyn Runs) -> View {
        let list = runs.list();
        if self.selected >= list.len() {
            self.selected = list.len().saturating_sub(1);
        }
        let (pending, log) = match list.get(self.selected) {
            Some(run) => (runs.pending(&run.run_id), runs.logs(&run.run_id)),
            None => (None, LogSnapshot::default()),
        };
        View {
            runs: list,
            pending,
            log,
        }
    }

    /// After `view` was drawn: acknowledge the request it showed — once per request id,
    /// however many refreshes show it.
    pub fn acknowledge_shown(&mut self, runs: &dyn Runs, view: &View) {
        let (Some(run), Some(pending)) = (view.selected(self), &view.pending) else {
            return;
        };
        let id = &pending.request.request_id;
        if self.acknowledged.insert(id.clone())
            && let Err(e) = runs.acknowledge(&run.run_id, id)
        {
            // Answered between the refresh and now: nothing left to acknowledge.
            tracing::debug!("{e}");
        }
    }

    /// Refresh, draw, acknowledge what was drawn.
    ///
    /// # Errors
    /// When the terminal cannot be drawn on.
    pub fn tick<B: ratatui::backend::Backend>(
        &mut self,
        terminal: &mut ratatui::Terminal<B>,
        runs: &dyn Runs,
    ) -> Result<(), B::Error> {
        let view = self.refresh(runs);
        terminal.draw(|f| self.draw(f, &view))?;
        self.acknowledge_shown(runs, &view);
        Ok(())
    }

    /// Handle one key press.
    pub fn on_key(&mut self, key: KeyEvent, runs: &dyn Runs) {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        match &mut self.input {
            Input::Keys => self.on_command(key.code, runs),
            Input::Reply(text) | Input::Task(text) | Input::FollowUp { text, .. } => match key.code
            {
                KeyCode::Esc => {
                    self.input = Input::Keys;
                    self.message = "cancelled".into();
                }
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Char(c) => text.push(c),
                KeyCode::Enter => self.submit(runs),
                _ => {}
            },
        }
    }

    fn selected_run(&self, runs: &dyn Runs) -> Option<RunInfo> {
        runs.list().into_iter().nth(self.selected)
    }

    fn on_command(&mut self, code: KeyCode, runs: &dyn Runs) {
        match code {
            KeyCode::Char('q') | KeyCode::Esc => self.quit = true,
            KeyCode::Up | KeyCode::Char('k') => {
                self.selected = self.selected.saturating_sub(1);
                self.scroll_back = 0;
            }
            KeyCode::Down | KeyCode::Char('j') if self.selected + 1 < runs.list().len() => {
                self.selected += 1;
                self.scroll_back = 0;
            }
            KeyCode::Char('t') => self.input = Input::Task(String::new()),
            KeyCode::Char('c') => self.follow_up(runs),
            KeyCode::Char('g') => {
                self.agent = self.next_agent();
                self.message = format!("new runs start the {} agent", self.agent);
            }
            KeyCode::PageUp => self.scroll_back = self.scroll_back.saturating_add(10),
            KeyCode::PageDown => self.scroll_back = self.scroll_back.saturating_sub(10),
            KeyCode::End => self.scroll_back = 0,
            KeyCode::Char('s') => match self.selected_run(runs) {
                Some(run) => {
                    self.message = match runs.stop(&run.run_id) {
                        Ok(()) => format!("{}: stop requested", run.run_id),
                        Err(e) => e.to_string(),
                    };
                }
                None => self.message = "no run selected".into(),
            },
            KeyCode::Char('y') => self.answer(runs, Decision::Approve, ""),
            KeyCode::Char('n') => self.answer(runs, Decision::Deny, "denied in the TUI"),
            KeyCode::Char('a') => self.answer(runs, Decision::ApproveSession, ""),
            KeyCode::Char('r') => match self.pending_of_selected(runs) {
                Some((_, p)) if p.request.request_type.takes_reply() => {
                    self.input = Input::Reply(String::new());
                }
                Some(_) => self.message = "this request takes y, n or a, not a reply".into(),
                None => self.message = "no request waiting in the selected run".into(),
            },
            _ => {}
        }
    }

    fn pending_of_selected(&self, runs: &dyn Runs) -> Option<(RunInfo, PendingView)> {
        let run = self.selected_run(runs)?;
        let pending = runs.pending(&run.run_id)?;
        Some((run, pending))
    }

    fn answer(&mut self, runs: &dyn Runs, decision: Decision, message: &str) {
        let Some((run, pending)) = self.pending_of_selected(runs) else {
            self.message = "no request waiting in the selected run".into();
            return;
        };
        let kind = pending.request.request_type;
        let fits = match decision {
            Decision::Deny => true,
            Decision::Approve => !kind.takes_reply(),
            Decision::ApproveSession => kind == RequestType::Permission,
            Decision::Reply => kind.takes_reply(),
        };
        if !fits {
            self.message = format!("a {kind} request cannot be answered with {decision}");
            return;
        }
        let id = pending.request.request_id;
        self.message = match runs.respond(&run.run_id, &id, decision, message) {
            Ok(()) => format!("{}: {decision} sent for {id}", run.run_id),
            Err(e) => e.to_string(),
        };
    }

    fn submit(&mut self, runs: &dyn Runs) {
        let input = std::mem::replace(&mut self.input, Input::Keys);
        match input {
            Input::Keys => {}
            Input::Reply(text) => self.answer(runs, Decision::Reply, text.trim()),
            Input::FollowUp {
                from,
                agent,
                run,
                text,
            } => self.send_follow_up(runs, &from, &agent, &run, &text),
            Input::Task(text) => {
                let task = text.trim();
                if task.is_empty() {
                    self.message = "a run needs a task".into();
                    return;
                }
                let input = self
                    .agents
                    .iter()
                    .find(|a| a.name == self.agent)
                    .map_or("task", |a| a.input);
                let request = self.request.clone().of_agent(&self.agent, input, task);
                self.message = match runs.start(request) {
                    Ok(id) => {
                        let count = runs.list().len();
                        self.selected = count.saturating_sub(1);
                        format!("{id}: started {}", self.agent)
                    }
                    Err(e) => e.to_string(),
                };
            }
        }
    }

    /// Draw `view`.
    pub fn draw(&self, f: &mut Frame<'_>, view: &View) {
        let area = f.area();
        // The panel grows with what it shows (a diff), up to half the screen.
        let wanted = view
            .pending
            .as_ref()
            .map_or(3, |p| panel_lines(p) + 2)
            .clamp(3, usize::from(area.height / 2).max(3));
        let [top, panel, footer] = Layout::vertical([
            Constraint::Min(5),
            Constraint::Length(u16::try_from(wanted).unwrap_or(u16::MAX)),
            Constraint::Length(2),
        ])
        .areas(area);
        let list_width = if area.width < 100 { 30 } else { 36 };
        let [list, log] =
            Layout::horizontal([Constraint::Length(list_width), Constraint::Min(20)]).areas(top);
        self.draw_runs(f, list, view);
        let log = self.draw_conversation(f, log, view);
        self.draw_log(f, log, view);
        self.draw_panel(f, panel, view);
        self.draw_footer(f, footer, view);
    }

    fn draw_runs(&self, f: &mut Frame<'_>, area: Rect, view: &View) {
        let lines: Vec<Line<'_>> = if view.runs.is_empty() {
            vec![Line::from("no runs yet: press t")]
        } else {
            let mut lines = Vec::new();
            for (i, r) in view.runs.iter().enumerate() {
                let mark = if i == self.selected { "> " } else { "  " };
                let text = format!("{mark}{:<3} {:<9} {}", r.run_id, r.agent, r.status);
                lines.push(if i == self.selected {
                    Line::styled(text, Style::new().add_modifier(Modifier::REVERSED))
                } else {
                    Line::from(text)
                });
                // A conductor's workers, nested under it.
                let count = r.workers.len();
                for (k, w) in r.workers.iter().enumerate() {
                    let branch = if k + 1 == count { "└" } else { "├" };
                    lines.push(Line::styled(
                        format!("   {branch} {} {} {}", w.item_id, w.capability, w.status),
                        Style::new().add_modifier(Modifier::DIM),
                    ));
                }
            }
            lines
        };
        f.render_widget(
            Paragraph::new(lines)
                .block(Block::bordered().title(format!(" Runs (new: {}) ", self.agent))),
            area,
        );
    }

    fn draw_log(&self, f: &mut Frame<'_>, area: Rect, view: &View) {
        let title = match view.selected(self) {
            Some(r) => {
                let dropped = if view.log.dropped > 0 {
                    format!(" ({} older lines dropped)", view.log.dropped)
                } else {
                    String::new()
                };
                format!(
                    " Log: {} {}{dropped} — {} ",
                    r.run_id,
                    r.agent,
                    clip(&r.task, 40)
                )
            }
            None => " Log ".to_string(),
        };
        let height = usize::from(area.height.saturating_sub(2));
        let width = usize::from(area.width.saturating_sub(2)).max(1);
        let mut texts: Vec<String> = view.log.lines.iter().map(|l| l.text.clone()).collect();
        if let Some(end) = view.selected(self).and_then(|r| r.end.as_ref()) {
            texts.push(format!(
                "== {} ({}): {}",
                end.status,
                end.outcome,
                clip(&end.final_text, 200)
            ));
        }
        // Long lines wrap: count the screen lines the text takes, to show the last screenful
        // — or, scrolled back, an earlier one.
        let lines: Vec<Line<'_>> = texts.into_iter().map(Line::from).collect();
        let paragraph = Paragraph::new(lines).wrap(Wrap { trim: false });
        let rows = paragraph.line_count(u16::try_from(width).unwrap_or(u16::MAX));
        let back = self.scroll_back.min(rows.saturating_sub(height));
        let top_row = rows.saturating_sub(height + back);
        let title = if back > 0 {
            // First, so a long title never cuts it off.
            format!(" back {back} lines, End follows —{title}")
        } else {
            title
        };
        f.render_widget(
            paragraph
                .block(Block::bordered().title(title))
                .scroll((u16::try_from(top_row).unwrap_or(u16::MAX), 0)),
            area,
        );
    }

    fn draw_panel(&self, f: &mut Frame<'_>, area: Rect, view: &View) {
        let block = Block::bordered().title(" Interaction ");
        let Some(p) = &view.pending else {
            f.render_widget(
                Paragraph::new("No request waiting in the selected run.").block(block),
                area,
            );
            return;
        };
        let r = &p.request;
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let mut lines = vec![
            Line::styled(r.prompt.clone(), bold),
            Line::from(format!(
                "{} {} from {} (risk: {})",
                r.request_type, r.request_id, r.tool_name, r.risk_level
            )),
        ];
        if !r.reason.is_empty() {
            lines.push(Line::from(format!("reason: {}", r.reason)));
        }
        match &r.preview {
            Some(preview) => {
                for line in preview.lines() {
                    let style = if line.starts_with('+') && !line.starts_with("+++") {
                        Style::new().fg(Color::Green)
                    } else if line.starts_with('-') && !line.starts_with("---") {
                        Style::new().fg(Color::Red)
                    } else {
                        Style::new()
                    };
                    lines.push(Line::styled(line.to_string(), style));
                }
            }
            None if !r.args_summary.is_empty() => {
                lines.push(Line::from(format!("arguments: {}", r.args_summary)));
            }
            None => {}
        }
        let keys = match &self.input {
            Input::Reply(text) => Line::from(vec![
                Span::styled("reply> ", bold),
                Span::raw(format!("{text}_")),
                Span::raw("   [Enter] send  [Esc] cancel"),
            ]),
            _ if r.request_type.takes_reply() => {
                Line::from("[r] type a reply   [n] decline to answer")
            }
            _ if r.request_type == RequestType::Permission => {
                Line::from("[y] approve   [n] deny   [a] approve for the rest of the run")
            }
            _ => Line::from("[y] yes   [n] no"),
        };
        // Right under the question, so a long diff never hides how to answer.
        lines.insert(1, keys);
        f.render_widget(
            Paragraph::new(lines)
                .block(block)
                .wrap(Wrap { trim: false }),
            area,
        );
    }

    fn draw_footer(&self, f: &mut Frame<'_>, area: Rect, _view: &View) {
        let first = match &self.input {
            Input::Task(text) => format!(
                "new {} run, {}> {text}_   [Enter] start  [Esc] cancel",
                self.agent,
                self.input_kind()
            ),
            Input::FollowUp { run, text, .. } => {
                format!("continue {run}> {text}_   [Enter] send  [Esc] cancel")
            }
            _ => "[t] new run [c] chat [g] agent [s] stop [j/k] select [PgUp/Dn] [y/n/a/r] [q]uit"
                .into(),
        };
        f.render_widget(
            Paragraph::new(vec![Line::from(first), Line::from(self.message.clone())]),
            area,
        );
    }
}

/// Lines the panel needs for `pending` (prompt, origin, reason, the diff or the arguments,
/// the keys).
fn panel_lines(pending: &PendingView) -> usize {
    let r = &pending.request;
    let shown = r
        .preview
        .as_ref()
        .map_or(usize::from(!r.args_summary.is_empty()), |p| {
            p.lines().count()
        });
    3 + usize::from(!r.reason.is_empty()) + shown
}
