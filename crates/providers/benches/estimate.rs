//! Prompt-token estimates: the one-time load of the `o200k_base` tokenizer, and one estimate
//! of a 20 KB prompt with it and with the conservative rule.
//! Run: `cargo bench -p lsm-providers --bench estimate`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use lsm_providers::{Estimator, LlmRequest, Message};

fn prompt() -> LlmRequest {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/ARCHITECTURE.md"
    ))
    .unwrap();
    let mut text: String = text.chars().cycle().take(20_000).collect();
    text.push('\n');
    LlmRequest {
        messages: vec![
            Message::system("You are a test agent.").into(),
            Message::user(text).into(),
        ],
        ..Default::default()
    }
}

fn estimate(c: &mut Criterion) {
    let request = prompt();
    let tiktoken = Estimator::for_model("gpt-4o-mini", true);
    // The first estimate parses the tokenizer's tables: measured once, printed.
    let start = Instant::now();
    let n = tiktoken.estimate(&request);
    println!(
        "first o200k_base estimate (tables loaded): {:?} for {n} tokens",
        start.elapsed()
    );
    let mut group = c.benchmark_group("prompt_estimate_20kb");
    group.bench_function("tiktoken_o200k", |b| b.iter(|| tiktoken.estimate(&request)));
    group.bench_function("conservative", |b| {
        b.iter(|| Estimator::Conservative.estimate(&request))
    });
    group.finish();
}

criterion_group!(benches, estimate);
criterion_main!(benches);
