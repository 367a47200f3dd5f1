//! The Xid catalogue is the one place Xid codes are classified: for every code it holds,
//! the verdict's finding, `kiln health`'s fault and the HTML report's explanation all come
//! from its row, and no other source file keeps a list of Xid codes of its own.

use crate::common;

use std::path::Path;

use kiln::cmd::health::HealthOptions;
use kiln::finding::Severity;
use kiln::verdict::xid::{CATALOGUE, XidInfo};

/// The healthy H200 recording with one kernel-log Xid of `row`'s code in its VRAM phase.
fn telemetry_with(row: &XidInfo) -> String {
    let base = std::fs::read_to_string(common::telemetry_fixture("healthy_load")).unwrap();
    let message = if row.code == 154 {
        "GPU recovery action changed from 0x0 (None) to 0x1 (Reset Required)".to_owned()
    } else {
        format!("test line for Xid {}", row.code)
    };
    let xid = serde_json::json!({
        "t_ms": 5000.5, "device": 0, "source": "kmsg", "kind": "xid",
        "xid": {"bus_id": "0000:05:00", "code": row.code, "pid": null, "process": null,
                "message": message, "kernel_us": 9_000_000, "before_run": false}
    });
    let mut lines: Vec<String> = base.lines().map(str::to_owned).collect();
    // After the header, identity and opening snapshot; before the closing one.
    lines.insert(10, xid.to_string());
    lines.join("\n") + "\n"
}

fn expected_exit(row: &XidInfo) -> i32 {
    match row.class().name() {
        "hardware" => 1,
        "environment" => 2,
        _ => 3,
    }
}

#[test]
fn verdict_health_and_html_answer_from_the_catalogue_for_every_code() {
    let work = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for row in CATALOGUE {
        let telemetry = work.path().join(format!("xid{}.jsonl", row.code));
        std::fs::write(&telemetry, telemetry_with(row)).unwrap();

        // The verdict of a run that saw it.
        let run = work.path().join(format!("run{}", row.code));
        std::fs::create_dir(&run).unwrap();
        common::lay_out_scenario("h200_healthy", &run);
        std::fs::copy(&telemetry, run.join("telemetry.jsonl")).unwrap();
        let out = common::verdict(&run, &[]);
        let report = common::json(&out);
        let findings = report["devices"][0]["findings"].as_array().unwrap();
        let f = findings.iter().find(|f| f["code"] == row.finding.name());
        // A lone GSP timeout the GPU recovered from (the run went on, no reset asked) is a
        // note to watch (issue 56): its class is its row's only where it repeats or sticks.
        let class = if row.gsp_timeout() {
            "info"
        } else {
            row.class().name()
        };
        match f {
            Some(f) if f["class"] == class => {}
            _ => wrong.push(format!(
                "Xid {}: the verdict gave {:?}, the catalogue says {} ({})",
                row.code,
                findings
                    .iter()
                    .map(|f| (&f["code"], &f["class"]))
                    .collect::<Vec<_>>(),
                row.finding,
                row.class().name()
            )),
        }
        if row.code == 154
            && !f.is_some_and(|f| f["action"].as_str().unwrap_or("").contains("reset the GPU"))
        {
            wrong.push("Xid 154: the driver's recovery action is not the finding's action".into());
        }
        // The HTML report explains it in the catalogue's words.
        let html = std::fs::read_to_string(run.join("report.html")).unwrap();
        if !html.contains(row.meaning) {
            wrong.push(format!(
                "Xid {}: report.html lacks `{}`",
                row.code, row.meaning
            ));
        }

        // `kiln health` on the same recording, as the command judges it (in this process:
        // health's own tests start the binary).
        let health = kiln::cmd::health::check(&HealthOptions {
            replay: Some(telemetry.clone()),
            ..HealthOptions::default()
        })
        .unwrap_or_else(|e| panic!("Xid {}: kiln health: {e}", row.code));
        let stdout = kiln::cmd::health::summary(&health);
        let first = stdout.lines().next().unwrap_or_default();
        let fault = format!("[KILN-XID-{:03}]", row.code);
        let ok = if row.severity > Severity::Major || row.gsp_timeout() {
            // Minor: noted for a look, not a drain.
            health.exit_code == 0 && stdout.contains(&fault)
        } else {
            health.exit_code == expected_exit(row) && first.ends_with(&fault)
        };
        if !ok {
            wrong.push(format!(
                "Xid {}: kiln health exit {}, `{first}`",
                row.code, health.exit_code
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_other_source_file_keeps_a_list_of_xid_codes() {
    // Two or more catalogue codes side by side in a list or a match arm is a second table.
    let codes: Vec<String> = CATALOGUE.iter().map(|x| x.code.to_string()).collect();
    let pair = regex::Regex::new(r"\b(\d{1,3})\s*(?:,|\|)\s*(\d{1,3})\b").unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offenders = Vec::new();
    let mut stack = vec![src];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            // The catalogue's own folder is where the codes are kept.
            if path.to_string_lossy().contains("verdict/xid/")
                || path.extension().is_none_or(|e| e != "rs")
            {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                let lower = line.to_ascii_lowercase();
                if !lower.contains("xid") {
                    continue;
                }
                for c in pair.captures_iter(line) {
                    if codes.contains(&c[1].to_string()) && codes.contains(&c[2].to_string()) {
                        offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "Xid codes classified outside src/verdict/xid/:\n{}",
        offenders.join("\n")
    );
}
