//! The emulated-discrete test layer (`tests/layers/discrete`): lavapipe seen through it looks
//! like a discrete card to kiln (identity, heaps, memory types, budget), device-local memory
//! cannot be mapped, and heap sizes are enforced.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{AllocLine, MIB, allocation_log, emulated_env};
use ash::vk;

/// `kiln args` with the emulated card `vendor`/`bar`, plus `extra` environment.
fn kiln_emulated(
    vendor: &str,
    bar: &str,
    log: &Path,
    extra: &[(&str, &str)],
    args: &[&str],
) -> Output {
    let mut cmd = common::kiln();
    cmd.args(args).envs(emulated_env(vendor, bar, log));
    cmd.envs(extra.iter().copied());
    cmd.output().unwrap()
}

/// The one device `kiln list --json` reports on the emulated card.
fn listed(vendor: &str, bar: &str, extra: &[(&str, &str)]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = kiln_emulated(
        vendor,
        bar,
        &dir.path().join("layer.log"),
        extra,
        &["list", "--json"],
    );
    assert!(
        out.status.success(),
        "{vendor}/{bar}: kiln list failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let devices = common::json(&out);
    let devices = devices.as_array().expect("a list of devices");
    assert_eq!(devices.len(), 1, "{vendor}/{bar}: {devices:#?}");
    devices[0].clone()
}

/// A heap as kiln lists it: size, device-local.
type Heap = (u64, bool);
/// A memory type as kiln lists it: flag names, heap.
type MemoryType = (Vec<&'static str>, u64);

/// The heaps and types the layer presents.
fn expected_memory(bar: &str, vram: u64, host: u64) -> (Vec<Heap>, Vec<MemoryType>) {
    let mut heaps = vec![(vram, true), (host, false)];
    let mut types = vec![
        (vec!["device_local"], 0),
        (vec!["host_visible", "host_coherent"], 1),
        (vec!["host_visible", "host_coherent", "host_cached"], 1),
    ];
    let bar_type = vec!["device_local", "host_visible", "host_coherent"];
    match bar {
        "none" => {}
        "rebar" => types.push((bar_type, 0)),
        "small" => {
            heaps.push((256 * MIB, true));
            types.push((bar_type, 2));
        }
        other => panic!("unknown BAR mode {other}"),
    }
    (heaps, types)
}

fn check_memory(device: &serde_json::Value, what: &str, bar: &str, vram: u64, host: u64) {
    let (heaps, types) = expected_memory(bar, vram, host);
    let got_heaps = device["heaps"].as_array().unwrap();
    assert_eq!(got_heaps.len(), heaps.len(), "{what}: {got_heaps:#?}");
    for (i, (heap, (size, local))) in got_heaps.iter().zip(&heaps).enumerate() {
        assert_eq!(heap["index"], i, "{what}: heap {i}");
        assert_eq!(heap["size_bytes"], *size, "{what}: heap {i}");
        assert_eq!(heap["device_local"], *local, "{what}: heap {i}");
        assert_eq!(heap["budget_bytes"], *size, "{what}: heap {i} budget");
        assert!(heap["usage_bytes"].is_u64(), "{what}: heap {i} usage");
    }
    let got_types = device["memory_types"].as_array().unwrap();
    assert_eq!(got_types.len(), types.len(), "{what}: {got_types:#?}");
    for (i, (t, (flags, heap))) in got_types.iter().zip(&types).enumerate() {
        assert_eq!(t["index"], i, "{what}: type {i}");
        assert_eq!(t["flags"], serde_json::json!(flags), "{what}: type {i}");
        assert_eq!(t["heap_index"], *heap, "{what}: type {i}");
    }
    assert_eq!(device["memory_budget_supported"], true, "{what}");
}

#[test]
fn kiln_lists_the_emulated_card_as_a_discrete_gpu_in_every_configuration() {
    for &(vendor, bar) in common::EMULATED {
        let what = format!("{vendor}/{bar}");
        let device = listed(vendor, bar, &[]);
        let (vendor_id, name) = match vendor {
            "nvidia" => (0x10DE, "kiln emulated NVIDIA GPU"),
            "amd" => (0x1002, "kiln emulated AMD GPU"),
            "intel" => (0x8086, "kiln emulated Intel GPU"),
            _ => unreachable!(),
        };
        assert_eq!(device["kind"], "discrete_gpu", "{what}");
        assert_eq!(device["vendor_id"], vendor_id, "{what}");
        assert_eq!(device["name"], name, "{what}");
        check_memory(&device, &what, bar, 1 << 30, 1 << 30);
        // The driver's own limits pass through unless lowered.
        assert_eq!(
            device["limits"]["max_storage_buffer_range_bytes"],
            128 * MIB,
            "{what}"
        );
    }
}

#[test]
fn heap_sizes_and_a_lowered_storage_range_show_in_kiln_list() {
    let device = listed(
        "amd",
        "small",
        &[
            ("KILN_EMULATE_VRAM_BYTES", "536870912"),
            ("KILN_EMULATE_HOST_BYTES", "805306368"),
            ("KILN_EMULATE_MAX_STORAGE_RANGE", "67108864"),
        ],
    );
    check_memory(&device, "amd/small", "small", 512 * MIB, 768 * MIB);
    assert_eq!(device["limits"]["max_storage_buffer_range_bytes"], 64 * MIB);
    assert_eq!(device["device_id"], 0x74A1);
}

#[test]
fn a_misspelt_setting_fails_instead_of_emulating_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let out = kiln_emulated(
        "nvidai",
        "none",
        &dir.path().join("layer.log"),
        &[],
        &["list", "--json"],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("KILN_EMULATE_VENDOR=nvidai"), "{stderr}");
}

/// Re-runs this test binary's ignored test `probe` with the emulated card and `extra`
/// environment; returns its exit code and the layer's log.
fn run_probe(probe: &str, extra: &[(&str, &str)]) -> (Option<i32>, Vec<AllocLine>, String) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("layer.log");
    // Named as the harness names it: its module path within the test binary.
    let here = module_path!().split_once("::").map_or("", |(_, m)| m);
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &format!("{here}::{probe}"),
            "--nocapture",
            "--ignored",
        ])
        .envs(emulated_env("nvidia", "none", &log))
        .envs(extra.iter().copied())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), allocation_log(&log), text)
}

fn has_line(log: &[AllocLine], kind: &str, memory_type: u32) -> bool {
    log.iter()
        .any(|l| l.kind == kind && l.memory_type == Some(memory_type))
}

#[test]
fn a_map_of_device_local_memory_is_refused() {
    let (code, log, text) = run_probe("map_probe", &[("KILN_MAP_PROBE", "1")]);
    assert_eq!(code, Some(0), "the probe failed:\n{text}");
    assert!(has_line(&log, "map-refused", 0), "{log:#?}");
    assert!(has_line(&log, "map", 1), "{log:#?}");
    assert!(!has_line(&log, "map", 0), "{log:#?}");
}

#[test]
fn the_layer_enforces_heap_sizes_and_reports_usage() {
    let (code, log, text) = run_probe(
        "heap_probe",
        &[
            ("KILN_HEAP_PROBE", "1"),
            ("KILN_EMULATE_VRAM_BYTES", "67108864"),
            ("KILN_EMULATE_HOST_BYTES", "67108864"),
        ],
    );
    assert_eq!(code, Some(0), "the probe failed:\n{text}");
    let refused: Vec<&AllocLine> = log
        .iter()
        .filter(|l| l.kind == "refused-heap-full")
        .collect();
    assert_eq!(refused.len(), 2, "{log:#?}");
    assert_eq!(
        (refused[0].memory_type, refused[0].heap, refused[0].bytes),
        (Some(0), Some(0), Some(32 * MIB))
    );
    assert_eq!(
        (refused[1].memory_type, refused[1].heap, refused[1].bytes),
        (Some(2), Some(1), Some(80 * MIB))
    );
    assert!(has_line(&log, "refused-bad-type", 7), "{log:#?}");
    let allocated = log
        .iter()
        .find(|l| l.kind == "alloc" && l.memory_type == Some(0))
        .expect("an allocation of type 0");
    assert_eq!(allocated.heap, Some(0));
    assert_eq!(allocated.bytes, Some(48 * MIB));
    assert_eq!(allocated.flags, ["device_local"]);
    let frees = log.iter().filter(|l| l.kind == "free").count();
    let allocs = log.iter().filter(|l| l.kind == "alloc").count();
    assert_eq!(frees, allocs, "{log:#?}");
}

#[test]
fn kiln_tests_vram_within_the_emulated_heap_and_refuses_more_than_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("layer.log");
    let vram = [("KILN_EMULATE_VRAM_BYTES", "268435456")];
    let run = |bytes: &str, out: &Path| {
        kiln_emulated(
            "nvidia",
            "none",
            &log,
            &vram,
            &[
                "run",
                "--device",
                "0",
                "--workloads",
                "vram",
                "--vram-bytes",
                bytes,
                "--passes",
                "1",
                "--algorithms",
                "own-address",
                "--out",
                out.to_str().unwrap(),
            ],
        )
    };
    let out = run("200MiB", &dir.path().join("run"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let lines = allocation_log(&log);
    // The tested memory sits in device-local, unmappable type 0 and adds up to the
    // requested 200 MiB; nothing of it is mapped.
    let tested: u64 = lines
        .iter()
        .filter(|l| l.kind == "alloc" && l.memory_type == Some(0))
        .map(|l| l.bytes.unwrap())
        .sum();
    assert!(tested >= 200 * MIB, "{lines:#?}");
    assert!(!has_line(&lines, "map-refused", 0), "{lines:#?}");
    assert!(
        !lines.iter().any(|l| l.kind.starts_with("refused")),
        "{lines:#?}"
    );

    // More than the heap holds is refused before anything starts (a usage error).
    let before = allocation_log(&log).len();
    let out = run("300MiB", &dir.path().join("run-too-big"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("300 MiB"), "{stderr}");
    assert!(!dir.path().join("run-too-big").exists());
    assert_eq!(allocation_log(&log).len(), before, "nothing was allocated");
}

// ---------------------------------------------------------------------------------------
// Probes: in-process Vulkan programs, run by the tests above in a child process with the
// layer enabled. Each does nothing unless its variable is set.

/// An instance, the first physical device and a device with one queue (asking for
/// `VK_EXT_memory_budget`, which only the layer provides).
struct Probe {
    _entry: ash::Entry,
    instance: ash::Instance,
    physical: vk::PhysicalDevice,
    device: ash::Device,
}

impl Probe {
    fn new() -> Probe {
        // SAFETY: loading the system's Vulkan loader.
        let entry = unsafe { ash::Entry::load() }.expect("the Vulkan loader");
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
        // SAFETY: the create info outlives the call.
        let instance = unsafe {
            entry.create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
        }
        .expect("an instance");
        // SAFETY: instance is alive.
        let physical = unsafe { instance.enumerate_physical_devices() }.expect("devices")[0];
        let priorities = [1.0];
        let queue = vk::DeviceQueueCreateInfo::default()
            .queue_family_index(0)
            .queue_priorities(&priorities);
        let extensions = [ash::ext::memory_budget::NAME.as_ptr()];
        let info = vk::DeviceCreateInfo::default()
            .queue_create_infos(std::slice::from_ref(&queue))
            .enabled_extension_names(&extensions);
        // SAFETY: physical belongs to instance; info outlives the call.
        let device = unsafe { instance.create_device(physical, &info, None) }.expect("a device");
        Probe {
            _entry: entry,
            instance,
            physical,
            device,
        }
    }

    fn allocate(&self, memory_type: u32, bytes: u64) -> Result<vk::DeviceMemory, vk::Result> {
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(bytes)
            .memory_type_index(memory_type);
        // SAFETY: the device is alive.
        unsafe { self.device.allocate_memory(&info, None) }
    }

    fn free(&self, memory: vk::DeviceMemory) {
        // SAFETY: memory came from this device and is not in use.
        unsafe { self.device.free_memory(memory, None) };
    }

    /// Per heap: (budget, usage) from `VK_EXT_memory_budget`.
    fn budget(&self) -> Vec<(u64, u64)> {
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let mut props = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
        // SAFETY: physical belongs to the instance.
        unsafe {
            self.instance
                .get_physical_device_memory_properties2(self.physical, &mut props)
        };
        let heaps = props.memory_properties.memory_heap_count as usize;
        (0..heaps)
            .map(|i| (budget.heap_budget[i], budget.heap_usage[i]))
            .collect()
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        // SAFETY: everything made from the device was freed by the probe.
        unsafe {
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

/// Collects the probe's failed checks and ends the process: 0 only when all held.
struct Checks(Vec<String>);

impl Checks {
    fn check(&mut self, ok: bool, what: String) {
        if !ok {
            eprintln!("probe check failed: {what}");
            self.0.push(what);
        }
    }

    fn exit(self) -> ! {
        std::process::exit(if self.0.is_empty() { 0 } else { 1 })
    }
}

#[test]
#[ignore = "a probe run by a_map_of_device_local_memory_is_refused"]
fn map_probe() {
    if std::env::var_os("KILN_MAP_PROBE").is_none() {
        return;
    }
    let mut checks = Checks(Vec::new());
    {
        let probe = Probe::new();
        let flags = vk::MemoryMapFlags::empty();
        let local = probe.allocate(0, MIB).expect("1 MiB of type 0");
        // SAFETY: local is an unmapped allocation of this device.
        let mapped = unsafe { probe.device.map_memory(local, 0, vk::WHOLE_SIZE, flags) };
        checks.check(
            mapped == Err(vk::Result::ERROR_MEMORY_MAP_FAILED),
            format!("a map of device-local type 0 gave {mapped:?}"),
        );
        probe.free(local);

        let host = probe.allocate(1, MIB).expect("1 MiB of type 1");
        // SAFETY: host is an unmapped allocation of this device.
        let mapped = unsafe { probe.device.map_memory(host, 0, vk::WHOLE_SIZE, flags) };
        checks.check(
            mapped.is_ok(),
            format!("a map of host-visible type 1 gave {mapped:?}"),
        );
        if let Ok(p) = mapped {
            // SAFETY: a mapping of 1 MiB, written and unmapped before the free.
            unsafe {
                std::ptr::write_bytes(p.cast::<u8>(), 0xA5, MIB as usize);
                probe.device.unmap_memory(host);
            }
        }
        probe.free(host);
    }
    checks.exit()
}

#[test]
#[ignore = "a probe run by the_layer_enforces_heap_sizes_and_reports_usage"]
fn heap_probe() {
    if std::env::var_os("KILN_HEAP_PROBE").is_none() {
        return;
    }
    let mut checks = Checks(Vec::new());
    {
        let probe = Probe::new();
        // Buffers may live in every fake type.
        let info = vk::BufferCreateInfo::default()
            .size(MIB)
            .usage(vk::BufferUsageFlags::STORAGE_BUFFER);
        // SAFETY: the device is alive; the buffer is destroyed below.
        let buffer = unsafe { probe.device.create_buffer(&info, None) }.expect("a buffer");
        // SAFETY: as above.
        let bits = unsafe { probe.device.get_buffer_memory_requirements(buffer) }.memory_type_bits;
        checks.check(bits == 0b111, format!("memoryTypeBits {bits:#b}"));
        // SAFETY: as above.
        unsafe { probe.device.destroy_buffer(buffer, None) };

        let budget = probe.budget();
        checks.check(
            budget == [(64 * MIB, 0), (64 * MIB, 0)],
            format!("budget before {budget:?}"),
        );
        let vram = probe.allocate(0, 48 * MIB).expect("48 of 64 MiB of VRAM");
        let budget = probe.budget();
        checks.check(
            budget == [(64 * MIB, 48 * MIB), (64 * MIB, 0)],
            format!("budget with 48 MiB allocated {budget:?}"),
        );
        let more = probe.allocate(0, 32 * MIB);
        checks.check(
            more == Err(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY),
            format!("80 MiB in a 64 MiB VRAM heap gave {more:?}"),
        );
        let host = probe.allocate(1, 32 * MIB);
        checks.check(
            host.is_ok(),
            format!("32 MiB of the separate host heap gave {host:?}"),
        );
        let too_much = probe.allocate(2, 80 * MIB);
        checks.check(
            too_much == Err(vk::Result::ERROR_OUT_OF_HOST_MEMORY),
            format!("80 MiB in a 64 MiB host heap gave {too_much:?}"),
        );
        let bad = probe.allocate(7, MIB);
        checks.check(
            bad == Err(vk::Result::ERROR_INITIALIZATION_FAILED),
            format!("a type the card lacks gave {bad:?}"),
        );
        for memory in [Ok(vram), more, host, too_much, bad].into_iter().flatten() {
            probe.free(memory);
        }
        let budget = probe.budget();
        checks.check(
            budget == [(64 * MIB, 0), (64 * MIB, 0)],
            format!("budget after the frees {budget:?}"),
        );
    }
    checks.exit()
}
