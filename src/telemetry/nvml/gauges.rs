//! What NVML reads on every tick (temperatures, power, clocks, throttle reasons,
//! utilisation, memory, the link's state) and on the slower schedule of its own thread
//! (PCIe throughput, fans, the other processes on the GPU).

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, channel};

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;

use super::{NvmlSource, ffi, fields, is_lost, num, passing, text};
use crate::telemetry::is_own_process;
use crate::telemetry::process::Process;
use crate::telemetry::record::{Reading, Readings};
use crate::telemetry::{signals, throttle};

/// Field ids without a wrapper method (NVML API Reference, "Field Value Enums":
/// `NVML_FI_DEV_MEMORY_TEMP` 82, `NVML_FI_DEV_REMAPPED_*` 142-145).
const FIELD_MEMORY_TEMP: u32 = 82;

/// The most NVML calls a tick makes for one GPU, its handle included (the test suite holds
/// kiln to it through the fake NVML's call log). At the default 200 ms interval eight GPUs
/// then cost well under a tick even where each call takes a millisecond.
pub const CALLS_PER_TICK: usize = 15;

/// How often the slow readings are taken: PCIe throughput (each call blocks for its ~20 ms
/// sampling window on a real driver), the fans and the other processes on the GPU. They
/// are read on their own thread, so that the tick never waits for them.
pub const SLOW_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

impl NvmlSource {
    /// The slow readings ([`slow_at`]) of every matched GPU, every [`SLOW_INTERVAL`], on a
    /// thread with its own NVML handle. A GPU that answers `GPU_IS_LOST` is read no more
    /// (the tick records the loss).
    pub(super) fn spawn_slow(&self) -> Option<Receiver<(u32, Readings)>> {
        let mut watched: Vec<u32> = self.matched().map(|(_, i)| i).collect();
        if watched.is_empty() {
            return None;
        }
        let (tx, rx) = channel();
        let stop = self.stop_events.clone();
        std::thread::Builder::new()
            .name("kiln-nvml-slow".into())
            .spawn(move || {
                let nvml = match Nvml::init() {
                    Ok(n) => n,
                    Err(e) => {
                        // Said as each slow reading's failure, never as silence.
                        let failed = num(Err(e));
                        for i in watched {
                            let _ = tx.send((i, slow_failed(&failed)));
                        }
                        return;
                    }
                };
                let mut fans = std::collections::BTreeMap::new();
                while !watched.is_empty() {
                    let round = std::time::Instant::now();
                    let mut lost = Vec::new();
                    for &i in &watched {
                        let readings = match nvml.device_by_index(i) {
                            Ok(d) => {
                                let count = match fans.get(&i) {
                                    Some(known) => Clone::clone(known),
                                    None => d.num_fans().map_err(|e| num(Err(e))),
                                };
                                // The count is read once, unless its failure may pass.
                                if count.as_ref().err().is_none_or(|why| !passing(why)) {
                                    fans.insert(i, count.clone());
                                }
                                slow_at(&d, &count)
                            }
                            Err(e) => slow_failed(&num(Err(e))),
                        };
                        if is_lost(&readings) {
                            lost.push(i);
                        } else if tx.send((i, readings)).is_err() {
                            return;
                        }
                    }
                    watched.retain(|i| !lost.contains(i));
                    while round.elapsed() < SLOW_INTERVAL {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                }
            })
            .ok()?;
        Some(rx)
    }

    /// Lays the slow readings that arrived since the last tick aside, by device.
    pub(super) fn take_slow(&mut self) {
        let Some(slow) = &self.slow else {
            return;
        };
        for (index, readings) in slow.try_iter() {
            if let Some(m) = self.matches.iter().find(|m| m.index == Some(index)) {
                self.fresh.entry(m.device).or_default().extend(readings);
            }
        }
    }

    /// The device's gauges read on the tick, or `GpuLost` when NVML answers that it is lost
    /// (for its handle, or for any reading): a lost device's tick is no sample. Only what
    /// moves from tick to tick is read here; what never changes is read once
    /// (`identity::fixed_at`), what is slow or slowly changing on its own schedule ([`slow_at`]),
    /// and the cumulative counters at phase boundaries ([`NvmlSource::counters`]), so that
    /// a tick costs at most [`CALLS_PER_TICK`] calls.
    pub(super) fn gauges(nvml: &Nvml, index: u32) -> Result<Readings, NvmlError> {
        let mut g = Readings::new();
        let d = nvml.device_by_index(index)?;
        g.insert(
            signals::GPU_TEMP_C.name.into(),
            num(d.temperature(TemperatureSensor::Gpu).map(f64::from)),
        );
        let [hbm] = fields(&d, [FIELD_MEMORY_TEMP]);
        g.insert(signals::HBM_TEMP_C.name.into(), hbm);
        g.insert(
            signals::POWER_W.name.into(),
            num(d.power_usage().map(|mw| f64::from(mw) / 1e3)),
        );
        // An administrator's cap or the driver's power brake moves it: read every tick.
        g.insert(
            signals::POWER_LIMIT_ENFORCED_W.name.into(),
            num(d.enforced_power_limit().map(|mw| f64::from(mw) / 1e3)),
        );
        for (now, clock) in [
            (signals::CLOCK_SM_MHZ, Clock::SM),
            (signals::CLOCK_MEM_MHZ, Clock::Memory),
            (signals::CLOCK_GRAPHICS_MHZ, Clock::Graphics),
        ] {
            g.insert(now.name.into(), num(d.clock_info(clock).map(f64::from)));
        }
        match ffi::clocks_event_reasons(&d) {
            Ok(mask) => {
                g.insert(
                    signals::THROTTLE_REASONS_MASK.name.into(),
                    Reading::Number(mask as f64),
                );
                // Decoded here, at the source: what reads the samples takes reasons.
                g.insert(
                    signals::THROTTLE_REASONS.name.into(),
                    throttle::reading(mask),
                );
            }
            Err(e) => {
                g.insert(signals::THROTTLE_REASONS_MASK.name.into(), num(Err(e)));
            }
        }
        match d.utilization_rates() {
            Ok(u) => {
                g.insert(
                    signals::UTIL_GPU_PCT.name.into(),
                    Reading::Number(f64::from(u.gpu)),
                );
                g.insert(
                    signals::UTIL_MEM_PCT.name.into(),
                    Reading::Number(f64::from(u.memory)),
                );
            }
            Err(e) => {
                g.insert(signals::UTIL_GPU_PCT.name.into(), num(Err(e)));
            }
        }
        match d.memory_info() {
            Ok(m) => {
                g.insert(
                    signals::MEM_USED_BYTES.name.into(),
                    Reading::Number(m.used as f64),
                );
                g.insert(
                    signals::MEM_FREE_BYTES.name.into(),
                    Reading::Number(m.free as f64),
                );
                g.insert(
                    signals::MEM_TOTAL_BYTES.name.into(),
                    Reading::Number(m.total as f64),
                );
            }
            Err(e) => {
                g.insert(signals::MEM_USED_BYTES.name.into(), num(Err(e)));
            }
        }
        g.insert(
            signals::PSTATE.name.into(),
            text(d.performance_state().map(|p| format!("P{}", p.as_c()))),
        );
        // A link that retrains under load shows for moments: its state is read every tick.
        g.insert(
            signals::PCIE_GEN.name.into(),
            num(d.current_pcie_link_gen().map(f64::from)),
        );
        g.insert(
            signals::PCIE_WIDTH.name.into(),
            num(d.current_pcie_link_width().map(f64::from)),
        );
        if is_lost(&g) {
            return Err(NvmlError::GpuLost);
        }
        Ok(g)
    }
}

/// Every slow reading failed, and why.
fn slow_failed(why: &Reading) -> Readings {
    [
        signals::PCIE_TX_KBPS.name.to_owned(),
        signals::PCIE_RX_KBPS.name.to_owned(),
        signals::OTHER_PROCESSES_NOW.name.to_owned(),
        signals::fan_speed_pct(0),
    ]
    .into_iter()
    .map(|k| (k, why.clone()))
    .collect()
}

/// The slow readings: PCIe throughput each way, every fan (`fans` is the device's count,
/// read once), and the other processes on the GPU.
fn slow_at(d: &nvml_wrapper::Device, fans: &Result<u32, Reading>) -> Readings {
    let mut s = Readings::new();
    s.insert(
        signals::PCIE_TX_KBPS.name.into(),
        num(d.pcie_throughput(PcieUtilCounter::Send).map(f64::from)),
    );
    s.insert(
        signals::PCIE_RX_KBPS.name.into(),
        num(d.pcie_throughput(PcieUtilCounter::Receive).map(f64::from)),
    );
    match fans {
        Ok(n) => {
            for i in 0..*n {
                s.insert(
                    signals::fan_speed_pct(i),
                    num(d.fan_speed(i).map(f64::from)),
                );
            }
        }
        Err(why) => {
            s.insert(signals::fan_speed_pct(0), why.clone());
        }
    }
    s.insert(signals::OTHER_PROCESSES_NOW.name.into(), other_processes(d));
    s
}

/// A process's name as the driver says it, made safe for a process list; `None` where it
/// will not say (a driver or a fake NVML without the call, a process gone).
fn process_name(d: &nvml_wrapper::Device, pid: u32) -> Option<String> {
    /// NVML's own bound on a process name.
    const NAME_MAX: usize = 64;
    let name = d.nvml().sys_process_name(pid, NAME_MAX).ok()?;
    let name: String = name
        .trim()
        .chars()
        .map(|c| {
            if c == ',' || c == ':' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Other processes on the GPU (kiln's own, its workers too, left out), or why the list could not be read: a refused or failed list is unknown, never
/// "none". A card that lists no processes of one kind (no graphics engine) is read from the
/// other.
pub(super) fn other_processes(d: &nvml_wrapper::Device) -> Reading {
    let mut processes = Vec::new();
    let mut readable = false;
    for list in [
        d.running_compute_processes(),
        d.running_graphics_processes(),
    ] {
        match list {
            Ok(list) => {
                readable = true;
                for p in list.into_iter().filter(|p| !is_own_process(p.pid)) {
                    processes.push(Process {
                        pid: p.pid,
                        used_bytes: match p.used_gpu_memory {
                            UsedGpuMemory::Used(b) => Some(b),
                            UsedGpuMemory::Unavailable => None,
                        },
                        name: process_name(d, p.pid),
                    });
                }
            }
            Err(NvmlError::NotSupported) => {}
            Err(e) => return num(Err(e)),
        }
    }
    if readable {
        Reading::Processes(processes)
    } else {
        Reading::not_supported()
    }
}
