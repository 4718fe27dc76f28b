//! `lsm config show [--json] [run options]`: every effective setting with where it comes
//! from — with a run's options that are settings on top, as such a run gets them.

use clap::Args;
use lsm_app::config::{self, ConfigArgs};
use lsm_app::run::RunSettings;
use lsm_app::secrets;

use crate::exit;
use crate::terminal::{output, text};

/// `lsm config show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// A run's options that are settings.
    #[command(flatten)]
    pub settings: RunSettings,
}

/// `lsm config show`.
pub fn show(cfg: &ConfigArgs, args: ShowArgs) -> u8 {
    exit::block_on_command(async move {
        let config = cfg
            .load()?
            .with_options(&args.settings.options(), &std::env::current_dir()?)?;
        if args.json {
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
