//! The core's modules depend on each other in one direction only:
//!
//! ```text
//! scenario → metrics → sim → policy → os → hw, workload → error, trace → time, prefetch
//! ```
//!
//! This test reads every `crate::…` path in the code of
//! `crates/hetsched-core/src` (comments left out) and fails on an edge that
//! points up or sideways, which is also what any cycle between modules would
//! need. Unit-test modules (`#[cfg(test)] mod tests`) are left out: a test
//! may build its inputs from any layer. `docs/architecture.md` explains the layers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Rank of each top-level module: a module may use only modules of a lower
/// rank.
const LAYERS: &[(&str, u32)] = &[
    ("scenario", 9),
    ("metrics", 8),
    ("sim", 7),
    ("policy", 6),
    ("os", 5),
    ("hw", 4),
    ("workload", 4),
    ("error", 2),
    ("trace", 2),
    ("time", 1),
    ("prefetch", 1),
];

fn rank(module: &str) -> Option<u32> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, r)| *r)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("src is readable")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without comments (line comments, doc comments and
/// block comments); string literals are kept, they hold no `crate::` paths.
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
        } else {
            let c = rest.chars().next().expect("non-empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Top-level modules named by `crate::NAME` paths in `code`.
fn used_modules(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before_ok = i == 0
            || !rest[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
        rest = &rest[i + "crate::".len()..];
        if !before_ok {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // `crate::{a, b}` groups name several modules.
        if name.is_empty() && rest.starts_with('{') {
            let end = rest.find('}').unwrap_or(rest.len());
            for part in rest[1..end].split(',') {
                let m: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !m.is_empty() {
                    out.push(m);
                }
            }
        } else if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    if rel.components().count() == 1 {
        let stem = first.trim_end_matches(".rs").to_string();
        return (stem != "lib").then_some(stem);
    }
    Some(first)
}

#[test]
fn modules_depend_downwards_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut bad: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut edges = 0;
    for f in &files {
        let Some(module) = module_of(&src, f) else {
            continue;
        };
        let Some(r) = rank(&module) else {
            panic!(
                "module {module} ({}) has no layer: add it to LAYERS and to docs/architecture.md",
                f.display()
            );
        };
        let mut code = code_of(&std::fs::read_to_string(f).expect("readable"));
        // Unit tests may build what they need from any layer.
        if let Some(i) = code.find("#[cfg(test)]\nmod tests") {
            code.truncate(i);
        }
        for used in used_modules(&code) {
            if used == module || used == "VERSION" {
                continue;
            }
            edges += 1;
            match rank(&used) {
                Some(u) if u < r => {}
                _ => bad
                    .entry(format!(
                        "{} ({module})",
                        f.strip_prefix(&src).unwrap().display()
                    ))
                    .or_default()
                    .push(used),
            }
        }
    }
    assert!(
        edges > 50,
        "the scan found only {edges} edges: is it reading the code?"
    );
    assert!(
        bad.is_empty(),
        "upward or sideways imports (file (module) -> modules it must not use): {bad:#?}"
    );
}

#[test]
fn the_scan_sees_paths_and_ignores_comments() {
    let code = code_of(
        "use crate::os::Task; // crate::scenario\n/// [`crate::sim`]\nlet x = crate::hw::f();\n/* crate::metrics */ use crate::{time, error::at};",
    );
    assert_eq!(used_modules(&code), ["os", "hw", "time", "error"]);
}
