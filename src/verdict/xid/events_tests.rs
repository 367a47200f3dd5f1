//! The kernel events' table proved: each row's case and the near miss beside it.

#![cfg(test)]

use super::*;

fn kind(line: &str) -> Option<EventKind> {
    classify(line).map(|(_, row)| row.kind)
}

#[test]
fn every_row_is_whole() {
    assert_eq!(patterns().len(), EVENTS.len());
    for row in EVENTS {
        assert!(!row.meaning.is_empty() && !row.action.is_empty() && !row.source.is_empty());
        assert!(
            row.source.contains("docs.kernel.org"),
            "{:?} cites the kernel's documentation",
            row.kind
        );
    }
}

#[test]
fn amdgpu_hangs_and_resets() {
    let timeout = "[  413.537839] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=7041, emitted seq=7043";
    assert_eq!(
        classify(timeout).map(|(d, r)| (d, r.kind)),
        Some((Driver::Amdgpu, EventKind::Hang))
    );
    let (_, row) = classify(timeout).unwrap();
    assert_eq!(row.class, Class::Software);
    assert!(row.decided_by.is_some(), "a hang alone does not say whose");
    // Its near miss: the same timeout, cleared without a reset.
    assert_eq!(
        kind("amdgpu 0000:03:00.0: amdgpu: ring gfx_0.0.0 timeout, but soft recovered"),
        Some(EventKind::HangSoftRecovered)
    );
    assert_eq!(
        kind(
            "[  125.127841] [drm:amdgpu_dm_atomic_commit_tail [amdgpu]] *ERROR* Waiting for fences timed out!"
        ),
        Some(EventKind::Hang)
    );
    assert_eq!(
        kind("amdgpu 0000:03:00.0: amdgpu: GPU reset begin!"),
        Some(EventKind::GpuResetBegin)
    );
    assert_eq!(
        kind("amdgpu 0000:03:00.0: amdgpu: GPU reset(2) succeeded!"),
        Some(EventKind::GpuResetSucceeded)
    );
    let failed = classify("amdgpu 0000:03:00.0: amdgpu: GPU reset(3) failed")
        .unwrap()
        .1;
    assert_eq!(
        (failed.kind, failed.severity),
        (EventKind::GpuResetFailed, Severity::Critical)
    );
    assert_eq!(
        kind("amdgpu 0000:c1:00.0: amdgpu: Mode2 reset failed"),
        Some(EventKind::GpuResetFailed)
    );
    // Benign: the ring's setup at load.
    assert_eq!(
        kind("amdgpu 0000:03:00.0: amdgpu: ring gfx_0.0.0 uses VM inv eng 0 on hub 0"),
        None
    );
}

#[test]
fn amdgpu_page_faults_in_their_forms() {
    let new = "amdgpu 0000:0b:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32777, for process glxinfo pid 2424 thread glxinfo:cs0 pid 2425)";
    assert_eq!(kind(new), Some(EventKind::PageFault));
    let retry = "amdgpu 0000:43:00.0: amdgpu: [gfxhub] retry page fault (src_id:0 ring:0 vmid:8 pasid:32769)";
    assert_eq!(kind(retry), Some(EventKind::PageFault));
    let old = "amdgpu 0000:01:00.0: GPU fault detected: 146 0x0c80440c";
    assert_eq!(kind(old), Some(EventKind::PageFault));
    // The fault's detail lines are not new faults.
    assert_eq!(
        kind(
            "amdgpu 0000:0b:00.0: amdgpu:   in page starting at address 0x0000800102800000 from IH client 0x1b (UTCL2)"
        ),
        None
    );
}

#[test]
fn amdgpu_ras_counts_only_when_there_are_errors() {
    let ue = "amdgpu 0000:0b:00.0: amdgpu: 1 uncorrectable hardware errors detected in umc block";
    let (_, row) = classify(ue).unwrap();
    assert_eq!(
        (row.kind, row.class),
        (EventKind::RasUncorrectable, Class::Hardware)
    );
    let ce = "amdgpu 0000:0b:00.0: amdgpu: 12 correctable hardware errors detected in gfx block";
    assert_eq!(kind(ce), Some(EventKind::RasCorrectable));
    let socket = "amdgpu 0000:05:00.0: {3}socket: 0, die: 1, 2 new uncorrectable hardware errors detected in umc block";
    assert_eq!(kind(socket), Some(EventKind::RasUncorrectable));
    // The all-clear spellings stay quiet.
    assert_eq!(
        kind("amdgpu 0000:c3:00.0: amdgpu: no uncorrectable hardware errors detected in umc block"),
        None
    );
    assert_eq!(
        kind("amdgpu 0000:c3:00.0: amdgpu: 0 correctable hardware errors detected in umc block"),
        None
    );
    assert_eq!(
        kind(
            "amdgpu 0000:c3:00.0: amdgpu: RAS records:130 exceed threshold:128, GPU will not be initialized. Replace this GPU or increase the threshold"
        ),
        Some(EventKind::RasBadPageThreshold)
    );
    let near =
        classify("amdgpu 0000:c3:00.0: amdgpu: RAS records:116 exceeds 90% of threshold:128")
            .unwrap()
            .1;
    assert_eq!(
        near.severity,
        Severity::Major,
        "near the threshold is a warning, past it an RMA"
    );
    assert_eq!(
        kind(
            "amdgpu 0000:c3:00.0: amdgpu: RAS poison consumption, fall back to gpu reset flow: client id 5"
        ),
        Some(EventKind::RasPoison)
    );
}

#[test]
fn the_forms_the_reader_once_knew_alone_are_rows() {
    let of = |line: &str| classify(line).map(|(d, r)| (d, r.kind));
    use Driver::{Amdgpu as A, I915 as I};
    use EventKind as K;
    for (line, want) in [
        (
            "[  316.082669] amdgpu 0000:28:00.0: VRAM is lost due to GPU reset!",
            (A, K::VramLost),
        ),
        (
            "[  312.774528] amdgpu 0000:28:00.0: Ring gfx_0.0.0 reset failed",
            (A, K::EngineResetFailed),
        ),
        (
            "amdgpu 0000:01:00.0: Starting sdma0 ring reset",
            (A, K::EngineReset),
        ),
        (
            "amdgpu 0000:0c:00.0: amdgpu: Ring gfx_0.0.0 reset succeeded",
            (A, K::EngineReset),
        ),
        (
            "amdgpu 0000:03:00.0: amdgpu: MODE1 reset",
            (A, K::GpuResetBegin),
        ),
        (
            "amdgpu 0000:33:00.0: amdgpu: GPU reset succeeded, trying to resume",
            (A, K::GpuResetSucceeded),
        ),
        (
            "amdgpu 0000:03:00.0: amdgpu: MES failed to respond to msg=RESET",
            (A, K::Hang),
        ),
        (
            "amdgpu: MES might be in unrecoverable state, issue a GPU reset",
            (A, K::Hang),
        ),
        // amdkfd's and FreeBSD's lines name no driver: their words are amdgpu's alone.
        (
            "[  510.633583] qcm fence wait loop timeout expired",
            (A, K::Hang),
        ),
        (
            "drmn0: [mmhub] VMC page fault (src_id:0 ring:153 vm_id:0 pas_id:0)",
            (A, K::PageFault),
        ),
        (
            "drmn0: VM_L2_PROTECTION_FAULT_STATUS:0x00341051",
            (A, K::PageFault),
        ),
        (
            "amdgpu 0000:e3:00.0: amdgpu: uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!",
            (A, K::RasUncorrectable),
        ),
        (
            "amdgpu 0000:03:00.0: [drm:amdgpu_ring_test_helper [amdgpu]] *ERROR* ring mes_kiq_3.1.0 test failed (-110)",
            (A, K::InitFailed),
        ),
        (
            "amdgpu 0000:03:00.0: amdgpu: Fatal error during GPU init",
            (A, K::InitFailed),
        ),
        (
            "amdgpu 0000:33:00.0: [drm] *ERROR* [CRTC:72:crtc-0] flip_done timed out",
            (A, K::DisplayError),
        ),
        (
            "kernel: [154858.820009] [drm:i915_hangcheck_elapsed] *ERROR* Hangcheck timer elapsed.",
            (I, K::Hang),
        ),
        (
            "i915 0000:00:02.0: [drm] *ERROR* rcs0 reset request timed out: {request: 00000001, RESET_CTL: 00000001}",
            (I, K::EngineResetFailed),
        ),
        (
            "i915 0000:00:02.0: [drm] *ERROR* GT0: GUC: TLB invalidation response timed out for seqno 309",
            (I, K::Hang),
        ),
        (
            "[drm] GPU HANG: ecode 7:0:0x87c3ffff, reason: Ring hung, action: reset",
            (I, K::Hang),
        ),
        (
            "i915 0000:00:02.0: [drm] *ERROR* Fault errors on pipe B: 0x00000080",
            (I, K::DisplayError),
        ),
    ] {
        assert_eq!(of(line), Some(want), "{line}");
    }
    // Near misses: a ring test passing, a ring's setup, radeon's fault (its words are
    // not amdgpu's alone) and a line of no driver that only says "failed".
    for quiet in [
        "[drm] ring test on 0 succeeded in 4 usecs",
        "amdgpu 0000:0c:00.0: amdgpu: ring gfx_0.0.0 uses VM inv eng 0 on hub 0",
        "radeon 0000:01:00.0: GPU fault detected: 146 0x0c80440c",
        "[drm] *ERROR* something failed",
    ] {
        assert_eq!(of(quiet), None, "{quiet}");
    }
}

#[test]
fn a_gpu_over_its_temperature_is_a_thermal_event_and_a_temperature_said_is_not() {
    // github.com/ValveSoftware/Proton/issues/8028 and ROCm/legacy-rocm-build/issues/385.
    let ctf = "amdgpu 0000:03:00.0: amdgpu: ERROR: System is going to shutdown due to GPU SW CTF!";
    let (_, row) = classify(ctf).unwrap();
    assert_eq!(
        (row.kind, row.class, row.severity),
        (EventKind::Thermal, Class::Environment, Severity::Critical)
    );
    assert_eq!(
        kind("amdgpu 0000:03:00.0: amdgpu: ERROR: GPU over temperature range(SW CTF) detected!"),
        Some(EventKind::Thermal)
    );
    assert_eq!(
        kind("amdgpu: [powerplay] GPU over temperature range detected on PCIe 0:0.0!"),
        Some(EventKind::Thermal)
    );
    // Near misses: the driver's temperature limits, said at load or by `sensors`.
    for quiet in [
        "amdgpu 0000:03:00.0: amdgpu: edge: +37.0 C (crit = +100.0 C)",
        "amdgpu 0000:03:00.0: amdgpu: SMU is initialized successfully!",
    ] {
        assert_eq!(kind(quiet), None, "{quiet}");
    }
}

#[test]
fn wedged_devices_of_any_driver() {
    let dead = classify("xe 0000:03:00.0: [drm] device wedged, needs recovery").unwrap();
    assert_eq!((dead.0, dead.1.kind), (Driver::Xe, EventKind::Wedged));
    assert_eq!(
        kind("amdgpu 0000:03:00.0: [drm] device wedged, but recovered through reset"),
        Some(EventKind::WedgedRecovered)
    );
    assert_eq!(
        kind(
            "xe 0000:03:00.0: [drm] *ERROR* CRITICAL: Xe has declared device 0000:03:00.0 as wedged."
        ),
        Some(EventKind::Wedged)
    );
}

#[test]
fn intel_hangs_faults_and_firmware() {
    assert_eq!(
        kind("i915 0000:00:02.0: [drm] GPU HANG: ecode 12:1:85dffffb, in Xorg [1234]"),
        Some(EventKind::Hang)
    );
    assert_eq!(
        kind("i915 0000:00:02.0: [drm] Resetting chip for stopped heartbeat on rcs0"),
        Some(EventKind::GpuResetBegin)
    );
    assert_eq!(
        kind("i915 0000:00:02.0: [drm] Resetting rcs0 for preemption time out"),
        Some(EventKind::EngineReset)
    );
    assert_eq!(
        kind("i915 0000:00:02.0: [drm] *ERROR* Failed to reset chip"),
        Some(EventKind::GpuResetFailed)
    );
    assert_eq!(
        kind(
            "xe 0000:03:00.0: [drm] GT0: Engine memory CAT error [18]: class=bcs, logical_mask: 0x1, guc_id=6"
        ),
        Some(EventKind::PageFault)
    );
    assert_eq!(
        kind(
            "xe 0000:03:00.0: [drm] GT0: Timedout job: seqno=4294967169, lrc_seqno=4294967169, guc_id=2, flags=0x0 in python3 [7561]"
        ),
        Some(EventKind::Hang)
    );
    assert_eq!(
        kind(
            "xe 0000:03:00.0: [drm] GT0: Engine reset: engine_class=ccs, logical_mask: 0x1, guc_id=2"
        ),
        Some(EventKind::EngineReset)
    );
    assert_eq!(
        kind("i915 0000:00:02.0: [drm] *ERROR* GT0: GuC initialization failed -ENOENT"),
        Some(EventKind::FirmwareFailed)
    );
    // Benign: the firmware's version at load, and an NVIDIA line.
    assert_eq!(
        kind("i915 0000:00:02.0: [drm] GT0: GuC firmware i915/tgl_guc_70.bin version 70.20.0"),
        None
    );
    assert_eq!(
        kind("i915 0000:00:02.0: [drm] GT0: GuC submission enabled"),
        None
    );
    assert!(
        classify("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.").is_none()
    );
}
