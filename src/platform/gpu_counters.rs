//! Every process's GPU memory as Windows counts it: the "GPU Process Memory" performance
//! counters Task Manager shows (dedicated and shared usage, per process and adapter). Under
//! WDDM, NVML gives no per-process memory, and no DRM fdinfo exists: this is how `kiln
//! watch` and the tenant rules see other processes there. Linux has no such counters (NVML
//! and fdinfo cover it): [`open`] answers None.

/// One process's memory on one adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessMemory {
    /// The process.
    pub pid: u32,
    /// The adapter's LUID (Vulkan's `deviceLUID`).
    pub luid: [u8; 8],
    /// The card's own memory it holds.
    pub dedicated_bytes: u64,
    /// System memory it holds through the card.
    pub shared_bytes: u64,
}

/// The counters, open for reading.
pub struct Counters(os::Counters);

/// Opens the counters: None where the OS has none; the error is one sentence.
pub fn open() -> Option<Result<Counters, String>> {
    os::open().map(|r| r.map(Counters))
}

impl Counters {
    /// Every process's memory now, by process and adapter.
    pub fn read(&mut self) -> Vec<ProcessMemory> {
        self.0.read()
    }
}

/// The process and adapter of a counter instance
/// (`pid_1234_luid_0x00000000_0x0000C5B2_phys_0`).
pub fn parse_instance(name: &str) -> Option<(u32, [u8; 8])> {
    let mut parts = name.split('_');
    let mut pid = None;
    let mut luid = None;
    while let Some(part) = parts.next() {
        match part {
            "pid" => pid = parts.next()?.parse().ok(),
            "luid" => {
                let hex = |p: Option<&str>| {
                    let p = p?;
                    u32::from_str_radix(p.trim_start_matches("0x").trim_start_matches("0X"), 16)
                        .ok()
                };
                let (high, low) = (hex(parts.next())?, hex(parts.next())?);
                let mut id = [0u8; 8];
                id[..4].copy_from_slice(&low.to_le_bytes());
                id[4..].copy_from_slice(&high.to_le_bytes());
                luid = Some(id);
            }
            _ => {}
        }
    }
    Some((pid?, luid?))
}

/// Sums the counters' instances into one figure per process and adapter (a process has an
/// instance per physical adapter node).
pub fn collect(dedicated: &[(String, u64)], shared: &[(String, u64)]) -> Vec<ProcessMemory> {
    let mut out: Vec<ProcessMemory> = Vec::new();
    for (list, is_dedicated) in [(dedicated, true), (shared, false)] {
        for (name, bytes) in list {
            let Some((pid, luid)) = parse_instance(name) else {
                continue;
            };
            let at = match out.iter().position(|p| p.pid == pid && p.luid == luid) {
                Some(i) => i,
                None => {
                    out.push(ProcessMemory {
                        pid,
                        luid,
                        dedicated_bytes: 0,
                        shared_bytes: 0,
                    });
                    out.len() - 1
                }
            };
            if is_dedicated {
                out[at].dedicated_bytes += bytes;
            } else {
                out[at].shared_bytes += bytes;
            }
        }
    }
    out
}

#[cfg(not(windows))]
mod os {
    pub struct Counters;

    pub fn open() -> Option<Result<Counters, String>> {
        None
    }

    impl Counters {
        pub fn read(&mut self) -> Vec<super::ProcessMemory> {
            Vec::new()
        }
    }
}

#[cfg(windows)]
mod os {
    use windows::Win32::System::Performance::{
        PDH_CSTATUS_VALID_DATA, PDH_FMT_COUNTERVALUE_ITEM_W, PDH_FMT_LARGE, PDH_HCOUNTER,
        PDH_HQUERY, PDH_MORE_DATA, PdhAddEnglishCounterW, PdhCloseQuery, PdhCollectQueryData,
        PdhGetFormattedCounterArrayW, PdhOpenQueryW,
    };
    use windows::core::{HSTRING, PCWSTR};

    /// The query and its two counters, kept as plain numbers so that the source that owns
    /// them may move to the telemetry thread.
    pub struct Counters {
        query: isize,
        dedicated: isize,
        shared: isize,
    }

    const DEDICATED: &str = r"\GPU Process Memory(*)\Dedicated Usage";
    const SHARED: &str = r"\GPU Process Memory(*)\Shared Usage";

    pub fn open() -> Option<Result<Counters, String>> {
        Some(open_query())
    }

    fn open_query() -> Result<Counters, String> {
        let mut query = PDH_HQUERY::default();
        // SAFETY: a live query on this machine; a valid out-pointer.
        let status = unsafe { PdhOpenQueryW(PCWSTR::null(), 0, &mut query) };
        if status != 0 {
            return Err(format!(
                "the GPU performance counters could not be opened (PDH 0x{status:08x})"
            ));
        }
        let add = |path: &str| {
            let mut counter = PDH_HCOUNTER::default();
            // SAFETY: the open query, a NUL-terminated path and a valid out-pointer.
            let status =
                unsafe { PdhAddEnglishCounterW(query, &HSTRING::from(path), 0, &mut counter) };
            (status == 0).then_some(counter.0 as isize)
        };
        match (add(DEDICATED), add(SHARED)) {
            (Some(dedicated), Some(shared)) => {
                // The first collection primes the counters.
                // SAFETY: the open query.
                let _ = unsafe { PdhCollectQueryData(query) };
                Ok(Counters {
                    query: query.0 as isize,
                    dedicated,
                    shared,
                })
            }
            _ => {
                // SAFETY: the query opened above, closed once.
                let _ = unsafe { PdhCloseQuery(query) };
                Err("Windows has no \"GPU Process Memory\" performance counters here (Windows 10 1709 or later has them): other processes' GPU memory is not seen".into())
            }
        }
    }

    /// A counter's instances and their values.
    fn values(counter: isize) -> Vec<(String, u64)> {
        let counter = PDH_HCOUNTER(counter as *mut core::ffi::c_void);
        let (mut size, mut count) = (0u32, 0u32);
        // SAFETY: a size query with no buffer; valid out-pointers.
        let status = unsafe {
            PdhGetFormattedCounterArrayW(counter, PDH_FMT_LARGE, &mut size, &mut count, None)
        };
        if status != PDH_MORE_DATA || size == 0 {
            return Vec::new();
        }
        // u64 elements keep the buffer aligned for the items' 8-byte values.
        let mut buffer = vec![0u64; (size as usize).div_ceil(8)];
        let items = buffer.as_mut_ptr().cast::<PDH_FMT_COUNTERVALUE_ITEM_W>();
        // SAFETY: a buffer of at least `size` bytes, as the size query asked.
        let status = unsafe {
            PdhGetFormattedCounterArrayW(counter, PDH_FMT_LARGE, &mut size, &mut count, Some(items))
        };
        if status != 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        for i in 0..count as usize {
            // SAFETY: `count` items were written at the buffer's start; their names point
            // into the same buffer, NUL-terminated.
            let item = unsafe { &*items.add(i) };
            if item.FmtValue.CStatus != PDH_CSTATUS_VALID_DATA {
                continue;
            }
            // SAFETY: as above.
            let name = unsafe { item.szName.to_string() }.unwrap_or_default();
            // SAFETY: PDH_FMT_LARGE fills the union's large value.
            let value = unsafe { item.FmtValue.Anonymous.largeValue };
            out.push((name, u64::try_from(value).unwrap_or(0)));
        }
        out
    }

    impl Counters {
        pub fn read(&mut self) -> Vec<super::ProcessMemory> {
            let query = PDH_HQUERY(self.query as *mut core::ffi::c_void);
            // SAFETY: the open query.
            if unsafe { PdhCollectQueryData(query) } != 0 {
                return Vec::new();
            }
            super::collect(&values(self.dedicated), &values(self.shared))
        }
    }

    impl Drop for Counters {
        fn drop(&mut self) {
            // SAFETY: the query opened in `open_query`, closed once.
            let _ = unsafe { PdhCloseQuery(PDH_HQUERY(self.query as *mut core::ffi::c_void)) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LUID: [u8; 8] = [0xb2, 0xc5, 0, 0, 0, 0, 0, 0];

    #[test]
    fn counter_instances_name_the_process_and_the_adapter() {
        assert_eq!(
            parse_instance("pid_1234_luid_0x00000000_0x0000C5B2_phys_0"),
            Some((1234, LUID))
        );
        assert_eq!(parse_instance("_Total"), None);
        assert_eq!(parse_instance("pid_x_luid_0x0_0x1_phys_0"), None);
    }

    #[test]
    fn a_process_is_summed_over_its_adapter_nodes() {
        let gib = 1u64 << 30;
        let list = collect(
            &[
                ("pid_9120_luid_0x00000000_0x0000C5B2_phys_0".into(), 6 * gib),
                ("pid_9120_luid_0x00000000_0x0000C5B2_phys_1".into(), gib),
                ("pid_4242_luid_0x00000000_0x0000C5B2_phys_0".into(), gib / 2),
                ("pid_4242_luid_0x00000000_0x0000D001_phys_0".into(), gib / 4),
            ],
            &[("pid_9120_luid_0x00000000_0x0000C5B2_phys_0".into(), 3 * gib)],
        );
        assert_eq!(list.len(), 3);
        assert_eq!(
            list[0],
            ProcessMemory {
                pid: 9120,
                luid: LUID,
                dedicated_bytes: 7 * gib,
                shared_bytes: 3 * gib
            }
        );
        assert_eq!((list[1].pid, list[1].dedicated_bytes), (4242, gib / 2));
        assert_ne!(list[2].luid, LUID, "the same process on another adapter");
    }
}
