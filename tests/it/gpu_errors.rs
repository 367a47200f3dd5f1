//! Typed errors of the Vulkan layer, provoked for real where the machine allows: no
//! loader, no driver, a fence wait that runs out, and a device loss.

use std::time::Duration;

use crate::common::*;
use kiln::evidence::{Event, MemorySink};
use kiln::gpu::{DeviceContext, GpuError, Vulkan};
use kiln::workload::vram::algorithm::Algorithm;
use kiln::workload::vram::engine::AccessLayout;
use kiln::workload::vram::{VramConfig, VramTest};
use kiln::workload::{KindTest, Report, RunControl, Workload, WorkloadStatus};

#[test]
fn a_missing_loader_names_the_package_to_install() {
    let err = Vulkan::from_path(std::path::Path::new("/nonexistent/libvulkan.so.1"))
        .err()
        .expect("loading a missing library fails");
    assert!(matches!(err, GpuError::LoaderMissing { .. }), "{err:?}");
    assert!(
        err.to_string().contains("apt-get install libvulkan1"),
        "{err}"
    );
}

#[test]
fn no_driver_is_its_own_error_and_exit_code() {
    // A machine without drivers has no NVIDIA library either (on the emulated NVIDIA node
    // NVML would name the GPU Vulkan cannot reach, a better answer of another case).
    let out = kiln()
        .arg("list")
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("KILN_FAKE_NVML")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("the Vulkan loader found no driver"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "one sentence: {stderr}");
}

#[test]
fn a_driver_without_its_hardware_is_no_device() {
    // Mesa's AMD driver ships with the CPU driver; on a machine without an AMD GPU it
    // loads and finds nothing.
    let icd = "/usr/share/vulkan/icd.d/radeon_icd.x86_64.json";
    assert!(std::path::Path::new(icd).exists(), "run scripts/setup.sh");
    let out = kiln()
        .arg("list")
        .env("VK_ICD_FILENAMES", icd)
        .env("VK_DRIVER_FILES", icd)
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("KILN_FAKE_NVML")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if std::fs::read_dir("/sys/bus/pci/drivers/amdgpu").is_ok_and(|mut d| d.next().is_some()) {
        return; // an AMD GPU is present: this machine cannot show the case
    }
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("Vulkan found no device"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one sentence: {stderr}");
}

/// The device decides these (its memory model, BAR, vendor): `scripts/test.sh` runs them
/// again on every emulated discrete card.
mod card {
    use super::*;

    #[test]
    fn a_fence_wait_past_its_bound_is_a_timeout_naming_the_work_and_the_context_recovers() {
        let (vulkan, info) = device();
        let mut ctx = DeviceContext::open(&vulkan, &info).unwrap();
        ctx.set_fence_timeout(Duration::from_nanos(1));
        let cfg = config(
            &[Algorithm::OwnAddress],
            64 * MIB,
            16 * MIB,
            AccessLayout::Contiguous,
        );
        let mut sink = MemorySink::default();
        let report = VramTest {
            config: cfg.clone(),
        }
        .run_report(&mut ctx, &RunControl::new(None), &mut sink)
        .unwrap();
        let error = report
            .run
            .device_error
            .clone()
            .expect("the 1 ns bound runs out");
        assert!(error.contains("did not finish vram"), "{error}");
        assert_ne!(
            report.status(),
            WorkloadStatus::Passed,
            "a timeout is never a pass"
        );
        assert!(
            sink.events.iter().any(
                |e| matches!(&e.event, Event::DeviceError { error, .. } if error == "timeout")
            )
        );
        // The hung submission finishes; with a sane bound the same context works again.
        ctx.set_fence_timeout(Duration::from_secs(10));
        let report = VramTest { config: cfg }
            .run_report(&mut ctx, &RunControl::new(None), &mut sink)
            .unwrap();
        assert_eq!(report.status(), WorkloadStatus::Passed);
    }

    #[test]
    fn a_device_loss_is_evidence_not_a_crash() {
        let (vulkan, info) = device();
        let mut ctx = DeviceContext::open(&vulkan, &info).unwrap();
        ctx.simulate_device_loss_on_next_submit();
        let mut sink = MemorySink::default();
        let mut test = VramTest {
            config: VramConfig {
                bytes: Some(16 * MIB),
                passes: Some(1),
                ..VramConfig::default()
            },
        };
        let outcome = test
            .run(&mut ctx, &RunControl::new(None), &mut sink)
            .unwrap();
        assert_eq!(outcome.status, WorkloadStatus::NotRun);
        assert!(
            outcome.headline.contains("device was lost while vram"),
            "{}",
            outcome.headline
        );
        assert!(sink.events.iter().any(
            |e| matches!(&e.event, Event::DeviceError { error, .. } if error == "device_lost")
        ));
        // A lost device stays lost: later work fails fast with the same typed error.
        let err = ctx.record("anything").err().expect("lost");
        assert!(matches!(err, GpuError::DeviceLost { .. }), "{err:?}");
    }
}
