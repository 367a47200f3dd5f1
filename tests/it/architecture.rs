//! The shape of the crate, checked: no import cycle between kiln's modules (the top-level
//! ones of the core, and each command under `src/cmd/`), the core importing no command, and
//! the GPU layer (the only unsafe code) importing nothing above it. Read from the source
//! (`crate::module` and, inside `src/cmd/`, `super::` paths), so a new cycle fails here
//! with the path that closes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The module path of a source file under `src/` (`cmd/run/worker.rs` is `cmd::run::worker`,
/// `cmd/run/mod.rs` is `cmd::run`).
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" {
        parts.push(stem.to_owned());
    }
    parts
}

/// The node a module path belongs to: a command (`cmd::run`) for anything under
/// `src/cmd/<command>`, `cmd` for the commands' shared edge, else its top-level module.
fn node(path: &[String], commands: &BTreeSet<String>) -> String {
    match path {
        [first, second, ..] if first == "cmd" && commands.contains(second) => {
            format!("cmd::{second}")
        }
        [first, ..] => first.clone(),
        [] => String::new(),
    }
}

/// Node -> the nodes its files name through `crate::` (and `super::` inside `src/cmd/`).
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    // The commands: each module directly under src/cmd/.
    let commands: BTreeSet<String> = files
        .iter()
        .map(|f| module_path(f.strip_prefix(&src).unwrap()))
        .filter(|m| m.len() >= 2 && m[0] == "cmd")
        .map(|m| m[1].clone())
        .collect();
    let name_at = |text: &str, at: usize| -> String {
        text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &files {
        let module = module_path(path.strip_prefix(&src).unwrap());
        if module.len() == 1 && ["lib", "main"].contains(&module[0].as_str()) {
            continue;
        }
        let me = node(&module, &commands);
        let text = std::fs::read_to_string(path).unwrap();
        // Unit tests (and a file of them, `#![cfg(test)]`) may reach anywhere; the shape
        // is that of the shipped code.
        if text.contains("#![cfg(test)]") {
            continue;
        }
        let shipped: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or("")
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut named = BTreeSet::new();
        for (at, _) in shipped.match_indices("crate::") {
            let first = name_at(&shipped, at + "crate::".len());
            let second = shipped[at + "crate::".len() + first.len()..]
                .strip_prefix("::")
                .map(|rest| name_at(rest, 0))
                .unwrap_or_default();
            named.insert(node(&[first, second], &commands));
        }
        // Inside a command, `super::` reaches the commands' edge or another command.
        if me.starts_with("cmd") {
            for (at, _) in shipped.match_indices("super::") {
                if shipped[..at].ends_with("super::") {
                    continue;
                }
                let mut up = 1;
                let mut rest = &shipped[at + "super::".len()..];
                while let Some(r) = rest.strip_prefix("super::") {
                    up += 1;
                    rest = r;
                }
                let mut target: Vec<String> = module[..module.len().saturating_sub(up)].to_vec();
                target.push(name_at(rest, 0));
                named.insert(node(&target, &commands));
            }
        }
        // The dispatcher (`cmd/mod.rs`) names its commands by their own paths.
        if module == ["cmd"] {
            for command in &commands {
                let path = format!("{command}::");
                let word = |at: usize| {
                    at == 0
                        || !shipped[..at]
                            .ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                };
                if shipped.match_indices(&path).any(|(at, _)| word(at)) {
                    named.insert(format!("cmd::{command}"));
                }
            }
        }
        named.retain(|n| !n.is_empty() && *n != me);
        deps.entry(me).or_default().extend(named);
    }
    deps
}

#[test]
fn no_two_modules_import_each_other_even_through_others() {
    let deps = dependencies();
    for (k, v) in &deps {
        eprintln!("{k}: {v:?}");
    }
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
fn the_core_imports_no_command() {
    let deps = dependencies();
    let wrong: Vec<String> = deps
        .iter()
        .filter(|(node, _)| !node.starts_with("cmd"))
        .flat_map(|(node, named)| {
            named
                .iter()
                .filter(|n| n.starts_with("cmd"))
                .map(move |n| format!("{node} imports {n}"))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "the core imports commands:\n{}",
        wrong.join("\n")
    );
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
                if text.contains("#![cfg(test)]") {
                    continue;
                }
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
