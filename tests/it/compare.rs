//! `kiln compare` and `kiln run --baseline`: what changed between two runs of the same
//! cards (matched by UUID or serial), on recorded runs from the scenario corpus.

use crate::common;

use std::path::{Path, PathBuf};

use crate::common::{expect_json, json, kiln, read_json};

fn scenario(name: &str, work: &Path) -> PathBuf {
    let dir = work.join(name);
    common::lay_out_scenario(name, &dir);
    dir
}

fn compare(a: &Path, b: &Path, extra: &[&str]) -> std::process::Output {
    kiln()
        .arg("compare")
        .arg(a)
        .arg(b)
        .args(extra)
        .arg("--json")
        .output()
        .unwrap()
}

#[test]
fn a_run_compared_with_itself_has_nothing_worse() {
    let work = tempfile::tempdir().unwrap();
    let a = scenario("h200_healthy", work.path());
    let out = compare(&a, &a, &[]);
    let c = expect_json(&out, 0);
    assert_eq!(c["devices"][0]["matched_by"], "uuid");
    assert!(c["devices"][0]["slower"].as_array().unwrap().is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing worse"));
}

#[test]
fn runs_asked_for_differently_are_compared_with_a_warning() {
    let work = tempfile::tempdir().unwrap();
    let a = scenario("h200_healthy", work.path());
    let c = expect_json(&compare(&a, &a, &[]), 0);
    assert!(c["warnings"].as_array().unwrap().is_empty(), "{c}");
    // The same run, as if asked for with another profile and a longer budget.
    let b = scenario("h200_healthy", &work.path().join("later"));
    let path = b.join("manifest.json");
    let mut manifest = read_json(&path);
    manifest["settings"]["profile"] = "fleet".into();
    manifest["settings"]["duration_s"] = 240.0.into();
    std::fs::write(&path, manifest.to_string()).unwrap();
    let out = compare(&a, &b, &[]);
    // A warning, not a finding: nothing is worse.
    let c = expect_json(&out, 0);
    let warnings: Vec<&str> = c["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("different profiles") && warnings[0].contains("then fleet"));
    assert!(warnings[1].contains("240 s"), "{}", warnings[1]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("warning: the runs used different profiles")
    );
}

#[test]
fn slower_memory_and_a_new_finding_are_reported() {
    let work = tempfile::tempdir().unwrap();
    let a = scenario("h200_healthy", work.path());
    let b = scenario("h200_slow_unexplained", work.path());
    // Slower than its burn-in: exit 1.
    let c = expect_json(&compare(&a, &b, &[]), 1);
    let d = &c["devices"][0];
    let slower: Vec<&str> = d["slower"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["rate"].as_str().unwrap())
        .collect();
    assert_eq!(slower, vec!["vram_gib_per_s"]);
    let change = d["slower"][0]["change"].as_f64().unwrap();
    assert!((-0.52..-0.48).contains(&change), "{change}");
    assert_eq!(d["new_findings"][0]["code"], "VRAM_BANDWIDTH_LOW");
    // Within a generous tolerance the drift is not counted, the finding still is.
    let c = expect_json(&compare(&a, &b, &["--tolerance", "60"]), 1);
    assert!(c["devices"][0]["slower"].as_array().unwrap().is_empty());
}

#[test]
fn a_rate_that_drifted_without_a_fault_is_a_drift_of_its_own_exit_code() {
    let work = tempfile::tempdir().unwrap();
    let a = scenario("h200_healthy", work.path());
    // The same card streaming its memory 15% slower, still well above its floor: no
    // finding, only a drift.
    let b = scenario("h200_healthy", &work.path().join("later"));
    common::scale_vram_rate(&b, 0.85);
    let out = compare(&a, &b, &[]);
    let c = expect_json(&out, 5);
    let d = &c["devices"][0];
    assert!(d["new_findings"].as_array().unwrap().is_empty(), "{d}");
    assert_eq!(d["slower"][0]["rate"], "vram_gib_per_s", "{d}");
    assert_eq!(d["slower"][0]["noise"], 0.0, "{d}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("slower VRAM streaming rate: 3.73 TiB/s -> 3.17 TiB/s (-15%)"),
        "units scaled to the value: {said}"
    );
    assert!(said.contains("(-15%"), "{said}");
    assert!(said.contains("exit 5: a drift, not a fault"), "{said}");
    // Within a tolerance wider than the drift, nothing is worse.
    expect_json(&compare(&a, &b, &["--tolerance", "20"]), 0);
}

#[test]
fn grown_error_counters_are_wear() {
    let work = tempfile::tempdir().unwrap();
    let a = scenario("healthy_load", work.path());
    let b = scenario("ecc_uncorrectable_remap_pending", work.path());
    let c = expect_json(&compare(&a, &b, &[]), 1);
    let grown: Vec<&str> = c["devices"][0]["counters_grown"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["counter"].as_str().unwrap())
        .collect();
    assert!(grown.contains(&"ecc_uncorrected_aggregate"), "{grown:?}");
}

#[test]
fn a_card_is_found_by_its_serial_and_a_missing_one_is_said() {
    let work = tempfile::tempdir().unwrap();
    // The same board (serial from NVML) seen through two Vulkan UUIDs: a card moved to
    // another host keeps its serial.
    let a = scenario("healthy_load", work.path());
    let b = scenario("h200_healthy", work.path());
    let c = json(&compare(&a, &b, &[]));
    assert_eq!(c["devices"][0]["matched_by"], "serial");
    // The pair against one card: the second of the pair is missing from the later run
    // (could not judge, 4), and the first streams its memory at half the rate there
    // (hardware, 1, which ranks first).
    let pair = scenario("h200_pair_within_tolerance", work.path());
    let slow = scenario("h200_slow_unexplained", work.path());
    let c = expect_json(&compare(&pair, &slow, &[]), 1);
    assert_eq!(c["missing"].as_array().unwrap().len(), 1);
    assert_eq!(c["devices"][0]["slower"][0]["rate"], "vram_gib_per_s");
    // The other way round the second card is new, which is not a regression.
    let out = compare(&b, &pair, &["--tolerance", "100"]);
    assert_eq!(json(&out)["added"].as_array().unwrap().len(), 1);
}

#[test]
fn bad_run_directories_get_one_sentence() {
    let work = tempfile::tempdir().unwrap();
    let a = scenario("h200_healthy", work.path());
    let out = compare(&a, &work.path().join("nowhere"), &[]);
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("nowhere does not exist: not a kiln run directory"),
        "{stderr}"
    );
}

#[test]
fn a_run_with_a_baseline_reports_what_changed() {
    let work = tempfile::tempdir().unwrap();
    let first = work.path().join("first");
    assert_eq!(common::quick_run(&[], &first).status.code(), Some(0));
    let second = work.path().join("second");
    let out = common::quick_run(&["--baseline", first.to_str().unwrap()], &second);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("compare: "), "{text}");
    let c = read_json(&second.join("compare.json"));
    assert_eq!(c["devices"][0]["matched_by"], "uuid");
    assert!(
        c["devices"][0]["new_findings"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let out = common::quick_run(
        &["--baseline", work.path().join("nowhere").to_str().unwrap()],
        &work.path().join("third"),
    );
    assert_eq!(out.status.code(), Some(64), "checked before the run starts");
}
