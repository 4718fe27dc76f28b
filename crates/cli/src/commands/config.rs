//! `lsm config show [--json]`: every effective setting with where it comes from.

use lsm_app::config::{self, ConfigArgs};
use lsm_app::secrets;

use crate::exit;
use crate::terminal::{output, text};

/// `lsm config show [--json]`.
pub fn show(cfg: &ConfigArgs, json: bool) -> u8 {
    exit::block_on_command(async move {
        let config = cfg.load()?;
        if json {
            let text = serde_json::to_string_pretty(&config::show::json(&config))?;
            output::print_json(&secrets::clean_json_text(&text));
        } else {
            // Values are shown as TOML (escaped); a file's path in a comment is not.
            print!(
                "{}",
                text::for_stdout(&secrets::clean(&config::show::text(&config)))
            );
        }
        Ok(exit::OK)
    })
}
