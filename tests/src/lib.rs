//! Black-box end-to-end tests of the built `lsm` binary live in `tests/e2e.rs`; this library
//! is empty on purpose (the package exists to hold them).
