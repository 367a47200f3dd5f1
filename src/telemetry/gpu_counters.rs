//! Every process's GPU memory and each adapter's use on Windows, from the "GPU Process
//! Memory" and "GPU Engine" performance counters ([`crate::platform::perf_counters`]):
//! written as `other_processes_now` and `util_gpu_pct`, the signals NVML and DRM fdinfo
//! give elsewhere, so that `kiln watch` and the tenant rules read one signal on any OS.
//! Matched to Vulkan's devices by LUID; read at most once a second. Where the OS has no
//! such counters (Linux) the source reads nothing and says nothing.

use std::time::{Duration, Instant};

use super::process::Process;
use super::reading::{Reading, Readings};
use super::record::TelemetryData;
use super::{Gap, Source, signals};
use crate::platform::perf_counters::{self, Counters};

/// The shortest time between two reads, as fdinfo's scans.
const READ_EVERY: Duration = Duration::from_millis(900);

/// The GPU performance counters as a telemetry source.
pub struct GpuCountersSource {
    /// (index, LUID) of the devices with a LUID.
    devices: Vec<(usize, [u8; 8])>,
    counters: Option<Counters>,
    unreadable: Option<Gap>,
    last_read: Option<Instant>,
}

impl GpuCountersSource {
    /// A source for the targets that have a LUID (Vulkan devices on Windows).
    pub fn for_targets(targets: &[super::Target]) -> GpuCountersSource {
        let devices: Vec<(usize, [u8; 8])> = targets
            .iter()
            .filter_map(|t| Some((t.index, t.luid?)))
            .collect();
        let (counters, unreadable) = match devices.is_empty() {
            true => (None, None),
            false => match perf_counters::open() {
                None => (None, None),
                Some(Ok(c)) => (Some(c), None),
                Some(Err(message)) => (
                    None,
                    Some(Gap {
                        device: None,
                        message,
                        missing: vec![signals::OTHER_PROCESSES_NOW.name.into()],
                        cause: None,
                    }),
                ),
            },
        };
        GpuCountersSource {
            devices,
            counters,
            unreadable,
            last_read: None,
        }
    }
}

/// The processes of one adapter in the counters' list, kiln's own left out, largest first.
pub fn processes_on(
    list: &[perf_counters::ProcessMemory],
    luid: [u8; 8],
    name_of: impl Fn(u32) -> Option<String>,
) -> Vec<Process> {
    let mut out: Vec<Process> = list
        .iter()
        .filter(|p| p.luid == luid && p.dedicated_bytes > 0 && !super::is_own_process(p.pid))
        .map(|p| Process {
            pid: p.pid,
            used_bytes: Some(p.dedicated_bytes),
            name: name_of(p.pid),
        })
        .collect();
    out.sort_by(|a, b| b.used_bytes.cmp(&a.used_bytes).then(a.pid.cmp(&b.pid)));
    out
}

impl Source for GpuCountersSource {
    fn name(&self) -> &'static str {
        "gpu_counters"
    }

    fn status(&self) -> Vec<Gap> {
        self.unreadable.iter().cloned().collect()
    }

    fn start(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        self.unreadable.iter().cloned().map(Gap::record).collect()
    }

    fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        let Some(counters) = &mut self.counters else {
            return Vec::new();
        };
        if self.last_read.is_some_and(|t| t.elapsed() < READ_EVERY) {
            return Vec::new();
        }
        self.last_read = Some(Instant::now());
        let read = counters.read();
        let root = crate::platform::process::proc_root();
        self.devices
            .iter()
            .map(|&(index, luid)| {
                let processes = processes_on(&read.processes, luid, |pid| {
                    crate::platform::process::name(&root, pid)
                });
                let mut readings = Readings::from([(
                    signals::OTHER_PROCESSES_NOW.name.to_owned(),
                    Reading::Processes(processes),
                )]);
                if let Some(pct) = perf_counters::utilisation_pct(&read.engines, luid) {
                    readings.insert(signals::UTIL_GPU_PCT.name.to_owned(), Reading::Number(pct));
                }
                (Some(index), TelemetryData::Sample { readings })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::perf_counters::ProcessMemory;

    #[test]
    fn each_device_gets_the_processes_on_its_own_adapter() {
        let (card, igpu) = ([0xb2, 0xc5, 0, 0, 0, 0, 0, 0], [1, 0xd0, 0, 0, 0, 0, 0, 0]);
        let memory = |pid, luid, dedicated_bytes| ProcessMemory {
            pid,
            luid,
            dedicated_bytes,
            shared_bytes: 0,
        };
        let list = [
            memory(9120, card, 6 << 30),
            memory(4242, card, 1 << 30),
            memory(4242, igpu, 1 << 20),
            // A process with only shared memory holds none of the card's.
            memory(777, card, 0),
            // kiln itself is never a tenant.
            memory(std::process::id(), card, 2 << 30),
        ];
        let names = |pid| (pid == 9120).then(|| "Cyberpunk2077".to_owned());
        let on_card = processes_on(&list, card, names);
        assert_eq!(
            on_card,
            [
                Process {
                    pid: 9120,
                    used_bytes: Some(6 << 30),
                    name: Some("Cyberpunk2077".into())
                },
                Process {
                    pid: 4242,
                    used_bytes: Some(1 << 30),
                    name: None
                },
            ]
        );
        assert_eq!(processes_on(&list, igpu, names).len(), 1);
        // Where the OS has no counters (Linux), the source reads nothing and says nothing.
        let mut source = GpuCountersSource::for_targets(&[]);
        assert!(source.status().is_empty());
        assert!(source.sample().is_empty());
    }
}
