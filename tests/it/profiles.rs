//! Profiles: every bundled one validates, every malformed one gets its one-line error
//! naming the file, line and key, and random damage to a profile never panics the loader.

use crate::common;

use kiln::profile::{BUNDLED, parse};
use kiln::workload::registry::WorkloadConfig;
use rand::{RngExt, SeedableRng};

const HEAD: &str = "description = \"test\"\n";
const VRAM: &str = "[[workload]]\nkind = \"vram\"\n";

/// `(profile text, line, key, words the message holds)`.
fn malformed() -> Vec<(String, Option<usize>, Option<&'static str>, &'static str)> {
    let with_vram = |extra: &str| format!("{HEAD}{VRAM}{extra}\n");
    let top = |line: &str| format!("{HEAD}{line}\n{VRAM}");
    let compute = |extra: &str| format!("{HEAD}[[workload]]\nkind = \"compute\"\n{extra}\n");
    let pcie = |extra: &str| format!("{HEAD}[[workload]]\nkind = \"pcie\"\n{extra}\n");
    let matrix = |extra: &str| format!("{HEAD}[[workload]]\nkind = \"matrix\"\n{extra}\n");
    let heat = |extra: &str| format!("{HEAD}[[workload]]\nkind = \"heat\"\n{extra}\n");
    let resident =
        |extra: &str| format!("{HEAD}{VRAM}[[workload]]\nkind = \"resident\"\n{extra}\n");
    let psu = |extra: &str| format!("{HEAD}[[workload]]\nkind = \"psu\"\n{extra}\n");
    vec![
        // Syntax and shape.
        (
            "description = \"x\"\nduration = \n".into(),
            Some(2),
            Some("duration"),
            "string",
        ),
        ("description = [\n".into(), Some(1), None, ""),
        (
            top("colour = \"blue\""),
            Some(2),
            Some("colour"),
            "unknown field",
        ),
        (
            HEAD.into(),
            None,
            Some("workload"),
            "at least one [[workload]]",
        ),
        (VRAM.to_string(), None, None, "description"),
        (
            "description = \"   \"\n[[workload]]\nkind = \"vram\"\n".into(),
            Some(1),
            Some("description"),
            "empty",
        ),
        (top("duration = 60"), Some(2), Some("duration"), "string"),
        (
            top("stop_on_first_failure = \"yes\""),
            Some(2),
            Some("stop_on_first_failure"),
            "bool",
        ),
        (top("wait_idle = 1"), Some(2), Some("wait_idle"), "bool"),
        (
            format!("{HEAD}workload = \"vram\"\n"),
            Some(2),
            Some("workload"),
            "",
        ),
        // Durations.
        (
            top("duration = \"soon\""),
            Some(2),
            Some("duration"),
            "not a duration",
        ),
        (
            top("duration = \"0s\""),
            Some(2),
            Some("duration"),
            "outside",
        ),
        (
            top("duration = \"9000h\""),
            Some(2),
            Some("duration"),
            "outside",
        ),
        (
            top("duration = \"3 fortnights\""),
            Some(2),
            Some("duration"),
            "unit",
        ),
        (
            top("telemetry_interval = \"1ms\""),
            Some(2),
            Some("telemetry_interval"),
            "outside",
        ),
        (
            top("fence_timeout = \"1h\""),
            Some(2),
            Some("fence_timeout"),
            "outside",
        ),
        (
            top("step_timeout = \"0.5s\""),
            Some(2),
            Some("step_timeout"),
            "outside",
        ),
        // Thresholds and confirmation.
        (
            format!("{HEAD}[thresholds]\nthrottle_share = 3\n{VRAM}"),
            Some(3),
            Some("thresholds.throttle_share"),
            "between 0 and 1",
        ),
        (
            format!("{HEAD}[thresholds]\ntrottle_share = 0.1\n{VRAM}"),
            Some(3),
            Some("trottle_share"),
            "`trottle_share` is not a threshold; did you mean `throttle_share`?",
        ),
        (
            format!("{HEAD}[thresholds]\nfloor_share = 1e-300\n{VRAM}"),
            Some(3),
            Some("thresholds.floor_share"),
            "1e-300 is not a share between 0 and 1",
        ),
        (
            format!("{HEAD}[thresholds.floors]\nvram_gib_per_s = 0\n{VRAM}"),
            Some(3),
            Some("thresholds.floors.vram_gib_per_s"),
            "0 is not a number above 0",
        ),
        (
            format!("{HEAD}[thresholds]\nthrottle_share = \"high\"\n{VRAM}"),
            Some(3),
            Some("throttle_share"),
            "string",
        ),
        (
            format!("{HEAD}[confirm]\nrepeat = 0\n{VRAM}"),
            Some(3),
            Some("confirm.repeat"),
            "outside 1..=20",
        ),
        (
            format!("{HEAD}[confirm]\nretest_cap = 5\n{VRAM}"),
            None,
            None,
            "repeat",
        ),
        (
            format!("{HEAD}[confirm]\nrepeat = 2\nretest_cap = -1\n{VRAM}"),
            Some(4),
            Some("confirm.retest_cap"),
            "outside",
        ),
        // Workloads.
        (
            format!("{HEAD}[[workload]]\nkind = \"gpu-burn\"\n"),
            Some(3),
            Some("kind"),
            "unknown workload",
        ),
        (
            format!("{HEAD}[[workload]]\nweight = 2\n"),
            None,
            None,
            "kind",
        ),
        (
            with_vram("weight = 0"),
            Some(4),
            Some("weight"),
            "outside 1..=100",
        ),
        (with_vram("weight = 1.5"), Some(4), Some("weight"), "float"),
        (with_vram("passes = -3"), Some(4), Some("passes"), "outside"),
        (
            with_vram("algorithms = []"),
            Some(4),
            Some("algorithms"),
            "at least one",
        ),
        (
            with_vram("algorithms = [\"march-x\"]"),
            Some(4),
            Some("algorithms"),
            "unknown VRAM algorithm",
        ),
        (
            with_vram("algorithms = \"random\""),
            Some(4),
            Some("algorithms"),
            "sequence",
        ),
        (
            with_vram("percent = 0"),
            Some(4),
            Some("percent"),
            "between 0 and 100",
        ),
        (
            with_vram("percent = 150.0"),
            Some(4),
            Some("percent"),
            "between 0 and 100",
        ),
        (
            with_vram("retention_delay = \"2y\""),
            Some(4),
            Some("retention_delay"),
            "unit",
        ),
        (
            with_vram("retention_delay = \"2d\""),
            Some(4),
            Some("retention_delay"),
            "outside 1ms..24h",
        ),
        (
            with_vram("shape = \"pulsed\""),
            Some(4),
            Some("shape"),
            "does not apply to a vram workload",
        ),
        (
            with_vram("max_bytes = \"1GiB\""),
            Some(4),
            Some("max_bytes"),
            "does not apply",
        ),
        (
            with_vram("colour = 1"),
            Some(4),
            Some("colour"),
            "`colour` is not a workload setting (they are listed in docs/guide.md)",
        ),
        (
            with_vram("percent = 1e-300"),
            Some(4),
            Some("percent"),
            "1e-300 is not a percentage between 0 and 100 (0.1 at least)",
        ),
        (
            compute("shape = \"wobbly\""),
            Some(4),
            Some("shape"),
            "unknown load shape",
        ),
        (
            compute("on_ms = 50"),
            Some(4),
            Some("on_ms"),
            "only to shape = \"pulsed\"",
        ),
        (
            compute("shape = \"pulsed\"\noff_ms = 0"),
            Some(5),
            Some("off_ms"),
            "outside",
        ),
        (compute("rounds = 0"), Some(4), Some("rounds"), "outside"),
        (
            compute("passes = 2"),
            Some(4),
            Some("passes"),
            "does not apply to a compute workload",
        ),
        (
            matrix("size = 100"),
            Some(4),
            Some("size"),
            "outside 128..=16384",
        ),
        (
            matrix("size = 1000"),
            Some(4),
            Some("size"),
            "a power of two",
        ),
        (
            matrix("kinds = [\"fp64\"]"),
            Some(4),
            Some("kinds"),
            "unknown matrix kind `fp64` (known: fp32, fp16, int8)",
        ),
        (
            matrix("path = \"tensor\""),
            Some(4),
            Some("path"),
            "unknown matrix path `tensor` (known: auto, matrix_units, shared_memory)",
        ),
        (
            matrix("power_target = 120"),
            Some(4),
            Some("power_target"),
            "outside 1..=100",
        ),
        (
            compute("shape = \"sweep\"\npower_target = 80"),
            Some(5),
            Some("power_target"),
            "only to shape = \"steady\"",
        ),
        (
            heat("load = \"matrix\"\non_ms = 100"),
            Some(5),
            Some("on_ms"),
            "is not a setting of the matrix load",
        ),
        (
            heat("load = \"matrix\"\nshape = \"pulsed\""),
            Some(5),
            Some("shape"),
            "the matrix load is steady or swept, not `pulsed` (known: steady, sweep)",
        ),
        (
            matrix("shape = \"sweep\"\npower_target = 80"),
            Some(5),
            Some("power_target"),
            "only to shape = \"steady\"",
        ),
        (
            heat("load = \"tensor\""),
            Some(4),
            Some("load"),
            "unknown load `tensor` (known: compute, matrix)",
        ),
        // The burn-in's keys: the resident region, the load's pauses, the combined load.
        (
            resident("share = 0.5"),
            Some(6),
            Some("share"),
            "0.5 is not a percentage from 1 to 50 of the memory tested",
        ),
        (
            resident("share = 1e-300"),
            Some(6),
            Some("share"),
            "1e-300 is not a percentage from 1 to 50",
        ),
        (
            resident("share = 60"),
            Some(6),
            Some("share"),
            "60 is not a percentage from 1 to 50",
        ),
        (
            resident("share = \"10%\""),
            Some(6),
            Some("share"),
            "invalid type: string \"10%\"",
        ),
        (
            resident("interval = \"10ms\""),
            Some(6),
            Some("interval"),
            "outside 100ms..24h",
        ),
        (
            resident("interval = \"often\""),
            Some(6),
            Some("interval"),
            "`often` is not a duration",
        ),
        (
            compute("hold = \"60s\""),
            Some(4),
            Some("hold"),
            "only to shape = \"pauses\"",
        ),
        (
            compute("shape = \"pulsed\"\npause = \"15s\""),
            Some(5),
            Some("pause"),
            "only to shape = \"pauses\"",
        ),
        (
            compute("shape = \"pauses\"\npause = \"2h\""),
            Some(5),
            Some("pause"),
            "outside 100ms..1h",
        ),
        (
            psu("threads = 0"),
            Some(4),
            Some("threads"),
            "outside 1..=4096",
        ),
        (
            psu("threads = 2\nshape = \"sweep\"\npower_target = 90"),
            Some(6),
            Some("power_target"),
            "only to shape = \"steady\"",
        ),
        (
            pcie("max_bytes = \"12 parsecs\""),
            Some(4),
            Some("max_bytes"),
            "unknown size unit",
        ),
        (
            pcie("max_bytes = \"1KiB\""),
            Some(4),
            Some("max_bytes"),
            "outside 4KiB..16GiB",
        ),
        (
            pcie("max_bytes = 1048576"),
            Some(4),
            Some("max_bytes"),
            "string",
        ),
    ]
    .into_iter()
    .map(|(text, line, key, words): (String, _, _, _)| (text, line, key, words))
    .collect()
}

#[test]
fn every_bundled_profile_validates_and_says_what_it_runs() {
    for (name, text) in BUNDLED {
        let p = parse(name, text).unwrap_or_else(|e| panic!("bundled profile: {e}"));
        assert!(!p.description.is_empty());
        assert!(p.duration.is_some(), "{name} has a time budget");
        let names: Vec<_> = p.workloads.iter().map(|w| w.config.name()).collect();
        assert!(
            names.contains(&kiln::workload::registry::WorkloadName::Vram),
            "{name} tests memory"
        );
    }
    let quick = kiln::profile::load("quick").unwrap();
    assert!(
        quick.duration.unwrap().as_secs() <= 45,
        "quick leaves room for start-up"
    );
    let burn_in = kiln::profile::load("burn-in").unwrap();
    let shapes: Vec<String> = burn_in
        .workloads
        .iter()
        .filter_map(|w| match &w.config {
            WorkloadConfig::Compute(c) => Some(format!("{:?}", c.shape)),
            _ => None,
        })
        .collect();
    assert!(
        ["Steady", "Pulsed", "Sweep"]
            .iter()
            .all(|s| shapes.iter().any(|x| x.starts_with(s))),
        "burn-in loads steady, pulsed and swept: {shapes:?}"
    );
    assert!(kiln::profile::load("rma").unwrap().confirm.is_some());
    assert!(kiln::profile::load("fleet").unwrap().stop_on_first_failure);
}

#[test]
fn malformed_profiles_get_one_sentence_naming_line_and_key() {
    let cases = malformed();
    assert!(cases.len() >= 30, "{} cases", cases.len());
    let mut wrong = Vec::new();
    for (i, (text, line, key, words)) in cases.iter().enumerate() {
        match parse("bad.toml", text) {
            Ok(_) => wrong.push(format!("case {i}: accepted\n{text}")),
            Err(e) => {
                let sentence = e.to_string();
                let ok = sentence.starts_with("bad.toml")
                    && !sentence.contains('\n')
                    && sentence.chars().count() < 400
                    && (line.is_none() || e.line == *line)
                    && (key.is_none() || e.key.as_deref() == *key)
                    && sentence.contains(words);
                if !ok {
                    wrong.push(format!(
                        "case {i}: got `{sentence}` (line {:?}, key {:?}); wanted line {line:?}, key {key:?}, words `{words}`\n{text}",
                        e.line, e.key
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// Damages the bundled profiles at random (bytes dropped, repeated, replaced, lines
/// swapped) and loads each result: it may be accepted or refused, never panic, and a
/// refusal is one line naming the file.
#[test]
fn random_damage_never_panics_the_loader() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x6b696c6e);
    // Multi-byte characters too: a damaged file may split one.
    let alphabet = "=[]\"'#.,-_ \n0123456789abcdefghijklmnopqrstuvwxyz{}é°€\u{1F525}".as_bytes();
    let mut refused = 0;
    for round in 0..3000 {
        let (_, text) = BUNDLED[round % BUNDLED.len()];
        let mut bytes = text.as_bytes().to_vec();
        for _ in 0..rng.random_range(1..6) {
            let at = rng.random_range(0..bytes.len());
            match rng.random_range(0..4) {
                0 => {
                    bytes.remove(at);
                }
                1 => bytes.insert(at, alphabet[rng.random_range(0..alphabet.len())]),
                2 => bytes[at] = alphabet[rng.random_range(0..alphabet.len())],
                _ => {
                    let end = (at + rng.random_range(1..40)).min(bytes.len());
                    let piece = bytes[at..end].to_vec();
                    bytes.splice(at..at, piece);
                }
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        let outcome = std::panic::catch_unwind(|| parse("fuzz.toml", &text));
        match outcome {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                refused += 1;
                let sentence = e.to_string();
                assert!(
                    sentence.starts_with("fuzz.toml") && !sentence.contains('\n'),
                    "{sentence}"
                );
            }
            Err(_) => panic!("the loader panicked on:\n{text}"),
        }
    }
    assert!(refused > 500, "the damage was too mild to test anything");
}

#[test]
fn the_command_line_refuses_a_bad_profile_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.toml");
    std::fs::write(&path, format!("{HEAD}{VRAM}passes = 0\n")).unwrap();
    let out = common::kiln()
        .args(["run", "--dry-run", "--profile"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("mine.toml:4: `passes`: 0 is outside"),
        "{stderr}"
    );
    for name in ["sprint", "./missing.toml"] {
        let out = common::kiln()
            .args(["run", "--dry-run", "--profile", name])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(64), "{name}");
    }
}

#[test]
fn a_dry_run_prints_the_plan_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::kiln()
        .args([
            "run",
            "--profile",
            "burn-in",
            "--dry-run",
            "--json",
            "--out",
        ])
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let plan = common::expect_json(&out, 0);
    assert_eq!(plan["profile"], "burn-in");
    assert_eq!(plan["duration_s"], 4.0 * 3600.0);
    let device = &plan["devices"][0];
    assert!(device["vram_bytes"].as_u64().unwrap() > 0);
    let workloads = device["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 13);
    // The resident region runs all along, beside the others: the whole budget is its.
    let resident = workloads
        .iter()
        .find(|w| w["workload"] == "resident")
        .unwrap();
    assert_eq!(resident["budget_s"], 4.0 * 3600.0, "{resident}");
    // The matrix phase holds the card at its full power limit.
    let matrix = workloads
        .iter()
        .find(|w| w["workload"] == "matrix")
        .unwrap();
    assert!(
        matrix["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("power held at 100% of the limit"),
        "{matrix}"
    );
    // And once more swept over load levels, the clock each reached recorded.
    assert!(
        workloads.iter().any(|w| w["workload"] == "matrix"
            && w["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("swept over load levels 10%..100%")),
        "{workloads:?}"
    );
    assert!(
        !dir.path().join("run").exists(),
        "a dry run writes no run directory"
    );
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("GiB of VRAM to test"), "{text}");
}

/// What a profile's time budget promises, planned: the shares add up to the budget, and a
/// budget shorter than what the profile cannot do without is refused with the least it
/// needs, never run past.
#[test]
fn every_bundled_profile_fits_its_own_budget_and_refuses_one_too_short() {
    for (name, _) in BUNDLED {
        let out = common::kiln()
            .args(["run", "--profile", name, "--dry-run", "--json"])
            .output()
            .unwrap();
        let plan = common::expect_json(&out, 0);
        let budget = plan["duration_s"].as_f64().unwrap();
        let shares: f64 = plan["devices"][0]["workloads"]
            .as_array()
            .unwrap()
            .iter()
            // The resident region runs beside the others, through the whole budget.
            .filter(|w| w["workload"] != "resident")
            .map(|w| w["budget_s"].as_f64().unwrap())
            .sum();
        assert!(
            (shares - budget).abs() < 0.01 * budget,
            "{name}: shares of {shares} s in a budget of {budget} s"
        );
    }
    // Burn-in's retention test idles twice 60 s: 45 s cannot hold it.
    let out = common::kiln()
        .args([
            "run",
            "--profile",
            "burn-in",
            "--duration",
            "45s",
            "--dry-run",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("a time budget of 45s is too short for profile burn-in")
            && said.contains("it needs at least 8m per device"),
        "{said}"
    );
    // Its near miss: the least it asks for is taken.
    let out = common::kiln()
        .args([
            "run",
            "--profile",
            "burn-in",
            "--duration",
            "8m",
            "--dry-run",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Timed: each holds a load for a time or measures one, so they run after the rest, one
/// at a time (`scripts/test.sh`).
mod timed {
    use super::*;

    /// Every bundled profile run for real at a short budget ends within it plus start-up,
    /// `rma` with a stuck bit planted, so that its three confirmation runs must fit too.
    #[test]
    fn every_bundled_profile_ends_within_a_short_budget() {
        // Burn-in's retention idles and rma's confirmation runs need their room; the
        // others are held to less.
        let budget_s = |name: &str| -> u64 {
            if matches!(name, "burn-in" | "rma") {
                24
            } else {
                8
            }
        };
        // Starting the device, the telemetry's idle second and writing the reports.
        const START_UP_S: f64 = 12.0;
        let dir = tempfile::tempdir().unwrap();
        for (name, _) in BUNDLED {
            let run_dir = dir.path().join(name);
            let mut args = vec![
                "run".to_owned(),
                "--profile".into(),
                name.into(),
                "--device".into(),
                "cpu".into(),
                "--duration".into(),
                format!("{}s", budget_s(name)),
                "--vram-bytes".into(),
                "64MiB".into(),
                "--out".into(),
                run_dir.display().to_string(),
            ];
            if name == "burn-in" {
                args.extend(["--retention-delay".into(), "1s".into()]);
            }
            if name == "rma" {
                args.extend(["--test-stuck-word".into(), "1000".into()]);
            }
            let started = std::time::Instant::now();
            let out = common::kiln().args(&args).output().unwrap();
            let took = started.elapsed().as_secs_f64();
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(
                took <= budget_s(name) as f64 + START_UP_S,
                "{name}: {took:.1} s for a {} s budget\n{said}",
                budget_s(name)
            );
            let report = common::read_json(&run_dir.join("report.json"));
            if name == "rma" {
                assert_eq!(out.status.code(), Some(1), "{name}: {said}");
                let runs = report["devices"][0]["workloads"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|w| w["workload"] == "vram")
                    .count();
                assert_eq!(runs, 4, "{name}: the finding and its three reruns");
                // Each workload after the reruns still had its part of the budget.
                for w in report["devices"][0]["workloads"].as_array().unwrap() {
                    if w["workload"] != "vram" {
                        assert_ne!(w["status"], "not_run", "{name}: {w}");
                    }
                }
            } else {
                assert!(
                    matches!(out.status.code(), Some(0) | Some(4)),
                    "{name}: {said}"
                );
            }
        }
    }
}
