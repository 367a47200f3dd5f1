//! The shape of the crate, checked: no import cycle between kiln's top-level modules, and
//! the GPU layer (the only unsafe code) importing nothing above it. Read from the source
//! (`crate::module` paths), so a new cycle fails here with the path that closes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module -> the top-level modules its files name through `crate::`.
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(&src).unwrap();
            let first = relative.components().next().unwrap().as_os_str();
            let module = Path::new(first)
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if ["lib", "main"].contains(&module.as_str()) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // Unit tests may reach anywhere; the shape is that of the shipped code.
            let shipped: String = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or("")
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            let named = deps.entry(module.clone()).or_default();
            for (at, _) in shipped.match_indices("crate::") {
                let rest = &shipped[at + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    named.insert(name);
                }
            }
        }
    }
    deps
}

#[test]
fn no_two_modules_import_each_other_even_through_others() {
    let deps = dependencies();
    let mut cycles = Vec::new();
    for start in deps.keys() {
        // Depth-first from `start`, keeping the path, looking for a way back.
        let mut stack = vec![vec![start.clone()]];
        let mut seen = BTreeSet::new();
        while let Some(path) = stack.pop() {
            let last = path.last().unwrap();
            for next in deps.get(last).into_iter().flatten() {
                if next == start {
                    let mut cycle = path.clone();
                    cycle.push(start.clone());
                    cycles.push(cycle.join(" -> "));
                } else if seen.insert(next.clone()) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push(longer);
                }
            }
        }
    }
    cycles.sort();
    cycles.dedup();
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_gpu_layer_imports_nothing_above_it() {
    let deps = dependencies();
    // The crate's leaves: byte units, text quoting, atomic file writes and the OS's side
    // of them.
    let allowed: BTreeSet<&str> = ["units", "text", "fsutil", "platform"].into();
    let above: Vec<&String> = deps["gpu"]
        .iter()
        .filter(|m| !allowed.contains(m.as_str()))
        .collect();
    assert!(above.is_empty(), "src/gpu imports {above:?}");
}

/// The shipped code of every file under `src/` but `src/platform/` (a file's unit tests, after
/// `#[cfg(test)]`, are left out), by path.
fn shipped_outside_platform() -> Vec<(std::path::PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path != src.join("platform") {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let shipped = text.split("#[cfg(test)]").next().unwrap_or("").to_owned();
                out.push((path, shipped));
            }
        }
    }
    out
}

#[test]
fn only_the_platform_modules_ask_which_os_kiln_runs_on() {
    let asks = [
        "cfg(unix)",
        "cfg(windows)",
        "cfg(not(unix))",
        "cfg(not(windows))",
        "cfg(target_os",
        "cfg(not(target_os",
        "cfg!(unix)",
        "cfg!(windows)",
        "cfg!(target_os",
        "std::os::unix",
        "std::os::windows",
        "libc::",
    ];
    let mut found = Vec::new();
    for (path, code) in shipped_outside_platform() {
        for ask in asks {
            if code.contains(ask) {
                found.push(format!("{}: {ask}", path.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "OS differences belong in src/platform/:\n{}",
        found.join("\n")
    );
}
