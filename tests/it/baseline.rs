//! `kiln baseline` over a fleet's run directories of its own making: several products,
//! one slow card, one card on another driver, one with a fault of its own and one held
//! back by heat. The floors, the cards left out and the cards behind the fleet are those a
//! GPU person would name.

use std::path::{Path, PathBuf};

use crate::common::{self, expect_json, kiln, read_json};

/// `scenario` laid out as node `node`'s run in the fleet folder `fleet`, its VRAM streaming
/// scaled by `vram`, and its driver version replaced by `driver` where given.
fn node_run(fleet: &Path, node: &str, scenario: &str, vram: f64, driver: Option<&str>) -> PathBuf {
    let dir = fleet.join(node).join("run");
    common::lay_out_scenario(scenario, &dir);
    let mut manifest = read_json(&dir.join("manifest.json"));
    manifest["host"] = node.into();
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
    common::scale_vram_rate(&dir, vram);
    own_card(&dir, node);
    // Another driver, installed whole: NVML's version and Vulkan's alike.
    if let Some(driver) = driver {
        for file in ["telemetry.jsonl", "events.jsonl", "manifest.json"] {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, text.replace("550.54.15", driver)).unwrap();
        }
    }
    dir
}

/// The UUID every scenario's card has.
const SCENARIO_UUID: &str = "6c4f3a5e-1b2c-4d5e-8f90-123456789abc";

/// Gives the card of the run in `dir` an identity of its own, `node`'s: every scenario
/// lays out the same card (one UUID, one serial per vendor), and a fleet of copies of one
/// card is one card.
fn own_card(dir: &Path, node: &str) {
    let tag = node.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let uuid = format!("6c4f3a5e-1b2c-4d5e-8f90-{:012x}", tag & 0xffff_ffff_ffff);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let own = text
            .replace(SCENARIO_UUID, &uuid)
            .replace("1654923012345", &format!("SN-{node}"))
            .replace("692412000123", &format!("SN-{node}"));
        std::fs::write(&path, own).unwrap();
    }
}

fn baseline(args: &[&str]) -> std::process::Output {
    kiln().arg("baseline").args(args).output().unwrap()
}

#[test]
fn a_fleet_gives_floors_per_product_leaves_out_the_slow_card_and_names_it() {
    let work = tempfile::tempdir().unwrap();
    let fleet = work.path().join("fleet");
    // Six healthy H200s within a few percent, one of them on a newer driver.
    for (i, scale) in [1.0, 0.98, 1.01, 0.97, 1.02, 0.99].iter().enumerate() {
        let driver = (i == 5).then_some("560.35.03");
        node_run(&fleet, &format!("h200-{i}"), "h200_healthy", *scale, driver);
    }
    // One 30% slow with nothing in its own run to say why, one with an uncorrectable ECC
    // error, one held back by heat: only the first is a card the fleet's floor should
    // catch; the other two are kept out of the floors by their own findings.
    let slow = node_run(&fleet, "h200-slow", "h200_healthy", 0.70, None);
    node_run(
        &fleet,
        "h200-dbe",
        "double_bit_error_between_phases",
        1.0,
        None,
    );
    node_run(&fleet, "h200-hot", "h200_slow_while_throttled", 1.0, None);
    // Four MI300Xs: a product of their own, never held to the H200s' floor.
    for i in 0..4 {
        node_run(&fleet, &format!("mi300x-{i}"), "amd_healthy", 1.0, None);
    }
    let floors = work.path().join("floors.json");
    let out = baseline(&[
        fleet.to_str().unwrap(),
        "--judge",
        "--json",
        "--out",
        floors.to_str().unwrap(),
    ]);
    let r = expect_json(&out, 2);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(r["runs"], 13, "{said}");
    assert!(said.starts_with("13 runs read: 13 GPUs"), "{said}");
    let products = &r["built"]["products"];
    let h200 = products
        .as_object()
        .unwrap()
        .iter()
        .find(|(name, _)| name.contains("H200"))
        .map(|(_, p)| p)
        .unwrap_or_else(|| panic!("no H200 floors: {said}"));
    // The six healthy cards and the slow one are candidates; the slow one is left out of
    // the VRAM floor it fails, the faulty and the throttled are not used at all.
    let vram = &h200["rates"]["vram_gib_per_s"];
    assert_eq!(vram["cards"], 6, "{said}");
    let median = vram["median"].as_f64().unwrap();
    let floor = vram["floor"].as_f64().unwrap();
    assert!((floor - 0.9 * median).abs() < 1e-6 * median, "{vram}");
    assert!(
        h200["source"]
            .as_str()
            .unwrap()
            .starts_with("site baseline, "),
        "{h200}"
    );
    let drivers: Vec<&str> = h200["drivers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(
        drivers.iter().any(|d| d.contains("560.35.03")),
        "{drivers:?}"
    );
    assert_eq!(drivers.len(), 2, "{drivers:?}");
    let left_out: Vec<&str> = h200["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["node"].as_str().unwrap())
        .collect();
    assert_eq!(left_out, ["h200-slow"], "{said}");
    let not_used = r["built"]["not_used"].to_string();
    assert!(
        not_used.contains("h200-dbe") && not_used.contains("ECC_UNCORRECTABLE"),
        "{not_used}"
    );
    assert!(
        not_used.contains("h200-hot") && not_used.contains("THROTTLE"),
        "{not_used}"
    );
    assert!(products.as_object().unwrap().len() >= 2, "{said}");
    // Behind the fleet: the slow card, by node and rate; the throttled card's slow VRAM
    // shows too (its own run says why); no healthy card and no MI300X.
    let behind: Vec<(&str, &str)> = r["behind"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["node"].as_str().unwrap(), b["rate"].as_str().unwrap()))
        .collect();
    assert!(
        behind.contains(&("h200-slow", "vram_gib_per_s")),
        "{behind:?}"
    );
    assert!(
        behind
            .iter()
            .all(|(n, _)| ["h200-slow", "h200-hot"].contains(n)),
        "{behind:?}"
    );
    assert!(said.contains("behind the fleet: h200-slow GPU0"), "{said}");
    // The card behind names its run directory, where its own evidence says why.
    let behind = said
        .lines()
        .find(|l| l.starts_with("behind the fleet: h200-slow"))
        .unwrap_or_default();
    assert!(
        behind.contains("VRAM streaming rate")
            && behind.contains("; its run: ")
            && behind.contains("h200-slow"),
        "{behind}"
    );
    assert!(said.contains("30% below the fleet's median"), "{said}");

    // The floors are a thresholds file: the slow card's own run, judged against them, is
    // a sure finding resting on the fleet; a healthy card's is a pass (the near miss).
    let with_floors = [std::ffi::OsStr::new("--thresholds"), floors.as_os_str()];
    let judged = common::verdict(&slow, &with_floors);
    let report = expect_json(&judged, 1);
    let finding = report["devices"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "VRAM_BANDWIDTH_LOW")
        .unwrap_or_else(|| panic!("{report}"))
        .clone();
    assert_eq!(finding["confidence"], "high", "{finding}");
    assert_eq!(
        finding["evidence"]["rates"][0]["floor_provenance"],
        "baseline"
    );
    assert!(
        finding["evidence"]["rates"][0]["floor_source"]
            .as_str()
            .unwrap()
            .starts_with("site baseline"),
        "{finding}"
    );
    let healthy = common::verdict(&fleet.join("h200-3/run"), &with_floors);
    expect_json(&healthy, 0);
}

#[test]
fn too_few_cards_give_no_floor_and_a_folder_without_runs_is_one_sentence() {
    let work = tempfile::tempdir().unwrap();
    let fleet = work.path().join("fleet");
    for i in 0..3 {
        node_run(&fleet, &format!("n{i}"), "h200_healthy", 1.0, None);
    }
    // A run directory whose manifest is corrupt is named with why, never a silent gap.
    let broken = fleet.join("broken").join("run");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("manifest.json"), "{").unwrap();
    // Too few cards for any floor: nothing written and said so, and the fleet could not be
    // judged (exit 4, issue 58), never "floors written" over an empty file.
    let floors = work.path().join("floors.json");
    let out = baseline(&[
        fleet.to_str().unwrap(),
        "--judge",
        "--out",
        floors.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("VRAM streaming rate: 3 of the 4 healthy cards a floor needs"),
        "{said}"
    );
    assert!(said.contains("behind the fleet: none"), "{said}");
    assert!(
        said.contains("no floor written: too few healthy cards"),
        "{said}"
    );
    assert!(!said.contains("floors written to"), "{said}");
    assert!(!floors.exists(), "no floors file over no floor");
    assert!(
        said.contains("not read: ") && said.contains("broken"),
        "{said}"
    );
    // Nothing readable at all: could not judge (exit 4).
    let only_broken = baseline(&[fleet.join("broken").to_str().unwrap()]);
    assert_eq!(only_broken.status.code(), Some(4), "{only_broken:?}");
    let empty = work.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    common::usage_error_of_binary(
        &["baseline", empty.to_str().unwrap()],
        "holds no run directory",
    );
}

/// One card's run given again and again (the same path twice, a link to it, the folder
/// above it, copies of it): one card, never a fleet, and so no floor.
#[test]
fn one_card_read_many_times_is_one_card_and_no_fleet() {
    let work = tempfile::tempdir().unwrap();
    let fleet = work.path().join("fleet");
    let run = node_run(&fleet, "n0", "h200_healthy", 1.0, None);
    let link = work.path().join("link");
    std::os::unix::fs::symlink(&run, &link).unwrap();
    let (run_s, link_s, fleet_s) = (
        run.to_str().unwrap(),
        link.to_str().unwrap(),
        fleet.to_str().unwrap(),
    );
    let out = baseline(&[run_s, run_s, link_s, fleet_s, "--json"]);
    let r = expect_json(&out, 4);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        (r["runs"].as_u64(), r["devices"].as_array().map(Vec::len)),
        (Some(1), Some(1)),
        "{said}"
    );
    assert!(said.starts_with("1 run read: 1 GPU"), "{said}");
    // Three copies of the run: four runs, one card.
    for i in 1..4 {
        let copy = fleet.join(format!("copy{i}")).join("run");
        std::fs::create_dir_all(&copy).unwrap();
        for file in std::fs::read_dir(&run).unwrap() {
            let file = file.unwrap().path();
            std::fs::copy(&file, copy.join(file.file_name().unwrap())).unwrap();
        }
    }
    let out = baseline(&[fleet_s, "--json"]);
    let r = expect_json(&out, 4);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(r["runs"], 4, "{said}");
    assert_eq!(r["devices"].as_array().map(Vec::len), Some(1), "{said}");
    assert_eq!(r["repeated"].as_array().map(Vec::len), Some(3), "{said}");
    assert!(said.contains("counted once: "), "{said}");
    assert_eq!(r["built"]["products"], serde_json::json!({}), "{said}");
    assert!(
        said.contains("VRAM streaming rate: 1 of the 4 healthy cards a floor needs"),
        "{said}"
    );
}

/// `--out` at a run's own files, inside a run directory or through a link into one: one
/// sentence, exit 64, and nothing written.
#[test]
fn floors_are_never_written_into_a_run_directory() {
    let work = tempfile::tempdir().unwrap();
    let fleet = work.path().join("fleet");
    let run = node_run(&fleet, "n0", "h200_healthy", 1.0, None);
    std::fs::create_dir(run.join("notes")).unwrap();
    std::os::unix::fs::symlink(&run, work.path().join("into-run")).unwrap();
    let before: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect();
    for out in [
        run.join("manifest.json"),
        run.join("events.jsonl"),
        run.join("floors.json"),
        run.join("notes").join("floors.json"),
        run.join("new").join("floors.json"),
        run.clone(),
        work.path().join("into-run").join("floors.json"),
    ] {
        let out_s = out.to_str().unwrap();
        common::usage_error_of_binary(
            &["baseline", fleet.to_str().unwrap(), "--out", out_s],
            &format!("--out {out_s} lies inside the run directory "),
        );
    }
    for (path, bytes) in &before {
        assert_eq!(&std::fs::read(path).unwrap(), bytes, "{}", path.display());
    }
    let files = std::fs::read_dir(&run).unwrap().count();
    assert_eq!(
        files,
        before.len() + 1,
        "nothing new in the run (its notes/ aside)"
    );
    assert!(!run.join("new").exists() && !run.join("notes/floors.json").exists());
}

/// A floors file whose floor rests on no cards: refused by the command that reads it, in
/// one line naming the file, the line and the key, with nothing written.
#[test]
fn an_impossible_floors_file_is_refused_at_its_line() {
    let work = tempfile::tempdir().unwrap();
    let fleet = work.path().join("fleet");
    node_run(&fleet, "n0", "h200_healthy", 1.0, None);
    let floors = work.path().join("floors.json");
    std::fs::write(
        &floors,
        r#"{
  "baseline": {
    "NVIDIA H200": {
      "source": "site baseline, 6 NVIDIA H200 cards, 2026-12-01",
      "cards": 6,
      "drivers": ["550.54.15"],
      "rates": {
        "vram_gib_per_s": {"floor": 3564.0, "median": 3960.0, "sigma": 30.0,
          "cards": 0}
      }
    }
  }
}"#,
    )
    .unwrap();
    let out = work.path().join("new-floors.json");
    common::usage_error_of_binary(
        &[
            "baseline",
            fleet.to_str().unwrap(),
            "--against",
            floors.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &format!(
            "{}:9: `baseline.\"NVIDIA H200\".rates.vram_gib_per_s.cards`: 0 cards is fewer than the 4 healthy cards a floor rests on",
            floors.display()
        ),
    );
    assert!(!out.exists(), "nothing written");
}

/// A host name from a run directory is data: one that holds a newline and a terminal's
/// escape is said escaped, and can never make a line of its own that names another node
/// behind the fleet (the fleet job drains the nodes such lines name).
#[test]
fn a_forged_host_name_is_said_escaped_and_never_a_line_of_its_own() {
    let work = tempfile::tempdir().unwrap();
    let fleet = work.path().join("fleet");
    for i in 0..4 {
        node_run(&fleet, &format!("h200-{i}"), "h200_healthy", 1.0, None);
    }
    let slow = node_run(&fleet, "h200-slow", "h200_healthy", 0.70, None);
    let forged = "slow-node\nbehind the fleet: victim-node GPU0 GPU-x: VRAM\u{1b}[2J";
    let mut manifest = read_json(&slow.join("manifest.json"));
    manifest["host"] = forged.into();
    std::fs::write(slow.join("manifest.json"), manifest.to_string()).unwrap();
    let out = baseline(&[fleet.to_str().unwrap(), "--judge", "--json"]);
    let r = expect_json(&out, 2);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!said.contains('\u{1b}'), "{said}");
    assert!(
        !said
            .lines()
            .any(|l| l.starts_with("behind the fleet: victim-node")),
        "{said}"
    );
    assert!(
        said.contains("behind the fleet: slow-node\\nbehind the fleet: victim-node"),
        "{said}"
    );
    let nodes: Vec<&str> = r["behind"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["node"].as_str().unwrap())
        .collect();
    assert!(
        !nodes.is_empty() && nodes.iter().all(|n| !n.contains(['\n', '\u{1b}'])),
        "{nodes:?}"
    );
}
