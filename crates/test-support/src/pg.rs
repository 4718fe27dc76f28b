//! PostgreSQL for tests: the shared test database (`LSM_TEST_DATABASE_URL`, which `.ci/run`
//! sets after starting Debian's server), a fresh schema per test, and a private server a
//! test can stop and start again ([`PgServer`]).
//!
//! A test that needs PostgreSQL and finds none skips with a message on stderr, unless
//! `LSM_TEST_PG_REQUIRED=1` (set by `.ci/run`), which makes the absence a failure.

#![allow(clippy::panic, clippy::expect_used)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The variable naming the shared test database (`postgres://USER@HOST:PORT/DB`; the
/// password in `LSM_STORE_PASSWORD`).
pub const DATABASE_URL_ENV: &str = "LSM_TEST_DATABASE_URL";

/// A database for one test: the URL, and a schema no other test uses.
#[derive(Debug, Clone)]
pub struct TestDb {
    /// Where the server is.
    pub url: String,
    /// A fresh schema name (`t_` and random letters).
    pub schema: String,
}

fn required() -> bool {
    std::env::var("LSM_TEST_PG_REQUIRED").is_ok_and(|v| v == "1")
}

/// Say why a PostgreSQL test does not run: a failure under `LSM_TEST_PG_REQUIRED=1`, a skip
/// message otherwise.
pub fn skip(test: &str, why: &str) {
    if required() {
        panic!("{test}: PostgreSQL is required (LSM_TEST_PG_REQUIRED=1) but {why}");
    }
    eprintln!("SKIPPED {test}: {why} (set {DATABASE_URL_ENV}; `.ci/run` starts a server)");
}

/// The shared test database with a fresh schema, or `None` (after [`skip`]) when none is
/// configured.
pub fn database(test: &str) -> Option<TestDb> {
    match std::env::var(DATABASE_URL_ENV) {
        Ok(url) if !url.is_empty() => Some(TestDb {
            url,
            schema: fresh_schema(),
        }),
        _ => {
            skip(test, &format!("{DATABASE_URL_ENV} is not set"));
            None
        }
    }
}

/// A schema name no other test uses.
pub fn fresh_schema() -> String {
    let n: u128 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("t_{:x}_{}", n, std::process::id())
}

/// A PostgreSQL server of the test's own, in a temporary folder, on a free port of
/// 127.0.0.1, with `trust` authentication for the user `lsm`; stopped when dropped.
#[derive(Debug)]
pub struct PgServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    child: Mutex<Option<Child>>,
}

/// The newest PostgreSQL's program folder of Debian's packages (`/usr/lib/postgresql/N/bin`).
pub fn server_bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn uid_of(user: &str) -> Option<(u32, u32)> {
    std::fs::read_to_string("/etc/passwd")
        .ok()?
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.first() == Some(&user))
                .then(|| Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?)))?
        })
}

impl PgServer {
    /// Make and start a server, or `None` (after [`skip`]) when PostgreSQL's programs are
    /// not installed.
    pub fn start(test: &str) -> Option<PgServer> {
        let Some(bin) = server_bin_dir() else {
            skip(
                test,
                "PostgreSQL's server programs are not installed (apt-get install postgresql)",
            );
            return None;
        };
        let dir = tempfile::tempdir().expect("a temporary folder");
        // PostgreSQL refuses to run as root: then it runs as the `postgres` user.
        let as_postgres = nix_is_root();
        if as_postgres {
            let (uid, gid) =
                uid_of("postgres").expect("a postgres user (Debian's package makes one)");
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown");
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let server = PgServer {
            dir,
            bin,
            port,
            as_postgres,
            child: Mutex::new(None),
        };
        let data = server.data();
        let status = server
            .command("initdb")
            .args([
                "-D",
                &data,
                "-U",
                "lsm",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .expect("initdb runs");
        assert!(
            status.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&status.stderr)
        );
        server.start_again();
        Some(server)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    /// The URL of its `postgres` database, as the user `lsm` (no password).
    pub fn url(&self) -> String {
        format!(
            "postgres://lsm@127.0.0.1:{}/postgres?sslmode=disable",
            self.port
        )
    }

    /// The socket folder (for `psql -h`).
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Start the server (again, after [`PgServer::stop`]) and wait until it takes
    /// connections.
    pub fn start_again(&self) {
        let mut slot = self.child.lock().expect("the child slot");
        if slot.is_some() {
            return;
        }
        let child = self
            .command("postgres")
            .args(["-D", &self.data(), "-p", &self.port.to_string()])
            .args(["-k", &self.dir.path().display().to_string()])
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .args(["-c", "max_connections=200"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("postgres starts");
        *slot = Some(child);
        drop(slot);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "postgres did not become ready in 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stop the server (a fast shutdown: clients are disconnected) and wait for it to exit.
    pub fn stop(&self) {
        let Some(mut child) = self.child.lock().expect("the child slot").take() else {
            return;
        };
        // `pg_ctl stop -m fast` by the server's own rules, then wait for our child.
        let _ = self
            .command("pg_ctl")
            .args(["stop", "-D", &self.data(), "-m", "fast", "-w"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = child.wait();
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn nix_is_root() -> bool {
    // The effective uid from /proc (no libc call needed).
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}
