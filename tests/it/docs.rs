//! The README and the pages under docs/ hold to what they promise: a landing page small
//! enough to read, its first commands unchanged, links and anchors that resolve, every
//! bundled profile with its duration, the exit codes the verdict gives, and nothing said
//! twice.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The README is a landing page, not the manual.
const README_MAX_BYTES: usize = 12288;

/// The README's first fenced code block, line for line.
const FIRST_COMMANDS: [&str; 2] = [
    "bash scripts/setup.sh && cargo run --release -- run           # quick health check of every GPU (none: exit 4)",
    "bash scripts/test.sh                                          # the test suite",
];

/// The commands the README gives its readers.
const README_COMMANDS: [&str; 5] = [
    "kiln run --profile burn-in",
    "kiln run --profile rma",
    "kiln report",
    "kiln health",
    "kiln watch",
];

/// Every exit code kiln gives (src/verdict/model.rs, `exit_code`).
const EXIT_CODES: [i32; 6] = [0, 1, 2, 3, 4, 64];

/// A paragraph shorter than this may repeat (a short note, a table header).
const MIN_PARAGRAPH_CHARS: usize = 80;

/// A run of this many words said twice in a row is a copy-and-paste slip.
const MIN_REPEATED_WORDS: usize = 8;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The pages under docs/, sorted.
fn docs_pages() -> Vec<PathBuf> {
    let dir = root().join("docs");
    let mut pages: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    assert!(!pages.is_empty(), "docs/ holds no page");
    pages
}

/// The README and the pages under docs/.
fn prose_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    files.extend(docs_pages());
    files
}

/// A line opens or closes a fenced code block.
fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// The lines outside fenced code blocks, with their line numbers (from 1).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for (i, line) in text.lines().enumerate() {
        if is_fence(line) {
            in_fence = !in_fence;
        } else if !in_fence {
            out.push((i + 1, line));
        }
    }
    out
}

/// The content lines of each fenced code block, in order.
fn fenced_blocks(text: &str) -> Vec<Vec<&str>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        if is_fence(line) {
            match current.take() {
                Some(block) => blocks.push(block),
                None => current = Some(Vec::new()),
            }
        } else if let Some(block) = current.as_mut() {
            block.push(line);
        }
    }
    blocks
}

/// The line with its code spans (`...`, ``...``) taken out.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let fence = "`".repeat(ticks);
        let after = &rest[start + ticks..];
        match after.find(&fence) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                // An unclosed run of backticks is text.
                out.push_str(&fence);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The targets of the inline links (`[text](target)`, images too) of a line.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) => {
                let inside = after[..end].trim();
                // A title may follow the target: [text](target "title").
                let target = inside.split_whitespace().next().unwrap_or("");
                targets.push(target.trim_matches(|c| c == '<' || c == '>').to_string());
                rest = &after[end + 1..];
            }
            None => break,
        }
    }
    targets
}

/// GitHub's anchor for a heading: lowercase, characters other than alphanumerics, spaces,
/// hyphens and underscores dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A heading line's level and text.
fn heading(line: &str) -> Option<(usize, &str)> {
    let level = line.chars().take_while(|&c| c == '#').count();
    if (1..=6).contains(&level) && line[level..].starts_with(' ') {
        Some((level, line[level..].trim().trim_end_matches('#').trim()))
    } else {
        None
    }
}

/// Every anchor a file's headings give, a repeated heading's with GitHub's `-1`, `-2`.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (_, line) in prose_lines(text) {
        if let Some((_, title)) = heading(line) {
            let base = slug(title);
            let count = seen.entry(base.clone()).or_insert(0);
            out.push(if *count == 0 {
                base.clone()
            } else {
                format!("{base}-{count}")
            });
            *count += 1;
        }
    }
    out
}

/// The paragraphs of a text outside fenced code blocks (split on blank lines), each with
/// its first line's number and its words joined by single spaces.
fn paragraphs(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut start = 0;
    let mut in_fence = false;
    for (i, line) in text.lines().enumerate() {
        let blank = line.trim().is_empty();
        if is_fence(line) || blank || in_fence {
            if !current.is_empty() {
                out.push((start, current.join(" ")));
                current.clear();
            }
            if is_fence(line) {
                in_fence = !in_fence;
            }
            continue;
        }
        if current.is_empty() {
            start = i + 1;
        }
        current.extend(line.split_whitespace());
    }
    if !current.is_empty() {
        out.push((start, current.join(" ")));
    }
    out
}

/// The first run of at least `MIN_REPEATED_WORDS` words that is said again right after
/// itself.
fn repeated_run(text: &str) -> Option<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    for n in MIN_REPEATED_WORDS..=words.len() / 2 {
        for i in 0..=words.len() - 2 * n {
            if words[i..i + n] == words[i + n..i + 2 * n] {
                return Some(words[i..i + n].join(" "));
            }
        }
    }
    None
}

/// `needle` in `line` as a token of its own (not part of a longer word or number).
fn has_token(line: &str, needle: &str) -> bool {
    line.match_indices(needle).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + needle.len()..].chars().next();
        let apart = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
        apart(before) && apart(after)
    })
}

/// The first cells of the body rows of every table whose header's first cell is `first`.
fn table_first_cells(text: &str, first: &str) -> Vec<Vec<String>> {
    let cells = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let lines = prose_lines(text);
    let mut tables = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].1.trim();
        let is_header = line.starts_with('|') && cells(line).first().is_some_and(|c| c == first);
        if !is_header {
            i += 1;
            continue;
        }
        let mut rows = Vec::new();
        i += 1;
        while i < lines.len() && lines[i].1.trim().starts_with('|') {
            let row = cells(lines[i].1);
            let separator = row
                .iter()
                .all(|c| !c.is_empty() && c.chars().all(|ch| ch == '-' || ch == ':'));
            if !separator {
                rows.push(row[0].clone());
            }
            i += 1;
        }
        tables.push(rows);
    }
    tables
}

/// The exit codes listed by a file's table headed `code`.
fn exit_code_table(path: &Path) -> Vec<i32> {
    let tables = table_first_cells(&read(path), "code");
    assert_eq!(
        tables.len(),
        1,
        "{} should hold one exit-code table (headed `| code |`), holds {}",
        relative(path),
        tables.len()
    );
    tables[0]
        .iter()
        .map(|c| {
            c.parse()
                .unwrap_or_else(|_| panic!("{}: exit code {c:?} is not a number", relative(path)))
        })
        .collect()
}

#[test]
fn readme_is_a_landing_page_of_at_most_12_kib() {
    let path = root().join("README.md");
    let size = fs::metadata(&path).expect("README.md").len();
    assert!(
        size <= README_MAX_BYTES as u64,
        "README.md is {size} bytes, over {README_MAX_BYTES}: move reference material to docs/"
    );
}

#[test]
fn readme_first_code_block_is_setup_then_the_test_suite() {
    let readme = read(&root().join("README.md"));
    let blocks = fenced_blocks(&readme);
    let first = blocks.first().expect("README.md has no fenced code block");
    assert_eq!(
        first.as_slice(),
        FIRST_COMMANDS.as_slice(),
        "README.md's first code block must be exactly the setup and test commands"
    );
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut files = prose_files();
    files.push(root().join("ARCHITECTURE.md"));
    let mut anchors_of: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = read(file);
        let dir = file.parent().expect("a file's folder");
        for (number, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if target.starts_with("http://")
                    || target.starts_with("https://")
                    || target.starts_with("mailto:")
                {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let resolved = if path.is_empty() {
                    file.clone()
                } else {
                    dir.join(path)
                };
                let place = format!("{}:{number}: ({target})", relative(file));
                if !resolved.exists() {
                    broken.push(format!("{place}: no such file or folder"));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if resolved.extension().is_none_or(|x| x != "md") {
                    continue;
                }
                let key = resolved.canonicalize().expect("an existing path");
                let known = anchors_of
                    .entry(key)
                    .or_insert_with(|| anchors(&read(&resolved)));
                if !known.iter().any(|a| a == anchor) {
                    broken.push(format!(
                        "{place}: no heading gives the anchor #{anchor} (known: {})",
                        known.join(", ")
                    ));
                }
            }
        }
    }
    assert!(
        checked > 0,
        "no relative link found: the link reader is broken"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_docs_page_lists_its_sections_at_the_top() {
    for page in docs_pages() {
        let text = read(&page);
        let lines = prose_lines(&text);
        let sections: Vec<String> = lines
            .iter()
            .filter_map(|(_, l)| heading(l))
            .filter(|(level, title)| *level == 2 && *title != "Contents")
            .map(|(_, title)| slug(title))
            .collect();
        let contents_at = lines
            .iter()
            .position(|(_, l)| l.trim() == "## Contents")
            .unwrap_or_else(|| panic!("{} has no `## Contents`", relative(&page)));
        let listed: Vec<String> = lines[contents_at + 1..]
            .iter()
            .take_while(|(_, l)| heading(l).is_none())
            .flat_map(|(_, l)| link_targets(l))
            .filter_map(|t| t.strip_prefix('#').map(str::to_string))
            .collect();
        let missing: Vec<&String> = sections.iter().filter(|s| !listed.contains(s)).collect();
        assert!(
            missing.is_empty(),
            "{}: the contents leave out #{}",
            relative(&page),
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", #")
        );
    }
}

#[test]
fn readme_names_every_bundled_profile_with_its_duration() {
    let readme = read(&root().join("README.md"));
    let dir = root().join("profiles");
    let mut profiles = 0;
    for entry in fs::read_dir(&dir).expect("profiles/") {
        let path = entry.expect("a profiles/ entry").path();
        if path.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a profile's name");
        let duration = read(&path)
            .lines()
            .filter_map(|l| l.trim().strip_prefix("duration"))
            .filter_map(|rest| rest.trim_start().strip_prefix('='))
            .map(|value| value.trim().trim_matches('"').to_string())
            .next()
            .unwrap_or_else(|| panic!("{} has no `duration = \"...\"`", relative(&path)));
        let named = [format!("`{name}`"), format!("--profile {name}")];
        let said = readme
            .lines()
            .any(|l| named.iter().any(|n| has_token(l, n)) && has_token(l, &duration));
        assert!(
            said,
            "README.md names no `{name}` beside its duration {duration} (from {})",
            relative(&path)
        );
        profiles += 1;
    }
    assert!(profiles >= 4, "only {profiles} bundled profiles found");
}

#[test]
fn readme_gives_the_command_for_each_kind_of_user() {
    let readme = read(&root().join("README.md"));
    for command in README_COMMANDS {
        assert!(readme.contains(command), "README.md never says `{command}`");
    }
}

#[test]
fn exit_code_tables_list_exactly_the_codes_kiln_gives() {
    for page in ["README.md", "docs/guide.md"] {
        let codes = exit_code_table(&root().join(page));
        assert_eq!(codes, EXIT_CODES, "{page}'s exit-code table");
    }
}

#[test]
fn no_paragraph_is_said_twice() {
    let mut first_seen: HashMap<String, String> = HashMap::new();
    let mut twice = Vec::new();
    for file in prose_files() {
        for (number, paragraph) in paragraphs(&read(&file)) {
            if paragraph.chars().count() < MIN_PARAGRAPH_CHARS {
                continue;
            }
            let place = format!("{}:{number}", relative(&file));
            match first_seen.get(&paragraph) {
                Some(before) => twice.push(format!("{place} repeats {before}")),
                None => {
                    first_seen.insert(paragraph, place);
                }
            }
        }
    }
    assert!(
        twice.is_empty(),
        "paragraphs said twice:\n{}",
        twice.join("\n")
    );
}

#[test]
fn no_words_repeat_themselves_back_to_back() {
    let mut found = Vec::new();
    for file in prose_files() {
        for (number, paragraph) in paragraphs(&read(&file)) {
            if let Some(run) = repeated_run(&paragraph) {
                found.push(format!("{}:{number}: \"{run}\" twice", relative(&file)));
            }
        }
    }
    assert!(found.is_empty(), "repeated words:\n{}", found.join("\n"));
}

#[test]
fn the_checks_catch_what_they_are_for() {
    // The slip that once stood in the README.
    let slip = "`--profile` takes a bundled name or the path of a file in the same `--profile` \
                takes a bundled name or the path of a file in the same format";
    assert!(repeated_run(slip).is_some());
    assert!(repeated_run("one two three four five six seven eight, one two").is_none());
    assert_eq!(slug("`kiln health`"), "kiln-health");
    assert_eq!(slug("Integrations in contrib/"), "integrations-in-contrib");
    assert_eq!(slug("Self-test and benchmarks"), "self-test-and-benchmarks");
    assert_eq!(
        link_targets("see [a](docs/a.md#x) and `[b](c)` and [d](<e.md> \"t\")"),
        ["docs/a.md#x", "e.md"]
    );
    assert!(has_token("| `rma` | 30m |", "30m"));
    assert!(!has_token("| `rma` | 130m |", "30m"));
    let table = "| code | meaning |\n|---|---|\n| 0 | fine |\n| 64 | usage |\n\ntext\n";
    assert_eq!(table_first_cells(table, "code"), [["0", "64"]]);
}

/// The heading the generated table of findings follows.
const FINDINGS_TABLE_AFTER: &str = "## The codes\n\n";

#[test]
fn the_table_of_findings_is_the_catalogue() {
    let page = root().join("docs/findings.md");
    let text = read(&page);
    let Some(at) = text.find(FINDINGS_TABLE_AFTER) else {
        panic!("docs/findings.md has no `## The codes` section");
    };
    let table = kiln::verdict::catalogue::findings_table();
    let written = &text[at + FINDINGS_TABLE_AFTER.len()..];
    if written != table && std::env::var_os("KILN_WRITE_DOCS").is_some() {
        let head = &text[..at + FINDINGS_TABLE_AFTER.len()];
        fs::write(&page, format!("{head}{table}")).unwrap();
        return;
    }
    assert!(
        written == table,
        "docs/findings.md's table is not the catalogue's: rerun with KILN_WRITE_DOCS=1 \
         cargo test --test docs, then read the diff"
    );
    // Every code is in the table once, as the catalogue spells it.
    for code in kiln::finding::FindingCode::ALL {
        let row = format!("| `{}` |", code.name());
        assert_eq!(written.matches(&row).count(), 1, "{row}");
    }
}
