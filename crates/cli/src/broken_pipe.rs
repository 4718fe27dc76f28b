//! A reader that goes away (`lsm tools list | head`) ends `lsm` quietly, as it ends `cat`.
//!
//! Rust ignores SIGPIPE (so a closed socket is an error, not death), which makes `println!`
//! panic on a closed stdout instead. Resetting the signal would also kill the process on a
//! closed HTTP connection, so this hook turns exactly that panic — printing to stdout failed
//! with a broken pipe — into exit status [`EXIT`], without a message. Every other panic goes
//! to the default hook. Leaving mid-run is what a crash does, and run records survive it.

/// The exit status after a broken stdout: 128 + SIGPIPE, what a shell reports for `cat`.
pub const EXIT: u8 = 141;

/// Install the hook (once, first thing in `main`).
pub fn install() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied());
        if message.is_some_and(is_broken_stdout) {
            std::process::exit(i32::from(EXIT));
        }
        default(info);
    }));
}

/// Whether a panic message is `println!`'s on a closed stdout.
fn is_broken_stdout(message: &str) -> bool {
    message.starts_with("failed printing to stdout") && message.contains("os error 32")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_broken_stdout_is_recognised() {
        assert!(is_broken_stdout(
            "failed printing to stdout: Broken pipe (os error 32)"
        ));
        assert!(!is_broken_stdout(
            "failed printing to stdout: No space left on device (os error 28)"
        ));
        assert!(!is_broken_stdout(
            "failed printing to stderr: Broken pipe (os error 32)"
        ));
        assert!(!is_broken_stdout("index out of bounds"));
    }
}
