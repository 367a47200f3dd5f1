use super::*;

fn replay(name: &str) -> Option<PathBuf> {
    Some(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/fixtures/telemetry/{name}.jsonl")),
    )
}

#[test]
fn a_fresh_node_is_not_yet_tested_not_a_fault_and_is_told_to_start_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let opts = HealthOptions {
        runs: Some(runs.clone()),
        max_age: Some(Duration::from_secs(720 * 3600)),
        replay: replay("healthy_idle"),
        ..Default::default()
    };
    let h = check(&opts).unwrap();
    assert_eq!(h.exit_code, exit_code::NOT_TESTED, "{}", h.line);
    assert!(
        h.line.starts_with("not yet tested: no full run in"),
        "{}",
        h.line
    );
    let next = h.next.as_deref().unwrap_or_default();
    assert!(next.contains("kiln run --profile burn-in"), "{next}");
    assert!(
        summary(&h).contains("\nnot a fault: not yet tested"),
        "{}",
        summary(&h)
    );
    // The near miss: a run is there but its report cannot be read: that could not be
    // checked (4), not a node never tested.
    std::fs::create_dir_all(runs.join("damaged")).unwrap();
    std::fs::write(runs.join("damaged/report.json"), "{ half").unwrap();
    let h = check(&opts).unwrap();
    assert_eq!(h.exit_code, exit_code::INCONCLUSIVE, "{}", h.line);
    assert!(h.line.contains("no readable full run"), "{}", h.line);
}

#[test]
fn a_fault_says_the_next_step_kiln_run_gives_in_text_and_json() {
    let h = check(&HealthOptions {
        replay: replay("xid79"),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(h.exit_code, exit_code::HARDWARE, "{}", h.line);
    let first = &h.faults[0];
    assert!(!first.next.is_empty(), "{first:?}");
    assert_eq!(h.next.as_deref(), Some(first.next.as_str()));
    assert!(
        summary(&h).contains(&format!("\nnext: {}\n", first.next)),
        "{}",
        summary(&h)
    );
    let json = serde_json::to_value(&h).unwrap();
    assert_eq!(json["next"], first.next.as_str());
    assert_eq!(json["faults"][0]["next"], first.next.as_str());
    // Without a state file nothing was compared with a last check, and none is named.
    let said = summary(&h);
    assert!(!said.contains("since the last check"), "{said}");
    assert!(said.contains("Xids since boot"), "{said}");
    // The near miss: a healthy node has no next step.
    let ok = check(&HealthOptions {
        replay: replay("healthy_idle"),
        ..Default::default()
    })
    .unwrap();
    assert_eq!((ok.exit_code, ok.next), (0, None));
}

#[test]
fn clear_is_confirmed_and_open_faults_read_as_sentences() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let opts = HealthOptions {
        state: Some(state.clone()),
        replay: replay("xid79"),
        ..Default::default()
    };
    let h = check(&opts).unwrap();
    assert!(
        h.notes.iter().any(
            |n| n.starts_with("1 open fault stays open until a person clears it (`kiln health")
        ),
        "{:?}",
        h.notes
    );
    // A code with nothing open under it: said so, nothing cleared.
    let none = check(&HealthOptions {
        clear: Some("KILN-MEM-002".into()),
        ..opts.clone()
    })
    .unwrap();
    assert_eq!(
        none.cleared.as_deref(),
        Some("--clear KILN-MEM-002: no open KILN-MEM-002 fault to clear")
    );
    let cleared = check(&HealthOptions {
        clear: Some("all".into()),
        replay: replay("healthy_idle"),
        ..opts.clone()
    })
    .unwrap();
    assert_eq!(
        cleared.cleared.as_deref(),
        Some("cleared 1 open fault (KILN-XID-079 on GPU0), recorded in the state file"),
    );
    assert!(summary(&cleared).contains("\ncleared 1 open fault"));
    assert_eq!(cleared.exit_code, 0, "{}", cleared.line);
}
