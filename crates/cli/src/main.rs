//! `lsm`.
fn main() {}
