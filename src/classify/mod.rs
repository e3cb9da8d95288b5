//! The classifier: pure, synchronous, push-fed. It watches response bytes go past without
//! holding them and gives each JSON-RPC request exactly one [`Outcome`].
mod capture;
pub mod json;
mod outcome;

pub use capture::{Captured, Envelope, Kind};
pub use outcome::{Layer, Outcome};
