//! The classifier: pure, synchronous, push-fed. It watches response bytes go past without
//! holding them and gives each JSON-RPC request exactly one [`Outcome`].
mod outcome;

pub use outcome::{Layer, Outcome};
