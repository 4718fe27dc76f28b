//! The floor under a model call: the HTTP exchange alone.
//!
//! `cargo xtask bench-peers` records the request bodies `lsm agent run` sent to its mock and
//! replays them here, one after the other on one keep-alive connection, with what `lsm` uses
//! for the exchange — reqwest configured as the HTTP provider configures it, the same
//! headers, a tokio runtime of one worker thread, the same allocator — and nothing else: no
//! request is built, no answer parsed, nothing recorded. The CPU this process spends on the
//! exchanges is what one call costs before the harness does anything; `lsm`'s CPU per call
//! above it is the harness's own.
//!
//! Usage: `bare_exchange URL BODIES` where BODIES holds each body as a little-endian `u32`
//! length and then its bytes. Prints `{"requests": N, "cpu_s": S, "bytes": B}`: the CPU time
//! (user + system) of the exchanges alone, after the bodies are loaded.

#![allow(clippy::print_stdout)]

use std::time::Duration;

use bytes::Bytes;
use nix::sys::resource::{UsageWho, getrusage};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, bodies] = args.as_slice() else {
        return Err("usage: bare_exchange URL BODIES".into());
    };
    let bodies = load(bodies)?;
    let bytes: usize = bodies.iter().map(Bytes::len).sum();
    let url = reqwest::Url::parse(&format!("{}/chat/completions", url.trim_end_matches('/')))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let before = cpu_seconds()?;
    let requests = bodies.len();
    let exchanges = runtime.spawn(exchange_all(url, bodies));
    runtime.block_on(exchanges)??;
    let cpu_s = cpu_seconds()? - before;
    println!(r#"{{"requests": {requests}, "cpu_s": {cpu_s}, "bytes": {bytes}}}"#);
    Ok(())
}

/// POST every body in turn and read each answer whole.
async fn exchange_all(url: reqwest::Url, bodies: Vec<Bytes>) -> Result<(), Error> {
    // As `HttpProvider` builds its client (lsm-providers' config.rs).
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(Duration::from_secs(300))
        .user_agent(concat!("lsm/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for body in bodies {
        let response = client
            .post(url.clone())
            .headers(headers.clone())
            .body(body)
            .send()
            .await?;
        let status = response.status();
        let answer = response.bytes().await?;
        if !status.is_success() {
            return Err(format!("{status}: {}", String::from_utf8_lossy(&answer)).into());
        }
    }
    Ok(())
}

/// The bodies of `path`: each a little-endian `u32` length, then that many bytes.
fn load(path: &str) -> Result<Vec<Bytes>, Error> {
    let data = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut rest = data.as_slice();
    let mut bodies = Vec::new();
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| format!("{path}: a length is cut short"))?;
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            return Err(format!("{path}: a body is cut short").into());
        }
        let (body, tail) = tail.split_at(len);
        bodies.push(Bytes::copy_from_slice(body));
        rest = tail;
    }
    Ok(bodies)
}

/// This process's CPU time so far, user + system.
fn cpu_seconds() -> Result<f64, Error> {
    let usage = getrusage(UsageWho::RUSAGE_SELF)?;
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Ok(seconds(usage.user_time()) + seconds(usage.system_time()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_read_each_after_its_length_and_a_cut_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.bin");
        std::fs::write(&path, b"\x02\0\0\0{}\0\0\0\0\x05\0\0\0[1,2]").unwrap();
        let path = path.to_str().unwrap();
        assert_eq!(
            load(path).unwrap(),
            vec![
                Bytes::from_static(b"{}"),
                Bytes::new(),
                Bytes::from_static(b"[1,2]")
            ]
        );
        std::fs::write(path, b"\x05\0\0\0[1]").unwrap();
        assert!(load(path).unwrap_err().to_string().contains("cut short"));
        std::fs::write(path, b"\x05\0").unwrap();
        assert!(load(path).unwrap_err().to_string().contains("cut short"));
    }
}
