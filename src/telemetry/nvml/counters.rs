//! What NVML counts, read at phase boundaries: ECC errors by location, retired pages, row
//! remapping and its banks, SRAM ECC, NVLink states and errors, violation time, PCIe
//! replays and energy. Their growth over a phase is the evidence.

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{
    EccCounter, MemoryError, MemoryLocation, PerformancePolicy, RetirementCause,
};
use nvml_wrapper::error::NvmlError;

use super::{NvmlSource, ffi, fields, num};
use crate::telemetry::record::{Reading, Readings};
use crate::telemetry::signals;

/// Field ids without a wrapper method (NVML API Reference, "Field Value Enums":
/// `NVML_FI_DEV_MEMORY_TEMP` 82, `NVML_FI_DEV_REMAPPED_*` 142-145).
const FIELD_REMAPPED_COR: u32 = 142;
const FIELD_REMAPPED_UNC: u32 = 143;
const FIELD_REMAP_PENDING: u32 = 144;
const FIELD_REMAP_FAILURE: u32 = 145;
/// `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`: 0 none, 1 GPU reset, 2 node reboot, 3 drain
/// peer-to-peer, 4 drain and reset.
const FIELD_RECOVERY_ACTION: u32 = 230;

impl NvmlSource {
    pub(super) fn counters(nvml: &Nvml, index: u32) -> Readings {
        let mut c = Readings::new();
        let Ok(d) = nvml.device_by_index(index) else {
            return c;
        };
        for (total, error, counter) in [
            (
                signals::ECC_CORRECTED_VOLATILE,
                MemoryError::Corrected,
                EccCounter::Volatile,
            ),
            (
                signals::ECC_CORRECTED_AGGREGATE,
                MemoryError::Corrected,
                EccCounter::Aggregate,
            ),
            (
                signals::ECC_UNCORRECTED_VOLATILE,
                MemoryError::Uncorrected,
                EccCounter::Volatile,
            ),
            (
                signals::ECC_UNCORRECTED_AGGREGATE,
                MemoryError::Uncorrected,
                EccCounter::Aggregate,
            ),
        ] {
            c.insert(
                total.name.into(),
                num(d.total_ecc_errors(error, counter).map(|v| v as f64)),
            );
            // In the order of `signals::ECC_LOCATIONS`.
            let locations = [
                MemoryLocation::Device,
                MemoryLocation::L1Cache,
                MemoryLocation::L2Cache,
                MemoryLocation::RegisterFile,
            ];
            for (place, location) in signals::ECC_LOCATIONS.iter().zip(locations) {
                c.insert(
                    signals::ecc_at(total, place),
                    num(d
                        .memory_error_counter(error, counter, location)
                        .map(|v| v as f64)),
                );
            }
        }
        for (key, cause) in [
            (
                signals::RETIRED_PAGES_SBE.name,
                RetirementCause::MultipleSingleBitEccErrors,
            ),
            (
                signals::RETIRED_PAGES_DBE.name,
                RetirementCause::DoubleBitEccError,
            ),
        ] {
            c.insert(
                key.into(),
                num(d.retired_pages(cause).map(|p| p.len() as f64)),
            );
        }
        c.insert(
            signals::RETIRED_PAGES_PENDING.name.into(),
            num(d
                .are_pages_pending_retired()
                .map(|p| f64::from(u8::from(p)))),
        );
        let keys = [
            signals::REMAPPED_CORRECTABLE.name,
            signals::REMAPPED_UNCORRECTABLE.name,
            signals::REMAP_PENDING.name,
            signals::REMAP_FAILURE.name,
            signals::RECOVERY_ACTION.name,
        ];
        let values = fields(
            &d,
            [
                FIELD_REMAPPED_COR,
                FIELD_REMAPPED_UNC,
                FIELD_REMAP_PENDING,
                FIELD_REMAP_FAILURE,
                FIELD_RECOVERY_ACTION,
            ],
        );
        for (key, value) in keys.into_iter().zip(values) {
            c.insert(key.into(), value);
        }
        // How close each memory bank is to its last spare row, and the SRAM's own RMA flag.
        match ffi::row_remapper_histogram(&d) {
            Ok(h) => {
                for (signal, banks) in [
                    (signals::REMAP_BANKS_MAX, h.max),
                    (signals::REMAP_BANKS_HIGH, h.high),
                    (signals::REMAP_BANKS_PARTIAL, h.partial),
                    (signals::REMAP_BANKS_LOW, h.low),
                    (signals::REMAP_BANKS_NONE, h.none),
                ] {
                    c.insert(signal.name.into(), Reading::Number(f64::from(banks)));
                }
            }
            Err(e) => {
                c.insert(signals::REMAP_BANKS_NONE.name.into(), num(Err(e)));
            }
        }
        match ffi::sram_ecc_status(&d) {
            Ok(s) => {
                for (signal, value) in [
                    (
                        signals::SRAM_UNCORRECTED_PARITY,
                        s.uncorrected_parity as f64,
                    ),
                    (
                        signals::SRAM_UNCORRECTED_SECDED,
                        s.uncorrected_secded as f64,
                    ),
                    (signals::SRAM_CORRECTED, s.corrected as f64),
                    (
                        signals::SRAM_THRESHOLD_EXCEEDED,
                        f64::from(u8::from(s.threshold_exceeded)),
                    ),
                ] {
                    c.insert(signal.name.into(), Reading::Number(value));
                }
            }
            Err(e) => {
                c.insert(signals::SRAM_THRESHOLD_EXCEEDED.name.into(), num(Err(e)));
            }
        }
        nvlinks(&d, &mut c);
        // Cumulative time held below the requested clocks: its growth over a phase is the
        // time the phase was capped.
        for (signal, policy) in [
            (signals::VIOLATION_POWER_NS, PerformancePolicy::Power),
            (signals::VIOLATION_THERMAL_NS, PerformancePolicy::Thermal),
        ] {
            c.insert(
                signal.name.into(),
                num(d.violation_status(policy).map(|v| v.violation_time as f64)),
            );
        }
        c.insert(
            signals::PCIE_REPLAYS.name.into(),
            num(d.pcie_replay_counter().map(f64::from)),
        );
        c.insert(
            signals::ENERGY_MJ.name.into(),
            num(d.total_energy_consumption().map(|e| e as f64)),
        );
        c
    }
}

/// The most NVLinks NVML numbers (`NVML_NVLINK_MAX_LINKS` of the headers kiln is built
/// with; an H100's 18).
pub(super) const NVLINK_MAX_LINKS: u32 = 18;

/// Every NVLink of the device, at a phase boundary: whether it is up, and its error
/// counters. A GPU without NVLink answers `NotSupported` for link 0, and a link past its
/// last `NotSupported` or `InvalidArg` (drivers differ): nothing more is asked then. A link
/// whose state cannot be read for another reason says why, never "down".
fn nvlinks(d: &nvml_wrapper::Device, c: &mut Readings) {
    use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
    for link in 0..NVLINK_MAX_LINKS {
        let l = d.link_wrapper_for(link);
        match l.is_active() {
            Err(NvmlError::NotSupported | NvmlError::InvalidArg) => break,
            state => {
                let failed = state.is_err();
                c.insert(
                    signals::nvlink(link, signals::NvlinkPart::State),
                    num(state.map(|up| f64::from(u8::from(up)))),
                );
                if failed {
                    break;
                }
            }
        }
        for (part, counter) in signals::NvlinkPart::COUNTERS.into_iter().zip([
            ErrorCounter::DlReplay,
            ErrorCounter::DlRecovery,
            ErrorCounter::DlCrcFlit,
            ErrorCounter::DlCrcData,
        ]) {
            c.insert(
                signals::nvlink(link, part),
                num(l.error_counter(counter).map(|v| v as f64)),
            );
        }
    }
}
