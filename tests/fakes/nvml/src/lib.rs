//! A `libnvidia-ml.so.1` for kiln's tests: it exports the NVML calls kiln makes (through
//! nvml-wrapper, with NVML's C types) and answers them for the GPUs of a scripted scenario
//! ([`scenario`]), so that kiln's real NVML code runs against an emulated NVIDIA node. Every
//! call is logged (`KILN_FAKE_NVML_LOG`: `<seconds> <symbol> <gpu index or -> <thread>` a
//! line, the thread by the name the kernel holds) so that tests can hold kiln to a call budget.
//!
//! Built with the `old_driver` feature it is an R470-era library: the calls added in R510
//! are not exported at all, so kiln meets them as missing symbols.
//!
//! A device handle is its index plus one; an event set is a boxed [`EventSet`]. A GPU the
//! scenario loses answers every call with `NVML_ERROR_GPU_IS_LOST` from then on, as a GPU
//! fallen off the bus does.

#![allow(non_snake_case, clippy::missing_safety_doc)]
// The old library leaves out the calls that read some of a scenario (its processes).
#![cfg_attr(feature = "old_driver", allow(dead_code))]

mod scenario;

use std::ffi::{c_char, c_int, c_uint, c_ulonglong};
use std::io::Write;
use std::sync::{Mutex, OnceLock};

use nvml_wrapper_sys::bindings::*;
use scenario::{Gpu, Scenario, State};

fn scenario() -> &'static Scenario {
    static SCENARIO: OnceLock<Scenario> = OnceLock::new();
    SCENARIO.get_or_init(Scenario::load)
}

/// Appends one line to the call log, when the test asked for one.
fn log_call(symbol: &str, gpu: Option<usize>) {
    static LOG: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();
    let log = LOG.get_or_init(|| {
        let path = std::env::var_os("KILN_FAKE_NVML_LOG")?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()
            .map(Mutex::new)
    });
    if let Some(file) = log
        && let Ok(mut f) = file.lock()
    {
        let gpu = gpu.map_or_else(|| "-".to_owned(), |g| g.to_string());
        // The caller's thread name as the kernel holds it (set by its own std, which this
        // library's std does not share; cut to 15 bytes).
        let thread = std::fs::read_to_string("/proc/thread-self/comm")
            .map(|n| n.trim().replace(' ', "_"))
            .unwrap_or_else(|_| "-".into());
        let _ = writeln!(f, "{:.3} {symbol} {gpu} {thread}", scenario().now());
    }
}

/// NVML's code for an error the scenario names.
fn code(name: &str) -> nvmlReturn_t {
    match name {
        "not_supported" => nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED,
        "no_permission" => nvmlReturn_enum_NVML_ERROR_NO_PERMISSION,
        "gpu_is_lost" => nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST,
        "timeout" => nvmlReturn_enum_NVML_ERROR_TIMEOUT,
        "driver_not_loaded" => nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED,
        "lib_rm_version_mismatch" => nvmlReturn_enum_NVML_ERROR_LIB_RM_VERSION_MISMATCH,
        "function_not_found" => nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND,
        "uninitialized" => nvmlReturn_enum_NVML_ERROR_UNINITIALIZED,
        "invalid_argument" => nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT,
        "reset_required" => nvmlReturn_enum_NVML_ERROR_RESET_REQUIRED,
        _ => nvmlReturn_enum_NVML_ERROR_UNKNOWN,
    }
}

const OK: nvmlReturn_t = nvmlReturn_enum_NVML_SUCCESS;

fn handle(index: usize) -> nvmlDevice_t {
    (index + 1) as nvmlDevice_t
}

fn index_of(device: nvmlDevice_t) -> Option<usize> {
    (device as usize).checked_sub(1)
}

/// Answers a call on `device`: logged, slowed by its latency, then refused as the scenario
/// says (lost, its own error, its group's), else `answer` fills the outputs.
fn on_device(
    symbol: &str,
    device: nvmlDevice_t,
    group: &str,
    answer: impl FnOnce(&Gpu, &State) -> nvmlReturn_t,
) -> nvmlReturn_t {
    let index = index_of(device);
    log_call(symbol, index);
    let s = scenario();
    let Some(gpu) = index.and_then(|i| s.gpus.get(i)) else {
        return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
    };
    if let Some(latency) = gpu.latency(symbol) {
        std::thread::sleep(latency);
    }
    let now = s.now();
    if gpu.lost(now) {
        return nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST;
    }
    if let Some(e) = gpu.error_for(symbol, group) {
        return code(&e);
    }
    answer(gpu, &gpu.state_at(now))
}

/// Writes `text` into a caller's buffer of `length` bytes, NUL-terminated.
unsafe fn put_text(text: &str, out: *mut c_char, length: c_uint) -> nvmlReturn_t {
    if out.is_null() {
        return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
    }
    let bytes = text.as_bytes();
    if bytes.len() + 1 > length as usize {
        return nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
    }
    // SAFETY: the caller's buffer holds `length` bytes, more than the text and its NUL.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), out, bytes.len());
        *out.add(bytes.len()) = 0;
    }
    OK
}

/// Writes `value` through a caller's pointer.
unsafe fn put<T>(out: *mut T, value: T) -> nvmlReturn_t {
    if out.is_null() {
        return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: the caller passed a valid pointer to a T.
    unsafe { out.write(value) };
    OK
}

// --- The library ---

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    log_call("nvmlInit_v2", None);
    scenario().init_error.as_deref().map_or(OK, code)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    log_call("nvmlInitWithFlags", None);
    scenario().init_error.as_deref().map_or(OK, code)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    log_call("nvmlShutdown", None);
    OK
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlErrorString(_result: nvmlReturn_t) -> *const c_char {
    c"fake NVML error".as_ptr()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    log_call("nvmlSystemGetDriverVersion", None);
    // SAFETY: as the caller's buffer is.
    unsafe { put_text(&scenario().driver_version, version, length) }
}

/// The name of a process the scenario names, on any of its GPUs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetProcessName(
    pid: c_uint,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    log_call("nvmlSystemGetProcessName", None);
    let named = scenario()
        .gpus
        .iter()
        .flat_map(|g| &g.processes)
        .find(|p| p.pid == pid)
        .and_then(|p| p.name.as_deref());
    match named {
        // SAFETY: as the caller's buffer is.
        Some(text) => unsafe { put_text(text, name, length) },
        None => nvmlReturn_enum_NVML_ERROR_NOT_FOUND,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> nvmlReturn_t {
    log_call("nvmlSystemGetCudaDriverVersion_v2", None);
    // SAFETY: as the caller's pointer is.
    unsafe { put(version, scenario().cuda_version) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    log_call("nvmlDeviceGetCount_v2", None);
    // SAFETY: as the caller's pointer is.
    unsafe { put(count, scenario().gpus.len() as c_uint) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    let i = index as usize;
    log_call("nvmlDeviceGetHandleByIndex_v2", Some(i));
    let s = scenario();
    match s.gpus.get(i) {
        None => nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT,
        Some(g) if g.lost(s.now()) => nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST,
        // SAFETY: as the caller's pointer is.
        Some(_) => unsafe { put(device, handle(i)) },
    }
}

// --- Identity ---

macro_rules! text_call {
    ($name:ident, $key:literal, $default:literal) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            device: nvmlDevice_t,
            out: *mut c_char,
            length: c_uint,
        ) -> nvmlReturn_t {
            on_device(stringify!($name), device, "identity", |g, _| {
                // SAFETY: as the caller's buffer is.
                unsafe { put_text(&g.text($key, $default), out, length) }
            })
        }
    };
}

text_call!(nvmlDeviceGetName, "name", "NVIDIA H200");
text_call!(
    nvmlDeviceGetUUID,
    "uuid",
    "GPU-6d657361-3232-2e33-2e36-000000000000"
);
text_call!(nvmlDeviceGetSerial, "serial", "1654923012345");
text_call!(
    nvmlDeviceGetBoardPartNumber,
    "board_part",
    "692-2G520-0280-000"
);
text_call!(nvmlDeviceGetVbiosVersion, "vbios", "96.00.A5.00.01");
text_call!(
    nvmlDeviceGetInforomImageVersion,
    "inforom",
    "G520.0280.00.05"
);

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetPciInfo_v3", device, "identity", |g, _| {
        let bus_id = g.text("bus_id", "00000000:3B:00.0");
        let part = |i: usize| {
            bus_id
                .split([':', '.'])
                .nth(i)
                .and_then(|p| u32::from_str_radix(p, 16).ok())
                .unwrap_or(0)
        };
        // SAFETY: a zeroed nvmlPciInfo_t is valid (integers and character arrays).
        let mut info: nvmlPciInfo_t = unsafe { std::mem::zeroed() };
        info.domain = part(0);
        info.bus = part(1);
        info.device = part(2);
        info.pciDeviceId = g.number("pci_device_id", 0x2335_10de) as c_uint;
        info.pciSubSystemId = g.number("pci_subsystem_id", 0x18be_10de) as c_uint;
        for (dst, src) in info.busId.iter_mut().zip(bus_id.bytes().take(31)) {
            *dst = src as c_char;
        }
        for (dst, src) in info.busIdLegacy.iter_mut().zip(bus_id.bytes().take(15)) {
            *dst = src as c_char;
        }
        // SAFETY: as the caller's pointer is.
        unsafe { put(pci, info) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(
    device: nvmlDevice_t,
    minor: *mut c_uint,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetMinorNumber", device, "identity", |g, _| {
        // SAFETY: as the caller's pointer is.
        unsafe { put(minor, g.number("minor", 0) as c_uint) }
    })
}

/// The card's compute capability: `"cc": [12, 0]`, else an H200's 9.0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: nvmlDevice_t,
    major: *mut c_int,
    minor: *mut c_int,
) -> nvmlReturn_t {
    on_device(
        "nvmlDeviceGetCudaComputeCapability",
        device,
        "identity",
        |g, _| {
            let cc = g.spec.get("cc").and_then(serde_json::Value::as_array);
            let at = |i: usize, default: c_int| {
                cc.and_then(|c| c.get(i))
                    .and_then(serde_json::Value::as_i64)
                    .map_or(default, |v| v as c_int)
            };
            // SAFETY: as the caller's pointers are.
            unsafe {
                put(major, at(0, 9));
                put(minor, at(1, 0))
            }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetMigMode", device, "mig", |g, _| {
        let Some(on) = g.spec.get("mig").and_then(serde_json::Value::as_bool) else {
            return nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
        };
        // SAFETY: as the caller's pointers are.
        unsafe {
            put(current, c_uint::from(on));
            put(pending, c_uint::from(on))
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    device: nvmlDevice_t,
    current: *mut nvmlEnableState_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetEccMode", device, "ecc", |g, _| {
        let on = g
            .spec
            .get("ecc")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(true);
        let after_reset = g
            .spec
            .get("ecc_pending")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(on);
        // SAFETY: as the caller's pointers are.
        unsafe {
            put(current, on as nvmlEnableState_t);
            put(pending, after_reset as nvmlEnableState_t)
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperatureThreshold(
    device: nvmlDevice_t,
    threshold: nvmlTemperatureThresholds_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    on_device(
        "nvmlDeviceGetTemperatureThreshold",
        device,
        "thresholds",
        |_, s| {
            let key = match threshold {
                0 => "shutdown_c",
                1 => "slowdown_c",
                2 => "mem_max_c",
                3 => "gpu_max_c",
                _ => return nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED,
            };
            // SAFETY: as the caller's pointer is.
            unsafe { put(temp, s.u(key) as c_uint) }
        },
    )
}

// --- Gauges ---

macro_rules! number_call {
    ($name:ident, $group:literal, $ty:ty, |$s:ident| $value:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(device: nvmlDevice_t, out: *mut $ty) -> nvmlReturn_t {
            on_device(stringify!($name), device, $group, |_, $s| {
                // SAFETY: as the caller's pointer is.
                unsafe { put(out, $value as $ty) }
            })
        }
    };
}

number_call!(nvmlDeviceGetPowerUsage, "gauges", c_uint, |s| s
    .f("power_w")
    * 1e3);
number_call!(nvmlDeviceGetEnforcedPowerLimit, "gauges", c_uint, |s| s
    .f("power_limit_w")
    * 1e3);
number_call!(
    nvmlDeviceGetPowerManagementDefaultLimit,
    "gauges",
    c_uint,
    |s| s.f("power_default_w") * 1e3
);
number_call!(
    nvmlDeviceGetTotalEnergyConsumption,
    "gauges",
    c_ulonglong,
    |s| s.f("energy_mj") + s.f("power_w") * scenario().now() * 1e3
);
number_call!(
    nvmlDeviceGetCurrentClocksThrottleReasons,
    "gauges",
    c_ulonglong,
    |s| s.u("throttle")
);
// R535's name for the same mask: an R470-era library has only the old one.
#[cfg(not(feature = "old_driver"))]
number_call!(
    nvmlDeviceGetCurrentClocksEventReasons,
    "gauges",
    c_ulonglong,
    |s| s.u("throttle")
);
number_call!(nvmlDeviceGetCurrPcieLinkGeneration, "gauges", c_uint, |s| s
    .u("pcie_gen"));
number_call!(nvmlDeviceGetCurrPcieLinkWidth, "gauges", c_uint, |s| s
    .u("pcie_width"));
number_call!(nvmlDeviceGetMaxPcieLinkGeneration, "gauges", c_uint, |s| s
    .u("pcie_gen_max"));
number_call!(nvmlDeviceGetMaxPcieLinkWidth, "gauges", c_uint, |s| s
    .u("pcie_width_max"));
number_call!(nvmlDeviceGetPcieReplayCounter, "replays", c_uint, |s| s
    .u("replays"));
number_call!(nvmlDeviceGetNumFans, "fans", c_uint, |s| s.u("fans"));
number_call!(
    nvmlDeviceGetPerformanceState,
    "gauges",
    nvmlPstates_t,
    |s| s.u("pstate")
);

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    _sensor: nvmlTemperatureSensors_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetTemperature", device, "gauges", |_, s| {
        // SAFETY: as the caller's pointer is.
        unsafe { put(temp, s.u("temp_c") as c_uint) }
    })
}

fn clock_key(clock: nvmlClockType_t, max: bool) -> Option<&'static str> {
    Some(match (clock, max) {
        (0, false) => "gfx_mhz",
        (1, false) => "sm_mhz",
        (2, false) => "mem_mhz",
        (0, true) => "gfx_max_mhz",
        (1, true) => "sm_max_mhz",
        (2, true) => "mem_max_mhz",
        _ => return None,
    })
}

/// Answers a clock call: the clock now, or its maximum.
unsafe fn clock(
    symbol: &str,
    device: nvmlDevice_t,
    clock: nvmlClockType_t,
    max: bool,
    mhz: *mut c_uint,
) -> nvmlReturn_t {
    on_device(symbol, device, "gauges", |_, s| {
        match clock_key(clock, max) {
            // SAFETY: as the caller's pointer is.
            Some(key) => unsafe { put(mhz, s.u(key) as c_uint) },
            None => nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED,
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: nvmlDevice_t,
    clock_type: nvmlClockType_t,
    mhz: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: as the caller's pointer is.
    unsafe { clock("nvmlDeviceGetClockInfo", device, clock_type, false, mhz) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxClockInfo(
    device: nvmlDevice_t,
    clock_type: nvmlClockType_t,
    mhz: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: as the caller's pointer is.
    unsafe { clock("nvmlDeviceGetMaxClockInfo", device, clock_type, true, mhz) }
}

/// The application clock target of the SM clock (graphics clocks answer the same), or
/// its default: what `nvidia-smi -ac` sets and `-rac` restores.
unsafe fn app_clock(
    symbol: &str,
    device: nvmlDevice_t,
    clock: nvmlClockType_t,
    key: &str,
    mhz: *mut c_uint,
) -> nvmlReturn_t {
    on_device(symbol, device, "gauges", |_, s| {
        if clock_key(clock, false).is_none() {
            return nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
        }
        // SAFETY: as the caller's pointer is.
        unsafe { put(mhz, s.u(key) as c_uint) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetApplicationsClock(
    device: nvmlDevice_t,
    clock_type: nvmlClockType_t,
    mhz: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: as the caller's pointer is.
    unsafe {
        app_clock(
            "nvmlDeviceGetApplicationsClock",
            device,
            clock_type,
            "app_mhz",
            mhz,
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDefaultApplicationsClock(
    device: nvmlDevice_t,
    clock_type: nvmlClockType_t,
    mhz: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: as the caller's pointer is.
    unsafe {
        app_clock(
            "nvmlDeviceGetDefaultApplicationsClock",
            device,
            clock_type,
            "app_default_mhz",
            mhz,
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetViolationStatus(
    device: nvmlDevice_t,
    policy: nvmlPerfPolicyType_t,
    violation: *mut nvmlViolationTime_t,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetViolationStatus", device, "gauges", |_, s| {
        let key = match policy {
            0 => "violation_power_ns",
            1 => "violation_thermal_ns",
            _ => return nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED,
        };
        let value = nvmlViolationTime_t {
            referenceTime: (scenario().now() * 1e9) as c_ulonglong,
            violationTime: s.u(key),
        };
        // SAFETY: as the caller's pointer is.
        unsafe { put(violation, value) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFanSpeed_v2(
    device: nvmlDevice_t,
    fan: c_uint,
    speed: *mut c_uint,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetFanSpeed_v2", device, "fans", |_, s| {
        if u64::from(fan) >= s.u("fans") {
            return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: as the caller's pointer is.
        unsafe { put(speed, s.u("fan_pct") as c_uint) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: nvmlDevice_t,
    utilization: *mut nvmlUtilization_t,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetUtilizationRates", device, "gauges", |_, s| {
        let value = nvmlUtilization_t {
            gpu: s.u("util_gpu") as c_uint,
            memory: s.u("util_mem") as c_uint,
        };
        // SAFETY: as the caller's pointer is.
        unsafe { put(utilization, value) }
    })
}

#[cfg(not(feature = "old_driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetMemoryInfo_v2", device, "gauges", |g, s| {
        let total = s.u("mem_total_bytes");
        // Other processes' memory is used memory, as the driver counts it.
        let now = scenario().now();
        let tenants: u64 = g
            .processes
            .iter()
            .filter(|p| p.from_s <= now && p.until_s.is_none_or(|u| now < u))
            .map(|p| p.bytes_at(now))
            .sum();
        let used = (s.u("mem_used_bytes") + tenants).min(total);
        let value = nvmlMemory_v2_t {
            version: (std::mem::size_of::<nvmlMemory_v2_t>() | (2 << 24)) as c_uint,
            total,
            reserved: 0,
            free: total - used,
            used,
        };
        // SAFETY: as the caller's pointer is.
        unsafe { put(memory, value) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieThroughput(
    device: nvmlDevice_t,
    counter: nvmlPcieUtilCounter_t,
    kbps: *mut c_uint,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetPcieThroughput", device, "gauges", |_, s| {
        let key = if counter == 0 {
            "pcie_tx_kbps"
        } else {
            "pcie_rx_kbps"
        };
        // SAFETY: as the caller's pointer is.
        unsafe { put(kbps, s.u(key) as c_uint) }
    })
}

// --- Counters ---

fn ecc_key(error: nvmlMemoryErrorType_t, counter: nvmlEccCounterType_t) -> &'static str {
    match (error, counter) {
        (0, 0) => "ecc_corrected_volatile",
        (0, _) => "ecc_corrected_aggregate",
        (_, 0) => "ecc_uncorrected_volatile",
        _ => "ecc_uncorrected_aggregate",
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error: nvmlMemoryErrorType_t,
    counter: nvmlEccCounterType_t,
    count: *mut c_ulonglong,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetTotalEccErrors", device, "ecc", |_, s| {
        // SAFETY: as the caller's pointer is.
        unsafe { put(count, s.u(ecc_key(error, counter))) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryErrorCounter(
    device: nvmlDevice_t,
    error: nvmlMemoryErrorType_t,
    counter: nvmlEccCounterType_t,
    location: nvmlMemoryLocation_t,
    count: *mut c_ulonglong,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetMemoryErrorCounter", device, "ecc", |_, s| {
        // Every error is in device memory (NVML_MEMORY_LOCATION_DRAM = 2).
        let n = if location == 2 {
            s.u(ecc_key(error, counter))
        } else {
            0
        };
        // SAFETY: as the caller's pointer is.
        unsafe { put(count, n) }
    })
}

fn retired_key(cause: nvmlPageRetirementCause_t) -> &'static str {
    if cause == 0 {
        "retired_sbe"
    } else {
        "retired_dbe"
    }
}

/// Answers a count-then-fill call: the count when the caller's room is short, else the
/// pages (and their times, where asked).
unsafe fn pages(
    n: u64,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> nvmlReturn_t {
    if count.is_null() {
        return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: the caller's pointers are valid, its arrays hold `*count` entries.
    unsafe {
        let room = *count as u64;
        *count = n as c_uint;
        if room < n {
            return nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
        }
        for i in 0..n as usize {
            if !addresses.is_null() {
                *addresses.add(i) = 0x1000 * (i as u64 + 1);
            }
            if !timestamps.is_null() {
                *timestamps.add(i) = 1_700_000_000 + i as u64;
            }
        }
    }
    OK
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
) -> nvmlReturn_t {
    on_device(
        "nvmlDeviceGetRetiredPages",
        device,
        "retired_pages",
        |_, s| {
            // SAFETY: as the caller's pointers are.
            unsafe {
                pages(
                    s.u(retired_key(cause)),
                    count,
                    addresses,
                    std::ptr::null_mut(),
                )
            }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages_v2(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> nvmlReturn_t {
    on_device(
        "nvmlDeviceGetRetiredPages_v2",
        device,
        "retired_pages",
        |_, s| {
            // SAFETY: as the caller's pointers are.
            unsafe { pages(s.u(retired_key(cause)), count, addresses, timestamps) }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPagesPendingStatus(
    device: nvmlDevice_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    on_device(
        "nvmlDeviceGetRetiredPagesPendingStatus",
        device,
        "retired_pages",
        |_, s| {
            // SAFETY: as the caller's pointer is.
            unsafe { put(pending, s.u("retired_pending").min(1) as nvmlEnableState_t) }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPersistenceMode(
    device: nvmlDevice_t,
    mode: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    on_device(
        "nvmlDeviceGetPersistenceMode",
        device,
        "identity",
        |_, s| {
            // SAFETY: as the caller's pointer is.
            unsafe { put(mode, s.u("persistence").min(1) as nvmlEnableState_t) }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeMode(
    device: nvmlDevice_t,
    mode: *mut nvmlComputeMode_t,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetComputeMode", device, "identity", |_, s| {
        // SAFETY: as the caller's pointer is.
        unsafe { put(mode, s.u("compute_mode") as nvmlComputeMode_t) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: nvmlDevice_t,
    link: c_uint,
    active: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetNvLinkState", device, "nvlink", |_, s| {
        // No NVLink at all: not supported; a link past the last: an invalid argument, as
        // recent drivers answer.
        let links = s.u("nvlinks");
        if links == 0 {
            return nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
        }
        if u64::from(link) >= links {
            return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
        }
        let up = !s.list("nvlink_down").contains(&u64::from(link));
        // SAFETY: as the caller's pointer is.
        unsafe { put(active, nvmlEnableState_t::from(up)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemoteDeviceType(
    device: nvmlDevice_t,
    link: c_uint,
    kind: *mut nvmlIntNvLinkDeviceType_t,
) -> nvmlReturn_t {
    on_device(
        "nvmlDeviceGetNvLinkRemoteDeviceType",
        device,
        "nvlink",
        |_, s| {
            // What every link's far end is (`nvlink_remote`: 0 a GPU, 2 an NVSwitch).
            let links = s.u("nvlinks");
            if links == 0 {
                return nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
            }
            if u64::from(link) >= links {
                return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
            }
            // SAFETY: as the caller's pointer is.
            unsafe { put(kind, s.u("nvlink_remote") as nvmlIntNvLinkDeviceType_t) }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkErrorCounter(
    device: nvmlDevice_t,
    link: c_uint,
    counter: nvmlNvLinkErrorCounter_t,
    value: *mut c_ulonglong,
) -> nvmlReturn_t {
    on_device(
        "nvmlDeviceGetNvLinkErrorCounter",
        device,
        "nvlink",
        |_, s| {
            if u64::from(link) >= s.u("nvlinks") {
                return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
            }
            let key = match counter {
                0 => "nvlink_replay",
                1 => "nvlink_recovery",
                2 => "nvlink_crc_flit",
                3 => "nvlink_crc_data",
                _ => return nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED,
            };
            // SAFETY: as the caller's pointer is.
            unsafe { put(value, s.at(key, u64::from(link))) }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRowRemapperHistogram(
    device: nvmlDevice_t,
    values: *mut nvmlRowRemapperHistogramValues_t,
) -> nvmlReturn_t {
    on_device(
        "nvmlDeviceGetRowRemapperHistogram",
        device,
        "remap",
        |_, s| {
            let banks = s.list("remap_banks");
            let at = |i: usize| banks.get(i).copied().unwrap_or(0) as c_uint;
            let v = nvmlRowRemapperHistogramValues_t {
                max: at(0),
                high: at(1),
                partial: at(2),
                low: at(3),
                none: at(4),
            };
            // SAFETY: as the caller's pointer is.
            unsafe { put(values, v) }
        },
    )
}

/// An R550 call: the R470-era library has none.
#[cfg(not(feature = "old_driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSramEccErrorStatus(
    device: nvmlDevice_t,
    status: *mut nvmlEccSramErrorStatus_t,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetSramEccErrorStatus", device, "sram", |_, s| {
        if status.is_null() {
            return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: the caller's struct, whose version it set.
        let asked = unsafe { (*status).version };
        let v1 = std::mem::size_of::<nvmlEccSramErrorStatus_t>() as u32 | (1 << 24);
        if asked != v1 {
            return nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        }
        // SAFETY: the struct is plain integers, for which all zeros is a valid value.
        let mut v: nvmlEccSramErrorStatus_t = unsafe { std::mem::zeroed() };
        v.version = v1;
        v.aggregateUncParity = s.u("sram_unc_parity");
        v.aggregateUncSecDed = s.u("sram_unc_secded");
        v.aggregateCor = s.u("sram_cor");
        v.bThresholdExceeded = s.u("sram_threshold").min(1) as c_uint;
        // SAFETY: as the caller's pointer is.
        unsafe { put(status, v) }
    })
}

/// A field value's reading and group: HBM temperature (82), the row remapper (142-145) and
/// the recovery action (230); every other field is not supported.
fn field(id: c_uint) -> Option<(&'static str, &'static str)> {
    Some(match id {
        82 => ("hbm_temp_c", "hbm_temp"),
        142 => ("remapped_cor", "remap"),
        143 => ("remapped_unc", "remap"),
        144 => ("remap_pending", "remap"),
        145 => ("remap_failure", "remap"),
        230 => ("recovery_action", "recovery"),
        _ => return None,
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: nvmlDevice_t,
    count: c_int,
    values: *mut nvmlFieldValue_t,
) -> nvmlReturn_t {
    on_device("nvmlDeviceGetFieldValues", device, "fields", |g, s| {
        if values.is_null() || count < 0 {
            return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
        }
        for i in 0..count as usize {
            // SAFETY: the caller's array holds `count` field values.
            let v = unsafe { &mut *values.add(i) };
            v.timestamp = (scenario().now() * 1e6) as i64;
            match field(v.fieldId) {
                Some((key, group)) => match g.error_for("nvmlDeviceGetFieldValues", group) {
                    Some(e) => v.nvmlReturn = code(&e),
                    None => {
                        v.nvmlReturn = OK;
                        v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
                        v.value.uiVal = s.u(key) as c_uint;
                    }
                },
                None => v.nvmlReturn = nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED,
            }
        }
        OK
    })
}

// --- Processes ---

/// Answers a process-list call: the count when the caller's room is short, else the list.
unsafe fn processes(
    gpu: &Gpu,
    graphics: bool,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    if count.is_null() {
        return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
    }
    let now = scenario().now();
    let mut list: Vec<scenario::Process> = gpu
        .processes
        .iter()
        .filter(|p| p.graphics == graphics && p.from_s <= now && p.until_s.is_none_or(|u| now < u))
        .cloned()
        .collect();
    // kiln's own workers, as a real driver lists them: its child processes, each holding
    // the memory it tests.
    if gpu.kiln_workers_listed && !graphics {
        list.extend(children().into_iter().map(|pid| scenario::Process {
            pid,
            bytes: 1 << 30,
            timeline: Vec::new(),
            from_s: 0.0,
            until_s: None,
            graphics: false,
            name: None,
        }));
    }
    // SAFETY: the caller's pointers are valid, its array holds `*count` entries.
    unsafe {
        let room = *count as usize;
        *count = list.len() as c_uint;
        if list.is_empty() {
            return OK;
        }
        if infos.is_null() || room < list.len() {
            return nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
        }
        for (i, p) in list.iter().enumerate() {
            *infos.add(i) = nvmlProcessInfo_t {
                pid: p.pid,
                usedGpuMemory: p.bytes_at(now),
                gpuInstanceId: u32::MAX,
                computeInstanceId: u32::MAX,
            };
        }
    }
    OK
}

/// The child processes of the process that loaded the library.
fn children() -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

#[cfg(not(feature = "old_driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    on_device(
        "nvmlDeviceGetComputeRunningProcesses_v3",
        device,
        "processes",
        // SAFETY: as the caller's pointers are.
        |g, _| unsafe { processes(g, false, count, infos) },
    )
}

#[cfg(not(feature = "old_driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    on_device(
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        device,
        "processes",
        // SAFETY: as the caller's pointers are.
        |g, _| unsafe { processes(g, true, count, infos) },
    )
}

// --- Events ---

/// The events a set waits for: each registered GPU with its event types, and the events
/// already delivered through it (each is delivered once per set).
pub struct EventSet {
    registered: Vec<(usize, u64)>,
    delivered: Vec<(usize, usize)>,
}

/// Event types the fake's GPUs raise: single-bit ECC, double-bit ECC, critical Xid.
const SUPPORTED_EVENTS: u64 = 0x1 | 0x2 | 0x8;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    device: nvmlDevice_t,
    types: *mut c_ulonglong,
) -> nvmlReturn_t {
    on_device(
        "nvmlDeviceGetSupportedEventTypes",
        device,
        "event_types",
        // SAFETY: as the caller's pointer is.
        |_, _| unsafe { put(types, SUPPORTED_EVENTS) },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) -> nvmlReturn_t {
    log_call("nvmlEventSetCreate", None);
    let boxed = Box::new(EventSet {
        registered: Vec::new(),
        delivered: Vec::new(),
    });
    // SAFETY: as the caller's pointer is.
    unsafe { put(set, Box::into_raw(boxed).cast()) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetFree(set: nvmlEventSet_t) -> nvmlReturn_t {
    log_call("nvmlEventSetFree", None);
    if !set.is_null() {
        // SAFETY: every set was made by nvmlEventSetCreate and is freed once.
        drop(unsafe { Box::from_raw(set.cast::<EventSet>()) });
    }
    OK
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    types: c_ulonglong,
    set: nvmlEventSet_t,
) -> nvmlReturn_t {
    on_device("nvmlDeviceRegisterEvents", device, "events", |_, _| {
        if set.is_null() || types & !SUPPORTED_EVENTS != 0 {
            return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: a set made by nvmlEventSetCreate and not yet freed.
        let set = unsafe { &mut *set.cast::<EventSet>() };
        if let Some(i) = index_of(device) {
            set.registered.push((i, types));
        }
        OK
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    log_call("nvmlEventSetWait_v2", None);
    if set.is_null() || data.is_null() {
        return nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: a set made by nvmlEventSetCreate and not yet freed; one waiter at a time.
    let set = unsafe { &mut *set.cast::<EventSet>() };
    let s = scenario();
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms.into());
    loop {
        let now = s.now();
        for &(gpu, types) in &set.registered {
            let Some(g) = s.gpus.get(gpu) else { continue };
            let next = g.events.iter().enumerate().find(|(i, e)| {
                e.at_s <= now && e.kind & types != 0 && !set.delivered.contains(&(gpu, *i))
            });
            if let Some((i, e)) = next {
                set.delivered.push((gpu, i));
                let event = nvmlEventData_t {
                    device: handle(gpu),
                    eventType: e.kind,
                    eventData: e.data,
                    gpuInstanceId: u32::MAX,
                    computeInstanceId: u32::MAX,
                };
                // SAFETY: as the caller's pointer is.
                return unsafe { put(data, event) };
            }
            // Its events delivered, a GPU fallen off the bus ends the wait.
            if g.lost(now) {
                return nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST;
            }
        }
        if std::time::Instant::now() >= deadline {
            return nvmlReturn_enum_NVML_ERROR_TIMEOUT;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
