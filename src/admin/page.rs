//! The inspector's page, served at `/` on the admin port: one self-contained HTML document
//! (styles and script inline, no external fetches), embedded in the binary.

/// The page as served.
pub const INDEX_HTML: &str = include_str!("page/index.html");
