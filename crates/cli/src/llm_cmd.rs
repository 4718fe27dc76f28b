//! `lsm llm ping`: one tiny call to the configured provider, with its figures or the precise
//! reason it failed.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use lsm_phase::LlmTier;
use lsm_providers::{CallOptions, LlmRequest, Message};
use serde_json::json;

use crate::config::tier_name;
use crate::exit;
use crate::output::{self, OutputFormat};
use crate::secrets;
use crate::wiring::{self, ProviderFlags};

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
    pub output_format: Option<crate::output::OutputFormat>,
}

fn parse_tier(s: &str) -> Result<LlmTier, String> {
    match s {
        "quick" => Ok(LlmTier::Quick),
        "normal" => Ok(LlmTier::Normal),
        "complex" => Ok(LlmTier::Complex),
        _ => Err(format!("'{s}' is not a tier: use quick, normal or complex")),
    }
}

/// The request a ping sends: a few tokens in, a few out.
pub fn ping_request() -> LlmRequest {
    LlmRequest {
        messages: vec![
            Message::system("This is a connectivity check. Reply with the single word: pong")
                .into(),
            Message::user("ping").into(),
        ],
        tools: Vec::new(),
        options: CallOptions {
            max_output_tokens: Some(16),
            ..CallOptions::default()
        },
    }
}

/// Run; returns the exit code.
pub fn ping(cfg: &crate::config::ConfigArgs, args: PingArgs) -> u8 {
    exit::block_on_command(ping_async(cfg, args))
}

async fn ping_async(cfg: &crate::config::ConfigArgs, args: PingArgs) -> Result<u8> {
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
    config: &crate::config::Config,
    flags: &ProviderFlags,
    tier: LlmTier,
    format: OutputFormat,
) -> Result<u8> {
    let cwd = std::env::current_dir()?;
    let llm = config.llm.resolve(tier)?;
    let built = wiring::build_provider(&llm, flags, &cwd, &config.source_name())?;
    let p = &crate::retry_notice::announcing(Arc::clone(&built.provider), llm.http.max_retries);
    let request = ping_request();
    let started = Instant::now();
    let result = p.complete(&request).await;
    let latency_ms = started.elapsed().as_millis();
    match result {
        Ok(r) => {
            let cost = p.pricing().map(|pr| pr.cost(&r.usage));
            if format == OutputFormat::Text {
                // The model and the URL are settings a project's `lsm.toml` can make.
                println!("provider: {}", p.name());
                println!("model: {}", crate::text::masked_line(p.model()));
                if let Some(url) = &built.base_url {
                    println!("base_url: {}", crate::text::masked_line(url));
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
                    crate::text::for_stdout(&secrets::clean(r.text.trim()))
                );
            } else {
                output::print_final(
                    format,
                    output::versioned(json!({
                        "ok": true, "provider": p.name(), "model": p.model(),
                        "base_url": built.base_url, "tier": tier_name(tier),
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
                        "ok": false, "provider": p.name(), "model": p.model(),
                        "base_url": built.base_url, "tier": tier_name(tier),
                        "latency_ms": latency_ms, "error": e.to_string(),
                    })),
                );
            }
            eprintln!(
                "{}",
                crate::text::terminal_text(&secrets::clean(&format!(
                    "error: ping failed after {latency_ms} ms: {e}"
                )))
            );
            Ok(exit::ERROR)
        }
    }
}
