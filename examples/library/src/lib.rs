//! Runnable examples of `lsm` used as a library; the library itself is empty.
//!
//! - `custom_tool`: a tool of your own and an agent of your own, on a scripted model.
//! - `embed_openai`: the harness inside another program's `main`, on an OpenAI-compatible
//!   server (`LSM_EXAMPLE_BASE_URL`, or a mock on 127.0.0.1 the example starts itself).
//! - `custom_provider`: a model of your own (the `Provider` trait) driving a built-in agent.
//!
//! Run one with `cargo run -p lsm-examples --example <name>`; `cargo test -p lsm-examples`
//! runs them all. See `docs/LIBRARY.md`.
