//! NVML calls that exist on one OS only. Linux has the event API (Xid and ECC events),
//! the device's minor number and persistence mode; Windows has none of them (its Xids are
//! read from the System event log instead), and the logic above asks here rather than
//! which OS it runs on.

use nvml_wrapper::Device;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::event::EventSet;

/// The file NVML is loaded from, as a person would look for it.
pub const LIBRARY: &str = os::LIBRARY;

/// Why NVML's events cannot be watched on this OS; None where they can.
pub const NO_EVENTS: Option<&str> = os::NO_EVENTS;

/// The events the device supports (an empty set where the OS has no events).
pub fn supported_events(device: &Device) -> Result<EventTypes, NvmlError> {
    os::supported_events(device)
}

/// Registers the device for `wanted` events in `set`. NVML releases the set when this
/// fails, so the error gives only why.
pub fn register_events<'nvml>(
    device: &Device<'nvml>,
    wanted: EventTypes,
    set: EventSet<'nvml>,
) -> Result<EventSet<'nvml>, NvmlError> {
    os::register_events(device, wanted, set)
}

/// The device's minor number (`/dev/nvidiaN`), where the OS has one.
pub fn minor_number(device: &Device) -> Result<u32, NvmlError> {
    os::minor_number(device)
}

/// Whether the driver stays loaded with no client (`on`/`off`), where the OS has it.
pub fn persistence_mode(device: &Device) -> Result<bool, NvmlError> {
    os::persistence_mode(device)
}

#[cfg(target_os = "linux")]
mod os {
    use super::*;

    pub const LIBRARY: &str = "libnvidia-ml.so.1";
    pub const NO_EVENTS: Option<&str> = None;

    pub fn supported_events(device: &Device) -> Result<EventTypes, NvmlError> {
        match device.supported_event_types() {
            Err(NvmlError::NotSupported) => Ok(EventTypes::empty()),
            other => other,
        }
    }

    pub fn register_events<'nvml>(
        device: &Device<'nvml>,
        wanted: EventTypes,
        set: EventSet<'nvml>,
    ) -> Result<EventSet<'nvml>, NvmlError> {
        device.register_events(wanted, set).map_err(|e| e.error)
    }

    pub fn minor_number(device: &Device) -> Result<u32, NvmlError> {
        device.minor_number()
    }

    pub fn persistence_mode(device: &Device) -> Result<bool, NvmlError> {
        device.is_in_persistent_mode()
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    use super::*;

    pub const LIBRARY: &str = "nvml.dll";
    pub const NO_EVENTS: Option<&str> = Some(
        "NVML has no Xid or ECC events on Windows: Xids are read from the System event log (nvlddmkm), ECC counters per phase",
    );

    pub fn supported_events(_device: &Device) -> Result<EventTypes, NvmlError> {
        Ok(EventTypes::empty())
    }

    pub fn register_events<'nvml>(
        _device: &Device<'nvml>,
        _wanted: EventTypes,
        _set: EventSet<'nvml>,
    ) -> Result<EventSet<'nvml>, NvmlError> {
        Err(NvmlError::NotSupported)
    }

    pub fn minor_number(_device: &Device) -> Result<u32, NvmlError> {
        Err(NvmlError::NotSupported)
    }

    pub fn persistence_mode(_device: &Device) -> Result<bool, NvmlError> {
        Err(NvmlError::NotSupported)
    }
}
