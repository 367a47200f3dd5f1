//! `kiln list`: the device table.

use std::fmt::Write;

use crate::gpu::DeviceInfo;
use crate::workload::vram::format_bytes;

/// A table of every device: identity, memory and the limits kiln works within.
pub fn table(devices: &[DeviceInfo]) -> String {
    let mut out = String::new();
    for d in devices {
        let _ = writeln!(out, "GPU{} {} ({:?})", d.index, d.name, d.kind);
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
    }
    out
}
