//! The catalogue of finding codes: one [`FindingCode`] per code kiln gives, each with its
//! class, the clock whose overclock explains it, the `kiln health` fault it becomes and its
//! meaning. One list makes the enum, [`FindingCode::ALL`] and [`FindingCode::info`], so a
//! code cannot exist without its row.

use super::Class;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// What one finding code means and how it is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeInfo {
    /// The class a finding of this code carries, unless its rule finds the evidence says
    /// otherwise (a rate below its floor beside a slower-than-peers environment, an
    /// application Xid that is a hardware fault's consequence, errors made while
    /// overclocked).
    pub class: Class,
    /// The clock whose overclock, raised past its maximum, explains the finding's wrong
    /// results: they are then the settings', not the card's.
    pub overclocked: Option<Clock>,
    /// The fault `kiln health` reports for it, if the node check judges it at all.
    pub health: HealthFault,
    /// Said once for the node in `kiln health`, not once per GPU: the driver installation.
    pub node_wide: bool,
    /// The next step's kind where it is not its class's ([`CodeInfo::remedy`]).
    pub own_remedy: Option<Remedy>,
    /// About a watched application (`kiln watch`): its memory, its failures, its cause.
    pub application: bool,
    /// What it means, in one line.
    pub meaning: &'static str,
}

/// A clock of the card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The shader (SM) clock: compute and matrix results.
    Shader,
    /// The memory clock: what VRAM returns.
    Memory,
}

/// How a finding reads in `kiln health`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthFault {
    /// Not the node check's to judge (a rate, a tenant, one idle sample).
    NotJudged,
    /// One fault code; `sticky` when it is an event that stays open until cleared, rather
    /// than a state read anew at every check.
    Fault {
        /// Its code.
        code: HealthCode,
        /// Open until cleared.
        sticky: bool,
    },
    /// `KILN-XID-nnn` for its worst Xid, open until cleared.
    Xid,
}

/// The kinds of `kiln health` fault codes, in the order a check ranks faults of one exit
/// code: the memory first, the run and what could not be checked last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HealthKind {
    /// Healthy (`KILN-OK-000`).
    Ok,
    /// VRAM: ECC, remapping, retired pages, SRAM.
    Mem,
    /// RAS blocks other than memory.
    Ras,
    /// The count of GPUs.
    Cnt,
    /// An Xid.
    Xid,
    /// NVLink.
    Nvl,
    /// PCIe.
    Pci,
    /// The driver.
    Drv,
    /// The card's configuration.
    Cfg,
    /// The last full run.
    Run,
    /// Something could not be checked.
    Not,
}

impl HealthKind {
    const ALL: [HealthKind; 11] = [
        HealthKind::Ok,
        HealthKind::Mem,
        HealthKind::Ras,
        HealthKind::Cnt,
        HealthKind::Xid,
        HealthKind::Nvl,
        HealthKind::Pci,
        HealthKind::Drv,
        HealthKind::Cfg,
        HealthKind::Run,
        HealthKind::Not,
    ];

    /// The kind as a code spells it (`MEM`).
    pub fn word(self) -> &'static str {
        match self {
            HealthKind::Ok => "OK",
            HealthKind::Mem => "MEM",
            HealthKind::Ras => "RAS",
            HealthKind::Cnt => "CNT",
            HealthKind::Xid => "XID",
            HealthKind::Nvl => "NVL",
            HealthKind::Pci => "PCI",
            HealthKind::Drv => "DRV",
            HealthKind::Cfg => "CFG",
            HealthKind::Run => "RUN",
            HealthKind::Not => "NOT",
        }
    }
}

/// A `kiln health` fault code, `KILN-MEM-001`: its kind and its number. Codes order by
/// rank: kind first, then number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HealthCode {
    /// Its kind.
    pub kind: HealthKind,
    /// Its number within the kind (the Xid's own for `KILN-XID-nnn`).
    pub number: u32,
}

impl HealthCode {
    /// The code of `kind` and `number`.
    pub const fn new(kind: HealthKind, number: u32) -> HealthCode {
        HealthCode { kind, number }
    }

    /// The code an Xid becomes (`KILN-XID-079`).
    pub const fn xid(code: u32) -> HealthCode {
        HealthCode::new(HealthKind::Xid, code)
    }

    /// The code `text` spells, if it is one (`KILN-MEM-001`; `KILN-XID-79` is Xid 79's).
    pub fn parse(text: &str) -> Option<HealthCode> {
        let mut parts = text.split('-');
        let (Some("KILN"), Some(kind), Some(number), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let kind = HealthKind::ALL.into_iter().find(|k| k.word() == kind)?;
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(HealthCode::new(kind, number.parse().ok()?))
    }
}

impl fmt::Display for HealthCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KILN-{}-{:03}", self.kind.word(), self.number)
    }
}

impl Serialize for HealthCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HealthCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<HealthCode, D::Error> {
        let text = String::deserialize(deserializer)?;
        HealthCode::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{text:?} is not a kiln health code (KILN-KIND-NNN)"
            ))
        })
    }
}

/// A catalogue row's parts, so the table below reads one code a line.
const fn row(class: Class, meaning: &'static str) -> CodeInfo {
    CodeInfo {
        class,
        overclocked: None,
        health: HealthFault::NotJudged,
        node_wide: false,
        own_remedy: None,
        application: false,
        meaning,
    }
}

/// The kind of next step a finding asks for, by its vendor's guidance: whether the card
/// goes back to its maker now, or something cheaper comes first. One situation has one
/// (resolution gives every finding of it the same), and only [`Remedy::Rma`] leads people
/// to the support desk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// The card's own fault by its vendor's criteria (a row remap failed, retired pages
    /// past DCGM's limit, uncorrectable errors nothing handled) or by kiln's evidence of
    /// wrong results: confirm it, then send the card back.
    Rma,
    /// A fault the card handled (a row remap or a page retirement pending): reset the GPU
    /// so it takes effect, then retest; RMA only if it fails or the errors come back
    /// (NVIDIA's row-remapping and page-retirement guidance).
    ResetAndRetest,
    /// The card or what it sits in (slot, riser, power cables, the link's other end):
    /// reboot or reset, reseat and check, then retest; RMA only if it follows the card.
    CheckPlatform,
    /// A warning before a vendor's criterion: the card still works; watch the counter.
    Watch,
    /// Not the card's fault: the finding's own action.
    OwnAction,
}

impl Remedy {
    /// In words, for the table of findings (`reset, retest`).
    pub fn word(self) -> &'static str {
        match self {
            Remedy::Rma => "RMA",
            Remedy::ResetAndRetest => "reset, retest",
            Remedy::CheckPlatform => "check the platform, retest",
            Remedy::Watch => "watch",
            Remedy::OwnAction => "its action",
        }
    }
}

impl CodeInfo {
    /// Its wrong results are explained by `clock` raised past its maximum.
    const fn clock(self, clock: Clock) -> CodeInfo {
        CodeInfo {
            overclocked: Some(clock),
            ..self
        }
    }

    /// `kiln health` reports it as `kind`-`number`, open until cleared if `sticky`.
    const fn health(self, kind: HealthKind, number: u32, sticky: bool) -> CodeInfo {
        CodeInfo {
            health: HealthFault::Fault {
                code: HealthCode::new(kind, number),
                sticky,
            },
            ..self
        }
    }

    /// `kiln health` reports it as its worst Xid.
    const fn xid(self) -> CodeInfo {
        CodeInfo {
            health: HealthFault::Xid,
            ..self
        }
    }

    /// Its next step is of this kind, not its class's.
    const fn remedy_is(self, remedy: Remedy) -> CodeInfo {
        CodeInfo {
            own_remedy: Some(remedy),
            ..self
        }
    }

    /// The kind of next step a finding of this code asks for: its own where the catalogue
    /// gives one, else a hardware fault's is an RMA and any other class's its action.
    pub const fn remedy(&self) -> Remedy {
        match (self.own_remedy, self.class) {
            (Some(r), _) => r,
            (None, Class::Hardware) => Remedy::Rma,
            (None, _) => Remedy::OwnAction,
        }
    }

    /// Said once for the node, not per GPU.
    const fn node(self) -> CodeInfo {
        CodeInfo {
            node_wide: true,
            ..self
        }
    }

    /// About a watched application.
    const fn app(self) -> CodeInfo {
        CodeInfo {
            application: true,
            ..self
        }
    }
}

/// The catalogue: each line a variant, the code as evidence spells it, and its row.
macro_rules! catalogue {
    ($($(#[$doc:meta])* $variant:ident = $name:literal => $info:expr;)*) => {
        /// Every finding code kiln gives. Evidence, reports and metrics spell it as its
        /// [`FindingCode::name`] (`VRAM_STUCK_BIT`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum FindingCode {
            $($(#[$doc])* $variant,)*
        }

        impl FindingCode {
            /// Every code, in the catalogue's order.
            pub const ALL: &'static [FindingCode] = &[$(FindingCode::$variant,)*];

            /// The code as evidence, reports and metrics spell it.
            pub const fn name(self) -> &'static str {
                match self {
                    $(FindingCode::$variant => $name,)*
                }
            }

            /// Its catalogue row.
            pub const fn info(self) -> CodeInfo {
                use Class::{CouldNotTest, Environment, Hardware, Info, Software};
                use HealthKind::{Cfg, Drv, Mem, Nvl, Pci, Ras};
                match self {
                    $(FindingCode::$variant => $info,)*
                }
            }
        }
    };
}

catalogue! {
    /// A VRAM word holds a bit whatever is written.
    VramStuckBit = "VRAM_STUCK_BIT" => row(Hardware,
        "a bit of VRAM holds one value whatever is written").clock(Clock::Memory);
    /// Reads return another address's data.
    VramAddressFault = "VRAM_ADDRESS_FAULT" => row(Hardware,
        "reads of VRAM return another address's data: the address path is faulty").clock(Clock::Memory);
    /// Cells fail sometimes, or for some patterns.
    VramMarginal = "VRAM_MARGINAL" => row(Hardware,
        "VRAM cells that fail only sometimes or only for some patterns: a marginal part").clock(Clock::Memory);
    /// Wrong reads of cells that held the right value.
    VramTransferError = "VRAM_TRANSFER_ERROR" => row(Hardware,
        "wrong reads of cells that held the right value: the transfer, not the cell").clock(Clock::Memory);
    /// One wrong read never repeated.
    VramTransientError = "VRAM_TRANSIENT_ERROR" => row(Hardware,
        "one wrong read of VRAM that did not come back on retest (low confidence)").clock(Clock::Memory);
    /// Several wrong reads, none repeated.
    VramErrors = "VRAM_ERRORS" => row(Hardware,
        "several wrong reads of VRAM, none of which came back on retest").clock(Clock::Memory);
    /// Words of the resident region lost their data while held.
    VramDecay = "VRAM_DECAY" => row(Hardware,
        "words of VRAM written once and checked all run long lost their data while held: memory that decays as the card heats").clock(Clock::Memory);
    /// Wrong results or words only around the load's pauses.
    ClockTransitionErrors = "CLOCK_TRANSITION_ERRORS" => row(Hardware,
        "wrong results or words found only around the switches between load and idle (ramp down, idle clocks, ramp up): a marginal part").clock(Clock::Shader);
    /// Wrong results only at partial load, where the clocks boost highest.
    PeakClockErrors = "PEAK_CLOCK_ERRORS" => row(Hardware,
        "wrong results only at partial load, where the card boosts to its highest clocks, none at full load: a marginal part at its peak clock").clock(Clock::Shader);
    /// VRAM streaming below the product's floor.
    VramBandwidthLow = "VRAM_BANDWIDTH_LOW" => row(Hardware,
        "VRAM streaming below the product's floor with nothing to explain it");
    /// A compute rate below the product's floor.
    ComputeRateLow = "COMPUTE_RATE_LOW" => row(Hardware,
        "an fp32, int32, fp16 or matrix rate below the product's floor with nothing to explain it");
    /// VRAM streaming below the floor, explained.
    BandwidthLowThrottled = "BANDWIDTH_LOW_THROTTLED" => row(Environment,
        "VRAM streaming below the product's floor, explained by heat, power, the card's own limit or another process");
    /// A compute rate below the floor, explained.
    ComputeRateLowThrottled = "COMPUTE_RATE_LOW_THROTTLED" => row(Environment,
        "a compute rate below the product's floor, explained by heat, power, the card's own limit or another process");
    /// A setting holds the card below its product.
    ConfigLimitsCard = "CONFIG_LIMITS_CARD" => row(Environment,
        "a setting (a power cap, locked or application clocks, sync boost) holds the card below what its product does");
    /// Locked clocks that kept the card within its floors.
    ClocksLocked = "CLOCKS_LOCKED" => row(Info,
        "locked clocks that kept the card within its product's floors");
    /// A power cap that kept the card within its floors.
    AdminPowerCap = "ADMIN_POWER_CAP" => row(Info,
        "an administrator's power cap that kept the card within its product's floors");
    /// A rate below a floor that rests on an unmeasured share of the spec sheet.
    RateBelowSpecShare = "RATE_BELOW_SPEC_SHARE" => row(Info,
        "a rate below a floor that rests on the spec sheet times a share kiln's kernel has not been measured to reach on a GPU: noted, never a call");
    /// No product figures for the card.
    ProductUnknown = "PRODUCT_UNKNOWN" => row(Info,
        "no product figures for this card: its results were verified, its rates not held to a floor");
    /// The card ran above its rated clocks.
    ClocksAboveMaximum = "CLOCKS_ABOVE_MAXIMUM" => row(Environment,
        "the card ran above its rated clocks: an overclock or raised application clocks");
    /// A compute result differs from the reference.
    ComputeMismatch = "COMPUTE_MISMATCH" => row(Hardware,
        "a compute result differs from the CPU's reference").clock(Clock::Shader);
    /// A compute result is NaN or infinite.
    ComputeNonfinite = "COMPUTE_NONFINITE" => row(Hardware,
        "a compute result is NaN or infinite where the reference is finite").clock(Clock::Shader);
    /// A wrong element of a matrix product.
    MatrixMismatch = "MATRIX_MISMATCH" => row(Hardware,
        "a wrong element of a matrix product, located by its tile").clock(Clock::Shader);
    /// Data changed crossing PCIe.
    PcieCorruption = "PCIE_CORRUPTION" => row(Hardware,
        "data changed on its way across PCIe").remedy_is(Remedy::CheckPlatform);
    /// The link runs below what card and slot allow.
    PcieLinkDegraded = "PCIE_LINK_DEGRADED" => row(Environment,
        "the PCIe link is narrower, or a lower generation under load, than card and slot allow").health(Pci, 1, false);
    /// The slot's maximum is below the card's.
    PcieSlotLimits = "PCIE_SLOT_LIMITS" => row(Info,
        "the slot's own PCIe maximum is below the card's: the link is judged against the slot's");
    /// The link at the card's own maximum, below the slot's.
    PcieCardLimits = "PCIE_CARD_LIMITS" => row(Info,
        "the link runs at the card's own PCIe maximum, below what the slot allows: a healthy link, never a degraded one");
    /// PCIe transfers below their share of the link.
    PcieBandwidthLow = "PCIE_BANDWIDTH_LOW" => row(Environment,
        "PCIe transfers below their share of the link in use");
    /// PCIe AER errors.
    PcieAerErrors = "PCIE_AER_ERRORS" => row(Environment,
        "PCIe AER errors, fatal or non-fatal").health(Pci, 2, true);
    /// Corrected AER errors at the port above the GPU over the bit error rate's budget.
    PciePortErrors = "PCIE_PORT_ERRORS" => row(Environment,
        "corrected PCIe AER errors at the port above the GPU (its slot's root port or a switch's port) above what a bit error rate of 1e-12 allows: the slot, riser or cable");
    /// More PCIe replays than the bit error rate allows.
    PcieReplaysHigh = "PCIE_REPLAYS_HIGH" => row(Environment,
        "more PCIe replays than a bit error rate of 1e-12 allows on the link in use");
    /// NVLink recoveries, or corrected errors over their budget.
    NvlinkErrors = "NVLINK_ERRORS" => row(Hardware,
        "an NVLink that retrained (a recovery), or corrected its errors (CRC and replays together) at 100 a second or more; fewer are a note").health(Nvl, 1, true).remedy_is(Remedy::CheckPlatform);
    /// An NVLink went down.
    NvlinkDown = "NVLINK_DOWN" => row(Hardware,
        "an NVLink went down, or is down on a board that wires every link (an NVSwitch baseboard, an SXM module); one down all run on a card with hand-fitted bridges is a note").health(Nvl, 2, false).remedy_is(Remedy::CheckPlatform);
    /// The same NVLinks down on every GPU: the fabric.
    NvlinkFabricDown = "NVLINK_FABRIC_DOWN" => row(Environment,
        "the same NVLinks down on every GPU of the run: the fabric they share (an NVSwitch tray, a bridge, the fabric manager), said once, not each GPU's fault").node();
    /// Memory banks with no spare row.
    RowRemapBanksLow = "ROW_REMAP_BANKS_LOW" => row(Hardware,
        "memory banks with no spare row left, or only a few").health(Mem, 5, false).remedy_is(Remedy::Watch);
    /// The on-chip SRAM past its threshold.
    SramThresholdExceeded = "SRAM_THRESHOLD_EXCEEDED" => row(Hardware,
        "the driver flags the on-chip SRAM past its threshold of uncorrectable errors (an RMA criterion)").health(Mem, 6, false);
    /// Uncorrectable SRAM errors over a card's life, under the threshold, said.
    SramHistory = "SRAM_HISTORY" => row(Info,
        "uncorrectable errors in the on-chip SRAM over the card's life, the driver's threshold flag not set: the count said, never a failure");
    /// Pages retired, or a retirement pending.
    RetiredPages = "RETIRED_PAGES" => row(Hardware,
        "memory pages retired, or a retirement pending").health(Mem, 4, true).remedy_is(Remedy::ResetAndRetest);
    /// A card's retired pages at or past the vendor's limit, over its life.
    RetiredPagesLimit = "RETIRED_PAGES_LIMIT" => row(Hardware,
        "pages retired over the card's life at or past DCGM's limit (63, the table holds 64), or past its soft limit of double-bit pages and still retiring: an RMA criterion, whether or not the run retired any").health(Mem, 7, false);
    /// A card's retired pages under the vendor's limit, said.
    RetiredPagesHistory = "RETIRED_PAGES_HISTORY" => row(Info,
        "pages retired over the card's life, under DCGM's limit: the count said, never a failure");
    /// Uncorrectable ECC errors.
    EccUncorrectable = "ECC_UNCORRECTABLE" => row(Hardware,
        "uncorrectable ECC errors in VRAM").health(Mem, 2, true);
    /// Uncorrectable RAS errors outside memory.
    RasUncorrectable = "RAS_UNCORRECTABLE" => row(Hardware,
        "uncorrectable RAS errors in a GPU block other than memory (AMD)").health(Ras, 1, true);
    /// A row remap waits for a reset.
    RowRemapPending = "ROW_REMAP_PENDING" => row(Hardware,
        "a row remap waits for a GPU reset").health(Mem, 3, false).remedy_is(Remedy::ResetAndRetest);
    /// Rows remapped over a card's life with spares left, said.
    RowRemapHistory = "ROW_REMAP_HISTORY" => row(Info,
        "rows remapped over the card's life with no remap failed or pending: the count said, never a failure");
    /// Row remapping failed.
    RowRemapFailure = "ROW_REMAP_FAILURE" => row(Hardware,
        "row remapping failed: no spare row was left").health(Mem, 1, false);
    /// The driver asks for a recovery action.
    RecoveryActionPending = "RECOVERY_ACTION_PENDING" => row(Software,
        "the driver asks for a reset, a reboot or a drain before the GPU is used again").health(Drv, 3, false);
    /// An ECC mode change waits for a reset.
    EccModePending = "ECC_MODE_PENDING" => row(Environment,
        "an ECC mode change waits for a GPU reset").health(Cfg, 1, false);
    /// The card slowed for heat.
    ThermalThrottle = "THERMAL_THROTTLE" => row(Environment,
        "the card slowed for heat, or sat at its thermal limit under load with its clock down");
    /// A fan read stopped, or far below what the card needed, while the GPU was hot
    /// under load: the card's cooler.
    FanFailed = "FAN_FAILED" => row(Hardware,
        "a fan read 0% or far below its share while the GPU was hot under load: the card's fan or its fan control, not the room");
    /// The memory ran at or near its rated temperature under load.
    MemoryHot = "MEMORY_HOT" => row(Info,
        "the memory ran within a few degrees of its rated temperature under load: little margin for a hotter room");
    /// The system's power brake slowed the card.
    PowerBrake = "POWER_BRAKE" => row(Environment,
        "the system's hardware power brake held the card's clocks down");
    /// The card's hardware slowdown for power.
    PowerDelivery = "POWER_DELIVERY" => row(Environment,
        "the card's hardware slowdown held its clocks down without heat: its power delivery");
    /// An Xid of VRAM hardware.
    XidMemoryHardware = "XID_MEMORY_HARDWARE" => row(Hardware,
        "an Xid of VRAM hardware").xid();
    /// An Xid of row remapping.
    XidRowRemap = "XID_ROW_REMAP" => row(Hardware,
        "an Xid of row remapping").xid().remedy_is(Remedy::ResetAndRetest);
    /// The GPU fell off the bus.
    XidFallenOffBus = "XID_FALLEN_OFF_BUS" => row(Hardware,
        "the GPU fell off the bus").xid().remedy_is(Remedy::CheckPlatform);
    /// An NVLink Xid.
    XidNvlink = "XID_NVLINK" => row(Hardware,
        "an Xid of NVLink").xid().remedy_is(Remedy::CheckPlatform);
    /// An Xid of the GPU outside its memory.
    XidGpuHardware = "XID_GPU_HARDWARE" => row(Hardware,
        "an Xid of the GPU outside its memory").xid();
    /// Corrected ECC errors under load above the budget.
    EccCorrectedRateHigh = "ECC_CORRECTED_RATE_HIGH" => row(Hardware,
        "the memory corrected errors under load faster than its budget: memory degrading, the card's").clock(Clock::Memory);
    /// Xid 92.
    XidEccRate = "XID_ECC_RATE" => row(Hardware,
        "an Xid of a high rate of corrected memory errors").xid();
    /// An application's fault.
    XidApplication = "XID_APPLICATION" => row(Software,
        "an Xid of an application's fault, or what stopping one leaves behind").xid();
    /// Another process's application Xid.
    XidOtherProcess = "XID_OTHER_PROCESS" => row(Info,
        "an application Xid the kernel names another process for: about the node, not the card").xid();
    /// A driver Xid.
    XidDriver = "XID_DRIVER" => row(Software,
        "an Xid of the driver").xid();
    /// Xid 109.
    XidTimeout = "XID_TIMEOUT" => row(Software,
        "an Xid of a context-switch timeout").xid();
    /// A firmware Xid.
    XidFirmware = "XID_FIRMWARE" => row(Software,
        "an Xid of the GPU's firmware (GSP, PMU)").xid();
    /// Xid 154.
    XidRecoveryAction = "XID_RECOVERY_ACTION" => row(Software,
        "an Xid in which the driver asks for a recovery action").xid();
    /// An Xid that informs.
    XidInformational = "XID_INFORMATIONAL" => row(Info,
        "an Xid the driver raises to inform").xid();
    /// Xid 54.
    AuxPowerMissing = "AUX_POWER_MISSING" => row(Environment,
        "an Xid of the card's auxiliary power missing or failing").xid();
    /// The device was lost with hardware Xids.
    DeviceLostHardware = "DEVICE_LOST_HARDWARE" => row(Hardware,
        "the device was lost mid-test with hardware Xids").remedy_is(Remedy::CheckPlatform);
    /// The device was lost with an application's Xid.
    DeviceLostApplication = "DEVICE_LOST_APPLICATION" => row(Software,
        "the device was lost mid-test with an application's Xid: a shader or application fault");
    /// The device was lost with no hardware evidence.
    DeviceLostTimeout = "DEVICE_LOST_TIMEOUT" => row(Software,
        "the device was lost mid-test with no hardware evidence: a watchdog or driver timeout");
    /// Memory allocated as the card's that the OS placed in system RAM.
    VramInSystemMemory = "VRAM_IN_SYSTEM_MEMORY" => row(Environment,
        "the OS placed memory allocated as the card's in system RAM: part of the VRAM test was of system memory");
    /// The OS reset the GPU's driver after a timeout with no test failing.
    DriverTimeoutReset = "DRIVER_TIMEOUT_RESET" => row(Software,
        "Windows reset the display driver after a timeout (TDR), or the kernel's GPU driver (amdgpu, i915, xe) reset the GPU, during the test");
    /// Lost, off the bus or reset only under the CPU and GPU load together.
    PsuCombinedLoad = "PSU_COMBINED_LOAD" => row(Environment,
        "the card was lost, fell off the bus or was reset only while the CPU and the GPU were loaded together: the power supply");
    /// The host's CPU computed a wrong result under load.
    CpuWrongResult = "CPU_WRONG_RESULT" => row(Environment,
        "the host's CPU computed a wrong result under the combined load: the computer around the card, not the GPU");
    /// The device stopped answering.
    DeviceHang = "DEVICE_HANG" => row(Software,
        "the device stopped answering: the watchdog abandoned it, or its worker did not stop when asked");
    /// The worker process died.
    WorkerCrashed = "WORKER_CRASHED" => row(Software,
        "the device's worker process died");
    /// Allocations refused with memory free.
    AllocFailFragmented = "ALLOC_FAIL_FRAGMENTED" => row(Software,
        "allocations refused while more than enough memory was free");
    /// Memory not given back.
    MemoryLeak = "MEMORY_LEAK" => row(Software,
        "memory not given back after everything allocated was freed");
    /// The kernel driver is not loaded.
    DriverNotLoaded = "DRIVER_NOT_LOADED" => row(Software,
        "the NVIDIA kernel driver is not loaded").health(Drv, 1, false).node();
    /// Two parts of the driver differ in version.
    DriverVersionMismatch = "DRIVER_VERSION_MISMATCH" => row(Software,
        "NVML and the kernel driver, or the Vulkan driver and NVML, differ in version").health(Drv, 2, false).node();
    /// Other processes used the GPU.
    OtherTenants = "OTHER_TENANTS" => row(Environment,
        "other processes used the GPU during the test");
    /// A GPU Vulkan cannot see.
    GpuNotVisible = "GPU_NOT_VISIBLE" => row(CouldNotTest,
        "a GPU of the machine that Vulkan cannot see, with its likely cause");
    /// A signal stopped the run.
    RunInterrupted = "RUN_INTERRUPTED" => row(CouldNotTest,
        "a signal stopped the run before its workloads ended");
    /// An evidence file of the run is gone.
    EvidenceMissing = "EVIDENCE_MISSING" => row(CouldNotTest,
        "an evidence file the run wrote is gone, emptied or not a file");
    /// Slower than the same model's other devices.
    PeerSlower = "PEER_SLOWER" => row(Hardware,
        "more than 10% slower than the same model's other devices in the run at the same clocks; environment where its own findings explain it, or where it ran at clocks that account for the gap");
    /// A watched application's memory climbs every iteration.
    AppMemoryLeak = "APP_MEMORY_LEAK" => row(Software,
        "a watched application's lowest memory between iterations climbs a steady amount each time: a leak").app();
    /// A watched application needed more memory than the card has.
    AppOverMemoryLimit = "APP_OVER_MEMORY_LIMIT" => row(Software,
        "a watched application failed for memory at a peak that reached the budget, its baseline flat: a step needs more than the card has").app();
    /// A watched application's allocation refused with memory free.
    AppFragmentation = "APP_FRAGMENTATION" => row(Software,
        "a watched application's allocation was refused while more than it asked for was free, or its floor creeps under flat peaks: fragmentation or an allocation limit").app();
    /// Another process took the memory a watched application needed.
    AppOtherProcess = "APP_OTHER_PROCESS" => row(Environment,
        "another process took GPU memory in the minute before a watched application failed").app();
    /// A watched application lost its device with its memory flat.
    AppDriverTimeout = "APP_DRIVER_TIMEOUT" => row(Software,
        "a watched application lost its device with its memory flat and no hardware evidence: a driver timeout or a fault of its own work").app();
    /// Hardware evidence while an application was watched.
    AppCardFault = "APP_CARD_FAULT" => row(Hardware,
        "hardware evidence (an Xid of the card, ECC, remaps, the card off the bus) while an application was watched: test the card").app();
    /// Nothing of a watched application's GPU memory was seen.
    AppMemoryUnseen = "APP_MEMORY_UNSEEN" => row(CouldNotTest,
        "none of a watched application's GPU memory could be read: no per-process figure from the driver and no allocation trace").app();
    /// What a watched application's memory did could not be judged.
    AppNotJudged = "APP_NOT_JUDGED" => row(CouldNotTest,
        "what a watched application's memory did could not be judged: the watch was too short for a leak while its memory rose, its trace stopped, or its memory sources disagree").app();
    /// A watched application's own error.
    AppExit = "APP_EXIT" => row(Software,
        "a watched application crashed or exited with an error, and nothing on the GPU explains it: the application's own failure").app();
    /// Telemetry could not be read.
    TelemetryMissing = "TELEMETRY_MISSING" => row(Info,
        "no telemetry was read: the checks that rest on it could not run");
}

impl FindingCode {
    /// The class a finding of this code carries unless its rule says otherwise.
    pub const fn class(self) -> Class {
        self.info().class
    }

    /// The code `name` spells, if kiln gives it.
    pub fn from_name(name: &str) -> Option<FindingCode> {
        FindingCode::ALL.iter().copied().find(|c| c.name() == name)
    }
}

impl fmt::Display for FindingCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for FindingCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for FindingCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<FindingCode, D::Error> {
        let name = String::deserialize(deserializer)?;
        FindingCode::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{name:?} is not a finding code this kiln knows (a report of a newer kiln?)"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_reads_back_from_its_name_and_names_are_unique() {
        let mut names = std::collections::BTreeSet::new();
        for &code in FindingCode::ALL {
            assert!(names.insert(code.name()), "{} twice", code.name());
            assert_eq!(FindingCode::from_name(code.name()), Some(code));
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, code.name());
            assert_eq!(serde_json::from_value::<FindingCode>(json).unwrap(), code);
            // Names are what fleets alert on: upper case words joined by underscores.
            assert!(
                code.name().split('_').all(|w| !w.is_empty()
                    && w.bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())),
                "{}",
                code.name()
            );
        }
    }

    #[test]
    fn an_unknown_code_is_an_error_that_names_it() {
        let err = serde_json::from_value::<FindingCode>(serde_json::json!("VRAM_ON_FIRE"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"VRAM_ON_FIRE\" is not a finding code"),
            "{err}"
        );
    }

    #[test]
    fn health_codes_are_unique_and_read_back() {
        let mut seen = std::collections::BTreeMap::new();
        for &code in FindingCode::ALL {
            if let HealthFault::Fault { code: h, .. } = code.info().health {
                assert_eq!(seen.insert(h, code), None, "{h} given twice");
                assert_eq!(HealthCode::parse(&h.to_string()), Some(h));
            }
        }
        assert_eq!(HealthCode::parse("KILN-XID-079"), Some(HealthCode::xid(79)));
        assert_eq!(HealthCode::parse("KILN-XID-79"), Some(HealthCode::xid(79)));
        for bad in [
            "KILN-XID-",
            "KILN-FOO-001",
            "kiln-mem-001",
            "KILN-MEM-001-2",
            "MEM-001",
        ] {
            assert_eq!(HealthCode::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn health_codes_rank_memory_first_and_the_unchecked_last() {
        let mut codes = [
            HealthCode::new(HealthKind::Not, 1),
            HealthCode::xid(79),
            HealthCode::new(HealthKind::Pci, 1),
            HealthCode::new(HealthKind::Mem, 2),
            HealthCode::new(HealthKind::Mem, 1),
        ];
        codes.sort();
        let spelt: Vec<String> = codes.iter().map(ToString::to_string).collect();
        assert_eq!(
            spelt,
            [
                "KILN-MEM-001",
                "KILN-MEM-002",
                "KILN-XID-079",
                "KILN-PCI-001",
                "KILN-NOT-001"
            ]
        );
    }

    #[test]
    fn only_wrong_results_are_explained_by_an_overclock() {
        for &code in FindingCode::ALL {
            let info = code.info();
            if info.overclocked.is_some() {
                assert_eq!(info.class, Class::Hardware, "{code}");
            }
        }
        // A slow card is not explained by a fast clock.
        assert_eq!(FindingCode::VramBandwidthLow.info().overclocked, None);
        assert_eq!(FindingCode::ComputeRateLow.info().overclocked, None);
    }
}
