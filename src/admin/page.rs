//! The inspector's page, served at `/` on the admin port: one self-contained HTML document
//! (styles and script inline, no external fetches), embedded in the binary.
//!
//! The page reads `/calls`, `/calls/stream`, `/calls/inflight` and `/calls/counts` with
//! `fetch` (the stream too, so an `Authorization` header can go with it; the token comes from
//! the URL fragment, `/#token=…`). Every text from a call record goes into the document as
//! text, never as markup. It needs no more from its `Content-Security-Policy` than inline
//! script and styles, `connect-src 'self'` and `data:` images (its icon).
//! `tests/browser/page.test.mjs` checks it in a real browser.

/// The page as served.
pub const INDEX_HTML: &str = include_str!("page/index.html");

#[cfg(test)]
mod tests {
    use super::INDEX_HTML;

    /// Record texts reach the document through `textContent` and attributes only: none of the
    /// APIs that parse a string as markup or code appears in the page.
    #[test]
    fn the_page_parses_no_string_as_markup_or_code() {
        let sinks = [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "srcdoc",
        ];
        for sink in sinks {
            assert!(!INDEX_HTML.contains(sink), "the page uses {sink}");
        }
    }

    /// Nothing is loaded from elsewhere: no external script, style, font or image, and every
    /// request path is relative to the page.
    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for external in [
            "src=\"http",
            "href=\"http",
            "url(http",
            "@import",
            "<script src",
            "fetch(\"http",
            "fetch(\"/",
        ] {
            assert!(!INDEX_HTML.contains(external), "the page has {external}");
        }
        for endpoint in ["calls/stream", "calls/inflight", "calls/counts", "\"calls?"] {
            assert!(
                INDEX_HTML.contains(endpoint),
                "the page never reads {endpoint}"
            );
        }
    }
}
