//! `lsm llm ping`: one tiny call to the configured provider, with its figures or the precise
//! reason it failed.

use anyhow::Result;
use clap::Args;
use lsm_app::config::tier_name;
use lsm_app::secrets;
use lsm_app::wiring::ProviderFlags;
use lsm_phase::LlmTier;
use serde_json::json;

use crate::exit;
use crate::terminal::output::{self, OutputFormat};

/// Arguments of `lsm llm ping`.
#[derive(Debug, Args)]
pub struct PingArgs {
    #[command(flatten)]
    pub llm: ProviderFlags,

    /// Which tier's settings to use: quick, normal or complex.
    #[arg(long, value_name = "TIER", default_value = "normal", value_parser = parse_tier)]
    pub tier: LlmTier,

    /// Print the result as one JSON object on stdout (same as `--output-format json`).
    #[arg(long, conflicts_with = "output_format")]
    pub json: bool,

    /// What stdout carries: `text`, `json` (one JSON document) or `stream-json` (one `result`
    /// line).
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub output_format: Option<crate::terminal::output::OutputFormat>,
}

fn parse_tier(s: &str) -> Result<LlmTier, String> {
    match s {
        "quick" => Ok(LlmTier::Quick),
        "normal" => Ok(LlmTier::Normal),
        "complex" => Ok(LlmTier::Complex),
        _ => Err(format!("'{s}' is not a tier: use quick, normal or complex")),
    }
}

/// `lsm llm ping`.
pub fn ping(cfg: &lsm_app::config::ConfigArgs, args: PingArgs) -> u8 {
    exit::block_on_command(ping_async(cfg, args))
}

async fn ping_async(cfg: &lsm_app::config::ConfigArgs, args: PingArgs) -> Result<u8> {
    let config = cfg.load()?;
    let format = OutputFormat::chosen(args.json, args.output_format);
    ping_with(&config, &args.llm, args.tier, format).await
}

/// One tiny call with `config`'s settings for `tier` and `flags`; prints the figures (or
/// the failure) as `format` says and returns the exit code: 0, or 1 when the call failed.
///
/// # Errors
/// A usage error when the provider cannot be built.
pub async fn ping_with(
    config: &lsm_app::config::Config,
    flags: &ProviderFlags,
    tier: LlmTier,
    format: OutputFormat,
) -> Result<u8> {
    let ping = lsm_app::llm::ping(
        config,
        flags,
        tier,
        crate::terminal::retry_notice::on_stderr(),
    )
    .await?;
    let latency_ms = ping.latency_ms;
    let result = &ping.result;
    match result {
        Ok(r) => {
            let cost = ping.cost_usd;
            if format == OutputFormat::Text {
                // The model and the URL are settings a project's `lsm.toml` can make.
                println!("provider: {}", ping.provider);
                println!("model: {}", crate::terminal::text::masked_line(&ping.model));
                if let Some(url) = &ping.base_url {
                    println!("base_url: {}", crate::terminal::text::masked_line(url));
                }
                println!("latency: {latency_ms} ms");
                println!(
                    "usage: {} input tokens ({} cached), {} output tokens",
                    r.usage.input_tokens, r.usage.cached_tokens, r.usage.output_tokens
                );
                if let Some(c) = cost {
                    println!("cost: ${c:.6}");
                }
                // The model's words: nothing in them drives the terminal.
                println!(
                    "reply: {}",
                    crate::terminal::text::for_stdout(&secrets::clean(r.text.trim()))
                );
            } else {
                output::print_final(
                    format,
                    output::versioned(json!({
                        "ok": true, "provider": ping.provider, "model": ping.model,
                        "base_url": ping.base_url, "tier": tier_name(tier),
                        "latency_ms": latency_ms, "usage": r.usage, "cost_usd": cost,
                        "response_id": r.response_id, "reply": r.text,
                    })),
                );
            }
            Ok(exit::OK)
        }
        Err(e) => {
            if format != OutputFormat::Text {
                output::print_final(
                    format,
                    output::versioned(json!({
                        "ok": false, "provider": ping.provider, "model": ping.model,
                        "base_url": ping.base_url, "tier": tier_name(tier),
                        "latency_ms": latency_ms, "error": e.to_string(),
                    })),
                );
            }
            eprintln!(
                "{}",
                crate::terminal::text::terminal_text(&secrets::clean(&format!(
                    "error: ping failed after {latency_ms} ms: {e}"
                )))
            );
            Ok(exit::ERROR)
        }
    }
}
