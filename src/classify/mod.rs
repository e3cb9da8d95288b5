//! The classifier: pure, synchronous, push-fed. It watches response bytes go past without
//! holding them and gives each JSON-RPC request exactly one [`Outcome`].
pub mod capture;
pub mod envelope;
pub mod exchange;
pub mod json;
mod outcome;
mod remembered;
pub mod request;
mod scan;
mod spare;
pub mod sse;
pub mod tool_hints;

pub use capture::{Captured, Envelope, Kind};
pub use outcome::{Layer, Outcome};
