//! Layers point one way. Each folder of `src/` may import only what its layer allows:
//!
//! | folder | may not import |
//! |---|---|
//! | `classify` | anything of strata (it is pure: bytes in, outcomes out) |
//! | `http` | `proxy`, `observe`, `policy`, `idempotency`, `classify` (HTTP without MCP) |
//! | `policy` | `proxy` (whether and when to re-send, not how) |
//! | `idempotency` | `proxy` (keys, fingerprints, records and stores) |
//!
//! The check reads every `crate::…` path in the folder's files (comments left out) and
//! names each import against the allowed directions. `docs/architecture.md` draws the layers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

/// (folder, top-level modules it may not import; `*` for every one but its own).
const RULES: [(&str, &[&str]); 4] = [
    ("classify", &["*"]),
    (
        "http",
        &["proxy", "observe", "policy", "idempotency", "classify"],
    ),
    ("policy", &["proxy"]),
    ("idempotency", &["proxy"]),
];

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The top-level modules a source names through `crate::`, with their line numbers; lines
/// that are comments are left out.
fn imports(source: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // `crate::` inside a longer word (`strata_crate::`) is not a path.
            let before = rest[..at].chars().next_back();
            if !name.is_empty() && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                found.push((n + 1, name));
            }
            rest = after;
        }
    }
    found
}

/// The imports of `source` (a file of `folder`) against the rules: one line per breach.
fn breaches(folder: &str, file: &str, source: &str) -> Vec<String> {
    let Some((_, banned)) = RULES.iter().find(|(f, _)| *f == folder) else {
        return Vec::new();
    };
    imports(source)
        .into_iter()
        .filter(|(_, module)| {
            module != folder && (banned.contains(&"*") || banned.contains(&module.as_str()))
        })
        .map(|(line, module)| format!("{file}:{line}: `{folder}` imports `crate::{module}`"))
        .collect()
}

#[test]
fn every_folder_imports_only_what_its_layer_allows() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut read = 0;
    for (folder, _) in RULES {
        let files = sources(&src.join(folder));
        assert!(!files.is_empty(), "src/{folder} has no sources");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let name = file.strip_prefix(&src).unwrap().display().to_string();
            found.extend(breaches(folder, &name, &text));
            read += 1;
        }
    }
    assert!(read > 20, "only {read} files read");
    assert!(
        found.is_empty(),
        "imports against the layers:\n{}",
        found.join("\n")
    );
}

#[test]
fn an_import_against_the_layers_is_named() {
    let source = "use crate::http::hop;\nuse crate::proxy::Proxy; // the breach\n// use crate::proxy::X;\nlet x = strata_crate::y;\n";
    assert_eq!(
        breaches("idempotency", "idempotency/x.rs", source),
        ["idempotency/x.rs:2: `idempotency` imports `crate::proxy`"]
    );
    assert_eq!(breaches("http", "http/x.rs", source).len(), 1);
    // `classify` may import nothing of strata but itself.
    let classify = "use crate::classify::json;\nuse crate::log::decimal;\n";
    assert_eq!(
        breaches("classify", "classify/x.rs", classify),
        ["classify/x.rs:2: `classify` imports `crate::log`"]
    );
    assert!(breaches("policy", "policy/x.rs", "use crate::config::RetryOn;\n").is_empty());
}
