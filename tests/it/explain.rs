//! `kiln explain` end to end: the binary reads a log (a dmesg excerpt with an Xid chain
//! and a PyTorch out-of-memory, gzipped too), prints `{"explained": [...]}` with the
//! issue's fields, and exits with the gravest class's code; a missing file is one
//! sentence and the usage exit code.

use std::io::Write;

use crate::common::{expect_json, kiln, stderr, stdout};

const EXCERPT: &str = "\
[   12.000001] usb 1-1: new high-speed USB device number 2 using xhci_hcd
[82659.755847] NVRM: Xid (PCI:0000:41:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Illegal Instruction Encoding
[82660.100000] NVRM: Xid (PCI:0000:41:00): 79, GPU has fallen off the bus.
[82660.100010] NVRM: GPU 0000:41:00.0: GPU has fallen off the bus.
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.50 GiB is free. Of the allocated memory 60.00 GiB is allocated by PyTorch, and 16.00 GiB is reserved by PyTorch but unallocated.
";

/// Every field of one explained failure: its first line, what the text says (the fields
/// the real corpus holds its readings to), and the judgement.
fn fields() -> Vec<&'static str> {
    let mut all = vec!["line"];
    all.extend(crate::real_corpus::READ_FIELDS);
    all.extend(["class", "meaning", "action"]);
    all
}

#[test]
fn explain_reads_a_log_into_the_issue_s_fields_and_exits_with_the_gravest_class() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("dmesg.txt");
    std::fs::write(&plain, EXCERPT).unwrap();
    let gz = dir.path().join("dmesg.txt.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::default(),
    );
    enc.write_all(EXCERPT.as_bytes()).unwrap();
    enc.finish().unwrap();
    for file in [&plain, &gz] {
        // Xid 79 is the card's (hardware): exit 1.
        let json = expect_json(
            &kiln()
                .arg("explain")
                .arg("--json")
                .arg(file)
                .output()
                .unwrap(),
            1,
        );
        let all = json["explained"].as_array().expect("explained");
        assert_eq!(all.len(), 3, "{json:#}");
        for e in all {
            let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
            let fields = fields();
            assert_eq!(keys.len(), fields.len(), "{keys:?}");
            assert!(fields.iter().all(|f| keys.contains(f)), "{keys:?}");
        }
        assert_eq!(
            (all[0]["line"].as_u64(), all[0]["xid"].as_u64()),
            (Some(2), Some(13))
        );
        assert_eq!(
            all[0]["pid"],
            serde_json::Value::Null,
            "pid='<unknown>' is none"
        );
        // The driver's second line of the fall off the bus is the same failure.
        assert_eq!(all[1]["xid"].as_u64(), Some(79));
        assert_eq!(all[1]["pci_address"], "0000:41:00.0");
        assert_eq!(all[1]["failure"], "device_lost");
        assert_eq!(all[1]["class"], "hardware");
        let oom = &all[2];
        assert_eq!(
            (
                &oom["source"],
                &oom["framework"],
                &oom["failure"],
                &oom["class"]
            ),
            (
                &serde_json::json!("application"),
                &serde_json::json!("pytorch"),
                &serde_json::json!("out_of_memory"),
                &serde_json::json!("software")
            )
        );
        assert_eq!(oom["requested_bytes"].as_u64(), Some(2 << 30));
        assert_eq!(oom["reserved_bytes"].as_u64(), Some(16 << 30));
    }
    // The near miss: the same log without its kernel lines is the software's alone (exit
    // 3), and a log of no failure says so and exits 0.
    let app_only = dir.path().join("app.txt");
    std::fs::write(&app_only, EXCERPT.lines().last().unwrap()).unwrap();
    let out = kiln().arg("explain").arg(&app_only).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stdout(&out).contains("out of memory"), "{}", stdout(&out));
    let quiet = dir.path().join("quiet.txt");
    std::fs::write(&quiet, EXCERPT.lines().next().unwrap()).unwrap();
    let out = kiln().arg("explain").arg(&quiet).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn explain_of_a_missing_file_is_one_sentence_and_a_usage_error() {
    let out = kiln()
        .args(["explain", "/nonexistent/kiln-explain.log"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(kiln::exit_code::USAGE));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert_eq!(
        err.trim_end(),
        "kiln: no such file: /nonexistent/kiln-explain.log",
        "the system's error in words, never its number"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(stdout(&out).is_empty());
}

#[test]
fn a_file_name_with_a_terminal_escape_or_a_newline_is_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let name = dir.path().join("k\u{1b}[31mred\nx.log");
    // Missing: the one sentence names it escaped.
    let out = kiln().arg("explain").arg(&name).output().unwrap();
    assert_eq!(out.status.code(), Some(kiln::exit_code::USAGE));
    let err = stderr(&out);
    assert!(!err.contains('\u{1b}'), "{err:?}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err:?}");
    assert!(err.contains("k\\u{1b}[31mred\\nx.log"), "{err:?}");
    // Present, with a failure in it: its lines are named escaped too.
    std::fs::write(
        &name,
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n",
    )
    .unwrap();
    let out = kiln().arg("explain").arg(&name).output().unwrap();
    let text = stdout(&out);
    assert!(text.contains("Xid 79"), "{text}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(text.contains("k\\u{1b}[31mred\\nx.log:1"), "{text:?}");
}

/// `kiln explain --json` of a file, its exit code and what it explained: (line, xid,
/// pci_address, failure, pid) of each.
fn explained(file: &std::path::Path) -> (Option<i32>, Vec<serde_json::Value>) {
    let out = kiln()
        .arg("explain")
        .arg("--json")
        .arg(file)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let all = json["explained"].as_array().expect("explained").iter();
    let said = all
        .map(|e| {
            serde_json::json!([
                e["line"],
                e["xid"],
                e["pci_address"],
                e["failure"],
                e["pid"]
            ])
        })
        .collect();
    (out.status.code(), said)
}

#[test]
fn a_pretty_printed_wevtutil_export_is_read_like_the_one_line_form() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/eventlog");
    let (code, pretty) = explained(&fixtures.join("system_pretty.xml"));
    // The Xid 79 event (its first line is line 18) and the TDR after it, one failure (the
    // driver's recovery of it) as the same events a line each are; the service's event
    // before them (the near miss: an event of another provider) is quiet.
    assert_eq!(
        pretty,
        [serde_json::json!([
            18,
            79,
            "0000:01:00.0",
            "device_lost",
            null
        ])]
    );
    assert_eq!(code, Some(1), "Xid 79 is the card's");
    // The same events as wevtutil writes them, one a line or run together on one, read the
    // same.
    let dir = tempfile::tempdir().unwrap();
    let events: Vec<String> = ["nvlddmkm_13_xid79.xml", "nvlddmkm_153_no_xid.xml"]
        .iter()
        .map(|f| {
            std::fs::read_to_string(fixtures.join(f))
                .unwrap()
                .trim()
                .to_owned()
        })
        .collect();
    for (name, joined) in [
        ("lines.xml", events.join("\n")),
        ("run.xml", events.concat()),
    ] {
        let flat = dir.path().join(name);
        std::fs::write(&flat, joined).unwrap();
        let (_, said) = explained(&flat);
        assert_eq!(
            said[0].as_array().unwrap()[1..],
            pretty[0].as_array().unwrap()[1..],
            "{name}"
        );
        assert_eq!(said.len(), 1, "{name}: {said:?}");
    }
    // The TDR alone, pretty-printed, is the driver's reset of a hung GPU.
    let tdr = std::fs::read_to_string(fixtures.join("system_pretty.xml")).unwrap();
    let tdr: String = tdr.lines().skip(40).collect::<Vec<_>>().join("\n");
    let alone = dir.path().join("tdr.xml");
    std::fs::write(&alone, tdr).unwrap();
    let (code, said) = explained(&alone);
    assert_eq!(said, [serde_json::json!([1, null, null, "gpu_hang", null])]);
    assert_eq!(code, Some(4), "a TDR alone does not say whose");
}
