//! `kiln list`: the device table.

use std::fmt::Write;

use crate::gpu::DeviceInfo;
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

/// A table of every device: identity, memory, the limits kiln works within, and the
/// NVML device each is matched to.
pub fn table(devices: &[DeviceInfo], nvml: &dyn Source) -> String {
    let mut out = String::new();
    if let Some(message) = down(nvml) {
        let _ = writeln!(out, "note: {message}");
    }
    let matches = nvml.matches();
    for d in devices {
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
    }
    out
}

/// The device list as JSON: each device's description plus its NVML match and identity.
pub fn json(devices: &[DeviceInfo], nvml: &dyn Source) -> String {
    let matches = nvml.matches();
    let unavailable = down(nvml);
    let list: Vec<serde_json::Value> = devices
        .iter()
        .map(|d| {
            let mut v = serde_json::to_value(d).unwrap_or_default();
            let m = matches.iter().find(|m| m.device == d.index);
            v["nvml"] = serde_json::json!({
                "index": m.and_then(|m| m.index),
                "matched_by": m.map(|m| m.by.clone()),
                "identity": nvml.identity(d.index),
                "unavailable": unavailable,
            });
            v
        })
        .collect();
    serde_json::to_string_pretty(&list).unwrap_or_default()
}

/// The machine's GPUs that Vulkan cannot see, a line each with the cause: they cannot be
/// tested until that is fixed.
pub fn not_visible(missing: &[crate::evidence::NotTested]) -> String {
    let mut out = String::new();
    for n in missing {
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
            err(&not_visible(&missing));
            if args.json {
                out("[]\n");
            }
            return Ok(exit_code::INCONCLUSIVE);
        }
        Err(e) => return Err(e.into()),
    };
    let nvml = crate::telemetry::nvml::NvmlSource::new(&devices);
    if args.json {
        out(&format!("{}\n", json(&devices, &nvml)));
        err(&not_visible(&missing));
    } else {
        out(&table(&devices, &nvml));
        out(&not_visible(&missing));
    }
    Ok(exit_code::HEALTHY)
}
