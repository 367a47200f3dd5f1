//! Which devices a command tests: the machine's GPUs from an inventory independent of
//! Vulkan, matched to the Vulkan devices; the GPUs Vulkan cannot see, each with its cause;
//! and the CPU Vulkan device, in a GPU's place when there is none (proving the tool) or as
//! the device under test when asked for (`--device cpu`).

use crate::error::AppError;
use crate::evidence::NotTested;
use crate::gpu::{DeviceInfo, GpuError, Vulkan};
use crate::inventory::{self, Inventory, InventoryGpu, System, VulkanState};

/// The sentence said when only CPU devices are tested.
pub const CPU_ONLY_NOTE: &str = "this proves the tool, not a card";

/// Matches the selector `cpu`: every CPU Vulkan device, chosen as the device under test.
fn is_cpu_selector(selector: &str) -> bool {
    selector.trim().eq_ignore_ascii_case("cpu")
}

/// The Vulkan devices `selectors` name (`cpu` for the CPU Vulkan devices), in the order
/// named, each once; the selectors that name none are returned apart.
fn pick<'a>(all: &'a [DeviceInfo], selectors: &'a [String]) -> (Vec<DeviceInfo>, Vec<&'a String>) {
    let mut chosen: Vec<DeviceInfo> = Vec::new();
    let mut unmatched = Vec::new();
    for s in selectors {
        let found: Vec<&DeviceInfo> = all
            .iter()
            .filter(|d| {
                if is_cpu_selector(s) {
                    d.kind == crate::gpu::DeviceKind::Cpu
                } else {
                    d.matches(s)
                }
            })
            .collect();
        if found.is_empty() {
            unmatched.push(s);
        }
        for d in found {
            if !chosen.iter().any(|c| c.index == d.index) {
                chosen.push(d.clone());
            }
        }
    }
    (chosen, unmatched)
}

/// Notes for CPU devices chosen by name: what their result proves.
fn cpu_notes(chosen: &[DeviceInfo]) -> Vec<String> {
    chosen
        .iter()
        .filter(|d| !d.kind.is_gpu())
        .map(|d| {
            format!(
                "device {} ({}) is {}, tested as asked; {CPU_ONLY_NOTE}",
                d.index,
                d.name,
                not_a_gpu(d.kind)
            )
        })
        .collect()
}

/// What a device that is no GPU is, in the words of a note.
fn not_a_gpu(kind: crate::gpu::DeviceKind) -> &'static str {
    match kind {
        crate::gpu::DeviceKind::Translation => {
            "Vulkan translated onto Direct3D 12 (Dozen), not the card's own driver (install the card maker's driver for its own Vulkan)"
        }
        _ => "a CPU Vulkan device",
    }
}

/// Picks the devices to test for the commands that prove the tool on whatever is there
/// (`selftest`, `bench`, `monitor`). With no selectors: every GPU, or, with none, the CPU
/// Vulkan devices (and a note saying what that proves, and which GPUs Vulkan cannot see).
pub fn select_devices(
    vulkan: &Vulkan,
    selectors: &[String],
) -> Result<(Vec<DeviceInfo>, Vec<String>), AppError> {
    let all = vulkan.devices()?;
    if !selectors.is_empty() {
        let (chosen, unmatched) = pick(&all, selectors);
        if let Some(s) = unmatched.first() {
            return Err(GpuError::NoSuchDevice {
                selector: (*s).clone(),
            }
            .into());
        }
        let notes = cpu_notes(&chosen);
        return Ok((chosen, notes));
    }
    let gpus: Vec<DeviceInfo> = all.iter().filter(|d| d.kind.is_gpu()).cloned().collect();
    if !gpus.is_empty() {
        return Ok((gpus, Vec::new()));
    }
    let names: Vec<&str> = all.iter().map(|d| d.name.as_str()).collect();
    let inventory = inventory::read(&System::from_env());
    let note = if inventory.gpus.is_empty() {
        format!(
            "no GPU found: testing the CPU Vulkan device ({}); {CPU_ONLY_NOTE}",
            names.join(", ")
        )
    } else {
        format!(
            "Vulkan sees none of this machine's {} GPU(s) ({}): testing the CPU Vulkan device ({}) instead; {CPU_ONLY_NOTE} (`kiln list` says why each GPU is not visible)",
            inventory.gpus.len(),
            gpu_names(&inventory.gpus),
            names.join(", ")
        )
    };
    Ok((all, vec![note]))
}

fn gpu_names(gpus: &[InventoryGpu]) -> String {
    gpus.iter()
        .map(|g| {
            format!(
                "{} at {}",
                g.name,
                g.pci_address.as_deref().unwrap_or("an unknown address")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What `kiln run` tests, and what it says of the machine's other GPUs.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// The devices to test.
    pub devices: Vec<DeviceInfo>,
    /// True when no GPU was found at all and the CPU Vulkan device runs the job in a GPU's
    /// place: the run then proves the tool and ends "could not test" (exit 4).
    pub stand_in: bool,
    /// GPUs of the machine (or named by the selectors) that Vulkan cannot see, with causes.
    pub not_tested: Vec<NotTested>,
    /// Facts about the selection.
    pub notes: Vec<String>,
}

/// How starting Vulkan went, in the inventory's terms.
pub fn vulkan_state(e: &GpuError) -> VulkanState {
    match e {
        GpuError::LoaderMissing { detail } => VulkanState::LoaderMissing(detail.clone()),
        GpuError::NoDriver => VulkanState::NoDriver,
        GpuError::NoDevice => VulkanState::NoDevice,
        e => VulkanState::Failed(e.to_string()),
    }
}

/// What went wrong starting Vulkan, in a few neutral words (no advice: the cause per GPU
/// is said where GPUs are present).
fn vulkan_failure(e: &GpuError) -> String {
    match e {
        GpuError::LoaderMissing { .. } => format!(
            "the Vulkan loader ({}) is not installed",
            crate::platform::vulkan::LOADER
        ),
        GpuError::NoDriver => "the Vulkan loader found no driver".into(),
        GpuError::NoDevice => "the Vulkan drivers found no device".into(),
        e => e.to_string(),
    }
}

/// A command's Vulkan failure, said for a machine that has GPUs: each GPU's cause instead
/// of advice meant for a machine without one (installing Mesa's CPU driver would test the
/// CPU, not the GPU). None when the machine has no GPU, or the error is not about starting.
pub fn explain_for_gpus(e: &GpuError) -> Option<String> {
    if !matches!(
        e,
        GpuError::LoaderMissing { .. } | GpuError::NoDriver | GpuError::NoDevice
    ) {
        return None;
    }
    let system = System::from_env();
    let inventory = inventory::read(&system);
    let first = not_visible(&system, &inventory, &[], &vulkan_state(e))
        .into_iter()
        .next()?;
    Some(format!(
        "{}, so none of this machine's {} GPU(s) can be tested: {} (`kiln list` names each GPU and its cause)",
        vulkan_failure(e),
        inventory.gpus.len(),
        first.cause.message.trim_end_matches('.')
    ))
}

/// The machine's GPUs Vulkan cannot see (given the devices it enumerated), each with its
/// cause read from the machine.
pub fn not_visible(
    system: &System,
    inventory: &Inventory,
    devices: &[DeviceInfo],
    vulkan: &VulkanState,
) -> Vec<NotTested> {
    let matched = inventory::match_vulkan(inventory, devices);
    let (icds, searched) = inventory::icds(system);
    inventory
        .gpus
        .iter()
        .zip(matched)
        .filter(|(_, m)| m.is_none())
        .map(|(gpu, _)| NotTested {
            gpu: gpu.clone(),
            cause: inventory::diagnose(system, gpu, &icds, &searched, vulkan),
            observed_as: None,
        })
        .collect()
}

/// True when `selector` names this inventory GPU by its UUID (`GPU-` prefix optional, at
/// least 8 characters) or its PCI address.
fn names_gpu(selector: &str, gpu: &InventoryGpu) -> bool {
    let lower = selector.trim().to_ascii_lowercase();
    let bare = lower.strip_prefix("gpu-").unwrap_or(&lower);
    let by_uuid = gpu.uuid.as_deref().is_some_and(|u| {
        let u = u.to_ascii_lowercase();
        bare.len() >= 8 && u.trim_start_matches("gpu-").starts_with(bare)
    });
    let by_pci = gpu
        .pci_address
        .as_deref()
        .is_some_and(|p| p == lower || p.strip_prefix("0000:") == Some(lower.as_str()));
    by_uuid || by_pci
}

/// What the devices are selected for: how a CPU device standing in is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// `kiln run`: the devices are tested.
    Test,
    /// `kiln watch`: an application is watched on them.
    Watch,
}

/// Picks what `kiln run` tests, from an inventory of the machine's GPUs independent of
/// Vulkan. With no selectors: every GPU Vulkan sees; every GPU it cannot see is not tested,
/// with its cause (the run cannot pass); with no GPU at all, the CPU Vulkan device runs the
/// job in a GPU's place (proving the tool, exit 4). `--device cpu` makes the CPU device the
/// device under test. A selector that names a GPU Vulkan cannot see makes it not tested.
pub fn select_for_run(selectors: &[String], job: Job) -> Result<Selection, AppError> {
    let system = System::from_env();
    let inventory = inventory::read(&system);
    let mut notes: Vec<String> = inventory
        .ignored
        .iter()
        .map(|d| format!("not a GPU to test: {d}"))
        .collect();
    let all = match Vulkan::new().and_then(|v| v.devices()) {
        Ok(all) => all,
        // With GPUs on the machine, a Vulkan that cannot start is each GPU's cause, said
        // per GPU (never the advice to install the CPU driver, which would test the CPU).
        Err(e) if !inventory.gpus.is_empty() => {
            let state = vulkan_state(&e);
            let mut not_tested = not_visible(&system, &inventory, &[], &state);
            if !selectors.is_empty() {
                not_tested.retain(|n| selectors.iter().any(|s| names_gpu(s, &n.gpu)));
                if not_tested.is_empty() {
                    return Err(e.into());
                }
            }
            // Said without the error's own advice, which is for machines with no GPU.
            notes.push(format!("Vulkan could not start: {}", vulkan_failure(&e)));
            return Ok(Selection {
                devices: Vec::new(),
                stand_in: false,
                not_tested,
                notes,
            });
        }
        Err(e) => return Err(e.into()),
    };
    let missing = not_visible(&system, &inventory, &all, &VulkanState::Started);
    if !selectors.is_empty() {
        let (chosen, unmatched) = pick(&all, selectors);
        let mut not_tested = Vec::new();
        for s in unmatched {
            match missing.iter().find(|n| names_gpu(s, &n.gpu)) {
                Some(n) => {
                    if !not_tested.contains(n) {
                        not_tested.push(n.clone());
                    }
                }
                None => {
                    return Err(GpuError::NoSuchDevice {
                        selector: s.clone(),
                    }
                    .into());
                }
            }
        }
        notes.extend(cpu_notes(&chosen));
        let unselected: Vec<InventoryGpu> = missing
            .iter()
            .filter(|n| !not_tested.contains(n))
            .map(|n| n.gpu.clone())
            .collect();
        if !unselected.is_empty() {
            notes.push(format!(
                "not selected, and not visible to Vulkan either: {}",
                gpu_names(&unselected)
            ));
        }
        return Ok(Selection {
            devices: chosen,
            stand_in: false,
            not_tested,
            notes,
        });
    }
    let gpus: Vec<DeviceInfo> = all.iter().filter(|d| d.kind.is_gpu()).cloned().collect();
    if gpus.is_empty() && missing.is_empty() {
        let cpus: Vec<DeviceInfo> = all.into_iter().filter(|d| !d.kind.is_gpu()).collect();
        let names: Vec<&str> = cpus.iter().map(|d| d.name.as_str()).collect();
        notes.push(match job {
            Job::Test => format!(
                "no GPU found: the CPU Vulkan device ({}) runs the whole job to prove the tool; no GPU is tested, so the run is never a pass (one that finds nothing is inconclusive, exit 4); `--device cpu` makes it the device under test",
                names.join(", ")
            ),
            Job::Watch => format!(
                "no GPU found: the application runs on the CPU Vulkan device ({}); what its memory shows is judged, but no GPU is watched, so the watch is never a pass: one that finds nothing in the application is inconclusive (exit 4)",
                names.join(", ")
            ),
        });
        return Ok(Selection {
            devices: cpus,
            stand_in: true,
            not_tested: Vec::new(),
            notes,
        });
    }
    Ok(Selection {
        devices: gpus,
        stand_in: false,
        not_tested: missing,
        notes,
    })
}
