//! The products kiln knows: what each card's spec sheet promises (memory bandwidth, vector
//! and matrix-unit rates, the PCIe link, power and temperature limits), each row cited, and
//! what kiln's own kernels reach of it on a healthy card. The verdict's floors, `kiln bench`
//! and the report's product line all answer from this one table; a card it does not know is
//! judged for stability only, and says so.
//!
//! A floor is one rule for every rate: `floor_share` (DCGM's 0.75) of the reference, where
//! the reference is what tools measure on the product where that is published, else the
//! spec sheet's figure times the share of it kiln's kernel reaches on healthy cards
//! ([`Rate::attainable`]).

use serde::Serialize;

/// A rate kiln measures that a product's figures can be held against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rate {
    /// VRAM streaming (the `vram` workload's faster of write and verify), GiB/s.
    Vram,
    /// fp32 multiply-adds on the ALUs (`compute`), 10^9 operations per second.
    ComputeFp32,
    /// int32 multiply-adds on the ALUs (`compute`), 10^9 operations per second.
    ComputeInt32,
    /// fp16 multiply-adds on the ALUs (`compute`), 10^9 operations per second.
    ComputeFp16,
    /// fp32 matrix products on the ALUs (`matrix`, shared-memory kernel), 10^12 per second.
    MatrixFp32,
    /// fp16 matrix products on the matrix units (`matrix`), 10^12 per second.
    MatrixFp16Units,
    /// int8 matrix products on the matrix units (`matrix`), 10^12 per second.
    MatrixInt8Units,
}

impl Rate {
    /// Every rate with a product figure, in report order.
    pub const ALL: [Rate; 7] = [
        Rate::Vram,
        Rate::ComputeFp32,
        Rate::ComputeInt32,
        Rate::ComputeFp16,
        Rate::MatrixFp32,
        Rate::MatrixFp16Units,
        Rate::MatrixInt8Units,
    ];

    /// Its name in comparisons, baselines and evidence (`compute_fp32_gops`): the name the
    /// workload gives the rate.
    pub const fn name(self) -> &'static str {
        match self {
            Rate::Vram => "vram_gib_per_s",
            Rate::ComputeFp32 => "compute_fp32_gops",
            Rate::ComputeInt32 => "compute_int32_gops",
            Rate::ComputeFp16 => "compute_fp16_gops",
            Rate::MatrixFp32 => "matrix_fp32_tflops",
            Rate::MatrixFp16Units => "matrix_fp16_units_tflops",
            Rate::MatrixInt8Units => "matrix_int8_units_tops",
        }
    }

    /// The workload that measures it (`vram`, `compute`, `matrix`).
    pub const fn workload(self) -> &'static str {
        match self {
            Rate::Vram => "vram",
            Rate::ComputeFp32 | Rate::ComputeInt32 | Rate::ComputeFp16 => "compute",
            _ => "matrix",
        }
    }

    /// The rate called `name`, if a product figure can judge it.
    pub fn from_name(name: &str) -> Option<Rate> {
        Rate::ALL.into_iter().find(|r| r.name() == name)
    }

    /// What it is, for people (`fp32 compute`).
    pub const fn label(self) -> &'static str {
        match self {
            Rate::Vram => "VRAM streaming",
            Rate::ComputeFp32 => "fp32 compute",
            Rate::ComputeInt32 => "int32 compute",
            Rate::ComputeFp16 => "fp16 compute",
            Rate::MatrixFp32 => "fp32 matrix products",
            Rate::MatrixFp16Units => "fp16 matrix products on the matrix units",
            Rate::MatrixInt8Units => "int8 matrix products on the matrix units",
        }
    }

    /// The unit of the product's figures for it.
    pub const fn spec_unit(self) -> &'static str {
        match self {
            Rate::Vram => "GB/s",
            Rate::ComputeInt32 | Rate::MatrixInt8Units => "TOP/s",
            _ => "TFLOP/s",
        }
    }

    /// A measured value (in the workload's unit) in the unit of the product's figures:
    /// GiB/s to GB/s, 10^9 to 10^12 operations per second.
    pub fn to_spec_unit(self, measured: f64) -> f64 {
        match self {
            Rate::Vram => measured * GIB_IN_GB,
            Rate::ComputeFp32 | Rate::ComputeInt32 | Rate::ComputeFp16 => measured / 1e3,
            _ => measured,
        }
    }

    /// The share of the spec sheet's figure kiln's kernel reaches on a healthy card, why,
    /// and whether that share was measured on GPUs: the reference where no measurement of
    /// the product is published. A share not yet measured on a GPU is kept low, and a
    /// floor resting on it never decides a verdict on its own ([`Provenance::SpecShare`]);
    /// a site's own floors (thresholds `floors`) replace them.
    pub const fn attainable(self) -> (f64, &'static str, Provenance) {
        match self {
            Rate::Vram => (
                0.75,
                "streaming tools reach 76-81% of the spec sheet's bandwidth (DCGM's diag-skus.yaml: H100 2.54 of 3.35 TB/s, A100 80 GB 1.56 of 2.04; the memtest_vulkan Readme: RTX 3090 742-757 of 936 GB/s)",
                Provenance::MeasuredShare,
            ),
            Rate::ComputeFp32 | Rate::ComputeInt32 => (
                0.6,
                "kiln's verified multiply-add chains, taken at 60% of the spec sheet's peak until measured on a GPU (dependent chains with a verification sum every 8 steps)",
                Provenance::SpecShare,
            ),
            Rate::ComputeFp16 => (
                0.3,
                "kiln's fp16 chains at 30% of the packed fp16 peak: a compiler that does not pack the f16vec4 into pairs runs them at the fp32 rate, half the packed peak",
                Provenance::SpecShare,
            ),
            Rate::MatrixFp32 => (
                0.3,
                "kiln's verified shared-memory GEMM at 30% of the fp32 peak until measured on a GPU",
                Provenance::SpecShare,
            ),
            Rate::MatrixFp16Units | Rate::MatrixInt8Units => (
                0.2,
                "kiln's verified matrix-unit GEMM reads its tiles from global memory: 20% of the dense matrix peak until measured on a GPU",
                Provenance::SpecShare,
            ),
        }
    }
}

/// GB (10^9 bytes) in a GiB.
const GIB_IN_GB: f64 = (1u64 << 30) as f64 / 1e9;

/// Whose card it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    /// NVIDIA.
    Nvidia,
    /// AMD.
    Amd,
    /// Intel.
    Intel,
}

impl Vendor {
    /// The vendor of a PCI vendor id, where it is one of these.
    pub fn from_pci_id(id: u32) -> Option<Vendor> {
        match id {
            0x10de => Some(Vendor::Nvidia),
            0x1002 => Some(Vendor::Amd),
            0x8086 => Some(Vendor::Intel),
            _ => None,
        }
    }
}

/// One product and what its spec sheet promises. Rates are peaks at the boost clock:
/// vector rates on the ALUs, matrix rates dense (no structured sparsity), fp16 matrix
/// products with fp32 accumulation where the sheet says which.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Product {
    /// The product's name (`NVIDIA H100 SXM5 80GB`).
    pub name: &'static str,
    /// Driver-reported names match when every word of one of these is a word of the name
    /// (words split at spaces, dashes and brackets, case ignored).
    pub names: &'static [&'static [&'static str]],
    /// Words that make a matching name another product (`D` of `RTX 4090 D`, `SUPER`).
    pub unless: &'static [&'static str],
    /// Whose card it is.
    pub vendor: Vendor,
    /// Device memory, GB.
    pub memory_gb: f64,
    /// Memory bandwidth, GB/s.
    pub memory_gbps: f64,
    /// fp32 on the ALUs, TFLOP/s, as the spec sheet gives it.
    pub fp32_tflops: f64,
    /// True where the sheet's fp32 figure counts packed (dual-issue) fp32, two operations
    /// per lane and clock (the MI300X's 163.4 TFLOP/s): kiln's GLSL chains and GEMM issue
    /// scalar fp32, which no compiler is known to pack, so their reference is half of it.
    pub fp32_packed: bool,
    /// fp16 on the ALUs (packed), TFLOP/s, where the sheet gives it.
    pub fp16_tflops: Option<f64>,
    /// int32 on the ALUs, TOP/s, where the sheet gives it.
    pub int32_tops: Option<f64>,
    /// fp16 on the matrix units, dense, TFLOP/s.
    pub matrix_fp16_tflops: Option<f64>,
    /// int8 on the matrix units, dense, TOP/s.
    pub matrix_int8_tops: Option<f64>,
    /// The card's PCIe generation and width.
    pub pcie: (u32, u32),
    /// An SXM module: it sits on a baseboard (HGX, DGX) whose NVLinks are the board's own
    /// wiring, never bridges a person fits or leaves off.
    pub sxm: bool,
    /// Board power (TDP, or the maximum board power), W.
    pub power_w: f64,
    /// The hottest the GPU may run (maximum operating or junction temperature), °C, where
    /// published.
    pub temp_limit_c: Option<f64>,
    /// The hottest the memory may run, °C, where published.
    pub memory_temp_limit_c: Option<f64>,
    /// The boost (maximum) shader clock of the spec sheet, MHz.
    pub boost_mhz: Option<f64>,
    /// What tools measure on the product, where published: a better reference than the
    /// spec sheet times [`Rate::attainable`].
    pub measured: &'static [(Rate, f64, &'static str)],
    /// Where the figures come from.
    pub source: &'static str,
}

/// Where a reference (and a floor resting on it) comes from, from the surest down: what
/// it may decide follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// The site's own floor, from its healthy cards of the product.
    Site,
    /// The site's baseline: the median of its healthy cards of the product, less their
    /// spread (`kiln baseline`).
    Baseline,
    /// A published measurement of this product.
    Measured,
    /// The spec sheet times a share that tools were measured to reach on GPUs of several
    /// products (streaming bandwidth).
    MeasuredShare,
    /// The spec sheet times a share kiln's kernel has not yet been measured to reach on
    /// any GPU: a guess, which may note a shortfall but never decides a verdict.
    SpecShare,
}

impl Provenance {
    /// In words, for a floor's evidence and the findings table.
    pub fn words(self) -> &'static str {
        match self {
            Provenance::Site => "the site's own floor from its healthy cards",
            Provenance::Baseline => {
                "the site's baseline: the median of its healthy cards of the product, less their spread"
            }
            Provenance::Measured => "a published measurement of the product",
            Provenance::MeasuredShare => {
                "the spec sheet times a share measured on GPUs of several products"
            }
            Provenance::SpecShare => {
                "the spec sheet times a share not yet measured on a GPU (no call on its own)"
            }
        }
    }
}

/// A reference for one rate of one product, in the product's unit (GB/s, 10^12 per second).
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// What a healthy card reaches.
    pub value: f64,
    /// The spec sheet's figure it rests on, as kiln's kernel can issue it (half a packed
    /// figure: see [`Product::fp32_packed`]).
    pub spec: f64,
    /// Where it comes from, in words.
    pub source: String,
    /// Where it comes from, as a kind.
    pub provenance: Provenance,
}

impl Product {
    /// The spec sheet's figure for `rate`, where it gives one, as kiln's kernel can issue
    /// it (half a packed fp32 figure).
    pub fn spec(&self, rate: Rate) -> Option<f64> {
        match rate {
            Rate::Vram => Some(self.memory_gbps),
            Rate::ComputeFp32 | Rate::MatrixFp32 if self.fp32_packed => {
                Some(self.fp32_tflops / 2.0)
            }
            Rate::ComputeFp32 | Rate::MatrixFp32 => Some(self.fp32_tflops),
            Rate::ComputeInt32 => self.int32_tops,
            Rate::ComputeFp16 => self.fp16_tflops,
            Rate::MatrixFp16Units => self.matrix_fp16_tflops,
            Rate::MatrixInt8Units => self.matrix_int8_tops,
        }
    }

    /// What a healthy card of this product reaches in `rate`: what tools measure where
    /// published, else the spec sheet times what kiln's kernel reaches of it.
    pub fn reference(&self, rate: Rate) -> Option<Reference> {
        let spec = self.spec(rate)?;
        if let Some((_, value, source)) = self.measured.iter().find(|(r, ..)| *r == rate) {
            return Some(Reference {
                value: *value,
                spec,
                source: (*source).to_owned(),
                provenance: Provenance::Measured,
            });
        }
        let (share, why, provenance) = rate.attainable();
        let packed = if self.fp32_packed && matches!(rate, Rate::ComputeFp32 | Rate::MatrixFp32) {
            format!(" (half the {} packed)", self.fp32_tflops)
        } else {
            String::new()
        };
        Some(Reference {
            value: spec * share,
            spec,
            source: format!(
                "{} spec sheet {spec}{packed} {} x {share} ({why})",
                self.name,
                rate.spec_unit()
            ),
            provenance,
        })
    }

    /// Whether a driver-reported name is this product's.
    pub fn matches(&self, name: &str) -> bool {
        let words: Vec<&str> = name
            .split(|c: char| c.is_whitespace() || "-()[],/".contains(c))
            .filter(|w| !w.is_empty())
            .collect();
        let has = |w: &str| words.iter().any(|x| x.eq_ignore_ascii_case(w));
        self.names.iter().any(|all| all.iter().all(|w| has(w)))
            && !self.unless.iter().any(|w| has(w))
    }
}

/// The product a driver-reported name (`NVIDIA H100 80GB HBM3`) belongs to, if kiln knows it.
pub fn lookup(name: &str) -> Option<&'static Product> {
    PRODUCTS.iter().find(|p| p.matches(name))
}

const NV_H100: &str = "NVIDIA H100 product page spec table (nvidia.com/en-us/data-center/h100) and H100 Tensor Core GPU Architecture whitepaper v1.04, table 3";
const NV_H200: &str = "NVIDIA H200 product page spec table (nvidia.com/en-us/data-center/h200)";
const NV_A100: &str = "NVIDIA A100 datasheet r4 (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf) and A100 Tensor Core GPU Architecture whitepaper, table 1; limits from nvidia-smi -q (driver 510-555)";
const NV_ADA_DC: &str = "NVIDIA L40S, L40 and L4 product pages and datasheets (nvidia.com/en-us/data-center/l40s, /l40, /l4)";
const NV_ADA: &str = "NVIDIA Ada GPU architecture whitepaper, appendix A (RTX 4090, RTX 4080)";
const NV_GA102: &str = "NVIDIA Ampere GA102 GPU architecture whitepaper v2, appendix A and table 3 (RTX 3090, RTX A6000)";
const NV_V100: &str = "NVIDIA Tesla V100 datasheet (437317-Volta-V100-DS-NV-US) and A100 whitepaper, table 1 (V100 column); limits from nvidia-smi -q (driver 410-418)";
const AMD_MI300: &str = "AMD ROCm documentation, MI300 microarchitecture (rocm.docs.amd.com, conceptual/gpu-arch/mi300) and rocm-smi (750 W)";
const AMD_CDNA2: &str = "AMD Instinct MI250 / MI250X / MI210 spec tables (amd.com, as printed by AnandTech 17326) and ROCm documentation, MI250 microarchitecture";
const MEASURED_H100: &str = "DCGM's diag-skus.yaml (github.com/NVIDIA/DCGM): H100 80 GB HBM3 about 2.54 TB/s with dcgmproftester 1005; p2pBandwidthLatencyTest's local copy 2.47-2.51 TB/s (NVIDIA/nccl #1264)";
const MEASURED_A100: &str = "DCGM's diag-skus.yaml (github.com/NVIDIA/DCGM): A100-SXM4-80GB about 1564 GB/s with dcgmproftester 1005";
const MEASURED_3090: &str = "the memtest_vulkan Readme (github.com/GpuZelenograd/memtest_vulkan): an RTX 3090 at 742-757 GB/s written and read";

/// A product row with nothing but its name filled, for the table below to complete.
const BLANK: Product = Product {
    name: "",
    names: &[],
    unless: &[],
    vendor: Vendor::Nvidia,
    memory_gb: 0.0,
    memory_gbps: 0.0,
    fp32_tflops: 0.0,
    fp32_packed: false,
    fp16_tflops: None,
    int32_tops: None,
    matrix_fp16_tflops: None,
    matrix_int8_tops: None,
    pcie: (4, 16),
    sxm: false,
    power_w: 0.0,
    temp_limit_c: None,
    memory_temp_limit_c: None,
    boost_mhz: None,
    measured: &[],
    source: "",
};

/// The A100's chip (GA100, 108 SMs at 1410 MHz), the same in its four boards.
const A100: Product = Product {
    fp32_tflops: 19.5,
    fp16_tflops: Some(78.0),
    int32_tops: Some(19.5),
    matrix_fp16_tflops: Some(312.0),
    matrix_int8_tops: Some(624.0),
    boost_mhz: Some(1410.0),
    source: NV_A100,
    ..BLANK
};

/// Every product kiln knows, the more specific names first. A figure the sources did not
/// confirm is left out (None), never guessed: a floor that rests on a wrong figure would
/// call healthy cards slow.
pub const PRODUCTS: &[Product] = &[
    Product {
        name: "NVIDIA H200 NVL",
        names: &[&["H200", "NVL"]],
        memory_gb: 141.0,
        memory_gbps: 4800.0,
        fp32_tflops: 60.0,
        matrix_fp16_tflops: Some(835.5),
        matrix_int8_tops: Some(1670.5),
        pcie: (5, 16),
        power_w: 600.0,
        boost_mhz: Some(1785.0),
        source: NV_H200,
        ..BLANK
    },
    Product {
        name: "NVIDIA H200 SXM",
        names: &[&["H200"]],
        unless: &["NVL"],
        memory_gb: 141.0,
        memory_gbps: 4800.0,
        fp32_tflops: 67.0,
        matrix_fp16_tflops: Some(989.5),
        matrix_int8_tops: Some(1979.0),
        pcie: (5, 16),
        sxm: true,
        power_w: 700.0,
        source: NV_H200,
        ..BLANK
    },
    Product {
        name: "NVIDIA H100 NVL",
        names: &[&["H100", "NVL"]],
        memory_gb: 94.0,
        memory_gbps: 3900.0,
        fp32_tflops: 60.0,
        matrix_fp16_tflops: Some(835.5),
        matrix_int8_tops: Some(1670.5),
        pcie: (5, 16),
        power_w: 400.0,
        boost_mhz: Some(1785.0),
        source: NV_H100,
        ..BLANK
    },
    Product {
        name: "NVIDIA H100 PCIe",
        names: &[&["H100", "PCIe"]],
        memory_gb: 80.0,
        memory_gbps: 2000.0,
        fp32_tflops: 51.0,
        matrix_fp16_tflops: Some(756.0),
        matrix_int8_tops: Some(1513.0),
        pcie: (5, 16),
        power_w: 350.0,
        boost_mhz: Some(1755.0),
        source: NV_H100,
        ..BLANK
    },
    Product {
        name: "NVIDIA H100 SXM5 80GB",
        names: &[&["H100", "HBM3"], &["H100", "SXM5"]],
        unless: &["NVL", "PCIe"],
        memory_gb: 80.0,
        memory_gbps: 3350.0,
        fp32_tflops: 67.0,
        fp16_tflops: Some(133.8),
        int32_tops: Some(33.5),
        matrix_fp16_tflops: Some(989.4),
        matrix_int8_tops: Some(1978.9),
        pcie: (5, 16),
        sxm: true,
        power_w: 700.0,
        boost_mhz: Some(1980.0),
        measured: &[(Rate::Vram, 2500.0, MEASURED_H100)],
        source: NV_H100,
        ..BLANK
    },
    Product {
        name: "NVIDIA A100 80GB SXM4",
        names: &[&["A100", "SXM4", "80GB"]],
        memory_gb: 80.0,
        memory_gbps: 2039.0,
        sxm: true,
        power_w: 400.0,
        temp_limit_c: Some(85.0),
        memory_temp_limit_c: Some(95.0),
        measured: &[(Rate::Vram, 1564.0, MEASURED_A100)],
        ..A100
    },
    Product {
        name: "NVIDIA A100 80GB PCIe",
        names: &[&["A100", "80GB", "PCIe"]],
        memory_gb: 80.0,
        memory_gbps: 1935.0,
        power_w: 300.0,
        ..A100
    },
    Product {
        name: "NVIDIA A100 40GB SXM4",
        names: &[&["A100", "SXM4", "40GB"]],
        memory_gb: 40.0,
        memory_gbps: 1555.0,
        sxm: true,
        power_w: 400.0,
        temp_limit_c: Some(85.0),
        memory_temp_limit_c: Some(95.0),
        ..A100
    },
    Product {
        name: "NVIDIA A100 40GB PCIe",
        names: &[&["A100", "PCIe", "40GB"]],
        memory_gb: 40.0,
        memory_gbps: 1555.0,
        power_w: 250.0,
        ..A100
    },
    Product {
        name: "NVIDIA L40S",
        names: &[&["L40S"]],
        memory_gb: 48.0,
        memory_gbps: 864.0,
        fp32_tflops: 91.6,
        matrix_fp16_tflops: Some(362.05),
        matrix_int8_tops: Some(733.0),
        power_w: 350.0,
        boost_mhz: Some(2520.0),
        source: NV_ADA_DC,
        ..BLANK
    },
    Product {
        name: "NVIDIA L40",
        names: &[&["L40"]],
        memory_gb: 48.0,
        memory_gbps: 864.0,
        fp32_tflops: 90.5,
        matrix_fp16_tflops: Some(181.05),
        matrix_int8_tops: Some(362.0),
        power_w: 300.0,
        source: NV_ADA_DC,
        ..BLANK
    },
    Product {
        name: "NVIDIA L4",
        names: &[&["L4"]],
        memory_gb: 24.0,
        memory_gbps: 300.0,
        fp32_tflops: 30.3,
        matrix_fp16_tflops: Some(121.0),
        matrix_int8_tops: Some(242.5),
        power_w: 72.0,
        boost_mhz: Some(2040.0),
        source: NV_ADA_DC,
        ..BLANK
    },
    Product {
        name: "NVIDIA A10",
        names: &[&["A10"]],
        memory_gb: 24.0,
        memory_gbps: 600.0,
        fp32_tflops: 31.2,
        matrix_fp16_tflops: Some(125.0),
        matrix_int8_tops: Some(250.0),
        power_w: 150.0,
        source: "NVIDIA A10 datasheet (nvidia.com/en-us/data-center/products/a10-gpu)",
        ..BLANK
    },
    Product {
        name: "NVIDIA RTX 6000 Ada Generation",
        names: &[&["RTX", "6000", "Ada"]],
        memory_gb: 48.0,
        memory_gbps: 960.0,
        fp32_tflops: 91.1,
        power_w: 300.0,
        boost_mhz: Some(2505.0),
        source: "NVIDIA RTX 6000 Ada Generation datasheet (proviz-print-rtx6000-datasheet-web-2504660)",
        ..BLANK
    },
    Product {
        name: "NVIDIA RTX A6000",
        names: &[&["RTX", "A6000"]],
        memory_gb: 48.0,
        memory_gbps: 768.0,
        fp32_tflops: 38.7,
        matrix_fp16_tflops: Some(154.8),
        matrix_int8_tops: Some(309.7),
        power_w: 300.0,
        source: NV_GA102,
        ..BLANK
    },
    Product {
        name: "NVIDIA GeForce RTX 4090",
        names: &[&["RTX", "4090"]],
        unless: &["D", "Laptop"],
        memory_gb: 24.0,
        memory_gbps: 1008.0,
        fp32_tflops: 82.6,
        matrix_fp16_tflops: Some(165.2),
        matrix_int8_tops: Some(660.6),
        power_w: 450.0,
        boost_mhz: Some(2520.0),
        source: NV_ADA,
        ..BLANK
    },
    Product {
        name: "NVIDIA GeForce RTX 4080",
        names: &[&["RTX", "4080"]],
        unless: &["SUPER", "Laptop"],
        memory_gb: 16.0,
        memory_gbps: 716.8,
        fp32_tflops: 48.7,
        power_w: 320.0,
        boost_mhz: Some(2505.0),
        source: NV_ADA,
        ..BLANK
    },
    Product {
        name: "NVIDIA GeForce RTX 3090",
        names: &[&["RTX", "3090"]],
        unless: &["Ti", "Laptop"],
        memory_gb: 24.0,
        memory_gbps: 936.0,
        fp32_tflops: 35.6,
        matrix_fp16_tflops: Some(71.0),
        matrix_int8_tops: Some(284.0),
        power_w: 350.0,
        temp_limit_c: Some(93.0),
        boost_mhz: Some(1695.0),
        measured: &[(Rate::Vram, 742.0, MEASURED_3090)],
        source: NV_GA102,
        ..BLANK
    },
    Product {
        name: "NVIDIA Tesla V100 SXM2",
        names: &[&["V100", "SXM2"]],
        memory_gb: 32.0,
        memory_gbps: 900.0,
        fp32_tflops: 15.7,
        fp16_tflops: Some(31.4),
        int32_tops: Some(15.7),
        matrix_fp16_tflops: Some(125.0),
        pcie: (3, 16),
        sxm: true,
        power_w: 300.0,
        temp_limit_c: Some(83.0),
        memory_temp_limit_c: Some(85.0),
        boost_mhz: Some(1530.0),
        source: NV_V100,
        ..BLANK
    },
    Product {
        name: "NVIDIA Tesla V100 PCIe",
        names: &[&["V100", "PCIe"]],
        memory_gb: 32.0,
        memory_gbps: 900.0,
        fp32_tflops: 14.0,
        matrix_fp16_tflops: Some(112.0),
        pcie: (3, 16),
        power_w: 250.0,
        temp_limit_c: Some(83.0),
        memory_temp_limit_c: Some(85.0),
        boost_mhz: Some(1380.0),
        source: NV_V100,
        ..BLANK
    },
    Product {
        name: "AMD Instinct MI300X",
        names: &[&["MI300X"]],
        vendor: Vendor::Amd,
        memory_gb: 192.0,
        memory_gbps: 5300.0,
        fp32_tflops: 163.4,
        fp32_packed: true,
        matrix_fp16_tflops: Some(1307.4),
        matrix_int8_tops: Some(2614.9),
        pcie: (5, 16),
        power_w: 750.0,
        boost_mhz: Some(2100.0),
        source: AMD_MI300,
        ..BLANK
    },
    // An MI250X or MI250 is two devices (two GCDs) under one name that does not tell the
    // two apart: each row is half the board, at the MI250's lower figures.
    Product {
        name: "AMD Instinct MI250X / MI250 (one GCD)",
        names: &[&["MI250X"], &["MI250"]],
        vendor: Vendor::Amd,
        memory_gb: 64.0,
        memory_gbps: 1638.4,
        fp32_tflops: 22.65,
        matrix_fp16_tflops: Some(181.0),
        matrix_int8_tops: Some(181.0),
        power_w: 250.0,
        boost_mhz: Some(1700.0),
        source: AMD_CDNA2,
        ..BLANK
    },
    Product {
        name: "AMD Instinct MI210",
        names: &[&["MI210"]],
        vendor: Vendor::Amd,
        memory_gb: 64.0,
        memory_gbps: 1638.4,
        fp32_tflops: 22.6,
        matrix_fp16_tflops: Some(181.0),
        matrix_int8_tops: Some(181.0),
        power_w: 300.0,
        boost_mhz: Some(1700.0),
        source: AMD_CDNA2,
        ..BLANK
    },
    // Intel publishes no TFLOPS: fp32 is 4096 lanes x 2 x the 2100 MHz graphics clock it
    // does publish (cards run faster), and the bandwidth the 8 GB card's (the 16 GB card,
    // under the same name, has 560 GB/s).
    Product {
        name: "Intel Arc A770",
        names: &[&["Arc", "A770"]],
        vendor: Vendor::Intel,
        memory_gb: 8.0,
        memory_gbps: 512.0,
        fp32_tflops: 17.2,
        power_w: 225.0,
        boost_mhz: Some(2100.0),
        source: "Intel Arc A-series specifications (ark.intel.com, September 2022): 32 Xe-cores, 2100 MHz graphics clock, 17.5 Gbps GDDR6 on 256 bits, 225 W",
        ..BLANK
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drivers_names_find_their_products() {
        // Names as drivers and NVML report them (older drivers drop `NVIDIA `).
        for (name, product) in [
            ("NVIDIA H200", Some("NVIDIA H200 SXM")),
            ("NVIDIA H200 NVL", Some("NVIDIA H200 NVL")),
            ("NVIDIA H100 80GB HBM3", Some("NVIDIA H100 SXM5 80GB")),
            ("NVIDIA H100 PCIe", Some("NVIDIA H100 PCIe")),
            ("NVIDIA H100 NVL", Some("NVIDIA H100 NVL")),
            ("NVIDIA A100-SXM4-80GB", Some("NVIDIA A100 80GB SXM4")),
            ("A100-SXM4-40GB", Some("NVIDIA A100 40GB SXM4")),
            ("NVIDIA A100 80GB PCIe", Some("NVIDIA A100 80GB PCIe")),
            ("NVIDIA A100-PCIE-40GB", Some("NVIDIA A100 40GB PCIe")),
            ("NVIDIA L40S", Some("NVIDIA L40S")),
            ("NVIDIA L40", Some("NVIDIA L40")),
            ("NVIDIA L4", Some("NVIDIA L4")),
            ("NVIDIA A10", Some("NVIDIA A10")),
            ("NVIDIA A10G", None),
            (
                "NVIDIA RTX 6000 Ada Generation",
                Some("NVIDIA RTX 6000 Ada Generation"),
            ),
            ("NVIDIA RTX A6000", Some("NVIDIA RTX A6000")),
            ("NVIDIA GeForce RTX 4090", Some("NVIDIA GeForce RTX 4090")),
            ("NVIDIA GeForce RTX 4090 D", None),
            ("NVIDIA GeForce RTX 4080", Some("NVIDIA GeForce RTX 4080")),
            ("NVIDIA GeForce RTX 4080 SUPER", None),
            ("NVIDIA GeForce RTX 3090", Some("NVIDIA GeForce RTX 3090")),
            ("NVIDIA GeForce RTX 3090 Ti", None),
            ("Tesla V100-SXM2-32GB", Some("NVIDIA Tesla V100 SXM2")),
            ("Tesla V100-PCIE-16GB", Some("NVIDIA Tesla V100 PCIe")),
            ("Tesla V100S-PCIE-32GB", None),
            ("AMD Instinct MI300X", Some("AMD Instinct MI300X")),
            (
                "AMD Instinct MI300X (RADV GFX942)",
                Some("AMD Instinct MI300X"),
            ),
            (
                "AMD Instinct MI250X/MI250",
                Some("AMD Instinct MI250X / MI250 (one GCD)"),
            ),
            (
                "AMD Instinct MI250X / MI250",
                Some("AMD Instinct MI250X / MI250 (one GCD)"),
            ),
            ("AMD Instinct MI210", Some("AMD Instinct MI210")),
            ("Intel(R) Arc(TM) A770 Graphics", Some("Intel Arc A770")),
            (
                "Intel(R) Arc(tm) A770 Graphics (DG2)",
                Some("Intel Arc A770"),
            ),
            ("AMD Radeon Graphics", None),
            ("llvmpipe (LLVM 15.0.6, 256 bits)", None),
            ("AMD Radeon RX 7900 XTX", None),
        ] {
            assert_eq!(lookup(name).map(|p| p.name), product, "{name}");
        }
    }

    #[test]
    fn every_row_is_whole_and_every_name_reaches_its_row() {
        for p in PRODUCTS {
            assert!(!p.source.is_empty() && !p.names.is_empty(), "{}", p.name);
            assert!(p.memory_gbps > 0.0 && p.fp32_tflops > 0.0 && p.power_w > 0.0);
            for words in p.names {
                let name = words.join(" ");
                assert_eq!(
                    lookup(&name).map(|q| q.name),
                    Some(p.name),
                    "`{name}` is taken by an earlier row"
                );
            }
            if let (Some(f16), Some(i8)) = (p.matrix_fp16_tflops, p.matrix_int8_tops) {
                assert!(i8 >= f16, "{}: int8 below fp16 on the matrix units", p.name);
            }
        }
    }

    #[test]
    fn a_reference_is_the_measurement_where_published_else_the_attainable_share() {
        // A published measurement of the product (DCGM's for an H100 SXM).
        let h100 = lookup("NVIDIA H100 80GB HBM3").unwrap();
        let vram = h100.reference(Rate::Vram).unwrap();
        assert_eq!((vram.value, vram.spec), (2500.0, 3350.0));
        assert_eq!(vram.provenance, Provenance::Measured);
        assert!(vram.source.contains("diag-skus"), "{}", vram.source);
        // None published for an H200: its sheet times the share streaming tools reach.
        let h200 = lookup("NVIDIA H200").unwrap();
        let vram = h200.reference(Rate::Vram).unwrap();
        assert_eq!((vram.value, vram.spec), (4800.0 * 0.75, 4800.0));
        assert_eq!(vram.provenance, Provenance::MeasuredShare);
        let fp32 = h200.reference(Rate::ComputeFp32).unwrap();
        assert_eq!(fp32.value, 67.0 * Rate::ComputeFp32.attainable().0);
        assert!(fp32.source.contains("spec sheet 67"), "{}", fp32.source);
        assert_eq!(fp32.provenance, Provenance::SpecShare);
        let l40s = lookup("NVIDIA L40S")
            .unwrap()
            .reference(Rate::Vram)
            .unwrap();
        assert_eq!(l40s.provenance, Provenance::MeasuredShare);
        // The MI300X's 163.4 TFLOP/s counts packed fp32, which kiln's chains do not issue.
        let mi300x = lookup("AMD Instinct MI300X").unwrap();
        let fp32 = mi300x.reference(Rate::ComputeFp32).unwrap();
        assert_eq!(fp32.spec, 81.7);
        assert!(
            fp32.source.contains("half the 163.4 packed"),
            "{}",
            fp32.source
        );
        assert!(
            lookup("NVIDIA L40S")
                .unwrap()
                .reference(Rate::ComputeInt32)
                .is_none(),
            "no int32 figure, no reference"
        );
        for r in Rate::ALL {
            assert_eq!(Rate::from_name(r.name()), Some(r));
        }
        assert_eq!(Rate::Vram.to_spec_unit(1.0), GIB_IN_GB);
        assert_eq!(Rate::ComputeFp32.to_spec_unit(67_000.0), 67.0);
    }
}
