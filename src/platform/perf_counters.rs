//! Every process's GPU memory and the engines' use as Windows counts them: the "GPU Process
//! Memory" and "GPU Engine" performance counters Task Manager shows (dedicated and shared
//! usage per process and adapter, each engine's busy share per process). Under
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

/// What the counters said at one read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Read {
    /// Every process's memory, by process and adapter.
    pub processes: Vec<ProcessMemory>,
    /// Every engine's busy share, by process, adapter and engine.
    pub engines: Vec<EngineUse>,
}

/// One process's use of one engine of one adapter.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineUse {
    /// The process.
    pub pid: u32,
    /// The adapter's LUID.
    pub luid: [u8; 8],
    /// The engine, by its node and index (`0_eng_3`).
    pub engine: String,
    /// Its busy share in the last interval, in percent.
    pub percent: f64,
}

/// The counters, open for reading.
pub struct Counters(os::Counters);

/// Opens the counters: None where the OS has none; the error is one sentence.
pub fn open() -> Option<Result<Counters, String>> {
    os::open().map(|r| r.map(Counters))
}

impl Counters {
    /// Every process's memory and engine use now.
    pub fn read(&mut self) -> Read {
        self.0.read()
    }
}

/// The engine of an engine counter's instance (`pid_1234_luid_..._phys_0_eng_3_engtype_3D`
/// is `0_eng_3`).
pub fn engine_of(name: &str) -> Option<String> {
    let after = &name[name.find("_phys_")? + "_phys_".len()..];
    let engine = after.split("_engtype").next()?;
    (!engine.is_empty()).then(|| engine.to_owned())
}

/// The adapter's use as Task Manager shows it: each engine's share summed over the
/// processes that used it, and the busiest engine's, at most 100%. None when no engine of
/// the adapter was counted.
pub fn utilisation_pct(engines: &[EngineUse], luid: [u8; 8]) -> Option<f64> {
    let mut by_engine: Vec<(&str, f64)> = Vec::new();
    for e in engines.iter().filter(|e| e.luid == luid) {
        match by_engine.iter_mut().find(|(name, _)| *name == e.engine) {
            Some((_, sum)) => *sum += e.percent,
            None => by_engine.push((e.engine.as_str(), e.percent)),
        }
    }
    by_engine
        .iter()
        .map(|(_, pct)| pct.min(100.0))
        .reduce(f64::max)
}

/// The engine counter's instances as uses.
pub fn engine_uses(values: &[(String, f64)]) -> Vec<EngineUse> {
    values
        .iter()
        .filter_map(|(name, percent)| {
            let (pid, luid) = parse_instance(name)?;
            Some(EngineUse {
                pid,
                luid,
                engine: engine_of(name)?,
                percent: *percent,
            })
        })
        .collect()
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
        pub fn read(&mut self) -> super::Read {
            super::Read::default()
        }
    }
}

#[cfg(windows)]
mod os {
    use windows::Win32::System::Performance::{
        PDH_CSTATUS_VALID_DATA, PDH_FMT, PDH_FMT_COUNTERVALUE_ITEM_W, PDH_FMT_DOUBLE,
        PDH_FMT_LARGE, PDH_HCOUNTER, PDH_HQUERY, PDH_MORE_DATA, PdhAddEnglishCounterW,
        PdhCloseQuery, PdhCollectQueryData, PdhGetFormattedCounterArrayW, PdhOpenQueryW,
    };
    use windows::core::{HSTRING, PCWSTR};

    /// The query and its two counters, kept as plain numbers so that the source that owns
    /// them may move to the telemetry thread.
    pub struct Counters {
        query: isize,
        dedicated: isize,
        shared: isize,
        /// The engines' counter, where Windows has it.
        engines: Option<isize>,
    }

    const DEDICATED: &str = r"\GPU Process Memory(*)\Dedicated Usage";
    const SHARED: &str = r"\GPU Process Memory(*)\Shared Usage";
    const ENGINES: &str = r"\GPU Engine(*)\Utilization Percentage";

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
                let engines = add(ENGINES);
                // The first collection primes the counters (a rate needs two).
                // SAFETY: the open query.
                let _ = unsafe { PdhCollectQueryData(query) };
                Ok(Counters {
                    query: query.0 as isize,
                    dedicated,
                    shared,
                    engines,
                })
            }
            _ => {
                // SAFETY: the query opened above, closed once.
                let _ = unsafe { PdhCloseQuery(query) };
                Err("Windows has no \"GPU Process Memory\" performance counters here (Windows 10 1709 or later has them): other processes' GPU memory is not seen".into())
            }
        }
    }

    /// A counter's instances and their values, in `format` (read as f64).
    fn values(counter: isize, format: PDH_FMT) -> Vec<(String, f64)> {
        let counter = PDH_HCOUNTER(counter as *mut core::ffi::c_void);
        let (mut size, mut count) = (0u32, 0u32);
        // SAFETY: a size query with no buffer; valid out-pointers.
        let status =
            unsafe { PdhGetFormattedCounterArrayW(counter, format, &mut size, &mut count, None) };
        if status != PDH_MORE_DATA || size == 0 {
            return Vec::new();
        }
        // u64 elements keep the buffer aligned for the items' 8-byte values.
        let mut buffer = vec![0u64; (size as usize).div_ceil(8)];
        let items = buffer.as_mut_ptr().cast::<PDH_FMT_COUNTERVALUE_ITEM_W>();
        // SAFETY: a buffer of at least `size` bytes, as the size query asked.
        let status = unsafe {
            PdhGetFormattedCounterArrayW(counter, format, &mut size, &mut count, Some(items))
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
            // SAFETY: the union's member is the one `format` asked for.
            let value = unsafe {
                if format == PDH_FMT_DOUBLE {
                    item.FmtValue.Anonymous.doubleValue
                } else {
                    item.FmtValue.Anonymous.largeValue as f64
                }
            };
            out.push((name, value));
        }
        out
    }

    impl Counters {
        pub fn read(&mut self) -> super::Read {
            let query = PDH_HQUERY(self.query as *mut core::ffi::c_void);
            // SAFETY: the open query.
            if unsafe { PdhCollectQueryData(query) } != 0 {
                return super::Read::default();
            }
            let bytes = |counter| -> Vec<(String, u64)> {
                values(counter, PDH_FMT_LARGE)
                    .into_iter()
                    .map(|(name, v)| (name, v.max(0.0) as u64))
                    .collect()
            };
            super::Read {
                processes: super::collect(&bytes(self.dedicated), &bytes(self.shared)),
                engines: self
                    .engines
                    .map(|c| super::engine_uses(&values(c, PDH_FMT_DOUBLE)))
                    .unwrap_or_default(),
            }
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
    fn the_busiest_engine_summed_over_its_processes_is_the_adapters_use() {
        let uses = engine_uses(&[
            (
                "pid_9120_luid_0x00000000_0x0000C5B2_phys_0_eng_0_engtype_3D".into(),
                61.0,
            ),
            (
                "pid_4242_luid_0x00000000_0x0000C5B2_phys_0_eng_0_engtype_3D".into(),
                20.5,
            ),
            (
                "pid_4242_luid_0x00000000_0x0000C5B2_phys_0_eng_3_engtype_Compute_0".into(),
                35.0,
            ),
            (
                "pid_7_luid_0x00000000_0x0000D001_phys_0_eng_0_engtype_3D".into(),
                99.0,
            ),
            ("_Total".into(), 100.0),
        ]);
        assert_eq!(uses.len(), 4);
        assert_eq!(uses[2].engine, "0_eng_3");
        assert_eq!(utilisation_pct(&uses, LUID), Some(81.5));
        assert_eq!(utilisation_pct(&uses, [9; 8]), None);
        // Rounding in the counters never reads as more than the whole engine.
        let busy = engine_uses(&[
            (
                "pid_1_luid_0x00000000_0x0000C5B2_phys_0_eng_0_engtype_3D".into(),
                70.0,
            ),
            (
                "pid_2_luid_0x00000000_0x0000C5B2_phys_0_eng_0_engtype_3D".into(),
                31.0,
            ),
        ]);
        assert_eq!(utilisation_pct(&busy, LUID), Some(100.0));
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
