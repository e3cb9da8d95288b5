//! HTTP without MCP: the rules a proxy applies to every head it passes on, whatever
//! connection read it and whatever connection writes it.

pub mod fields;
pub mod forward;
pub mod hop;
pub mod io;
pub mod length;
pub mod names;
