//! The shape of the crate, checked: no import cycle between kiln's modules (the top-level
//! ones of the core, and each command under `src/cmd/`) nor between any two modules at any
//! depth, the core importing no command, the GPU layer (the only unsafe code) importing
//! nothing above it, no rule able to reach a finding by type, the report built in one
//! place and never patched, and no file over 1,000 lines nor function of the verdict over
//! 150. Read from the source (`crate::`, `super::`, `self::` and child paths, followed
//! through re-exports), so a new cycle fails here with the path that closes it.

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
    let cycles = cycles(&deps, |m| m.clone());
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

/// Every way back to a node of `deps` from itself, as the path that closes it (each node
/// said by `name`), sorted and each once.
fn cycles<N: Ord + Clone>(
    deps: &BTreeMap<N, BTreeSet<N>>,
    name: impl Fn(&N) -> String,
) -> Vec<String> {
    let mut cycles = Vec::new();
    for start in deps.keys() {
        // Depth-first from `start`, keeping the path, looking for a way back.
        let mut stack = vec![vec![start.clone()]];
        let mut seen = BTreeSet::new();
        while let Some(path) = stack.pop() {
            let last = path.last().unwrap();
            for next in deps.get(last).into_iter().flatten() {
                if next == start {
                    let mut cycle: Vec<String> = path.iter().map(&name).collect();
                    cycle.push(name(start));
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
    cycles
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

/// Every source file under `src/` by its module path, with its shipped code (comment lines
/// and unit tests left out).
fn modules() -> BTreeMap<Vec<String>, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let module = module_path(path.strip_prefix(&src).unwrap());
                if module.len() == 1 && ["lib", "main"].contains(&module[0].as_str()) {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
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
                out.insert(module, shipped);
            }
        }
    }
    out
}

/// The identifier at the start of `text`.
fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The paths a use tree (or an expression's path) names from `text` on: `a::b::{c, d::e}`
/// is `a::b::c` and `a::b::d::e`, each with the name it is known by here.
fn use_paths(text: &str) -> Vec<(Vec<String>, String)> {
    let mut path = Vec::new();
    let mut rest = text;
    loop {
        let name = ident(rest);
        if name.is_empty() {
            if let Some(inner) = rest.strip_prefix('{') {
                // The braces' items, split at their top-level commas.
                let (mut depth, mut start, mut out) = (0, 0, Vec::new());
                for (i, c) in inner.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            out.push(&inner[start..i]);
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            out.push(&inner[start..i]);
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
                return out
                    .into_iter()
                    .flat_map(|item| use_paths(item.trim()))
                    .map(|(p, alias)| {
                        let mut full = path.clone();
                        full.extend(p);
                        (full, alias)
                    })
                    .collect();
            }
            break;
        }
        path.push(name.to_owned());
        rest = &rest[name.len()..];
        match rest.strip_prefix("::") {
            Some(more) => rest = more,
            None => break,
        }
    }
    let alias = rest
        .trim_start()
        .strip_prefix("as ")
        .map(|r| ident(r.trim_start()).to_owned())
        .unwrap_or_else(|| path.last().cloned().unwrap_or_default());
    vec![(path, alias)]
}

/// A path named in `module`, made absolute: `crate::` from the root, `super::` from the
/// parent, `self::` and a declared child from the module itself; None for another crate's.
fn absolute(
    module: &[String],
    path: &[String],
    children: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let first = path.first()?;
    if first == "crate" {
        return Some(path[1..].to_vec());
    }
    let mut at = module.to_vec();
    let mut rest = path;
    if first == "self" {
        rest = &path[1..];
    } else if first == "super" {
        while rest.first().is_some_and(|p| p == "super") {
            at.pop();
            rest = &rest[1..];
        }
    } else if !children.contains(first) {
        return None;
    }
    at.extend(rest.iter().cloned());
    Some(at)
}

/// The module an absolute path names: its longest prefix that is a module, followed
/// through that module's `pub use` to the module a re-exported name comes from.
fn defining(
    path: &[String],
    modules: &BTreeMap<Vec<String>, String>,
    reexports: &BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
    depth: usize,
) -> Option<Vec<String>> {
    let n = (1..=path.len())
        .rev()
        .find(|n| modules.contains_key(&path[..*n]))?;
    let module = path[..n].to_vec();
    if depth < 4
        && let Some(name) = path.get(n)
        && let Some(target) = reexports.get(&module).and_then(|r| r.get(name))
        && let Some(found) = defining(target, modules, reexports, depth + 1)
    {
        return Some(found);
    }
    Some(module)
}

/// Every module's imports of other modules, by module path: what its shipped code names
/// (`crate::`, `super::`, `self::` and its own children's paths), each followed to the
/// module that defines it. A module and its own descendants are one family: a parent
/// listing its children and a child using its parent's helpers are not counted, only
/// imports between modules neither of which contains the other.
fn module_imports() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let modules = modules();
    let children = |m: &Vec<String>| -> BTreeSet<String> {
        modules
            .keys()
            .filter(|k| k.len() == m.len() + 1 && k.starts_with(m))
            .map(|k| k[m.len()].clone())
            .collect()
    };
    let mut reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for (m, text) in &modules {
        let kids = children(m);
        for (at, _) in text.match_indices("pub use ") {
            let tree = &text[at + "pub use ".len()..];
            let tree = &tree[..tree.find(';').unwrap_or(tree.len())];
            let flat: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
            for (path, alias) in use_paths(&flat.replace(":: ", "::")) {
                if let Some(abs) = absolute(m, &path, &kids) {
                    reexports.entry(m.clone()).or_default().insert(alias, abs);
                }
            }
        }
    }
    let mut out: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (m, text) in &modules {
        let kids = children(m);
        let mut named = BTreeSet::new();
        let is_start = |at: usize| {
            at == 0
                || !text[..at]
                    .ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        };
        let mut starts: Vec<usize> = Vec::new();
        for word in ["crate::", "super::", "self::"] {
            starts.extend(
                text.match_indices(word)
                    .map(|(at, _)| at)
                    .filter(|at| is_start(*at)),
            );
        }
        for kid in &kids {
            let word = format!("{kid}::");
            starts.extend(
                text.match_indices(&word)
                    .map(|(at, _)| at)
                    .filter(|at| is_start(*at)),
            );
        }
        for at in starts {
            let flat: String = text[at..]
                .chars()
                .take(400)
                .collect::<String>()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .replace(":: ", "::")
                .replace("{ ", "{");
            for (path, _) in use_paths(&flat) {
                let Some(abs) = absolute(m, &path, &kids) else {
                    continue;
                };
                if let Some(target) = defining(&abs, &modules, &reexports, 0)
                    && !target.starts_with(m)
                    && !m.starts_with(&target)
                {
                    named.insert(target);
                }
            }
        }
        out.insert(m.clone(), named);
    }
    out
}

#[test]
fn no_module_imports_another_that_imports_it_back_at_any_depth() {
    // Submodules too (verdict::watch and verdict::model, telemetry::nvml::gauges and
    // telemetry::nvml::counters): two modules neither of which contains the other never
    // import each other, even through others.
    let deps = module_imports();
    let cycles = cycles(&deps, |m| m.join("::"));
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
    // The reading holds: the verdict's pieces are seen importing each other.
    let verdict = |m: &str| m.split("::").map(str::to_owned).collect::<Vec<_>>();
    assert!(
        deps[&verdict("verdict::settle")].contains(&verdict("verdict::evidence")),
        "settle reads the device's evidence: {:?}",
        deps[&verdict("verdict::settle")]
    );
    assert!(
        deps[&verdict("verdict::model")].contains(&verdict("verdict::watch::report")),
        "the report holds the application's: {:?}",
        deps[&verdict("verdict::model")]
    );
}

/// The field types of struct `name` in `code`, as written.
fn field_types(code: &str, name: &str) -> Vec<String> {
    let at = code
        .find(&format!("pub struct {name} "))
        .unwrap_or_else(|| panic!("no struct {name}"));
    let body = &code[at..];
    let body = &body[body.find('{').unwrap() + 1..body.find("\n}").unwrap()];
    body.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("pub ") && l.contains(':'))
        .map(|l| l.split_once(':').unwrap().1.trim().to_owned())
        .collect()
}

#[test]
fn no_rule_of_either_kind_can_reach_a_finding() {
    // By type: what a rule is given holds no finding and no report, so that no rule can
    // read another's findings; which finding explains which is the resolution's alone.
    let modules = modules();
    let code =
        |m: &str| -> &String { &modules[&m.split("::").map(str::to_owned).collect::<Vec<_>>()] };
    let forbidden = ["Finding", "DeviceReport", "Report", "Evidence"];
    for (module, name) in [
        ("verdict::evidence", "DeviceEvidence"),
        ("verdict::evidence", "Setup"),
        ("verdict::watch::view", "AppView"),
    ] {
        for ty in field_types(code(module), name) {
            let words: Vec<&str> = ty
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .collect();
            assert!(
                !forbidden.iter().any(|f| words.contains(f)),
                "{name} holds a {ty}: a rule could read findings through it"
            );
        }
    }
    assert!(
        code("verdict::rules")
            .contains("pub type Rule = fn(&DeviceEvidence, &Thresholds) -> Vec<Finding>;"),
        "a card's rule reads the device's evidence and the thresholds alone"
    );
    assert!(
        code("verdict::watch::rules").contains(
            "pub type AppRule = fn(&AppView, &DeviceEvidence, &Thresholds) -> Vec<Finding>;"
        ),
        "an application's rule reads its view, its device's evidence and the thresholds alone"
    );
    // Nor does any rule's module name a report or its findings.
    for (module, text) in &modules {
        let name = module.join("::");
        let is_rule =
            name.starts_with("verdict::rules") || name.starts_with("verdict::watch::rules");
        if !is_rule {
            continue;
        }
        for word in ["DeviceReport", ".findings", "model::"] {
            assert!(!text.contains(word), "{name} names `{word}`");
        }
    }
}

#[test]
fn the_report_is_built_once_and_never_patched() {
    let modules = modules();
    let mut found = Vec::new();
    for (module, text) in &modules {
        let name = module.join("::");
        // Built in one place: the model's constructors, called by the verdict's pipeline.
        // A struct literal is the type's name at a word's start, then ` {` and a field.
        for built in ["DeviceReport", "Report"] {
            let literal = text.match_indices(&format!("{built} {{")).any(|(at, _)| {
                let word_start =
                    !text[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
                let after = text[at + built.len() + 2..].trim_start();
                let field = ident(after);
                let a_field = !field.is_empty()
                    && field.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                    && after[field.len()..].trim_start().starts_with([':', ',']);
                let declared = ["struct ", "impl ", "-> ", "for "]
                    .iter()
                    .any(|w| text[..at].ends_with(w));
                word_start && a_field && !declared
            });
            if literal && name != "verdict::model" {
                found.push(format!("{name} builds a {built} by hand"));
            }
        }
        for call in [
            "DeviceReport::judged(",
            "DeviceReport::not_tested(",
            "Report::new(",
        ] {
            let called = text.match_indices(call).any(|(at, _)| {
                !text[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            });
            if called && name != "verdict" && name != "verdict::model" {
                found.push(format!("{name} calls {call}"));
            }
        }
    }
    // Nothing changes a report once built: no method of the model takes it mutably.
    let model = &modules[&vec!["verdict".to_owned(), "model".to_owned()]];
    if model.contains("&mut self") {
        found.push("verdict::model has a method that changes a report".into());
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn no_file_in_src_is_over_a_thousand_lines_nor_a_function_of_the_verdict_over_150() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut long = Vec::new();
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
            let text = std::fs::read_to_string(&path).unwrap();
            let shown = path.strip_prefix(&src).unwrap().display().to_string();
            let lines: Vec<&str> = text.lines().collect();
            if lines.len() > 1000 {
                long.push(format!("src/{shown}: {} lines", lines.len()));
            }
            if !shown.starts_with("verdict") {
                continue;
            }
            // Each function: from its `fn` line to the brace that closes its body.
            for (i, line) in lines.iter().enumerate() {
                let t = line.trim_start();
                let is_fn = [
                    "fn ",
                    "pub fn ",
                    "pub(super) fn ",
                    "pub(crate) fn ",
                    "const fn ",
                    "pub const fn ",
                ]
                .iter()
                .any(|p| t.starts_with(p));
                if !is_fn {
                    continue;
                }
                let (mut depth, mut opened) = (0i32, false);
                for (j, l) in lines[i..].iter().enumerate() {
                    for c in l.chars() {
                        match c {
                            '{' => {
                                depth += 1;
                                opened = true;
                            }
                            '}' => depth -= 1,
                            _ => {}
                        }
                    }
                    if !opened && l.trim_end().ends_with(';') {
                        break;
                    }
                    if opened && depth == 0 {
                        if j + 1 > 150 {
                            long.push(format!(
                                "src/{shown}:{}: a function of {} lines",
                                i + 1,
                                j + 1
                            ));
                        }
                        break;
                    }
                }
            }
        }
    }
    assert!(long.is_empty(), "{}", long.join("\n"));
}
