//! The real-world corpus (tests/fixtures/real/, issue 57): every failure excerpt quoted
//! from a public bug report is read by the one log reader, in-process, and compared with
//! its `expect` field by field; every benign line must produce nothing.

use std::collections::BTreeMap;

use serde_json::Value;

/// The fields `expect` may hold, all compared (an absent one must read null).
pub(crate) const READ_FIELDS: [&str; 13] = [
    "source",
    "driver",
    "xid",
    "pci_address",
    "pid",
    "process",
    "framework",
    "failure",
    "requested_bytes",
    "total_bytes",
    "free_bytes",
    "reserved_bytes",
    "allocated_bytes",
];

/// The share of failure excerpts that must read right: every one did when this floor was
/// set (the issue asks at least 95%), so an excerpt added that the reader misreads is a
/// format to teach it, not a floor to lower.
const FLOOR: f64 = 1.0;

fn entries() -> Vec<(String, usize, Value)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the corpus folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    let mut all = Vec::new();
    for file in files {
        let family = file.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).expect("a corpus file");
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let entry: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{family}:{}: {e}", i + 1));
            all.push((family.clone(), i + 1, entry));
        }
    }
    all
}

#[test]
fn the_real_corpus_is_read_right_and_benign_lines_stay_quiet() {
    let mut per_family: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut loud = Vec::new();
    for (family, number, entry) in entries() {
        let text = entry["text"].as_str().expect("a text");
        let found = kiln::logread::explain(text);
        let expect = &entry["expect"];
        if expect.is_null() {
            if !found.is_empty() {
                loud.push(format!("{family}:{number}: {:?}", found[0]));
            }
            continue;
        }
        let tally = per_family.entry(family.clone()).or_default();
        tally.1 += 1;
        let Some(first) = found.first() else {
            wrong.push(format!("{family}:{number}: nothing read"));
            continue;
        };
        let got = serde_json::to_value(first).expect("serialisable");
        let diffs: Vec<String> = READ_FIELDS
            .iter()
            .filter(|f| got[**f] != *expect.get(**f).unwrap_or(&Value::Null))
            .map(|f| {
                format!(
                    "{f}: got {} want {}",
                    got[*f],
                    expect.get(*f).unwrap_or(&Value::Null)
                )
            })
            .collect();
        if diffs.is_empty() {
            tally.0 += 1;
        } else {
            wrong.push(format!("{family}:{number}: {}", diffs.join("; ")));
        }
    }
    let (right, total) = per_family
        .values()
        .fold((0, 0), |(r, t), (a, b)| (r + a, t + b));
    let share = right as f64 / total as f64;
    let table: String = per_family
        .iter()
        .map(|(f, (r, t))| {
            format!(
                "{f:<20} {r:>3}/{t:<3} {:>5.1}%\n",
                100.0 * *r as f64 / *t as f64
            )
        })
        .collect();
    let report = format!(
        "{table}{:<20} {right:>3}/{total:<3} {:>5.1}%\n\nwrong:\n{}\n\nloud benign:\n{}",
        "all",
        100.0 * share,
        wrong.join("\n"),
        loud.join("\n")
    );
    if std::env::var_os("KILN_CORPUS_REPORT").is_some() {
        eprintln!("{report}");
    }
    assert!(loud.is_empty(), "benign lines read as failures\n{report}");
    assert!(
        share >= FLOOR,
        "{:.1}% read right, under the floor\n{report}",
        100.0 * share
    );
}
