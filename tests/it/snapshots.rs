//! What people read, held word for word: the terminal summary, the page's text, JUnit and
//! the metrics, for a healthy run, a stuck bit, an interrupted run and two watched
//! applications, one leaking and one squeezed by another process (each a run
//! of the scenario corpus, so nothing in them moves but the machine's own names, which are
//! masked). A change of wording or numbers shows as a diff here, to be accepted on purpose
//! (`INSTA_UPDATE=always cargo test --test it snapshots::`, then review the `.snap` files in
//! `tests/it/snapshots/`). The summaries are judged in-process (`common::verdict`).

use crate::common;

use std::path::Path;

/// The runs: one of each thing a reader meets.
const RUNS: [&str; 7] = [
    "h200_healthy",
    "vram_stuck_bit",
    "interrupted_before_pcie",
    "watch_leak_per_step",
    "watch_other_process_before_oom",
    "watch_sources_disagree",
    "watch_own_error",
];

/// The run's directory, masked: it is a temporary one.
fn masked(run_dir: &Path, text: &str) -> String {
    text.replace(&run_dir.display().to_string(), "[RUN_DIR]")
}

/// The page's words, in reading order, one block a line: what a support desk sees.
fn page_text(html: &str) -> String {
    let body = html.split_once("<body>").map_or(html, |(_, b)| b);
    let mut out = String::new();
    let mut in_tag = false;
    let mut in_svg = 0usize;
    let mut tag = String::new();
    for c in body.chars() {
        match (in_tag, c) {
            (false, '<') => {
                in_tag = true;
                tag.clear();
            }
            (true, '>') => {
                in_tag = false;
                let name = tag.split_whitespace().next().unwrap_or_default().to_owned();
                match name.as_str() {
                    "svg" => in_svg += 1,
                    "/svg" => {
                        in_svg = in_svg.saturating_sub(1);
                        out.push_str("[chart]\n");
                    }
                    "/p" | "/tr" | "/h1" | "/h2" | "/h3" | "/li" | "/div" | "/figcaption"
                    | "br" => out.push('\n'),
                    "td" | "th" => out.push_str(" | "),
                    _ => {}
                }
            }
            (true, c) => tag.push(c),
            (false, c) if in_svg == 0 => out.push(c),
            _ => {}
        }
    }
    let out = out
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#9632;", "■");
    out.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a rebuild takes from the machine and the clock it runs on: the host's name, the
/// moment it finished, kiln's version.
fn filters() -> Vec<(&'static str, &'static str)> {
    vec![
        (r#"Hostname="[^"]*""#, r#"Hostname="[HOST]""#),
        (r#"hostname="[^"]*""#, r#"hostname="[HOST]""#),
        (r"Host [^,\n]+, started", "Host [HOST], started"),
        (r"\| Host \| [^\n|]+", "| Host | [HOST]"),
        (
            r"finished \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",
            "finished [TIME]",
        ),
        (
            r"\| Finished \(UTC\) \| [^\n|]+",
            "| Finished (UTC) | [TIME]",
        ),
        (
            r"(kiln_last_run_timestamp_seconds\{[^}]*\}) \d+",
            "$1 [TIME]",
        ),
        (r"kiln \d+\.\d+\.\d+", "kiln [VERSION]"),
        (r"\| kiln \| \d+\.\d+\.\d+", "| kiln | [VERSION]"),
        (r#"version="\d+\.\d+\.\d+""#, r#"version="[VERSION]""#),
    ]
}

fn check(run: &str) {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join(run);
    common::lay_out_scenario(run, &run_dir);
    // The summary `kiln verdict` prints (on stderr beside `--json`'s report).
    let out = common::verdict(&run_dir, &[]);
    let summary = masked(&run_dir, &common::stderr(&out));
    let read = |file: &str| {
        masked(
            &run_dir,
            &std::fs::read_to_string(run_dir.join(file)).unwrap(),
        )
    };
    let page = page_text(&read("report.html"));
    // A summary a person reads at a glance, whatever the run.
    assert!(
        summary.lines().count() <= 15,
        "{run}: {} lines\n{summary}",
        summary.lines().count()
    );
    // Every family the metrics hold is one kiln declares (what the alert rules are checked
    // against), each once.
    let metrics = read("kiln.prom");
    let families: Vec<&str> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let declared = kiln::report::prometheus::families();
    for f in &families {
        assert!(declared.contains(f), "{run}: {f} is not among {declared:?}");
    }
    let mut once = families.clone();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), families.len(), "{run}: {families:?}");
    insta::with_settings!({filters => filters(), prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(format!("{run}-summary"), summary);
        insta::assert_snapshot!(format!("{run}-page"), page);
        insta::assert_snapshot!(format!("{run}-junit"), read("junit.xml"));
        insta::assert_snapshot!(format!("{run}-metrics"), read("kiln.prom"));
    });
}

#[test]
fn a_healthy_run_reads_the_same() {
    check(RUNS[0]);
}

#[test]
fn a_stuck_bit_reads_the_same() {
    check(RUNS[1]);
}

#[test]
fn an_interrupted_run_reads_the_same() {
    check(RUNS[2]);
}

#[test]
fn a_watched_leak_reads_the_same() {
    check(RUNS[3]);
}

#[test]
fn a_watched_application_squeezed_by_another_process_reads_the_same() {
    check(RUNS[4]);
}

#[test]
fn a_watch_whose_sources_disagree_reads_the_same() {
    check(RUNS[5]);
}

#[test]
fn an_application_s_own_failure_reads_the_same() {
    check(RUNS[6]);
}

/// The verdict as a buyer who double-clicked kiln.exe reads it, for each kind of result.
#[test]
fn the_verdict_in_plain_words_reads_the_same() {
    let mut all = String::new();
    for run in [
        "h200_healthy",
        "vram_stuck_bit",
        "thermal_throttle",
        "windows_tdr_during_compute",
        "device_lost_no_telemetry",
        "cpu_stood_in_for_a_missing_gpu",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join(run);
        common::lay_out_scenario(run, &run_dir);
        let out = common::verdict(&run_dir, &[]);
        let report: kiln::verdict::Report = serde_json::from_slice(&out.stdout).unwrap();
        let code = out.status.code().unwrap();
        let words = kiln::report::terminal::in_plain_words(&report, code);
        all.push_str(&format!(
            "== {run} (exit {code})\n{}\n",
            masked(&run_dir, &words)
        ));
    }
    insta::with_settings!({filters => filters(), prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("in-plain-words", all);
    });
}

/// The burn-in detectors' words, every line of them (`--verbose`): a word that decayed
/// while held, errors only around the pauses and only at partial load, the power supply
/// under the combined load, a wrong CPU result, and memory near its rated temperature.
#[test]
fn the_burn_in_findings_read_the_same() {
    let mut all = String::new();
    for run in [
        "resident_word_decays_while_held",
        "compute_wrong_only_around_pauses",
        "compute_wrong_only_at_partial_load",
        "psu_card_off_the_bus_only_under_combined_load",
        "cpu_wrong_under_combined_load",
        "h200_hbm_near_its_limit",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join(run);
        common::lay_out_scenario(run, &run_dir);
        let out = common::verdict(&run_dir, &["--verbose".as_ref()]);
        let code = out.status.code().unwrap();
        all.push_str(&format!(
            "== {run} (exit {code})\n{}\n",
            masked(&run_dir, &common::stderr(&out))
        ));
    }
    insta::with_settings!({filters => filters(), prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("burn-in-findings", all);
    });
}
