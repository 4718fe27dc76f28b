//! The harness.
