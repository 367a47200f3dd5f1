//! The catalogue of telemetry signals: every reading a source writes, by the name it has
//! in `telemetry.jsonl`, with its unit, its kind and what it is. Sources write and every
//! layer above reads a signal through its entry here, never through a string of its own;
//! the names are the on-disk format, so an entry's name never changes.
//!
//! Vendors other than NVIDIA give what they can under NVML's names (`sysfs/`), so that
//! the verdict judges every vendor by the same rules.

/// Some signals' values, each under its signal's name: how a finding's evidence gives the
/// readings it rests on, typed by the catalogue's entries rather than by strings.
#[derive(Debug, Clone, PartialEq)]
pub struct Values<T>(pub Vec<(Signal, T)>);

impl<T: serde::Serialize> serde::Serialize for Values<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (signal, value) in &self.0 {
            map.serialize_entry(signal.name, value)?;
        }
        map.end()
    }
}

/// What a signal's value is measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Degrees Celsius.
    Celsius,
    /// Watts.
    Watts,
    /// Millijoules.
    Millijoules,
    /// Megahertz.
    Megahertz,
    /// Percent, 0-100.
    Percent,
    /// Bytes.
    Bytes,
    /// Nanoseconds.
    Nanoseconds,
    /// Kilobytes per second (NVML's PCIe throughput).
    KilobytesPerSecond,
    /// Gigatransfers per second per lane.
    GigatransfersPerSecond,
    /// Revolutions per minute.
    Rpm,
    /// A number of events or items.
    Count,
    /// A PCIe generation (1 to 6).
    Generation,
    /// A number of PCIe lanes.
    Lanes,
    /// 0 or 1 (no or yes).
    Flag,
    /// A code from a fixed list (NVML's recovery action, an Xid).
    Code,
    /// NVML's throttle bit mask, raw.
    Bitmask,
    /// An index or a version, with no unit.
    Number,
    /// A word, or words joined by commas.
    Text,
    /// A list of processes, each `{pid, used_bytes, name}`.
    Processes,
}

impl Unit {
    /// The suffix a signal's name carries for its unit (`c` for `gpu_temp_c`), where the
    /// unit has one.
    pub const fn suffix(self) -> Option<&'static str> {
        match self {
            Unit::Celsius => Some("c"),
            Unit::Watts => Some("w"),
            Unit::Millijoules => Some("mj"),
            Unit::Megahertz => Some("mhz"),
            Unit::Percent => Some("pct"),
            Unit::Bytes => Some("bytes"),
            Unit::Nanoseconds => Some("ns"),
            Unit::KilobytesPerSecond => Some("kbps"),
            Unit::GigatransfersPerSecond => Some("gts"),
            Unit::Rpm => Some("rpm"),
            _ => None,
        }
    }
}

/// How a signal behaves, which says where it is recorded and how it is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A level that moves either way, sampled every tick (temperature, power, clocks).
    Gauge,
    /// A total that only grows until a reset or a reboot, snapshotted around every phase
    /// and judged by its growth (ECC errors, replays); some are sampled too.
    Counter,
    /// A standing condition read with the counters, judged by its value whenever it was
    /// set (a pending remap, a recovery action the driver asks for).
    State,
    /// Who the device is, read once at the start.
    Identity,
    /// Something that happened, recorded when it did (an Xid).
    Event,
}

/// One signal: its name on disk, its unit, its kind and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal {
    /// The name it has in records (`gpu_temp_c`); the unit is part of it.
    pub name: &'static str,
    /// What its value is measured in.
    pub unit: Unit,
    /// How it behaves.
    pub kind: Kind,
    /// What it is, in one line.
    pub about: &'static str,
}

/// Declares each signal as a documented constant, and [`ALL`] as the list of them.
macro_rules! catalogue {
    ($($id:ident = $kind:ident($name:literal, $unit:ident, $about:literal);)*) => {
        $(
            #[doc = $about]
            pub const $id: Signal = Signal {
                name: $name,
                unit: Unit::$unit,
                kind: Kind::$kind,
                about: $about,
            };
        )*
        /// Every signal with a fixed name, in catalogue order.
        pub const ALL: &[Signal] = &[$($id),*];
    };
}

catalogue! {
    // Temperatures and power.
    GPU_TEMP_C = Gauge("gpu_temp_c", Celsius, "GPU temperature (NVML's GPU sensor; amdgpu's edge, Intel's package).");
    GPU_HOTSPOT_TEMP_C = Gauge("gpu_hotspot_temp_c", Celsius, "Hottest point of the die (amdgpu's junction).");
    HBM_TEMP_C = Gauge("hbm_temp_c", Celsius, "Memory temperature (NVML field 82; amdgpu's mem).");
    POWER_W = Gauge("power_w", Watts, "Board power draw (Intel's from energy-counter deltas).");
    POWER_LIMIT_ENFORCED_W = Gauge("power_limit_enforced_w", Watts, "The power limit in force, an administrator's cap included.");
    POWER_LIMIT_DEFAULT_W = Gauge("power_limit_default_w", Watts, "The card's default power limit.");
    ENERGY_MJ = Counter("energy_mj", Millijoules, "Energy used since the driver loaded; snapshotted around every phase.");
    // Clocks and what holds them.
    CLOCK_SM_MHZ = Gauge("clock_sm_mhz", Megahertz, "SM (shader) clock (amdgpu's sclk, Intel's GT clock).");
    CLOCK_SM_MAX_MHZ = Gauge("clock_sm_max_mhz", Megahertz, "The SM clock's maximum.");
    CLOCK_MEM_MHZ = Gauge("clock_mem_mhz", Megahertz, "Memory clock (amdgpu's mclk).");
    CLOCK_MEM_MAX_MHZ = Gauge("clock_mem_max_mhz", Megahertz, "The memory clock's maximum.");
    CLOCK_GRAPHICS_MHZ = Gauge("clock_graphics_mhz", Megahertz, "Graphics clock.");
    CLOCK_GRAPHICS_MAX_MHZ = Gauge("clock_graphics_max_mhz", Megahertz, "The graphics clock's maximum.");
    CLOCK_SM_APP_MHZ = Gauge("clock_sm_app_mhz", Megahertz, "The SM clock's application clock target (`nvidia-smi -ac`; a lock by `-lgc` has no getter), read once.");
    CLOCK_SM_APP_DEFAULT_MHZ = Gauge("clock_sm_app_default_mhz", Megahertz, "The application clock target's default (what `nvidia-smi -rac` restores), read once.");
    THROTTLE_REASONS_MASK = Gauge("throttle_reasons_mask", Bitmask, "NVML's clocks-event (throttle) bit mask, raw: charted, never judged.");
    THROTTLE_REASONS = Gauge("throttle_reasons", Text, "The throttle reasons holding the clocks, by NVML's names, comma-separated (empty for none): NVML's mask decoded, amdgpu's gpu_metrics throttlers and residencies, Intel's throttle files.");
    VIOLATION_POWER_NS = Counter("violation_power_ns", Nanoseconds, "Time held below the requested clocks by the power policy; snapshotted around every phase.");
    VIOLATION_THERMAL_NS = Counter("violation_thermal_ns", Nanoseconds, "Time held below the requested clocks by the thermal policy; snapshotted around every phase.");
    PSTATE = Gauge("pstate", Text, "Performance state (`P0` fastest).");
    // Cooling, load and memory.
    FAN0_RPM = Gauge("fan0_rpm", Rpm, "Fan speed (amdgpu's hwmon fan1).");
    UTIL_GPU_PCT = Gauge("util_gpu_pct", Percent, "Share of time the GPU was busy.");
    UTIL_MEM_PCT = Gauge("util_mem_pct", Percent, "Share of time the memory was busy.");
    MEM_USED_BYTES = Gauge("mem_used_bytes", Bytes, "Device memory in use, by every process.");
    MEM_FREE_BYTES = Gauge("mem_free_bytes", Bytes, "Device memory free.");
    MEM_TOTAL_BYTES = Gauge("mem_total_bytes", Bytes, "Device memory in all.");
    // The PCIe link.
    PCIE_GEN = Gauge("pcie_gen", Generation, "PCIe generation the link runs at now (drops at idle by design).");
    PCIE_GEN_MAX = Gauge("pcie_gen_max", Generation, "The highest PCIe generation the device supports.");
    PCIE_WIDTH = Gauge("pcie_width", Lanes, "PCIe lanes the link runs at now.");
    PCIE_WIDTH_MAX = Gauge("pcie_width_max", Lanes, "The most PCIe lanes the device supports.");
    PCIE_SLOT_GEN_MAX = Gauge("pcie_slot_gen_max", Generation, "The highest PCIe generation of the port the device sits in: its slot, or the switch above it (sysfs).");
    PCIE_SLOT_WIDTH_MAX = Gauge("pcie_slot_width_max", Lanes, "The most PCIe lanes of the port the device sits in (sysfs).");
    PCIE_SPEED_GTS = Gauge("pcie_speed_gts", GigatransfersPerSecond, "PCIe transfer rate per lane now (sysfs).");
    PCIE_SPEED_MAX_GTS = Gauge("pcie_speed_max_gts", GigatransfersPerSecond, "The highest PCIe transfer rate per lane (sysfs).");
    PCIE_TX_KBPS = Gauge("pcie_tx_kbps", KilobytesPerSecond, "PCIe throughput the device sends (NVML: read every second, off the tick).");
    PCIE_RX_KBPS = Gauge("pcie_rx_kbps", KilobytesPerSecond, "PCIe throughput the device receives (NVML: read every second, off the tick).");
    PCIE_REPLAYS = Counter("pcie_replays", Count, "PCIe replays (link-level retransmissions); snapshotted around every phase.");
    AER_CORRECTABLE = Counter("aer_correctable", Count, "PCIe AER correctable errors of the device (sysfs).");
    AER_NONFATAL = Counter("aer_nonfatal", Count, "PCIe AER uncorrectable non-fatal errors (sysfs).");
    AER_FATAL = Counter("aer_fatal", Count, "PCIe AER fatal errors (sysfs).");
    AER_PORT_CORRECTABLE = Counter("aer_port_correctable", Count, "PCIe AER correctable errors of the port above the device: its slot's root port, or a switch's port (sysfs, the parent device's aer_dev_correctable).");
    // Memory errors and what was done about them.
    ECC_CORRECTED_VOLATILE = Counter("ecc_corrected_volatile", Count, "Corrected ECC errors since the driver loaded (amdgpu's umc ce).");
    ECC_CORRECTED_AGGREGATE = Counter("ecc_corrected_aggregate", Count, "Corrected ECC errors over the card's life.");
    ECC_UNCORRECTED_VOLATILE = Counter("ecc_uncorrected_volatile", Count, "Uncorrectable ECC errors since the driver loaded (amdgpu's umc ue).");
    ECC_UNCORRECTED_AGGREGATE = Counter("ecc_uncorrected_aggregate", Count, "Uncorrectable ECC errors over the card's life.");
    RETIRED_PAGES_SBE = Counter("retired_pages_sbe", Count, "Pages retired for repeated single-bit errors.");
    RETIRED_PAGES_DBE = Counter("retired_pages_dbe", Count, "Pages retired for double-bit errors (amdgpu: reserved bad pages).");
    RETIRED_PAGES_PENDING = State("retired_pages_pending", Count, "Page retirements waiting for a reset (NVML: 0 or 1; amdgpu: pages).");
    RETIRED_PAGES_FAILED = Counter("retired_pages_failed", Count, "Bad pages that could not be retired (amdgpu).");
    REMAPPED_CORRECTABLE = Counter("remapped_correctable", Count, "Rows remapped for correctable errors.");
    REMAPPED_UNCORRECTABLE = Counter("remapped_uncorrectable", Count, "Rows remapped for uncorrectable errors.");
    REMAP_PENDING = State("remap_pending", Flag, "A row remap waits for a reset.");
    REMAP_FAILURE = State("remap_failure", Flag, "Row remapping has failed: no spare rows are left.");
    REMAP_BANKS_MAX = State("remap_banks_max", Count, "Memory banks with every spare row left (NVML's row remapper histogram).");
    REMAP_BANKS_HIGH = State("remap_banks_high", Count, "Memory banks with most of their spare rows left.");
    REMAP_BANKS_PARTIAL = State("remap_banks_partial", Count, "Memory banks with some of their spare rows left.");
    REMAP_BANKS_LOW = State("remap_banks_low", Count, "Memory banks with few spare rows left: the warning before a remap failure.");
    REMAP_BANKS_NONE = State("remap_banks_none", Count, "Memory banks with no spare row left: the next uncorrectable error in one fails row remapping.");
    SRAM_UNCORRECTED_PARITY = Counter("sram_uncorrected_parity", Count, "Uncorrectable errors in the GPU's parity-protected SRAM, over the card's life (NVML's SRAM ECC status).");
    SRAM_UNCORRECTED_SECDED = Counter("sram_uncorrected_secded", Count, "Uncorrectable errors in the GPU's SEC-DED-protected SRAM, over the card's life.");
    SRAM_CORRECTED = Counter("sram_corrected", Count, "Corrected errors in the GPU's SRAM, over the card's life.");
    SRAM_THRESHOLD_EXCEEDED = State("sram_threshold_exceeded", Flag, "The driver's flag that an SRAM bank passed its threshold of unique uncorrectable errors (an RMA criterion).");
    RECOVERY_ACTION = State("recovery_action", Code, "The recovery the driver asks for: 0 none, 1 GPU reset, 2 node reboot, 3 drain peer-to-peer, 4 drain and reset.");
    RAS_UNCORRECTED_OTHER = Counter("ras_uncorrected_other", Count, "Uncorrectable RAS errors of every amdgpu block but the memory's, summed.");
    // Who the device is.
    NVML_INDEX = Identity("nvml_index", Number, "NVML's index of the device.");
    NAME = Identity("name", Text, "Marketing name.");
    UUID = Identity("uuid", Text, "NVML's UUID (`GPU-...`).");
    SERIAL = Identity("serial", Text, "Board serial number.");
    BOARD_PART_NUMBER = Identity("board_part_number", Text, "Board part number.");
    VBIOS = Identity("vbios", Text, "VBIOS version.");
    INFOROM_IMAGE = Identity("inforom_image", Text, "InfoROM image version.");
    PCI_BUS_ID = Identity("pci_bus_id", Text, "PCI bus id as NVML writes it (`00000000:3B:00.0`).");
    PCI_SUBSYSTEM_VENDOR_ID = Identity("pci_subsystem_vendor_id", Number, "The PCI subsystem vendor id: the board's maker, not the chip's (NVML's pciSubSystemId, its low 16 bits; sysfs `subsystem_vendor`).");
    MINOR_NUMBER = Identity("minor_number", Number, "The device node's minor number (`/dev/nvidia3` is 3).");
    UNIQUE_ID = Identity("unique_id", Text, "amdgpu's unique id of the chip.");
    NVLINK_SWITCH_LINKS = Identity("nvlink_switch_links", Count, "How many of the GPU's NVLinks end at an NVSwitch (nvmlDeviceGetNvLinkRemoteDeviceType): more than none puts the GPU on an NVSwitch baseboard (HGX, DGX), whose links are all wired.");
    KERNEL_DRIVER = Identity("kernel_driver", Text, "The kernel driver bound to the device (`amdgpu`, `i915`, `xe`).");
    DRIVER_VERSION = Identity("driver_version", Text, "The driver's version.");
    CUDA_DRIVER_VERSION = Identity("cuda_driver_version", Number, "The CUDA version the driver supports, as NVML encodes it (12040).");
    ECC_ENABLED = Identity("ecc_enabled", Text, "Whether ECC is on now (`true`, `false`).");
    ECC_ENABLED_PENDING = Identity("ecc_enabled_pending", Text, "Whether ECC will be on after the next reset.");
    PERSISTENCE_MODE = Identity("persistence_mode", Text, "Whether the driver keeps the GPU initialised with no client (`on`, `off`).");
    COMPUTE_MODE = Identity("compute_mode", Text, "Who may open compute contexts on the GPU (`default`, `exclusive_process`, `prohibited`).");
    TEMP_SLOWDOWN_C = Identity("temp_slowdown_c", Celsius, "Temperature at which the card slows down.");
    TEMP_SHUTDOWN_C = Identity("temp_shutdown_c", Celsius, "Temperature at which the card shuts down.");
    TEMP_GPU_MAX_C = Identity("temp_gpu_max_c", Celsius, "The GPU's highest rated temperature.");
    TEMP_MEM_MAX_C = Identity("temp_mem_max_c", Celsius, "The memory's highest rated temperature (amdgpu: the mem sensor's critical limit).");
    TEMP_HOTSPOT_MAX_C = Identity("temp_hotspot_max_c", Celsius, "The junction (hotspot) temperature the driver protects the die at (amdgpu: the junction sensor's critical limit).");
    OTHER_PROCESSES = Identity("other_processes", Processes, "Other processes on the GPU at the start (each `{pid, used_bytes, name}`, the bytes left out where the driver did not say them, the name where the system would not give it; telemetry of schema kiln.telemetry/1 gave `pid:bytes:name` joined by commas).");
    OTHER_PROCESSES_NOW = Gauge("other_processes_now", Processes, "Other processes on the GPU during the run, as `other_processes` (NVML: read every second, off the tick; amdgpu, xe and i915: DRM fdinfo, at most once a second).");
        MATCHED_BY = Identity("matched_by", Text, "How the source matched the device: `uuid` or `pci`.");
    // Events.
    XID = Event("xid", Code, "An Xid of the kernel log (or a GPU fallen off the bus), or NVML's critical Xid and ECC events.");
}

/// A family of signals whose names are built from a part: a fan, an ECC location, a RAS
/// block, a hwmon sensor. Each has a function here that builds its names.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// The names' shape, the part in braces (`fan{i}_speed_pct`).
    pub pattern: &'static str,
    /// What its values are measured in; for hwmon, the name's own suffix says.
    pub unit: Unit,
    /// How its members behave.
    pub kind: Kind,
    /// What they are, in one line.
    pub about: &'static str,
    /// Whether a name belongs to the family.
    pub matches: fn(&str) -> bool,
}

/// Fan speed of fan `i`, as a share of its maximum.
pub const FAN_SPEED_PCT: Family = Family {
    pattern: "fan{i}_speed_pct",
    unit: Unit::Percent,
    kind: Kind::Gauge,
    about: "Fan speed of fan i, as a share of its maximum (NVML: read every second, off the tick).",
    matches: |n| matches!(Name::parse(n), Some(Name::Fan(_))),
};

/// ECC errors at one place of the chip: one of the four ECC totals, then the place.
pub const ECC_AT: Family = Family {
    pattern: "ecc_{corrected|uncorrected}_{volatile|aggregate}_{location}",
    unit: Unit::Count,
    kind: Kind::Counter,
    about: "ECC errors at one place of the chip (device memory, L1, L2, register file).",
    matches: |n| matches!(Name::parse(n), Some(Name::EccAt { .. })),
};

/// Uncorrectable errors of one amdgpu RAS block other than the memory's.
pub const RAS_BLOCK_UE: Family = Family {
    pattern: "ras_{block}_ue",
    unit: Unit::Count,
    kind: Kind::Counter,
    about: "Uncorrectable errors of one amdgpu RAS block (gfx, sdma, mmhub, xgmi, ...).",
    matches: |n| {
        matches!(
            Name::parse(n),
            Some(Name::Ras {
                uncorrected: true,
                ..
            })
        )
    },
};

/// Correctable errors of one amdgpu RAS block other than the memory's.
pub const RAS_BLOCK_CE: Family = Family {
    pattern: "ras_{block}_ce",
    unit: Unit::Count,
    kind: Kind::Counter,
    about: "Correctable errors of one amdgpu RAS block.",
    matches: |n| {
        matches!(
            Name::parse(n),
            Some(Name::Ras {
                uncorrected: false,
                ..
            })
        )
    },
};

/// One hwmon sensor of the device, by its kind and label, in base units.
pub const HWMON: Family = Family {
    pattern: "hwmon_{temp|power|clock|fan}_{label}_{c|w|mhz|rpm}",
    unit: Unit::Number,
    kind: Kind::Gauge,
    about: "One hwmon sensor of the device, by its kind and label, in base units.",
    matches: |n| matches!(Name::parse(n), Some(Name::Hwmon(_))),
};

/// Whether one NVLink is up: 1 active, 0 not.
pub const NVLINK_STATE: Family = Family {
    pattern: "nvlink{l}_state",
    unit: Unit::Flag,
    kind: Kind::State,
    about: "Whether NVLink l is up (1) or down (0), read at every phase boundary.",
    matches: |n| {
        matches!(
            Name::parse(n),
            Some(Name::Nvlink {
                part: NvlinkPart::State,
                ..
            })
        )
    },
};

/// One NVLink's error counters, by kind: the data link's replays and recoveries, and the
/// CRC errors it received in flow-control digits and in data.
pub const NVLINK_ERRORS: Family = Family {
    pattern: "nvlink{l}_{replay|recovery|crc_flit|crc_data}",
    unit: Unit::Count,
    kind: Kind::Counter,
    about: "NVLink l's error counters: replays and recoveries of its data link, CRC errors in flow-control digits and in data; snapshotted around every phase.",
    matches: |n| matches!(Name::parse(n), Some(Name::Nvlink { part, .. }) if part != NvlinkPart::State),
};

/// Every family.
pub const FAMILIES: [Family; 7] = [
    FAN_SPEED_PCT,
    ECC_AT,
    RAS_BLOCK_UE,
    RAS_BLOCK_CE,
    HWMON,
    NVLINK_STATE,
    NVLINK_ERRORS,
];

/// What an NVLink signal tells of its link: whether it is up, or one of its error counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NvlinkPart {
    /// Up (1) or down (0).
    State,
    /// The data link resent flits it found damaged: a corrected error.
    Replay,
    /// The data link retrained: the link failed and came back.
    Recovery,
    /// CRC errors in flow-control digits: a corrected error.
    CrcFlit,
    /// CRC errors in data: a corrected error.
    CrcData,
}

impl NvlinkPart {
    /// The error counters, in NVML's order.
    pub const COUNTERS: [NvlinkPart; 4] = [
        NvlinkPart::Replay,
        NvlinkPart::Recovery,
        NvlinkPart::CrcFlit,
        NvlinkPart::CrcData,
    ];

    /// The part as the signal's name ends (`crc_flit`).
    pub const fn name(self) -> &'static str {
        match self {
            NvlinkPart::State => "state",
            NvlinkPart::Replay => "replay",
            NvlinkPart::Recovery => "recovery",
            NvlinkPart::CrcFlit => "crc_flit",
            NvlinkPart::CrcData => "crc_data",
        }
    }

    /// Whether it counts errors the link corrected (CRC errors and the replays that fix
    /// them), judged by their rate rather than by one.
    pub const fn corrected(self) -> bool {
        matches!(
            self,
            NvlinkPart::Replay | NvlinkPart::CrcFlit | NvlinkPart::CrcData
        )
    }
}

/// `part` of NVLink `link`.
pub fn nvlink(link: u32, part: NvlinkPart) -> String {
    format!("nvlink{link}_{}", part.name())
}

/// The link and the part of an NVLink signal's name (`(7, Replay)` of `nvlink7_replay`).
pub fn nvlink_part(name: &str) -> Option<(u32, NvlinkPart)> {
    let rest = name.strip_prefix("nvlink")?;
    let (link, what) = rest.split_once('_')?;
    let part = [NvlinkPart::State]
        .into_iter()
        .chain(NvlinkPart::COUNTERS)
        .find(|p| p.name() == what)?;
    Some((link.parse().ok()?, part))
}

/// A recorded signal's name read back as what it names: a signal of fixed name, or a
/// family's member with its part. How every layer above the sources reads a name, so that
/// none classifies names by their spelling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Name<'a> {
    /// A signal of the catalogue's fixed names.
    Fixed(&'static Signal),
    /// Fan `i`'s speed.
    Fan(u32),
    /// One of the four ECC totals at one place of the chip.
    EccAt {
        /// The total (one of [`ECC_TOTALS`]).
        total: Signal,
        /// The place (one of [`ECC_LOCATIONS`]).
        location: &'static str,
    },
    /// An amdgpu RAS block's errors.
    Ras {
        /// The block (`gfx`, `sdma`, `xgmi`, ...).
        block: &'a str,
        /// Uncorrectable (`_ue`) rather than correctable (`_ce`).
        uncorrected: bool,
    },
    /// A hwmon sensor, by the rest of its name (`temp_edge_c`).
    Hwmon(&'a str),
    /// One NVLink's state or error counter.
    Nvlink {
        /// The link's number.
        link: u32,
        /// What of it.
        part: NvlinkPart,
    },
}

impl<'a> Name<'a> {
    /// What `name` names; None for a name the catalogue does not have.
    pub fn parse(name: &'a str) -> Option<Name<'a>> {
        if let Some(s) = lookup(name) {
            return Some(Name::Fixed(s));
        }
        if let Some((link, part)) = nvlink_part(name) {
            return Some(Name::Nvlink { link, part });
        }
        if let Some(rest) = name.strip_prefix("hwmon_") {
            return Some(Name::Hwmon(rest));
        }
        if let Some(i) = name
            .strip_prefix("fan")
            .and_then(|n| n.strip_suffix("_speed_pct"))
            .filter(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
        {
            return i.parse().ok().map(Name::Fan);
        }
        if let Some(rest) = name.strip_prefix("ras_") {
            let (block, uncorrected) = match (rest.strip_suffix("_ue"), rest.strip_suffix("_ce")) {
                (Some(b), _) => (b, true),
                (None, Some(b)) => (b, false),
                (None, None) => return None,
            };
            return Some(Name::Ras { block, uncorrected });
        }
        ECC_TOTALS.iter().find_map(|total| {
            let place = name.strip_prefix(total.name)?.strip_prefix('_')?;
            let location = ECC_LOCATIONS.iter().find(|l| **l == place)?;
            Some(Name::EccAt {
                total: *total,
                location,
            })
        })
    }
}

/// The four ECC totals, each the stem of its per-location family members.
pub const ECC_TOTALS: [Signal; 4] = [
    ECC_CORRECTED_VOLATILE,
    ECC_CORRECTED_AGGREGATE,
    ECC_UNCORRECTED_VOLATILE,
    ECC_UNCORRECTED_AGGREGATE,
];

/// The places of the chip ECC errors are counted at, as their names spell them.
pub const ECC_LOCATIONS: [&str; 4] = ["device_memory", "l1", "l2", "register_file"];

/// The speed of fan `i`.
pub fn fan_speed_pct(i: u32) -> String {
    format!("fan{i}_speed_pct")
}

/// The ECC errors of `total` (one of [`ECC_TOTALS`]) at `location` (one of
/// [`ECC_LOCATIONS`]).
pub fn ecc_at(total: Signal, location: &str) -> String {
    format!("{}_{location}", total.name)
}

/// Uncorrectable errors of amdgpu RAS block `block`.
pub fn ras_ue(block: &str) -> String {
    format!("ras_{block}_ue")
}

/// Correctable errors of amdgpu RAS block `block`.
pub fn ras_ce(block: &str) -> String {
    format!("ras_{block}_ce")
}

/// A hwmon sensor's reading: its kind (`temp`), label (`edge`) and unit suffix (`c`).
pub fn hwmon(kind: &str, label: &str, unit: &str) -> String {
    format!("hwmon_{kind}_{label}_{unit}")
}

/// Whether a counter counts from when the driver loaded (NVML's volatile ECC counts,
/// amdgpu's RAS counts) rather than over the card's life.
pub fn counts_since_driver_load(name: &str) -> bool {
    match Name::parse(name) {
        Some(Name::Fixed(s)) => [
            ECC_CORRECTED_VOLATILE,
            ECC_UNCORRECTED_VOLATILE,
            RAS_UNCORRECTED_OTHER,
        ]
        .contains(s),
        Some(Name::EccAt { total, .. }) => {
            [ECC_CORRECTED_VOLATILE, ECC_UNCORRECTED_VOLATILE].contains(&total)
        }
        Some(Name::Ras { .. }) => true,
        _ => false,
    }
}

/// The signal with this name, if the catalogue has it under a fixed name.
pub fn lookup(name: &str) -> Option<&'static Signal> {
    ALL.iter().find(|s| s.name == name)
}

/// Whether a name is the catalogue's: a fixed name, or a family's.
pub fn known(name: &str) -> bool {
    Name::parse(name).is_some()
}

/// Names a [`super::Gap`] gives for a group of signals it cannot read.
pub mod group {
    /// Everything NVML gives.
    pub const NVML: &str = "nvml";
    /// NVML's Xid and ECC events.
    pub const NVML_EVENTS: &str = "nvml_events";
    /// The PCIe link state from sysfs.
    pub const PCIE_LINK: &str = "pcie_link";
    /// The AER counters from sysfs.
    pub const AER: &str = "aer";
    /// The hwmon sensors from sysfs.
    pub const HWMON: &str = "hwmon";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_carry_their_units() {
        let mut names: Vec<&str> = ALL.iter().map(|s| s.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a name twice");
        let suffixes = [
            Unit::Celsius,
            Unit::Watts,
            Unit::Millijoules,
            Unit::Megahertz,
            Unit::Percent,
            Unit::Bytes,
            Unit::Nanoseconds,
            Unit::KilobytesPerSecond,
            Unit::GigatransfersPerSecond,
            Unit::Rpm,
        ];
        for s in ALL {
            if let Some(suffix) = s.unit.suffix() {
                assert!(s.name.ends_with(&format!("_{suffix}")), "{}", s.name);
            }
            for u in suffixes {
                let suffix = u.suffix().unwrap_or_default();
                if s.name.ends_with(&format!("_{suffix}")) {
                    assert_eq!(s.unit, u, "{} says {suffix} in its name", s.name);
                }
            }
        }
    }

    #[test]
    fn families_build_the_names_they_match() {
        assert!((FAN_SPEED_PCT.matches)(&fan_speed_pct(3)));
        assert!(!(FAN_SPEED_PCT.matches)("fan_speed_pct"));
        assert!((ECC_AT.matches)(&ecc_at(
            ECC_UNCORRECTED_AGGREGATE,
            "register_file"
        )));
        assert!(!(ECC_AT.matches)(ECC_UNCORRECTED_AGGREGATE.name));
        assert_eq!(
            Name::parse(&ras_ue("gfx")),
            Some(Name::Ras {
                block: "gfx",
                uncorrected: true
            })
        );
        assert!((RAS_BLOCK_UE.matches)(&ras_ue("gfx")));
        assert!(!(RAS_BLOCK_UE.matches)(RAS_UNCORRECTED_OTHER.name));
        assert_eq!(Name::parse(GPU_TEMP_C.name), Some(Name::Fixed(&GPU_TEMP_C)));
        assert_eq!(Name::parse("gpu_temp"), None);
        assert_eq!(Name::parse("nvlink3_crc"), None);
        assert!((RAS_BLOCK_CE.matches)(&ras_ce("sdma")));
        assert!((HWMON.matches)(&hwmon("temp", "edge", "c")));
        assert!((NVLINK_STATE.matches)(&nvlink(17, NvlinkPart::State)));
        assert!(!(NVLINK_ERRORS.matches)(&nvlink(17, NvlinkPart::State)));
        assert!((NVLINK_ERRORS.matches)(&nvlink(3, NvlinkPart::CrcFlit)));
        assert!(!(NVLINK_ERRORS.matches)("nvlinkx_replay"));
        assert_eq!(
            nvlink_part("nvlink12_crc_data"),
            Some((12, NvlinkPart::CrcData))
        );
        assert!(counts_since_driver_load(ECC_CORRECTED_VOLATILE.name));
        assert!(counts_since_driver_load(&ras_ue("gfx")));
        assert!(!counts_since_driver_load(ECC_CORRECTED_AGGREGATE.name));
    }

    /// Every name in the recorded telemetry the tests replay is the catalogue's: the
    /// catalogue is complete, and the names on disk are the names it writes.
    #[test]
    fn every_recorded_name_is_catalogued() {
        use crate::telemetry::record::{TelemetryData, TelemetryRecord};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
        let mut files = Vec::new();
        for dir in [root.join("fixtures/telemetry"), root.join("scenarios")] {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                if path.is_dir() {
                    files.push(path.join("telemetry.jsonl"));
                } else if path.extension().is_some_and(|x| x == "jsonl") {
                    files.push(path);
                }
            }
        }
        let mut read = 0;
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            for line in text.lines() {
                let Ok(record) = serde_json::from_str::<TelemetryRecord>(line) else {
                    continue;
                };
                let names: Vec<&String> = match &record.data {
                    TelemetryData::Sample { readings } => readings.keys().collect(),
                    TelemetryData::Snapshot { counters, .. } => counters.keys().collect(),
                    TelemetryData::Identity { fields } => fields.keys().collect(),
                    _ => continue,
                };
                for name in names {
                    read += 1;
                    assert!(known(name), "{name} in {}", file.display());
                }
            }
        }
        assert!(read > 1000, "the recordings were read ({read} names)");
    }
}
