//! The scenario corpus: recorded run directories, each with the verdict a person who knows the
//! hardware expects (`tests/scenarios/<name>/expected.json`), rebuilt by `kiln verdict` from the
//! files alone. A scenario is a base run (`_base`, or the scenario it names in `run_from`) with
//! its own files laid over it, less the files it names in `without`, and, where it names one,
//! a recorded telemetry fixture as its telemetry. The faulty runs were recorded with `cargo run --example plant_run`; the ones a
//! CPU device cannot record are derived from those by `scripts/derive-scenarios.py`.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// What a scenario expects of the verdict on device 0.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expected {
    /// The story of the scenario, shown when it fails.
    about: String,
    /// Another scenario whose files this one starts from (default `_base`; read by
    /// `common::lay_out_scenario`).
    #[allow(dead_code)]
    run_from: Option<String>,
    /// A fixture under `tests/fixtures/telemetry/` used as the run's telemetry (read by
    /// `common::lay_out_scenario`).
    #[allow(dead_code)]
    telemetry_fixture: Option<String>,
    /// Files of the base left out of this scenario's run directory (read by
    /// `common::lay_out_scenario`): evidence lost after the run.
    #[allow(dead_code)]
    #[serde(default)]
    without: Vec<String>,
    exit_code: i32,
    result: String,
    /// Finding codes in the order the report lists them.
    codes: Vec<String>,
    incomplete: bool,
    /// Words the device's reason must hold: the finding that decided it.
    #[serde(default)]
    reason: Option<String>,
    /// Words the device's one next step (`action`) must hold: a situation's step, not
    /// another finding's.
    #[serde(default)]
    action: Option<String>,
    /// A watch's diagnosis of its application (`leak`, `healthy`), where the scenario holds
    /// one to it.
    #[serde(default)]
    diagnosis: Option<String>,
}

fn corpus() -> PathBuf {
    common::scenarios()
}

/// Every scenario's directory, in name order (the base left out).
fn scenario_dirs() -> Vec<PathBuf> {
    let mut scenarios: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.ends_with("_base"))
        .collect();
    scenarios.sort();
    scenarios
}

fn expected_of(name: &str) -> Expected {
    let path = corpus().join(name).join("expected.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Lays out one scenario's run directory, judges it, and says how it differs from what was
/// expected (`None` when it matches).
fn check(scenario: &Path, work: &Path) -> (i32, Option<String>) {
    let name = scenario.file_name().unwrap().to_string_lossy().into_owned();
    let expected = expected_of(&name);
    let run_dir = work.join(&name);
    std::fs::create_dir(&run_dir).unwrap();
    common::lay_out_scenario(&name, &run_dir);

    let thresholds = scenario.join("thresholds.json");
    let extra: Vec<&std::ffi::OsStr> = if thresholds.is_file() {
        vec!["--thresholds".as_ref(), thresholds.as_os_str()]
    } else {
        Vec::new()
    };
    let out = common::verdict(&run_dir, &extra);
    let code = out.status.code().unwrap_or(-1);
    let report: serde_json::Value = match serde_json::from_slice(&out.stdout) {
        Ok(r) => r,
        Err(e) => {
            return (
                code,
                Some(format!(
                    "{name}: no JSON report ({e}); stderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                )),
            );
        }
    };
    let device = &report["devices"][0];
    let codes: Vec<String> = device["findings"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(|f| f["code"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let got = (
        code,
        device["result"].as_str().unwrap_or("").to_string(),
        codes,
        report["incomplete"].as_bool().unwrap_or(false),
    );
    let want = (
        expected.exit_code,
        expected.result.clone(),
        expected.codes.clone(),
        expected.incomplete,
    );
    let reason = device["reason"].as_str().unwrap_or("");
    if let Some(words) = &expected.reason
        && !reason.contains(words.as_str())
    {
        return (
            code,
            Some(format!(
                "{name} ({}): the reason should name `{words}`, got `{reason}`",
                expected.about
            )),
        );
    }
    let action = device["action"].as_str().unwrap_or("");
    if let Some(words) = &expected.action
        && !action.contains(words.as_str())
    {
        return (
            code,
            Some(format!(
                "{name} ({}): the next step should say `{words}`, got `{action}`",
                expected.about
            )),
        );
    }
    if let Some(diagnosis) = &expected.diagnosis {
        let said = report["application"]["diagnosis"]
            .as_str()
            .unwrap_or("none");
        if said != diagnosis {
            return (
                code,
                Some(format!(
                    "{name} ({}): the application's diagnosis should be `{diagnosis}`, got `{said}`",
                    expected.about
                )),
            );
        }
    }
    if got == want {
        (code, None)
    } else {
        (
            code,
            Some(format!(
                "{name} ({}): expected (exit, result, codes, incomplete) {want:?}, got {got:?}",
                expected.about
            )),
        )
    }
}

#[test]
fn every_scenario_gets_the_expected_verdict() {
    let work = tempfile::tempdir().unwrap();
    let scenarios = scenario_dirs();
    assert!(scenarios.len() >= 25, "the corpus lost scenarios");

    let mut failures = Vec::new();
    let mut exit_codes = BTreeSet::new();
    for scenario in &scenarios {
        let (code, failure) = check(scenario, work.path());
        exit_codes.insert(code);
        failures.extend(failure);
    }
    // Every report a scenario makes follows the published schema, whatever it holds.
    let reports: Vec<PathBuf> = scenarios
        .iter()
        .filter_map(|s| s.file_name())
        .map(|name| work.path().join(name).join("report.json"))
        .filter(|r| r.is_file())
        .collect();
    assert_eq!(
        reports.len(),
        scenarios.len(),
        "every scenario writes its report"
    );
    common::validate_reports(&reports);
    assert!(
        failures.is_empty(),
        "{} of {} scenarios differ:\n{}",
        failures.len(),
        scenarios.len(),
        failures.join("\n")
    );
    // Every verdict a fleet acts on is exercised: pass, fail, environment, software, inconclusive.
    assert_eq!(exit_codes, BTreeSet::from([0, 1, 2, 3, 4]));
}

#[test]
fn every_finding_code_has_a_scenario_and_every_scenario_code_a_rule() {
    // The catalogue holds every code a rule can give.
    let in_rules: BTreeSet<String> = kiln::finding::FindingCode::ALL
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    let mut in_corpus = BTreeSet::new();
    for path in scenario_dirs() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        in_corpus.extend(expected_of(&name).codes);
    }
    let uncovered: Vec<&String> = in_rules.difference(&in_corpus).collect();
    assert!(
        uncovered.is_empty(),
        "codes no scenario shows: {uncovered:?}"
    );
    let unknown: Vec<&String> = in_corpus.difference(&in_rules).collect();
    assert!(
        unknown.is_empty(),
        "scenarios expect codes no rule makes: {unknown:?}"
    );
}

#[test]
fn the_order_of_the_rules_changes_no_report() {
    // Each rule reads the evidence alone and the resolution decides which finding explains
    // which: every scenario judged with the rules in reverse and in shuffled orders gives
    // the report it gives with them in order, to the byte.
    use rand::SeedableRng;
    use rand::seq::SliceRandom;
    let work = tempfile::tempdir().unwrap();
    let mut orders: Vec<Vec<(&str, kiln::verdict::rules::Rule)>> = Vec::new();
    let mut reversed = kiln::verdict::rules::RULES.to_vec();
    reversed.reverse();
    orders.push(reversed);
    let mut rng = rand::rngs::StdRng::seed_from_u64(44);
    for _ in 0..3 {
        let mut shuffled = kiln::verdict::rules::RULES.to_vec();
        shuffled.shuffle(&mut rng);
        orders.push(shuffled);
    }
    let scenarios = scenario_dirs();
    let mut judged = 0;
    let mut unworded: Vec<String> = Vec::new();
    for scenario in &scenarios {
        let name = scenario.file_name().unwrap().to_string_lossy().into_owned();
        let run_dir = work.path().join(&name);
        std::fs::create_dir(&run_dir).unwrap();
        common::lay_out_scenario(&name, &run_dir);
        let thresholds = scenario.join("thresholds.json");
        let overlay = thresholds.is_file().then_some(thresholds.as_path());
        // Read once, judged in every order (only the judging is under test).
        let Ok(evidence) = kiln::rundir::RunEvidence::read(&run_dir) else {
            continue;
        };
        let Ok(in_order) =
            kiln::verdict::rebuild_with(&evidence, overlay, kiln::verdict::rules::RULES)
        else {
            continue;
        };
        // Every fact a rule writes into a finding's evidence reads in words for people:
        // evidence with something in it has rows, none labelled by a key's spelling.
        for f in in_order.devices.iter().flat_map(|d| &d.findings) {
            let json = f.evidence.json();
            let said_nothing =
                json.as_object().is_some_and(|o| !o.is_empty()) && f.evidence.rows().is_empty();
            if said_nothing {
                unworded.push(format!("{name}: {} says none of {json}", f.code.name()));
            }
            for (label, _) in f.evidence.rows() {
                if label.is_empty() || label.contains('_') {
                    unworded.push(format!("{name}: {} `{label}`", f.code.name()));
                }
            }
        }
        let in_order = serde_json::to_value(&in_order).unwrap();
        for order in &orders {
            let other = kiln::verdict::rebuild_with(&evidence, overlay, order).unwrap();
            let names: Vec<&str> = order.iter().map(|(n, _)| *n).collect();
            assert_eq!(
                serde_json::to_value(&other).unwrap(),
                in_order,
                "{name}: the rules in the order {names:?} give another report"
            );
        }
        judged += 1;
    }
    assert!(judged >= 150, "only {judged} scenarios were judged");
    assert!(
        unworded.is_empty(),
        "evidence that does not read in words (declare each field's words with evidence!):\n{}",
        unworded.join("\n")
    );
}
