//! What the OS's graphics kernel says of a GPU's memory, beside what Vulkan says. Windows'
//! WDDM manages video memory itself: it gives each process a budget of the card's memory
//! (DXGI's `QueryVideoMemoryInfo`), which can be lower than Vulkan's heap budget, and under
//! pressure it places memory an application asked for as device-local in system RAM. kiln
//! sizes the VRAM test within both budgets and checks, after allocating, that what it
//! allocated landed in the card's memory: a test of system RAM is never a test of VRAM.
//! Linux's drivers place device-local memory in VRAM or refuse it: there is nothing to ask.

/// A GPU's memory as the OS counts it for this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OsMemory {
    /// What this process may use of the card's own memory (DXGI's local budget).
    pub local_budget_bytes: u64,
    /// What this process uses of the card's own memory now.
    pub local_usage_bytes: u64,
    /// What this process uses of system memory through the card now (the non-local
    /// segment: where WDDM puts "device-local" memory it had no room for).
    pub non_local_usage_bytes: u64,
}

/// The OS's figures for the adapter with this LUID (Vulkan's `deviceLUID`); None where the
/// OS keeps none (Linux) or the adapter is not found.
pub fn query(luid: [u8; 8]) -> Option<OsMemory> {
    os::query(luid)
}

/// How much of `allocated_bytes`, allocated as device-local between `before` and `after`,
/// the OS placed in system memory: the growth of the non-local usage, at most what was
/// allocated; None when the local usage grew by all of it (within a MiB per GiB).
pub fn placed_in_system(before: OsMemory, after: OsMemory, allocated_bytes: u64) -> Option<u64> {
    let local = after
        .local_usage_bytes
        .saturating_sub(before.local_usage_bytes);
    let non_local = after
        .non_local_usage_bytes
        .saturating_sub(before.non_local_usage_bytes);
    let slack = allocated_bytes / 1024;
    (local.saturating_add(slack) < allocated_bytes && non_local > slack)
        .then(|| non_local.min(allocated_bytes))
}

#[cfg(not(windows))]
mod os {
    pub fn query(_luid: [u8; 8]) -> Option<super::OsMemory> {
        None
    }
}

#[cfg(windows)]
mod os {
    use windows::Win32::Graphics::Dxgi::{
        CreateDXGIFactory1, DXGI_MEMORY_SEGMENT_GROUP_LOCAL, DXGI_MEMORY_SEGMENT_GROUP_NON_LOCAL,
        DXGI_QUERY_VIDEO_MEMORY_INFO, IDXGIAdapter3, IDXGIFactory1,
    };
    use windows::core::Interface;

    pub fn query(luid: [u8; 8]) -> Option<super::OsMemory> {
        // SAFETY: a factory for this process, released when dropped.
        let factory: IDXGIFactory1 = unsafe { CreateDXGIFactory1() }.ok()?;
        for index in 0.. {
            // SAFETY: an index the factory answers with an adapter or an error.
            let Ok(adapter) = (unsafe { factory.EnumAdapters1(index) }) else {
                return None;
            };
            // SAFETY: a description of an adapter the factory gave.
            let Ok(desc) = (unsafe { adapter.GetDesc1() }) else {
                continue;
            };
            let mut id = [0u8; 8];
            id[..4].copy_from_slice(&desc.AdapterLuid.LowPart.to_le_bytes());
            id[4..].copy_from_slice(&desc.AdapterLuid.HighPart.to_le_bytes());
            if id != luid {
                continue;
            }
            let adapter: IDXGIAdapter3 = adapter.cast().ok()?;
            let segment = |group| {
                let mut info = DXGI_QUERY_VIDEO_MEMORY_INFO::default();
                // SAFETY: node 0 of the adapter and a valid out-pointer.
                unsafe { adapter.QueryVideoMemoryInfo(0, group, &mut info) }
                    .ok()
                    .map(|()| info)
            };
            let local = segment(DXGI_MEMORY_SEGMENT_GROUP_LOCAL)?;
            let non_local = segment(DXGI_MEMORY_SEGMENT_GROUP_NON_LOCAL)?;
            return Some(super::OsMemory {
                local_budget_bytes: local.Budget,
                local_usage_bytes: local.CurrentUsage,
                non_local_usage_bytes: non_local.CurrentUsage,
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn at(local: u64, non_local: u64) -> OsMemory {
        OsMemory {
            local_budget_bytes: 22 * GIB,
            local_usage_bytes: local,
            non_local_usage_bytes: non_local,
        }
    }

    #[test]
    fn memory_wddm_moved_to_system_ram_is_told_from_memory_in_the_card() {
        // All 20 GiB landed in the card.
        assert_eq!(
            placed_in_system(at(GIB, 0), at(21 * GIB, 0), 20 * GIB),
            None
        );
        // 6 GiB of the 20 went to system memory under pressure.
        assert_eq!(
            placed_in_system(at(GIB, 0), at(15 * GIB, 6 * GIB), 20 * GIB),
            Some(6 * GIB)
        );
        // Another process's system-memory use moving meanwhile is not ours: the card
        // took all of it.
        assert_eq!(
            placed_in_system(at(GIB, 0), at(21 * GIB, GIB), 20 * GIB),
            None
        );
    }
}
