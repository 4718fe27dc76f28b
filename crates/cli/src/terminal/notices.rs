//! The engine's notices ([`lsm_app::notice::Notice`]) on stderr: one line each, secrets
//! masked, nothing in them obeyed by the terminal (they carry outside text: a database row's
//! id and agent, a server's or a tool's words).

use std::sync::Arc;

use lsm_app::notice::{Notice, Notify};

use super::text::masked_line;

/// Print `notice` on stderr.
pub fn show(notice: Notice) {
    eprintln!("{}", masked_line(&notice.to_string()));
}

/// Every notice on stderr.
pub fn on_stderr() -> Notify {
    Arc::new(show)
}
