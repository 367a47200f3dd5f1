//! The NVML calls nvml-wrapper does not wrap, made through the library it loaded: the row
//! remapper's histogram (per-bank spare rows, R455+) and the SRAM ECC error status (its
//! RMA threshold flag, R550+). The only unsafe code outside `gpu/`: each call is one FFI
//! call with its SAFETY note, and only safe types leave this module. A driver that lacks a
//! call answers as NVML would (`FailedToLoadSymbol`), never a crash.

use nvml_wrapper::Device;
use nvml_wrapper::error::{NvmlError, nvml_sym, nvml_try};
use nvml_wrapper_sys::bindings::{nvmlEccSramErrorStatus_t, nvmlRowRemapperHistogramValues_t};

/// Why the clocks are held now, every bit as the driver sets it
/// (`nvmlDeviceGetCurrentClocksEventReasons`, R535+; before it, the same mask under its old
/// name, `nvmlDeviceGetCurrentClocksThrottleReasons`).
pub fn clocks_event_reasons(device: &Device) -> Result<u64, NvmlError> {
    let lib = device.nvml().lib();
    let sym = nvml_sym(lib.nvmlDeviceGetCurrentClocksEventReasons.as_ref())
        .or_else(|_| nvml_sym(lib.nvmlDeviceGetCurrentClocksThrottleReasons.as_ref()))?;
    let mut mask: std::os::raw::c_ulonglong = 0;
    // SAFETY: `sym` is one of the library's two names for this call, both with the
    // signature the binding declares (device, mask out); the handle is valid while
    // `device` lives, and `mask` is a writable integer.
    nvml_try(unsafe { sym(device.handle(), &mut mask) })?;
    Ok(mask)
}

/// How many of the device's memory banks have how much of their spare rows left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemapHistogram {
    /// Banks with every spare row left.
    pub max: u32,
    /// Banks with most of them.
    pub high: u32,
    /// Banks with some.
    pub partial: u32,
    /// Banks with few: the warning before a remap failure.
    pub low: u32,
    /// Banks with none: the next uncorrectable error there fails row remapping.
    pub none: u32,
}

/// The device's row remapper histogram (`nvmlDeviceGetRowRemapperHistogram`).
pub fn row_remapper_histogram(device: &Device) -> Result<RemapHistogram, NvmlError> {
    let sym = nvml_sym(
        device
            .nvml()
            .lib()
            .nvmlDeviceGetRowRemapperHistogram
            .as_ref(),
    )?;
    let mut v = nvmlRowRemapperHistogramValues_t {
        max: 0,
        high: 0,
        partial: 0,
        low: 0,
        none: 0,
    };
    // SAFETY: `sym` is the library's own `nvmlDeviceGetRowRemapperHistogram`, whose C
    // signature the binding declares; the handle is valid while `device` (borrowed from
    // the live `Nvml`) lives, and `v` is a writable struct of the type the call fills.
    nvml_try(unsafe { sym(device.handle(), &mut v) })?;
    Ok(RemapHistogram {
        max: v.max,
        high: v.high,
        partial: v.partial,
        low: v.low,
        none: v.none,
    })
}

/// The device's on-chip SRAM ECC status (`nvmlDeviceGetSramEccErrorStatus`, version 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SramStatus {
    /// Uncorrectable errors in parity-protected SRAM, over the card's life.
    pub uncorrected_parity: u64,
    /// Uncorrectable errors in SEC-DED-protected SRAM, over the card's life.
    pub uncorrected_secded: u64,
    /// Corrected SRAM errors, over the card's life.
    pub corrected: u64,
    /// The driver's flag that a bank passed its threshold of unique uncorrectable errors
    /// (more than 4 for parity, 2 for SEC-DED): an RMA criterion.
    pub threshold_exceeded: bool,
}

/// `nvmlEccSramErrorStatus_v1`: the struct's size with its version in the top byte.
const SRAM_STATUS_V1: u32 = std::mem::size_of::<nvmlEccSramErrorStatus_t>() as u32 | (1 << 24);

/// The device's SRAM ECC status (R550+, root only on some drivers).
pub fn sram_ecc_status(device: &Device) -> Result<SramStatus, NvmlError> {
    let sym = nvml_sym(device.nvml().lib().nvmlDeviceGetSramEccErrorStatus.as_ref())?;
    // SAFETY: the struct is plain integers, for which all zeros is a valid value.
    let mut s: nvmlEccSramErrorStatus_t = unsafe { std::mem::zeroed() };
    s.version = SRAM_STATUS_V1;
    // SAFETY: `sym` is the library's own `nvmlDeviceGetSramEccErrorStatus` with the
    // signature the binding declares; the handle is valid while `device` lives, and `s` is
    // a writable struct of the version it carries.
    nvml_try(unsafe { sym(device.handle(), &mut s) })?;
    Ok(SramStatus {
        uncorrected_parity: s.aggregateUncParity,
        uncorrected_secded: s.aggregateUncSecDed,
        corrected: s.aggregateCor,
        threshold_exceeded: s.bThresholdExceeded != 0,
    })
}

/// What the far end of an NVLink is (`nvmlDeviceGetNvLinkRemoteDeviceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NvlinkRemote {
    /// Another GPU: a bridge, or a direct link on a baseboard.
    Gpu,
    /// An IBM NPU (POWER hosts).
    Npu,
    /// An NVSwitch: the GPU sits on an NVSwitch baseboard (HGX, DGX).
    Switch,
    /// The driver does not say.
    Unknown,
}

/// What the far end of NVLink `link` of `device` is. nvml-wrapper 0.13's own call hands
/// the driver a temporary and so always answers `Unknown`; this one reads the answer.
pub fn nvlink_remote(device: &Device, link: u32) -> Result<NvlinkRemote, NvmlError> {
    use nvml_wrapper_sys::bindings::{
        nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_GPU as GPU,
        nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_IBMNPU as NPU,
        nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_SWITCH as SWITCH,
        nvmlIntNvLinkDeviceType_t,
    };
    let sym = nvml_sym(
        device
            .nvml()
            .lib()
            .nvmlDeviceGetNvLinkRemoteDeviceType
            .as_ref(),
    )?;
    let mut kind: nvmlIntNvLinkDeviceType_t = 0xFF;
    // SAFETY: `sym` is the library's own `nvmlDeviceGetNvLinkRemoteDeviceType` with the
    // signature the binding declares (device, link, type out); the handle is valid while
    // `device` lives, and `kind` is a writable integer of the enum's type.
    nvml_try(unsafe { sym(device.handle(), link, &mut kind) })?;
    Ok(match kind {
        GPU => NvlinkRemote::Gpu,
        NPU => NvlinkRemote::Npu,
        SWITCH => NvlinkRemote::Switch,
        _ => NvlinkRemote::Unknown,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_sram_status_version_is_nvml_s() {
        // nvml.h: NVML_STRUCT_VERSION(EccSramErrorStatus, 1) = sizeof (104) | 1 << 24.
        assert_eq!(super::SRAM_STATUS_V1, 0x0100_0068);
    }
}
