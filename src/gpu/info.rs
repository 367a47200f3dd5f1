//! Identity, memory and limits of a Vulkan device, as plain data for the evidence,
//! the device table and device selection.

use serde::{Deserialize, Serialize};

/// What kind of device Vulkan says this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// A discrete GPU.
    DiscreteGpu,
    /// A GPU sharing the host's memory.
    IntegratedGpu,
    /// A virtualised GPU.
    VirtualGpu,
    /// A software device on the CPU (lavapipe, SwiftShader).
    Cpu,
    /// Vulkan translated onto another API by a layer (Mesa's Dozen on Direct3D 12, as
    /// Windows offers it): a card's own driver is not what runs, so it is no GPU's test.
    Translation,
    /// Anything else.
    Other,
}

impl DeviceKind {
    /// The kind in words (`discrete GPU`).
    pub fn word(self) -> &'static str {
        match self {
            DeviceKind::DiscreteGpu => "discrete GPU",
            DeviceKind::IntegratedGpu => "integrated GPU",
            DeviceKind::VirtualGpu => "virtual GPU",
            DeviceKind::Cpu => "CPU device",
            DeviceKind::Translation => "Vulkan translated onto Direct3D 12 (Dozen)",
            DeviceKind::Other => "other device",
        }
    }

    /// The kind of a device Vulkan reports as `device_type`, whose driver is `driver_id`
    /// and whose name is `name`: Dozen reports the Direct3D 12 adapter's own type, so it
    /// is told by its driver (or, without the driver's id, by the name it gives).
    pub fn classify(
        device_type: ash::vk::PhysicalDeviceType,
        driver_id: Option<ash::vk::DriverId>,
        name: &str,
    ) -> DeviceKind {
        use ash::vk::PhysicalDeviceType as T;
        if driver_id == Some(ash::vk::DriverId::MESA_DOZEN)
            || name.starts_with("Microsoft Direct3D12")
        {
            return DeviceKind::Translation;
        }
        match device_type {
            T::DISCRETE_GPU => DeviceKind::DiscreteGpu,
            T::INTEGRATED_GPU => DeviceKind::IntegratedGpu,
            T::VIRTUAL_GPU => DeviceKind::VirtualGpu,
            T::CPU => DeviceKind::Cpu,
            _ => DeviceKind::Other,
        }
    }

    /// True for real GPUs: the devices a health check is about.
    pub fn is_gpu(self) -> bool {
        matches!(
            self,
            DeviceKind::DiscreteGpu | DeviceKind::IntegratedGpu | DeviceKind::VirtualGpu
        )
    }
}

/// One memory heap, with the budget when `VK_EXT_memory_budget` reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeapInfo {
    /// Heap index.
    pub index: u32,
    /// Heap size in bytes.
    pub size_bytes: u64,
    /// True for device-local memory (VRAM).
    pub device_local: bool,
    /// What this process may still allocate, per the driver; None without the extension.
    pub budget_bytes: Option<u64>,
    /// What this process already uses, per the driver; None without the extension.
    pub usage_bytes: Option<u64>,
}

/// One memory type.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryTypeInfo {
    /// Memory type index.
    pub index: u32,
    /// The heap it draws from.
    pub heap_index: u32,
    /// Property flags by name (`device_local`, `host_visible`, ...).
    pub flags: Vec<String>,
}

/// What a device's matrix units offer shaders (`VK_KHR_cooperative_matrix`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MatrixUnits {
    /// The shapes and types they multiply at subgroup scope, as the device lists them
    /// (`vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR`); empty where kiln cannot use
    /// them.
    pub shapes: Vec<MatrixUnitShape>,
    /// Why kiln cannot drive them although the device offers the extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unusable: Option<String>,
    /// Invocations per subgroup: the matrix-unit shaders' workgroups are whole subgroups.
    pub subgroup_size: u32,
    /// Whether shaders may compute in 8-bit integers (`shaderInt8`), which int8 matrices
    /// need.
    pub int8: bool,
}

/// One multiplication the matrix units perform: (M x K) x (K x N) + (M x N), with the
/// component types of A, B, C and the result (`f16`, `f32`, `s8`, `s32`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixUnitShape {
    /// Rows of A and of the result.
    pub m: u32,
    /// Columns of B and of the result.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
    /// A's component type.
    pub a: String,
    /// B's component type.
    pub b: String,
    /// The accumulator's component type.
    pub c: String,
    /// The result's component type.
    pub result: String,
    /// Whether integer accumulation saturates instead of wrapping.
    pub saturating: bool,
}

impl MatrixUnitShape {
    /// The shape in a few characters: `f16 x f16 + f32 -> f32, 16x16x16`.
    pub fn describe(&self) -> String {
        format!(
            "{} x {} + {} -> {}, {}x{}x{}{}",
            self.a,
            self.b,
            self.c,
            self.result,
            self.m,
            self.n,
            self.k,
            if self.saturating { " saturating" } else { "" }
        )
    }
}

/// The limits that shape how kiln cuts and dispatches work.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceLimits {
    /// Largest range one storage-buffer binding may cover.
    pub max_storage_buffer_range_bytes: u64,
    /// Largest single memory allocation.
    pub max_memory_allocation_size_bytes: u64,
    /// Largest buffer (Vulkan 1.3 / maintenance4), when reported.
    pub max_buffer_size_bytes: Option<u64>,
    /// Texels one texel-buffer view may cover.
    pub max_texel_buffer_elements: u64,
    /// Workgroups per dispatch in x, y, z.
    pub max_compute_work_group_count: [u32; 3],
    /// Invocations per workgroup.
    pub max_compute_work_group_invocations: u32,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period_ns: f32,
    /// Valid timestamp bits on the compute queue (0: no GPU timing).
    pub timestamp_valid_bits: u32,
    /// Push constant bytes.
    pub max_push_constants_size_bytes: u32,
}

impl DeviceLimits {
    /// The largest buffer a test can allocate and bind whole as one storage buffer.
    pub fn largest_storage_buffer_bytes(&self) -> u64 {
        self.max_storage_buffer_range_bytes
            .min(self.max_memory_allocation_size_bytes)
            .min(self.max_buffer_size_bytes.unwrap_or(u64::MAX))
    }
}

/// Everything kiln knows about a device before it opens it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Position in Vulkan's enumeration; what `--device N` refers to.
    pub index: usize,
    /// Marketing name as the driver reports it.
    pub name: String,
    /// PCI vendor id.
    pub vendor_id: u32,
    /// Vendor by name, where the id is known.
    pub vendor_name: String,
    /// PCI device id.
    pub device_id: u32,
    /// Discrete, integrated, CPU, ...
    pub kind: DeviceKind,
    /// Driver name (`VK_KHR_driver_properties`).
    pub driver_name: String,
    /// Driver description (`VK_KHR_driver_properties`).
    pub driver_info: String,
    /// Driver version decoded the way its vendor encodes it.
    pub driver_version: String,
    /// Driver version as Vulkan reports it.
    pub driver_version_raw: u32,
    /// Vulkan API version the device supports.
    pub api_version: String,
    /// `deviceUUID`, formatted like NVML's UUID body (8-4-4-4-12 hex).
    pub device_uuid: String,
    /// PCI address `domain:bus:device.function`, when `VK_EXT_pci_bus_info` is present.
    pub pci_address: Option<String>,
    /// `deviceLUID`, where the driver gives one (Windows): how the OS's own figures of the
    /// adapter (DXGI's memory budget) are matched to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub luid: Option<[u8; 8]>,
    /// Memory heaps.
    pub heaps: Vec<HeapInfo>,
    /// Memory types.
    pub memory_types: Vec<MemoryTypeInfo>,
    /// True when heap budgets come from `VK_EXT_memory_budget`.
    pub memory_budget_supported: bool,
    /// Limits that matter to kiln.
    pub limits: DeviceLimits,
    /// True when shaders may use 64-bit integers (`shaderInt64`).
    pub shader_int64: bool,
    /// True when shaders may compute in 16-bit floats (`shaderFloat16`).
    #[serde(default)]
    pub shader_float16: bool,
    /// True when the device offers matrix units to shaders (`VK_KHR_cooperative_matrix`).
    #[serde(default)]
    pub cooperative_matrix: bool,
    /// What those matrix units multiply, and whether kiln can drive them.
    #[serde(default)]
    pub matrix_units: MatrixUnits,
    /// Queue family used for compute.
    pub compute_queue_family: Option<u32>,
}

impl DeviceInfo {
    /// The VRAM heap: the largest device-local heap. A card's small BAR window is a second
    /// device-local heap that is the same memory seen through the bus, not more of it.
    pub fn vram_heap(&self) -> Option<&HeapInfo> {
        self.heaps
            .iter()
            .filter(|h| h.device_local)
            .max_by_key(|h| h.size_bytes)
    }

    /// VRAM bytes free at this moment: the budget minus usage when the driver reports it,
    /// else the heap size (said as such by `memory_budget_supported`).
    pub fn device_local_free_bytes(&self) -> u64 {
        self.vram_heap()
            .map_or(0, |h| match (h.budget_bytes, h.usage_bytes) {
                (Some(budget), Some(usage)) => budget.saturating_sub(usage),
                _ => h.size_bytes,
            })
    }

    /// True when `selector` names this device: its index, its UUID (with or without the
    /// `GPU-` prefix, any case, a unique prefix of at least 8 characters), or its PCI address.
    pub fn matches(&self, selector: &str) -> bool {
        let s = selector.trim();
        if let Ok(index) = s.parse::<usize>() {
            return index == self.index;
        }
        let lower = s.to_ascii_lowercase();
        let uuid = lower.strip_prefix("gpu-").unwrap_or(&lower);
        if uuid.len() >= 8 && self.device_uuid.starts_with(uuid) {
            return true;
        }
        match &self.pci_address {
            Some(pci) => {
                let pci = pci.to_ascii_lowercase();
                pci == lower || pci.strip_prefix("0000:") == Some(lower.as_str())
            }
            None => false,
        }
    }
}

/// Formats 16 UUID bytes as `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Vendor name for a PCI vendor id.
pub fn vendor_name(vendor_id: u32) -> &'static str {
    match vendor_id {
        0x10de => "NVIDIA",
        0x1002 => "AMD",
        0x8086 => "Intel",
        0x13b5 => "ARM",
        0x5143 => "Qualcomm",
        0x106b => "Apple",
        0x10005 => "Mesa",
        _ => "unknown",
    }
}

/// Decodes a driver version the way the vendor packs it.
pub fn decode_driver_version(vendor_id: u32, v: u32) -> String {
    match vendor_id {
        0x10de => format!(
            "{}.{}.{}.{}",
            (v >> 22) & 0x3ff,
            (v >> 14) & 0xff,
            (v >> 6) & 0xff,
            v & 0x3f
        ),
        _ => format!("{}.{}.{}", v >> 22, (v >> 12) & 0x3ff, v & 0xfff),
    }
}

#[cfg(test)]
impl DeviceInfo {
    /// A device with nothing but its place, kind and identity, for tests.
    pub(crate) fn for_tests(
        index: usize,
        kind: DeviceKind,
        vendor_id: u32,
        device_id: u32,
        uuid: &str,
        pci_address: Option<&str>,
    ) -> DeviceInfo {
        DeviceInfo {
            index,
            name: format!("device {index}"),
            vendor_id,
            vendor_name: String::new(),
            device_id,
            kind,
            driver_name: String::new(),
            driver_info: String::new(),
            driver_version: String::new(),
            driver_version_raw: 0,
            api_version: "1.3.0".into(),
            device_uuid: uuid.into(),
            pci_address: pci_address.map(str::to_owned),
            luid: None,
            heaps: Vec::new(),
            memory_types: Vec::new(),
            memory_budget_supported: false,
            limits: DeviceLimits {
                max_storage_buffer_range_bytes: 0,
                max_memory_allocation_size_bytes: 0,
                max_buffer_size_bytes: None,
                max_texel_buffer_elements: 0,
                max_compute_work_group_count: [0; 3],
                max_compute_work_group_invocations: 0,
                timestamp_period_ns: 1.0,
                timestamp_valid_bits: 0,
                max_push_constants_size_bytes: 0,
            },
            shader_int64: false,
            shader_float16: false,
            cooperative_matrix: false,
            matrix_units: Default::default(),
            compute_queue_family: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_is_formatted_like_nvml() {
        let bytes: [u8; 16] = [
            0x6d, 0x65, 0x73, 0x61, 0x32, 0x32, 0x2e, 0x33, 0x2e, 0x36, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(format_uuid(&bytes), "6d657361-3232-2e33-2e36-000000000000");
    }

    #[test]
    fn nvidia_driver_version_decodes() {
        // 550.54.14 packed the NVIDIA way.
        let v = (550 << 22) | (54 << 14) | (14 << 6);
        assert_eq!(decode_driver_version(0x10de, v), "550.54.14.0");
    }
}
