//! The listener: the accept loop with its connection limits and drain (`accept.rs`), h1/h2
//! detection, and TLS toward the agent (`tls.rs`).

pub mod accept;
pub mod tls;
