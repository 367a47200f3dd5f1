//! Every Vulkan path of kiln under the Khronos validation layer with synchronization
//! validation: lavapipe runs everything in order, so a missing barrier never shows as
//! wrong data here and shows on a real GPU as false errors or missed ones. Any message
//! fails the test; kiln takes the layer's messages itself (stderr and the run's notes),
//! so none lands in a worker's protocol pipe.

use crate::common;

use std::path::Path;

fn validation_layer_installed() {
    assert!(
        Path::new("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json").is_file(),
        "the Khronos validation layer is needed: run scripts/setup.sh --test"
    );
}

/// Runs kiln under validation; returns its exit code and stderr.
fn validated(args: &[&str], cwd: &Path) -> (Option<i32>, String) {
    let out = common::kiln()
        .args(args)
        .current_dir(cwd)
        .env("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation")
        .env(
            "VK_LAYER_ENABLES",
            "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT",
        )
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn messages(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("Vulkan validation"))
        .take(5)
        .collect()
}

#[test]
fn every_workload_is_validation_clean_including_synchronization() {
    validation_layer_installed();
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let (code, stderr) = validated(
        &[
            "run",
            "--device",
            "cpu",
            "--workloads",
            "vram,compute,pcie,heat,fragment",
            "--vram-bytes",
            "16MiB",
            "--passes",
            "1",
            "--algorithms",
            "all",
            "--retention-delay",
            "10ms",
            "--pcie-max-bytes",
            "1MiB",
            "--out",
            run_dir.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(messages(&stderr).is_empty(), "{:#?}", messages(&stderr));
    assert_eq!(code, Some(0), "{stderr}");
    let events = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    assert!(!events.contains("Vulkan validation"));
    assert!(
        !events.contains("worker output"),
        "nothing but messages on a worker's pipe"
    );
}

#[test]
fn selftest_and_benchmarks_are_validation_clean() {
    validation_layer_installed();
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &[
            "selftest",
            "--device",
            "cpu",
            "--runs",
            "2",
            "--vram-bytes",
            "4MiB",
            "--faults",
            "8",
        ][..],
        &[
            "bench", "vram", "--device", "cpu", "--bytes", "16MiB", "--repeat", "1",
        ],
        &["bench", "pcie", "--device", "cpu"],
        &["bench", "compute", "--device", "cpu", "--duration", "1s"],
    ] {
        let (code, stderr) = validated(args, dir.path());
        assert!(
            messages(&stderr).is_empty(),
            "{args:?}: {:#?}",
            messages(&stderr)
        );
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
    }
}

#[test]
fn a_validation_message_reaches_stderr_and_the_evidence_not_the_pipe() {
    validation_layer_installed();
    // A layer setting that makes the layer speak on every run: best-practices warnings.
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let out = common::kiln()
        .args([
            "run",
            "--device",
            "cpu",
            "--workloads",
            "compute",
            "--passes",
            "1",
            "--out",
        ])
        .arg(&run_dir)
        .env("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation")
        .env(
            "VK_LAYER_ENABLES",
            "VK_VALIDATION_FEATURE_ENABLE_BEST_PRACTICES_EXT",
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let events = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    assert!(
        !messages(&stderr).is_empty(),
        "best practices has advice for every program: the messages reach stderr whole"
    );
    assert!(
        events.contains("Vulkan validation"),
        "the messages are evidence too"
    );
    assert!(
        !events.contains("worker output"),
        "none came through the worker's pipe"
    );
}
