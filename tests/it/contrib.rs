//! The fleet hooks in `contrib/`, each against the real engine where this machine can run
//! it: promtool for the alert rules, a real single-node Slurm for the drain and resume
//! hooks, NHC's calling convention with a stub `die`, kubernetes-validate for the
//! manifests and node-problem-detector's custom plugin contract. `scripts/setup.sh
//! --test` installs every tool; a missing one fails the test with that advice.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    root().join("tests/fixtures/telemetry")
}

fn tool(name: &str) -> String {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "{name} is missing: run `bash scripts/setup.sh --test`"
    );
    name.to_owned()
}

/// The Python environment with kubernetes-validate (and PyYAML) that setup.sh makes.
fn test_venv() -> PathBuf {
    let venv = std::env::var_os("KILN_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/kiln-test-venv"));
    assert!(
        venv.join("bin/kubernetes-validate").is_file(),
        "{} has no kubernetes-validate: run `bash scripts/setup.sh --test`",
        venv.display()
    );
    venv
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[test]
fn alert_rules_pass_promtool_and_their_unit_tests() {
    let dir = root().join("contrib/prometheus");
    let promtool = tool("promtool");
    let out = run(Command::new(&promtool)
        .args(["check", "rules", "kiln-alerts.yml"])
        .current_dir(&dir));
    assert!(out.contains("SUCCESS: 13 rules found"), "{out}");
    let out = run(Command::new(&promtool)
        .args([
            "test",
            "rules",
            "kiln-alerts.test.yml",
            "kiln-alerts-stale.test.yml",
        ])
        .current_dir(&dir));
    assert!(out.contains("SUCCESS"), "{out}");
    assert!(!out.contains("FAILED"), "{out}");
}

/// Every kiln metric an alert rule reads (its expression or an annotation's query) is one
/// kiln writes: a run's `kiln.prom` or `kiln health`'s `kiln-health.prom`. A rule reading
/// a name kiln never writes would never fire.
#[test]
fn every_alert_reads_a_metric_kiln_writes() {
    let rules = std::fs::read_to_string(root().join("contrib/prometheus/kiln-alerts.yml")).unwrap();
    let mut written = kiln::report::prometheus::families();
    written.extend(kiln::cmd::health::FAMILIES);
    let name = regex::Regex::new(r"\bkiln_[a-z0-9_]+").unwrap();
    let mut read = Vec::new();
    for line in rules.lines().filter(|l| !l.trim_start().starts_with('#')) {
        read.extend(name.find_iter(line).map(|m| m.as_str().to_owned()));
    }
    assert!(read.len() >= 10, "{read:?}");
    let unknown: Vec<&String> = read
        .iter()
        .filter(|n| !written.contains(&n.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "alerts read what kiln never writes: {unknown:?}"
    );
    // The near miss: a name kiln does not write is caught.
    assert!(!written.contains(&"kiln_device_unhealthy"));
    // And the health textfile is alerted on: its exit code and its staleness.
    for family in [
        "kiln_health_exit_code",
        "kiln_health_last_check_timestamp_seconds",
    ] {
        assert!(read.iter().any(|n| n == family), "no alert reads {family}");
    }
}

#[test]
fn the_nhc_check_dies_with_kilns_message() {
    let out = run(Command::new("bash")
        .arg(root().join("contrib/nhc/test-nhc.sh"))
        .arg(env!("CARGO_BIN_EXE_kiln"))
        .arg(fixtures()));
    assert!(out.contains("PASS"), "{out}");
}

#[test]
fn slurm_hooks_drain_and_resume_a_real_node() {
    for t in ["munged", "slurmctld", "slurmd", "scontrol", "sinfo"] {
        tool(t);
    }
    // The fleet flow's jobs test an emulated discrete card (lavapipe dressed as an NVIDIA
    // GPU), briefly: the flow is under test here, the statistic in tests/it/baseline.rs.
    let dir = tempfile::tempdir().unwrap();
    let out = run(Command::new("bash")
        .arg(root().join("contrib/slurm/test-slurm.sh"))
        .arg(env!("CARGO_BIN_EXE_kiln"))
        .arg(fixtures())
        .envs(crate::common::emulated_env(
            "nvidia",
            "none",
            &dir.path().join("layer.log"),
        ))
        .env(
            "KILN_TEST_RUN_ARGS",
            "--workloads compute --duration 2s --telemetry-interval 0",
        ));
    for step in [
        "ok: a fresh node was not drained and got its burn-in",
        "ok: a failing check drained the node: kiln: GPU0",
        "ok: the next check kept it drained: kiln: GPU0",
        "ok: after --clear a passing check resumed it",
        "ok: the administrator's drain was left alone",
        "ok: the epilog drained for the job's GPU only",
        "ok: the fleet array ran 4 runs and the job after it built the floors on 4 cards",
        "ok: a later run is judged against the fleet's floors",
        "PASS",
    ] {
        assert!(out.contains(step), "missing `{step}`:\n{out}");
    }
}

#[test]
fn kubernetes_manifests_validate_strictly_and_reach_the_gpu() {
    let venv = test_venv();
    let dir = root().join("contrib/k8s");
    let out = run(Command::new(venv.join("bin/kubernetes-validate"))
        .args(["--strict", "kiln-cronjob.yaml", "kiln-npd.yaml"])
        .current_dir(&dir));
    for resource in [
        "cronjob/kiln-fleet",
        "daemonset/kiln-npd",
        "configmap/kiln-npd-config",
        "clusterrole/kiln-npd",
    ] {
        assert!(
            out.contains(&format!("passed for resource {resource}")),
            "{out}"
        );
    }
    assert!(!out.contains("ERROR"), "{out}");
    // What the schema cannot say: runtime class, capabilities, the GPU request, one pod
    // per node, /dev/kmsg read-only, and the image the Dockerfile builds.
    let image = format!("kiln:{}", env!("CARGO_PKG_VERSION"));
    let out = run(Command::new(venv.join("bin/python"))
        .arg("check-manifests.py")
        .arg(&image)
        .current_dir(&dir));
    assert!(!out.contains("FAIL"), "{out}");
    assert!(out.matches("ok ").count() >= 16, "{out}");
}

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn dockerfile() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let mut out: Vec<(String, String)> = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || (line.is_empty() && pending.is_empty()) {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let (op, rest) = pending.split_once(' ').unwrap_or((&pending, ""));
        out.push((op.to_uppercase(), rest.trim().to_owned()));
        pending.clear();
    }
    out
}

#[test]
fn the_dockerfile_builds_with_cargo_and_runs_kiln_on_slim_debian_with_the_vulkan_loader() {
    let all = dockerfile();
    let stages: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, (op, _))| op == "FROM")
        .map(|(i, _)| i)
        .collect();
    assert!(stages.len() >= 2, "multi-stage: {all:?}");
    let build = &all[stages[0]..stages[stages.len() - 1]];
    let runtime = &all[stages[stages.len() - 1]..];
    let has = |stage: &[(String, String)], op: &str, needle: &str| {
        stage
            .iter()
            .any(|(o, rest)| o == op && rest.contains(needle))
    };
    assert!(
        build[0].1.starts_with("rust:") && build[0].1.ends_with(" AS build"),
        "{:?}",
        build[0]
    );
    assert!(has(build, "RUN", "cargo build --release --locked"));
    assert!(
        runtime[0].1.starts_with("debian:") && runtime[0].1.contains("-slim"),
        "{:?}",
        runtime[0]
    );
    assert!(has(runtime, "RUN", "--no-install-recommends libvulkan1"));
    assert!(has(runtime, "RUN", "rm -rf /var/lib/apt/lists/*"));
    assert!(
        runtime.iter().any(|(o, r)| o == "COPY"
            && r.starts_with("--from=build ")
            && r.ends_with(" /usr/local/bin/kiln")),
        "the runtime image carries the binary"
    );
    assert!(has(runtime, "ENTRYPOINT", "\"/usr/local/bin/kiln\""));
    assert!(has(
        runtime,
        "ENV",
        "NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics"
    ));
    assert!(has(
        runtime,
        "LABEL",
        &format!(
            "org.opencontainers.image.version=\"{}\"",
            env!("CARGO_PKG_VERSION")
        )
    ));
    // The build stage is given everything cargo reads: the manifest, the lock file, the
    // build script, the sources and what they include, and every workspace member.
    let copied: Vec<&str> = build
        .iter()
        .filter(|(o, _)| o == "COPY")
        .flat_map(|(_, r)| {
            let parts: Vec<&str> = r.split_whitespace().collect();
            parts[..parts.len() - 1].to_vec()
        })
        .collect();
    for path in &copied {
        assert!(
            root().join(path).exists(),
            "COPY {path}: not in the repository"
        );
    }
    let covered = |path: &str| {
        copied
            .iter()
            .any(|c| path == *c || path.starts_with(&format!("{c}/")))
    };
    // Every workspace member, as the manifest lists them: cargo reads them all.
    let manifest: toml::Table = std::fs::read_to_string(root().join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let members: Vec<String> = manifest["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m.as_str())
        .filter(|m| *m != ".")
        .map(str::to_owned)
        .collect();
    assert!(members.len() >= 2, "{members:?}");
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "src",
        "shaders",
        "profiles",
    ]
    .into_iter()
    .chain(members.iter().map(String::as_str))
    {
        assert!(covered(needed), "the build stage lacks {needed}");
    }
    let ignored = std::fs::read_to_string(root().join(".dockerignore")).unwrap();
    for line in ignored.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            !copied.iter().any(|c| c.starts_with(line.trim())),
            "{line} is both ignored and copied"
        );
    }
}

#[test]
fn the_npd_plugin_keeps_the_custom_plugin_contract() {
    let venv = test_venv();
    let out = run(Command::new("bash")
        .arg(root().join("contrib/k8s/test-npd.sh"))
        .arg(env!("CARGO_BIN_EXE_kiln"))
        .arg(fixtures())
        .arg(venv.join("bin/python")));
    assert!(out.contains("PASS"), "{out}");
}

#[test]
fn every_contrib_script_parses() {
    for dir in ["slurm", "nhc", "k8s"] {
        for entry in std::fs::read_dir(root().join("contrib").join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".sh") || name.ends_with(".nhc") || name.ends_with(".sbatch") {
                run(Command::new("bash").arg("-n").arg(&path));
            }
        }
    }
}

/// kiln-npd.sh run as node-problem-detector runs it (a bare environment), with `kiln` (a
/// path) checking with `args`: (exit code, stdout).
fn npd_plugin(kiln: &Path, args: &str, state: &Path) -> (i32, String) {
    let out = Command::new("/bin/sh")
        .arg(root().join("contrib/k8s/kiln-npd.sh"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("KILN_BIN", kiln)
        .env("KILN_STATE", state)
        .env("KILN_HEALTH_ARGS", args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_npd_plugin_leads_with_the_fault_code_so_the_cut_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let kiln = Path::new(env!("CARGO_BIN_EXE_kiln"));
    let replay = |name: &str| {
        format!(
            "--telemetry-replay {}",
            fixtures().join(format!("{name}.jsonl")).display()
        )
    };
    for (name, code, start) in [
        // Real faults whose line is longer than NPD keeps: the code was cut off before.
        // (Xid 79's line, `... since boot [KILN-XID-079]`, now fits: Xid 54's does not.)
        (
            "aux_power_missing",
            "KILN-XID-054",
            "KILN-XID-054 GPU0 GPU-6c4f3a5e...: Xid 54 (auxiliary power not connected)",
        ),
        // `[CODE] (and N more faults)`: the code is not the line's last word.
        (
            "ecc_uncorrectable_remap_pending",
            "KILN-MEM-002",
            "KILN-MEM-002 GPU0 GPU-6c4f3a5e...: 2 uncorrectable ECC errors",
        ),
        // A line that fits leads with its code all the same.
        (
            "healthy_idle",
            "KILN-OK-000",
            "KILN-OK-000 OK: 1 GPU healthy",
        ),
    ] {
        let state = dir.path().join(format!("{name}.json"));
        let first = Command::new(kiln)
            .args(["health", "--state"])
            .arg(dir.path().join(format!("{name}-direct.json")))
            .args(replay(name).split(' '))
            .output()
            .unwrap();
        let first = String::from_utf8_lossy(&first.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        assert!(first.contains(&format!("[{code}]")), "{first}");
        if code != "KILN-OK-000" {
            assert!(first.chars().count() > 80, "a line NPD cuts: {first}");
        }
        let (rc, out) = npd_plugin(kiln, &replay(name), &state);
        assert_eq!(rc, i32::from(code != "KILN-OK-000"), "{name}: {out}");
        assert_eq!(out.lines().count(), 1, "{name}: {out}");
        let line = out.trim_end_matches('\n');
        assert!(line.chars().count() <= 80, "{name}: {line}");
        assert!(line.starts_with(start), "{name}: {line}");
        assert!(!line.contains(&format!("[{code}]")), "said once: {line}");
    }
    // A message of any length keeps its code; a line without one is left as it is.
    let stub = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!("#!/bin/sh\nprintf '{text}\\nsecond line\\n'\nexit 1\n"),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        path
    };
    let long = "x".repeat(200);
    let state = dir.path().join("stub.json");
    let (rc, out) = npd_plugin(
        &stub(
            "long",
            &format!(
                "GPU3 GPU-12345678...: {long} (open since 2025-01-01T00:00:00Z) [KILN-MEM-002] (and 2 more faults)"
            ),
        ),
        "",
        &state,
    );
    assert_eq!(rc, 1, "{out}");
    assert_eq!(
        out,
        format!("KILN-MEM-002 GPU3 GPU-12345678...: {}\n", &long[..80 - 35])
    );
    let (rc, out) = npd_plugin(&stub("bare", "something odd [not a code]"), "", &state);
    assert_eq!((rc, out.as_str()), (1, "something odd [not a code]\n"));
}
