//! Unit tests of the agent layer (seed 001 §6.3 layers 3, 4 and 6), all on a spy executor:
//! no model, no tool, no harness.

mod agents;
mod core;
mod invariants;
mod research;
mod spy;
