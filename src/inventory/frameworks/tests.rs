//! The diagnoses' own tests: each kind's case and the near miss beside it.

#![cfg(test)]

use super::*;
use crate::inventory::fixture::*;
use crate::inventory::read;
use std::fs;

fn facts(nvml: NvmlState, cuda: Option<&str>, installed: Vec<Installed>) -> Facts {
    Facts {
        nvml,
        cuda_driver: cuda.and_then(CudaVersion::parse),
        installed,
        compute_capability: std::collections::BTreeMap::new(),
    }
}

fn torch(runtime: Runtime) -> Installed {
    Installed {
        framework: Framework::Pytorch,
        version: Some("2.7.0".into()),
        runtime,
        site_packages: PathBuf::from("/venv/lib/python3.11/site-packages"),
        archs: None,
    }
}

fn cuda(v: &str) -> Runtime {
    Runtime::Cuda(CudaVersion::parse(v).unwrap())
}

fn kinds(f: &Fixture, facts: &Facts) -> Vec<DiagnosisKind> {
    let system = f.system();
    let gpu = read(&system).gpus.remove(0);
    diagnose(&system, &gpu, facts)
        .into_iter()
        .map(|d| d.kind)
        .collect()
}

fn said(f: &Fixture, facts: &Facts) -> Vec<String> {
    let system = f.system();
    let gpu = read(&system).gpus.remove(0);
    diagnose(&system, &gpu, facts)
        .iter()
        .map(Diagnosis::sentence)
        .collect()
}

#[test]
fn versions_read_from_nvml_and_from_text() {
    assert_eq!(
        CudaVersion::from_nvml(12040),
        Some(CudaVersion {
            major: 12,
            minor: 4
        })
    );
    assert_eq!(CudaVersion::from_nvml(11080).unwrap().to_string(), "11.8");
    assert_eq!(CudaVersion::from_nvml(0), None);
    assert_eq!(CudaVersion::parse("12.1").unwrap().to_string(), "12.1");
    assert_eq!(CudaVersion::parse("12").unwrap().to_string(), "12.0");
    assert_eq!(CudaVersion::parse("None"), None);
}

#[test]
fn a_framework_built_for_a_newer_cuda_major_than_the_driver_cannot_see_the_card() {
    let f = nvidia_gpu(Some("nvidia"));
    let on = |driver: &str, runtime: Runtime| {
        kinds(
            &f,
            &facts(NvmlState::Up, Some(driver), vec![torch(runtime)]),
        )
    };
    assert_eq!(on("11.8", cuda("12.8")), [DiagnosisKind::CudaTooNew]);
    assert_eq!(
        on("11.8", Runtime::CudaMajor(12)),
        [DiagnosisKind::CudaTooNew]
    );
    // Before CUDA 11 a newer minor needs a newer driver too.
    assert_eq!(on("10.1", cuda("10.2")), [DiagnosisKind::CudaTooNew]);
    // Same major, newer minor: it sees the card, without PTX JIT.
    assert_eq!(on("12.4", cuda("12.8")), [DiagnosisKind::CudaMinorNewer]);
    // Near misses: the driver's own version or older, and a major-only build it supports.
    assert!(on("12.4", cuda("12.4")).is_empty());
    assert!(on("12.8", cuda("11.8")).is_empty());
    assert!(on("12.2", Runtime::CudaMajor(12)).is_empty());
    let sentence = &said(
        &f,
        &facts(NvmlState::Up, Some("11.8"), vec![torch(cuda("12.8"))]),
    )[0];
    assert!(
        sentence.contains("PyTorch 2.7.0 in /venv/lib/python3.11/site-packages is built for CUDA 12.8 but the driver supports CUDA 11.8")
            && sentence.contains("update the NVIDIA driver"),
        "{sentence}"
    );
    // Without NVML's CUDA version nothing is compared.
    assert!(kinds(&f, &facts(NvmlState::Up, None, vec![torch(cuda("12.8"))])).is_empty());
}

fn words(list: &str) -> Vec<String> {
    list.split(' ').map(str::to_owned).collect()
}

#[test]
fn a_wheel_without_code_for_the_card_s_architecture() {
    let to_sm90 = words("sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90");
    // PyTorch's own rule: any machine code of the same major, or PTX no newer.
    assert!(!runs_on(&to_sm90, (12, 0)));
    assert!(runs_on(&to_sm90, (8, 9)));
    assert!(runs_on(&words("sm_80 compute_80"), (9, 0)));
    assert!(runs_on(&words("sm_90 sm_100 sm_120"), (12, 0)));
    assert!(!runs_on(&words("sm_90a"), (10, 0)));

    let f = nvidia_gpu(Some("nvidia"));
    let system = f.system();
    let mut gpu = read(&system).gpus.remove(0);
    gpu.nvml_index = Some(0);
    let with = |gpu: &InventoryGpu, archs: &str, cc: (u32, u32)| {
        let mut t = torch(cuda("12.8"));
        t.archs = Some(words(archs));
        let mut facts = facts(NvmlState::Up, Some("12.8"), vec![t]);
        facts.compute_capability.insert(0, cc);
        diagnose(&system, gpu, &facts)
    };
    let said = with(&gpu, "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90", (12, 0));
    assert_eq!(said.len(), 1);
    assert_eq!(said[0].kind, DiagnosisKind::ArchMissing);
    assert!(
        said[0]
            .sentence()
            .contains("compute capability 12.0 (sm_120)")
            && said[0].sentence().contains("lists sm_120"),
        "{}",
        said[0].sentence()
    );
    // Near misses: the wheel lists the card's architecture, or the card is one it has.
    assert!(with(&gpu, "sm_80 sm_86 sm_90 sm_100 sm_120", (12, 0)).is_empty());
    assert!(with(&gpu, "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90", (9, 0)).is_empty());
    // Without the card's capability nothing is compared.
    gpu.nvml_index = None;
    assert!(with(&gpu, "sm_50", (12, 0)).is_empty());
}

#[test]
fn a_build_without_the_card_s_runtime_cannot_see_it() {
    let nvidia = nvidia_gpu(Some("nvidia"));
    let amd = Fixture::new();
    amd.pci("0000:05:00.0", 0x030000, 0x1002, 0x744c, Some("amdgpu"));
    let with = |runtime: Runtime| facts(NvmlState::Up, Some("12.4"), vec![torch(runtime)]);
    assert_eq!(
        kinds(&nvidia, &with(Runtime::CpuOnly)),
        [DiagnosisKind::CpuOnlyBuild]
    );
    assert_eq!(
        kinds(&amd, &with(Runtime::CpuOnly)),
        [DiagnosisKind::CpuOnlyBuild]
    );
    assert_eq!(
        kinds(&nvidia, &with(Runtime::Hip("6.2".into()))),
        [DiagnosisKind::OtherVendorBuild]
    );
    assert_eq!(
        kinds(&amd, &with(cuda("12.1"))),
        [DiagnosisKind::OtherVendorBuild]
    );
    // Near misses: each card with its own vendor's build; an Intel GPU is no framework's
    // CUDA or ROCm target, so nothing is said of it.
    assert!(kinds(&nvidia, &with(cuda("12.1"))).is_empty());
    assert!(kinds(&amd, &with(Runtime::Hip("6.2".into()))).is_empty());
    let intel = Fixture::new();
    intel.pci("0000:00:02.0", 0x030000, 0x8086, 0x56a0, Some("i915"));
    assert!(kinds(&intel, &with(Runtime::CpuOnly)).is_empty());
}

#[test]
fn nvml_s_version_mismatch_is_a_reboot() {
    let f = nvidia_gpu(Some("nvidia"));
    let k = kinds(&f, &facts(NvmlState::VersionMismatch, None, vec![]));
    assert_eq!(k, [DiagnosisKind::DriverLibraryMismatch]);
    assert!(said(&f, &facts(NvmlState::VersionMismatch, None, vec![]))[0].contains("reboot"));
    // Near miss: NVML down for another reason (here its library absent, the module
    // loaded and the GPU bound to it) is no mismatch.
    assert_eq!(
        NvmlState::from_cause(Some(crate::telemetry::cause::VERSION_MISMATCH)),
        NvmlState::VersionMismatch
    );
    assert_eq!(
        NvmlState::from_cause(Some(crate::telemetry::cause::DRIVER_NOT_LOADED)),
        NvmlState::Down
    );
    assert!(kinds(&f, &facts(NvmlState::Down, None, vec![])).is_empty());
}

#[test]
fn a_kernel_module_not_loaded_is_named_only_where_it_is_not() {
    let f = nvidia_gpu(None);
    let down = facts(NvmlState::Down, None, vec![]);
    assert_eq!(kinds(&f, &down), [DiagnosisKind::KernelModuleNotLoaded]);
    let f = nvidia_gpu(Some("nouveau"));
    assert!(said(&f, &down)[0].contains("(nouveau drives it)"));
    // Near misses: the module loaded (sysfs has it), a GPU bound to nvidia, and NVML up.
    f.write("/sys/module/nvidia/version", "570.86.15\n");
    assert!(kinds(&f, &down).is_empty());
    assert!(kinds(&nvidia_gpu(Some("nvidia")), &down).is_empty());
    assert!(kinds(&nvidia_gpu(None), &facts(NvmlState::Up, None, vec![])).is_empty());
}

#[test]
fn a_container_without_the_gpu_or_its_compute_capability() {
    let down = facts(NvmlState::Down, None, vec![]);
    let mut f = nvidia_gpu(Some("nvidia"));
    f.write("/.dockerenv", "");
    assert_eq!(kinds(&f, &down), [DiagnosisKind::ContainerWithoutGpu]);
    f.set("NVIDIA_VISIBLE_DEVICES", "void");
    f.write("/dev/nvidiactl", "");
    assert!(said(&f, &down)[0].contains("\"void\""));
    // Given the GPU but not compute: libcuda.so is not mounted.
    f.set("NVIDIA_VISIBLE_DEVICES", "all");
    f.set("NVIDIA_DRIVER_CAPABILITIES", "graphics,utility");
    assert_eq!(kinds(&f, &down), [DiagnosisKind::ContainerWithoutCompute]);
    // Near misses: compute given, or the toolkit's default (compute,utility).
    f.set("NVIDIA_DRIVER_CAPABILITIES", "compute,utility");
    assert!(kinds(&f, &down).is_empty());
    f.env.remove("NVIDIA_DRIVER_CAPABILITIES");
    assert!(kinds(&f, &down).is_empty());
    // Outside a container, no /dev/nvidiactl is not a container's doing.
    let f = nvidia_gpu(Some("nvidia"));
    assert!(kinds(&f, &down).is_empty());
}

#[test]
fn a_display_server_holding_the_gpu_that_passthrough_needs() {
    let up = facts(NvmlState::Up, Some("12.4"), vec![]);
    let holder = |comm: &str, pid: u32, node: &str| {
        let f = nvidia_gpu(Some("nvidia"));
        fs::create_dir_all(f.host("/sys/module/vfio_pci")).unwrap();
        fs::create_dir_all(f.host("/sys/bus/pci/devices/0000:05:00.0/drm/card1")).unwrap();
        f.write(
            "/proc/driver/nvidia/gpus/0000:05:00.0/information",
            "Model: \t\t NVIDIA GeForce RTX 4090\nDevice Minor: \t 0\n",
        );
        f.write(&format!("/proc/{pid}/comm"), &format!("{comm}\n"));
        fs::create_dir_all(f.host(&format!("/proc/{pid}/fd"))).unwrap();
        std::os::unix::fs::symlink(node, f.host(&format!("/proc/{pid}/fd/12"))).unwrap();
        f
    };
    let f = holder("Xorg", 1742, "/dev/nvidia0");
    assert_eq!(kinds(&f, &up), [DiagnosisKind::DisplayServerHolds]);
    assert!(said(&f, &up)[0].contains("Xorg (pid 1742)"));
    let f = holder("gnome-shell", 2001, "/dev/dri/card1");
    assert_eq!(kinds(&f, &up), [DiagnosisKind::DisplayServerHolds]);
    // Near misses: another card's node, a process that is no display server, and a
    // machine without vfio-pci loaded.
    assert!(kinds(&holder("Xorg", 1742, "/dev/dri/card0"), &up).is_empty());
    assert!(kinds(&holder("python3", 4242, "/dev/nvidia0"), &up).is_empty());
    let f = holder("Xorg", 1742, "/dev/nvidia0");
    fs::remove_dir(f.host("/sys/module/vfio_pci")).unwrap();
    assert!(kinds(&f, &up).is_empty());
}

#[test]
fn a_gpu_assigned_to_a_virtual_machine() {
    let up = facts(NvmlState::Up, Some("12.4"), vec![]);
    let f = nvidia_gpu(Some("vfio-pci"));
    assert_eq!(kinds(&f, &up), [DiagnosisKind::PassedThrough]);
    // Nor is its missing module said: vfio-pci holds it by choice.
    assert_eq!(
        kinds(&f, &facts(NvmlState::Down, None, vec![])),
        [DiagnosisKind::PassedThrough]
    );
    assert!(kinds(&nvidia_gpu(Some("nvidia")), &up).is_empty());
}

/// A card at `address` under a port whose slot is `slot` lanes wide, its link files
/// `(current speed, current width, max speed, max width)`.
fn card_on_link(f: &Fixture, slot: u32, link: (&str, u32, &str, u32)) {
    let port = "/sys/devices/pci0000:00/0000:00:01.0";
    f.write(&format!("{port}/max_link_speed"), "16.0 GT/s PCIe\n");
    f.write(&format!("{port}/max_link_width"), &format!("{slot}\n"));
    let dev = format!("{port}/0000:05:00.0");
    for (file, text) in [
        ("class", "0x030000".to_owned()),
        ("vendor", "0x10de".to_owned()),
        ("device", "0x2684".to_owned()),
        ("current_link_speed", link.0.to_owned()),
        ("current_link_width", link.1.to_string()),
        ("max_link_speed", link.2.to_owned()),
        ("max_link_width", link.3.to_string()),
    ] {
        f.write(&format!("{dev}/{file}"), &text);
    }
    let driver = f.host("/sys/bus/pci/drivers/nvidia");
    fs::create_dir_all(&driver).unwrap();
    std::os::unix::fs::symlink(driver, f.host(&format!("{dev}/driver"))).unwrap();
    fs::create_dir_all(f.host("/sys/bus/pci/devices")).unwrap();
    std::os::unix::fs::symlink(f.host(&dev), f.host("/sys/bus/pci/devices/0000:05:00.0")).unwrap();
}

#[test]
fn a_link_narrower_than_the_card_says_what_it_costs() {
    let up = facts(NvmlState::Up, Some("12.4"), vec![]);
    // An x16 Gen4 card in an x4 slot: 7.9 of 31.5 GB/s.
    let f = Fixture::new();
    card_on_link(&f, 4, ("16.0 GT/s PCIe", 4, "16.0 GT/s PCIe", 16));
    let s = said(&f, &up);
    assert_eq!(kinds(&f, &up), [DiagnosisKind::NarrowLink]);
    assert!(
        s[0].contains("x4 of its x16 lanes because its slot is x4, 7.9 of 31.5 GB/s per direction at PCIe Gen4 (23.6 GB/s lost)")
            && s[0].contains("a slot (or riser) with x16 lanes"),
        "{s:?}"
    );
    // The same width in an x16 slot: the link trained down.
    let f = Fixture::new();
    card_on_link(&f, 16, ("16.0 GT/s PCIe", 8, "16.0 GT/s PCIe", 16));
    assert!(
        said(&f, &up)[0].contains("trained its link at x8") && said(&f, &up)[0].contains("reseat")
    );
    // Near misses: full width at an idle card's lowered speed, and a link that is down.
    let f = Fixture::new();
    card_on_link(&f, 16, ("2.5 GT/s PCIe", 16, "16.0 GT/s PCIe", 16));
    assert!(kinds(&f, &up).is_empty());
    let f = Fixture::new();
    card_on_link(&f, 16, ("Unknown", 0, "16.0 GT/s PCIe", 16));
    assert!(kinds(&f, &up).is_empty());
}
