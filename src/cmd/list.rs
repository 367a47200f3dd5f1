//! `kiln list`: the device table.

use std::fmt::Write;

use crate::gpu::DeviceInfo;
use crate::inventory::frameworks::Diagnosis;
use crate::telemetry::record::Reading;
use crate::telemetry::{Source, signals};
use crate::units::format_bytes;

/// What the source as a whole cannot read, if anything.
fn down(source: &dyn Source) -> Option<String> {
    source
        .status()
        .into_iter()
        .find(|g| g.device.is_none())
        .map(|g| g.message)
}

/// A table of every device: identity, memory, the limits kiln works within, the
/// NVML device each is matched to, and why a framework cannot use it (`diagnoses`, by the
/// device's place in `devices`; nothing where all is well).
pub fn table(devices: &[DeviceInfo], nvml: &dyn Source, diagnoses: &[Vec<Diagnosis>]) -> String {
    let mut out = String::new();
    if let Some(message) = down(nvml) {
        let _ = writeln!(out, "note: {message}");
    }
    let matches = nvml.matches();
    for (at, d) in devices.iter().enumerate() {
        let _ = writeln!(out, "GPU{} {} ({})", d.index, d.name, d.kind.word());
        let _ = writeln!(
            out,
            "  vendor {} 0x{:04x} device 0x{:04x}, driver {} {} ({}), Vulkan {}",
            d.vendor_name,
            d.vendor_id,
            d.device_id,
            d.driver_name,
            d.driver_version,
            d.driver_info,
            d.api_version
        );
        let _ = writeln!(
            out,
            "  uuid {}, pci {}",
            d.device_uuid,
            d.pci_address
                .as_deref()
                .unwrap_or("unknown (no VK_EXT_pci_bus_info)")
        );
        for h in &d.heaps {
            let budget = match (h.budget_bytes, h.usage_bytes) {
                (Some(b), Some(u)) => {
                    format!(", budget {}, used {}", format_bytes(b), format_bytes(u))
                }
                _ => ", no budget reported".into(),
            };
            let _ = writeln!(
                out,
                "  heap {}: {}{}{}",
                h.index,
                format_bytes(h.size_bytes),
                if h.device_local { " device-local" } else { "" },
                budget
            );
        }
        let l = &d.limits;
        let _ = writeln!(
            out,
            "  limits: maxStorageBufferRange {}, maxMemoryAllocationSize {}, maxBufferSize {}, maxComputeWorkGroupCount {:?}, timestampPeriod {} ns ({} valid bits), shaderInt64 {}",
            format_bytes(l.max_storage_buffer_range_bytes),
            format_bytes(l.max_memory_allocation_size_bytes),
            l.max_buffer_size_bytes
                .map(format_bytes)
                .unwrap_or_else(|| "n/a".into()),
            l.max_compute_work_group_count,
            l.timestamp_period_ns,
            l.timestamp_valid_bits,
            d.shader_int64
        );
        let _ = writeln!(out, "  matrix units: {}", matrix_units_line(d));
        if let Some(m) = matches.iter().find(|m| m.device == d.index) {
            let line = match (m.index, nvml.identity(d.index)) {
                (Some(i), Some(id)) => {
                    let field = |k: &str| match id.get(k) {
                        Some(Reading::Text(t)) => t.clone(),
                        Some(Reading::Number(n)) => n.to_string(),
                        _ => "n/a".into(),
                    };
                    format!(
                        "nvml: device {i}, matched by {}: {} serial {}, VBIOS {}, driver {}",
                        m.by,
                        field(signals::UUID.name),
                        field(signals::SERIAL.name),
                        field(signals::VBIOS.name),
                        field(signals::DRIVER_VERSION.name)
                    )
                }
                _ => format!("nvml: none ({})", m.by),
            };
            let _ = writeln!(out, "  {line}");
        }
        write_diagnoses(&mut out, diagnoses.get(at));
    }
    out
}

/// Each diagnosis as a line of its own under its GPU.
fn write_diagnoses(out: &mut String, diagnoses: Option<&Vec<Diagnosis>>) {
    for d in diagnoses.into_iter().flatten() {
        let _ = writeln!(out, "  diagnosis [{}]: {}", d.kind.word(), d.sentence());
    }
}

/// The device list as JSON: each device's description plus its NVML match and identity,
/// and `diagnoses`: why a framework cannot use it (by the device's place in `devices`).
pub fn json(devices: &[DeviceInfo], nvml: &dyn Source, diagnoses: &[Vec<Diagnosis>]) -> String {
    let matches = nvml.matches();
    let unavailable = down(nvml);
    let list: Vec<serde_json::Value> = devices
        .iter()
        .enumerate()
        .map(|(at, d)| {
            let mut v = serde_json::to_value(d).unwrap_or_default();
            let m = matches.iter().find(|m| m.device == d.index);
            v["nvml"] = serde_json::json!({
                "index": m.and_then(|m| m.index),
                "matched_by": m.map(|m| m.by.clone()),
                "identity": nvml.identity(d.index),
                "unavailable": unavailable,
            });
            v["diagnoses"] = serde_json::to_value(diagnoses.get(at).cloned().unwrap_or_default())
                .unwrap_or_default();
            v
        })
        .collect();
    serde_json::to_string_pretty(&list).unwrap_or_default()
}

/// The machine's GPUs that Vulkan cannot see, a line each with the cause: they cannot be
/// tested until that is fixed; then why a framework cannot use each (`diagnoses`, by its
/// place in `missing`).
pub fn not_visible(missing: &[crate::evidence::NotTested], diagnoses: &[Vec<Diagnosis>]) -> String {
    let mut out = String::new();
    for (at, n) in missing.iter().enumerate() {
        let _ = writeln!(
            out,
            "not visible to Vulkan: {} at {} ({}, seen by {}): {} [{}]",
            n.gpu.name,
            n.gpu.pci_address.as_deref().unwrap_or("an unknown address"),
            n.gpu
                .kernel_driver
                .as_deref()
                .map_or_else(|| "no kernel driver".to_owned(), |d| format!("driver {d}")),
            n.gpu.seen_by.join(" and "),
            n.cause.message,
            n.cause.cause
        );
        write_diagnoses(&mut out, diagnoses.get(at));
    }
    out
}

/// The device's matrix units in one line: the shapes kiln can drive, or why none.
fn matrix_units_line(d: &crate::gpu::DeviceInfo) -> String {
    let units = &d.matrix_units;
    if !d.cooperative_matrix {
        return "none offered to shaders (no VK_KHR_cooperative_matrix)".into();
    }
    if let Some(why) = &units.unusable {
        return format!("not usable: {why}");
    }
    format!(
        "{} (subgroup {})",
        units
            .shapes
            .iter()
            .map(crate::gpu::MatrixUnitShape::describe)
            .collect::<Vec<_>>()
            .join("; "),
        units.subgroup_size
    )
}

/// What the framework diagnoses read beyond each GPU: NVML's state and CUDA version, and
/// the frameworks of the Python environments on PATH and of those `named`.
fn facts(
    system: &crate::inventory::System,
    nvml: &crate::telemetry::nvml::NvmlSource,
    named: &[std::path::PathBuf],
    nvml_indices: &[u32],
) -> crate::inventory::frameworks::Facts {
    use crate::inventory::frameworks::{self, CudaVersion, Facts, NvmlState};
    let cause = nvml
        .status()
        .into_iter()
        .find(|g| g.device.is_none())
        .map(|g| g.cause.unwrap_or_default());
    let envs = frameworks::python_envs(
        system.env.get("PATH").map(String::as_str),
        named,
        system.env.get("HOME").map(std::path::Path::new),
    );
    Facts {
        nvml: NvmlState::from_cause(cause.as_deref()),
        cuda_driver: nvml.cuda_driver_version().and_then(CudaVersion::from_nvml),
        installed: frameworks::installed(&envs),
        compute_capability: nvml_indices
            .iter()
            .copied()
            .filter_map(|i| nvml.compute_capability_at(i).map(|cc| (i, cc)))
            .collect(),
    }
}

/// The diagnoses of the GPUs Vulkan does not see, by their place in `missing`.
fn missing_diagnoses(
    system: &crate::inventory::System,
    missing: &[crate::evidence::NotTested],
    facts: &crate::inventory::frameworks::Facts,
) -> Vec<Vec<Diagnosis>> {
    missing
        .iter()
        .map(|n| crate::inventory::frameworks::diagnose(system, &n.gpu, facts))
        .collect()
}

/// The diagnoses of Vulkan's devices, by their place in `devices`: each through the
/// machine's GPU it is, else as Vulkan describes it; none for a CPU device.
fn device_diagnoses(
    system: &crate::inventory::System,
    inventory: &crate::inventory::Inventory,
    devices: &[DeviceInfo],
    nvml: &[crate::telemetry::Match],
    facts: &crate::inventory::frameworks::Facts,
) -> Vec<Vec<Diagnosis>> {
    let matched = crate::inventory::match_vulkan(inventory, devices);
    devices
        .iter()
        .map(|d| {
            if !d.kind.is_gpu() {
                return Vec::new();
            }
            let gpu = matched
                .iter()
                .position(|m| *m == Some(d.index))
                .map(|slot| inventory.gpus[slot].clone())
                .unwrap_or_else(|| crate::inventory::InventoryGpu {
                    pci_address: d.pci_address.clone(),
                    vendor_id: d.vendor_id,
                    device_id: Some(d.device_id),
                    name: d.name.clone(),
                    uuid: None,
                    nvml_index: nvml
                        .iter()
                        .find(|m| m.device == d.index)
                        .and_then(|m| m.index),
                    kernel_driver: None,
                    mig_enabled: None,
                    seen_by: vec!["vulkan".into()],
                    problem: None,
                    compute_only: false,
                });
            crate::inventory::frameworks::diagnose(system, &gpu, facts)
        })
        .collect()
}

/// `kiln list`.
pub fn command(args: crate::cmd::cli::ListArgs) -> Result<i32, crate::error::AppError> {
    use crate::cmd::edge::{err, out};
    use crate::exit_code;
    use crate::inventory::{System, VulkanState};
    let system = System::from_env();
    let inventory = crate::inventory::read(&system);
    let (devices, missing) = match crate::gpu::Vulkan::new().and_then(|v| v.devices()) {
        Ok(devices) => {
            let missing =
                crate::select::not_visible(&system, &inventory, &devices, &VulkanState::Started);
            (devices, missing)
        }
        // GPUs that Vulkan cannot reach at all: each is named with its cause, and the
        // listing could not show what was asked (exit 4).
        Err(e) if !inventory.gpus.is_empty() => {
            let state = crate::select::vulkan_state(&e);
            let missing = crate::select::not_visible(&system, &inventory, &[], &state);
            let nvml = crate::telemetry::nvml::NvmlSource::for_targets(&[]);
            let indices: Vec<u32> = inventory.gpus.iter().filter_map(|g| g.nvml_index).collect();
            let facts = facts(&system, &nvml, &args.python, &indices);
            err(&not_visible(
                &missing,
                &missing_diagnoses(&system, &missing, &facts),
            ));
            if args.json {
                out("[]\n");
            }
            return Ok(exit_code::INCONCLUSIVE);
        }
        Err(e) => return Err(e.into()),
    };
    let nvml = crate::telemetry::nvml::NvmlSource::new(&devices);
    let matches = nvml.matches();
    let mut indices: Vec<u32> = inventory.gpus.iter().filter_map(|g| g.nvml_index).collect();
    indices.extend(matches.iter().filter_map(|m| m.index));
    indices.sort_unstable();
    indices.dedup();
    let facts = facts(&system, &nvml, &args.python, &indices);
    let diagnoses = device_diagnoses(&system, &inventory, &devices, &matches, &facts);
    let missing_said = not_visible(&missing, &missing_diagnoses(&system, &missing, &facts));
    if args.json {
        out(&format!("{}\n", json(&devices, &nvml, &diagnoses)));
        err(&missing_said);
    } else {
        out(&table(&devices, &nvml, &diagnoses));
        out(&missing_said);
    }
    Ok(exit_code::HEALTHY)
}
