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
//! Usage: `bare_exchange [--client CLIENT] URL BODIES` where BODIES holds each body as a
//! little-endian `u32` length and then its bytes. Prints `{"requests": N, "cpu_s": S,
//! "bytes": B}`: the CPU time (user + system) of the exchanges alone, after the bodies are
//! loaded.
//!
//! CLIENT says how much of the stack under `lsm`'s call is measured, to tell the kernel's
//! part from the libraries': `reqwest` (the default: what `lsm` uses), `hyper` (hyper's
//! HTTP/1.1 connection alone, no reqwest), `tokio` (the request written and the answer read
//! by hand on tokio's socket), `blocking` (the same by hand on a blocking socket, no
//! runtime). The hand-written clients need the answer's `content-length` (the mock sends it).

#![allow(clippy::print_stdout)]

use std::time::Duration;

use std::io::{Read, Write};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use nix::sys::resource::{UsageWho, getrusage};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What carries the exchanges.
#[derive(Clone, Copy, PartialEq)]
enum Client {
    Reqwest,
    Hyper,
    Tokio,
    Blocking,
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (client, rest) = match args.as_slice() {
        [flag, name, rest @ ..] if flag == "--client" => (
            match name.as_str() {
                "reqwest" => Client::Reqwest,
                "hyper" => Client::Hyper,
                "tokio" => Client::Tokio,
                "blocking" => Client::Blocking,
                other => {
                    return Err(format!(
                        "unknown client '{other}': give reqwest, hyper, tokio or blocking"
                    )
                    .into());
                }
            },
            rest,
        ),
        rest => (Client::Reqwest, rest),
    };
    let [url, bodies] = rest else {
        return Err("usage: bare_exchange [--client CLIENT] URL BODIES".into());
    };
    let bodies = load(bodies)?;
    let bytes: usize = bodies.iter().map(Bytes::len).sum();
    let url = reqwest::Url::parse(&format!("{}/chat/completions", url.trim_end_matches('/')))?;
    let requests = bodies.len();
    let before;
    if client == Client::Blocking {
        before = cpu_seconds()?;
        exchange_blocking(&url, &bodies)?;
    } else {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        before = cpu_seconds()?;
        let exchanges = match client {
            Client::Hyper => runtime.spawn(exchange_hyper(url, bodies)),
            Client::Tokio => runtime.spawn(exchange_tokio(url, bodies)),
            _ => runtime.spawn(exchange_all(url, bodies)),
        };
        runtime.block_on(exchanges)??;
    }
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

/// The same on hyper's HTTP/1.1 connection alone: no pool, no redirect or retry layers.
async fn exchange_hyper(url: reqwest::Url, bodies: Vec<Bytes>) -> Result<(), Error> {
    let host = authority(&url)?;
    let stream = tokio::net::TcpStream::connect(&host).await?;
    stream.set_nodelay(true)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake::<_, Full<Bytes>>(
        hyper_util::rt::TokioIo::new(stream),
    )
    .await?;
    tokio::spawn(connection);
    for body in bodies {
        let request = hyper::Request::post(url.path())
            .header(hyper::header::HOST, &host)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(
                hyper::header::USER_AGENT,
                concat!("lsm/", env!("CARGO_PKG_VERSION")),
            )
            .body(Full::new(body))?;
        let response = sender.send_request(request).await?;
        let status = response.status();
        let answer = response.into_body().collect().await?.to_bytes();
        if !status.is_success() {
            return Err(format!("{status}: {}", String::from_utf8_lossy(&answer)).into());
        }
    }
    Ok(())
}

/// The same written and read by hand on tokio's socket.
async fn exchange_tokio(url: reqwest::Url, bodies: Vec<Bytes>) -> Result<(), Error> {
    let host = authority(&url)?;
    let mut stream = tokio::net::TcpStream::connect(&host).await?;
    stream.set_nodelay(true)?;
    let mut answer = Answer::default();
    for body in &bodies {
        stream.write_all(&request_bytes(&url, &host, body)).await?;
        answer.clear();
        while !answer.complete()? {
            let n = stream.read(answer.room()).await?;
            answer.filled(n)?;
        }
    }
    Ok(())
}

/// The same written and read by hand on a blocking socket, without a runtime.
fn exchange_blocking(url: &reqwest::Url, bodies: &[Bytes]) -> Result<(), Error> {
    let host = authority(url)?;
    let mut stream = std::net::TcpStream::connect(&host)?;
    stream.set_nodelay(true)?;
    let mut answer = Answer::default();
    for body in bodies {
        stream.write_all(&request_bytes(url, &host, body))?;
        answer.clear();
        while !answer.complete()? {
            let n = stream.read(answer.room())?;
            answer.filled(n)?;
        }
    }
    Ok(())
}

/// `host:port` of `url`.
fn authority(url: &reqwest::Url) -> Result<String, Error> {
    let host = url.host_str().ok_or("the URL has no host")?;
    let port = url.port_or_known_default().ok_or("the URL has no port")?;
    Ok(format!("{host}:{port}"))
}

/// One POST of `body`, headers and body in one buffer (one `write`, as hyper's `writev`).
fn request_bytes(url: &reqwest::Url, host: &str, body: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "POST {} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n\
         user-agent: lsm/{}\r\ncontent-length: {}\r\n\r\n",
        url.path(),
        env!("CARGO_PKG_VERSION"),
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

/// An answer read by hand: its bytes so far, and where its body ends once the head is in.
#[derive(Default)]
struct Answer {
    bytes: Vec<u8>,
    filled: usize,
    end: Option<usize>,
}

impl Answer {
    fn clear(&mut self) {
        self.filled = 0;
        self.end = None;
    }

    /// Free room to read into.
    fn room(&mut self) -> &mut [u8] {
        if self.bytes.len() < self.filled + 8192 {
            self.bytes.resize(self.filled + 8192, 0);
        }
        &mut self.bytes[self.filled..]
    }

    fn filled(&mut self, n: usize) -> Result<(), Error> {
        if n == 0 {
            return Err("the server closed the connection before the answer's end".into());
        }
        self.filled += n;
        Ok(())
    }

    /// Whether the whole answer is in (its head, and as many body bytes as it says).
    fn complete(&mut self) -> Result<bool, Error> {
        if self.end.is_none() {
            let got = &self.bytes[..self.filled];
            let Some(head) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
                return Ok(false);
            };
            let raw = String::from_utf8_lossy(&got[..head]);
            let text = raw.to_ascii_lowercase();
            if !text.starts_with("http/1.1 2") {
                return Err(
                    format!("the server answered: {}", raw.lines().next().unwrap_or("")).into(),
                );
            }
            let length: usize = text
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .ok_or("the answer has no content-length (needed by the hand-written clients)")?
                .trim()
                .parse()?;
            self.end = Some(head + 4 + length);
        }
        Ok(self.end.is_some_and(|end| self.filled >= end))
    }
}

/// The bodies of `path`: each a little-endian `u32` length, then that many bytes.
///
/// Each body is a view into the one buffer the file was read into, not a copy: under
/// `bench-peers --instructions` the whole process is counted, and copying the bodies byte
/// by byte would count as the exchange's (at N = 200 it was ¾ of the floor's instructions).
fn load(path: &str) -> Result<Vec<Bytes>, Error> {
    let data = Bytes::from(std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?);
    let mut at = 0;
    let mut bodies = Vec::new();
    while at < data.len() {
        let (len, _) = data[at..]
            .split_first_chunk::<4>()
            .ok_or_else(|| format!("{path}: a length is cut short"))?;
        let len = u32::from_le_bytes(*len) as usize;
        let start = at + 4;
        if data.len() - start < len {
            return Err(format!("{path}: a body is cut short").into());
        }
        bodies.push(data.slice(start..start + len));
        at = start + len;
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
        // Views into the one buffer read, not copies: the third body starts where the file
        // puts it, two lengths and two bytes after the first.
        let bodies = load(path).unwrap();
        assert_eq!(
            bodies[2].as_ptr(),
            bodies[0].as_ptr().wrapping_add(2 + 4 + 4)
        );
        std::fs::write(path, b"\x05\0\0\0[1]").unwrap();
        assert!(load(path).unwrap_err().to_string().contains("cut short"));
        std::fs::write(path, b"\x05\0").unwrap();
        assert!(load(path).unwrap_err().to_string().contains("cut short"));
    }

    #[test]
    fn a_hand_read_answer_ends_where_its_content_length_says() {
        let mut answer = Answer::default();
        let feed = |answer: &mut Answer, part: &[u8]| {
            let room = answer.room();
            room[..part.len()].copy_from_slice(part);
            answer.filled(part.len()).unwrap();
            answer.complete().unwrap()
        };
        assert!(!feed(
            &mut answer,
            b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n"
        ));
        assert!(!feed(&mut answer, b"\r\n{}"));
        assert!(feed(&mut answer, b"[]"));
        answer.clear();
        assert!(
            !answer.complete().unwrap(),
            "a cleared answer waits for the next"
        );
        let room = answer.room();
        room[..22].copy_from_slice(b"HTTP/1.1 500 Oops\r\n\r\n\0");
        answer.filled(21).unwrap();
        assert!(
            answer
                .complete()
                .unwrap_err()
                .to_string()
                .contains("500 Oops")
        );
        let mut unsized_answer = Answer::default();
        assert!(!feed(&mut unsized_answer, b"HTTP/1.1 200 OK\r\n"));
        let room = unsized_answer.room();
        room[..2].copy_from_slice(b"\r\n");
        unsized_answer.filled(2).unwrap();
        assert!(
            unsized_answer.complete().is_err(),
            "no content-length: an error"
        );
        assert!(
            Answer::default().filled(0).is_err(),
            "a closed connection: an error"
        );
    }
}
