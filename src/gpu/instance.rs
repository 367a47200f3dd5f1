//! Loading the Vulkan loader, creating the instance and describing every device.

use std::ffi::CStr;
use std::sync::Arc;

use ash::vk;

use super::error::{GpuError, GpuResult};
use super::info::{
    DeviceInfo, DeviceKind, DeviceLimits, HeapInfo, MatrixUnitShape, MatrixUnits, MemoryTypeInfo,
    decode_driver_version, format_uuid, vendor_name,
};

/// The loaded Vulkan library and one instance; shared by every device context.
pub struct Vulkan {
    entry: ash::Entry,
    pub(crate) instance: ash::Instance,
    /// The messenger that takes a validation layer's messages, when one is active.
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
}

/// Messages a validation layer sent, not yet taken by [`take_validation_messages`].
static VALIDATION: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Takes the validation layer's messages so far (each also went to stderr whole).
pub fn take_validation_messages() -> Vec<String> {
    VALIDATION
        .lock()
        .map(|mut v| std::mem::take(&mut *v))
        .unwrap_or_default()
}

/// True when the environment asks the loader for a validation layer: kiln then takes its
/// messages itself (a layer that prints on stdout would write into the worker's protocol
/// pipe to its parent).
fn validation_requested() -> bool {
    ["VK_INSTANCE_LAYERS", "VK_LOADER_LAYERS_ENABLE"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .any(|v| v.to_ascii_lowercase().contains("validation"))
}

/// The messenger's callback: the message whole on stderr and kept for the evidence.
unsafe extern "system" fn on_validation_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _kind: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut std::ffi::c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes a valid callback-data struct whose message, when set, is a
    // NUL-terminated string, for the duration of the call.
    let text = unsafe {
        data.as_ref()
            .and_then(|d| (!d.p_message.is_null()).then(|| CStr::from_ptr(d.p_message)))
            .map(|m| m.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let line = format!("Vulkan validation ({severity:?}): {text}");
    {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{line}");
    }
    if let Ok(mut kept) = VALIDATION.lock() {
        kept.push(line);
    }
    vk::FALSE
}

/// The Vulkan loader's version (the instance version it supports, `1.3.275`), or `None`
/// where no loader loads.
pub fn loader_version() -> Option<String> {
    // SAFETY: as in `Vulkan::new`: loading libvulkan runs the trusted loader's initialisers.
    let entry = unsafe { ash::Entry::load() }.ok()?;
    // SAFETY: entry is a loaded loader; the call has no other precondition.
    let version = unsafe { entry.try_enumerate_instance_version() }
        .ok()?
        .unwrap_or(vk::API_VERSION_1_0);
    Some(version_text(version))
}

/// A Vulkan version as `major.minor.patch`.
fn version_text(version: u32) -> String {
    format!(
        "{}.{}.{}",
        vk::api_version_major(version),
        vk::api_version_minor(version),
        vk::api_version_patch(version)
    )
}

impl Vulkan {
    /// Loads the system's Vulkan loader and creates an instance.
    pub fn new() -> GpuResult<Arc<Vulkan>> {
        // SAFETY: loading libvulkan runs its initialisers; the loader is trusted system code.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| GpuError::LoaderMissing {
            detail: e.to_string(),
        })?;
        Self::with_entry(entry)
    }

    /// Loads the Vulkan loader from an explicit path (for tests and odd installs).
    pub fn from_path(path: &std::path::Path) -> GpuResult<Arc<Vulkan>> {
        // SAFETY: as in `new`; the path names a Vulkan loader or fails to load.
        let entry =
            unsafe { ash::Entry::load_from(path) }.map_err(|e| GpuError::LoaderMissing {
                detail: e.to_string(),
            })?;
        Self::with_entry(entry)
    }

    fn with_entry(entry: ash::Entry) -> GpuResult<Arc<Vulkan>> {
        let app = vk::ApplicationInfo::default()
            .application_name(c"kiln")
            .application_version(vk::make_api_version(0, 0, 1, 0))
            .engine_name(c"kiln")
            .api_version(vk::API_VERSION_1_1);
        // Portability enumeration lets non-conformant drivers (MoltenVK) show up too.
        // SAFETY: entry is a loaded loader.
        let available =
            unsafe { entry.enumerate_instance_extension_properties(None) }.map_err(|r| {
                GpuError::from_vk(
                    "vkEnumerateInstanceExtensionProperties",
                    r,
                    "starting Vulkan",
                )
            })?;
        let portability = available.iter().any(|e| {
            e.extension_name_as_c_str().ok() == Some(ash::khr::portability_enumeration::NAME)
        });
        let mut extensions = Vec::new();
        let mut flags = vk::InstanceCreateFlags::empty();
        if portability {
            extensions.push(ash::khr::portability_enumeration::NAME.as_ptr());
            flags |= vk::InstanceCreateFlags::ENUMERATE_PORTABILITY_KHR;
        }
        let debug_utils = validation_requested()
            && available
                .iter()
                .any(|e| e.extension_name_as_c_str().ok() == Some(ash::ext::debug_utils::NAME));
        if debug_utils {
            extensions.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        let mut messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            // The layer's findings, not the loader's chatter about which layers it loaded.
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(on_validation_message));
        let mut info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_extension_names(&extensions)
            .flags(flags);
        if debug_utils {
            // Also catches what is said while the instance is made.
            info = info.push_next(&mut messenger_info);
        }
        // SAFETY: info and everything it points to outlive the call.
        let instance = unsafe { entry.create_instance(&info, None) }.map_err(|r| match r {
            vk::Result::ERROR_INCOMPATIBLE_DRIVER | vk::Result::ERROR_INITIALIZATION_FAILED => {
                GpuError::NoDriver
            }
            r => GpuError::from_vk("vkCreateInstance", r, "starting Vulkan"),
        })?;
        let messenger = debug_utils
            .then(|| {
                let loader = ash::ext::debug_utils::Instance::new(&entry, &instance);
                // SAFETY: the instance enabled VK_EXT_debug_utils; the info outlives the call.
                unsafe { loader.create_debug_utils_messenger(&messenger_info, None) }
                    .ok()
                    .map(|m| (loader, m))
            })
            .flatten();
        Ok(Arc::new(Vulkan {
            entry,
            instance,
            messenger,
        }))
    }

    /// Physical devices in enumeration order; `NoDevice` when there are none.
    pub(crate) fn physical_devices(&self) -> GpuResult<Vec<vk::PhysicalDevice>> {
        // The instance exists, so a driver loaded: a driver that finds no hardware fails
        // enumeration with one of these.
        // SAFETY: the instance is alive for self's lifetime.
        let devices =
            unsafe { self.instance.enumerate_physical_devices() }.map_err(|r| match r {
                vk::Result::ERROR_INITIALIZATION_FAILED | vk::Result::ERROR_INCOMPATIBLE_DRIVER => {
                    GpuError::NoDevice
                }
                r => GpuError::from_vk("vkEnumeratePhysicalDevices", r, "listing devices"),
            })?;
        if devices.is_empty() {
            return Err(GpuError::NoDevice);
        }
        Ok(devices)
    }

    /// Describes every device Vulkan can see.
    pub fn devices(&self) -> GpuResult<Vec<DeviceInfo>> {
        self.physical_devices()?
            .into_iter()
            .enumerate()
            .map(|(index, pd)| self.describe(index, pd))
            .collect()
    }

    pub(crate) fn device_extensions(&self, pd: vk::PhysicalDevice) -> Vec<String> {
        // SAFETY: pd came from this instance.
        unsafe { self.instance.enumerate_device_extension_properties(pd) }
            .unwrap_or_default()
            .iter()
            .filter_map(|e| e.extension_name_as_c_str().ok())
            .map(|n| n.to_string_lossy().into_owned())
            .collect()
    }

    fn describe(&self, index: usize, pd: vk::PhysicalDevice) -> GpuResult<DeviceInfo> {
        let extensions = self.device_extensions(pd);
        let has = |name: &CStr| extensions.iter().any(|e| e.as_bytes() == name.to_bytes());
        let has_pci = has(ash::ext::pci_bus_info::NAME);
        let has_budget = has(ash::ext::memory_budget::NAME);
        let has_driver_props = has(ash::khr::driver_properties::NAME);
        let (float16, int8) = self.float16_int8(pd, &has);

        let mut id_props = vk::PhysicalDeviceIDProperties::default();
        let mut pci = vk::PhysicalDevicePCIBusInfoPropertiesEXT::default();
        let mut driver = vk::PhysicalDeviceDriverProperties::default();
        let mut maint4 = vk::PhysicalDeviceMaintenance4Properties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id_props);
        if has_pci {
            props2 = props2.push_next(&mut pci);
        }
        if has_driver_props {
            props2 = props2.push_next(&mut driver);
        }
        // SAFETY: pd belongs to this instance; the chain holds only structs whose
        // extensions the device reports.
        let api = unsafe { self.instance.get_physical_device_properties(pd) }.api_version;
        let has_maint4 = vk::api_version_minor(api) >= 3 || has(ash::khr::maintenance4::NAME);
        if has_maint4 {
            props2 = props2.push_next(&mut maint4);
        }
        // SAFETY: as above.
        unsafe {
            self.instance
                .get_physical_device_properties2(pd, &mut props2)
        };
        let props = props2.properties;

        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let mut mem2 = vk::PhysicalDeviceMemoryProperties2::default();
        if has_budget {
            mem2 = mem2.push_next(&mut budget);
        }
        // SAFETY: as above.
        unsafe {
            self.instance
                .get_physical_device_memory_properties2(pd, &mut mem2)
        };
        let mem = mem2.memory_properties;

        let heaps = (0..mem.memory_heap_count as usize)
            .map(|i| {
                let heap = mem.memory_heaps[i];
                HeapInfo {
                    index: i as u32,
                    size_bytes: heap.size,
                    device_local: heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL),
                    budget_bytes: has_budget.then(|| budget.heap_budget[i]),
                    usage_bytes: has_budget.then(|| budget.heap_usage[i]),
                }
            })
            .collect();
        let memory_types = (0..mem.memory_type_count as usize)
            .map(|i| {
                let t = mem.memory_types[i];
                MemoryTypeInfo {
                    index: i as u32,
                    heap_index: t.heap_index,
                    flags: memory_flag_names(t.property_flags),
                }
            })
            .collect();

        // SAFETY: as above.
        let families = unsafe {
            self.instance
                .get_physical_device_queue_family_properties(pd)
        };
        let compute_family = pick_compute_family(&families);
        let timestamp_valid_bits = compute_family
            .map(|f| families[f as usize].timestamp_valid_bits)
            .unwrap_or(0);

        let limits = props.limits;
        let name = c_chars_to_string(&props.device_name);
        let kind = DeviceKind::classify(
            props.device_type,
            has_driver_props.then_some(driver.driver_id),
            &name,
        );
        let (driver_name, driver_info) = if has_driver_props {
            (
                c_chars_to_string(&driver.driver_name),
                c_chars_to_string(&driver.driver_info),
            )
        } else {
            (String::new(), String::new())
        };
        Ok(DeviceInfo {
            index,
            name,
            vendor_id: props.vendor_id,
            vendor_name: vendor_name(props.vendor_id).to_owned(),
            device_id: props.device_id,
            kind,
            driver_name,
            driver_info,
            driver_version: decode_driver_version(props.vendor_id, props.driver_version),
            driver_version_raw: props.driver_version,
            api_version: version_text(props.api_version),
            device_uuid: format_uuid(&id_props.device_uuid),
            luid: (id_props.device_luid_valid == vk::TRUE).then_some(id_props.device_luid),
            pci_address: has_pci.then(|| {
                format!(
                    "{:04x}:{:02x}:{:02x}.{:x}",
                    pci.pci_domain, pci.pci_bus, pci.pci_device, pci.pci_function
                )
            }),
            heaps,
            memory_types,
            memory_budget_supported: has_budget,
            limits: DeviceLimits {
                max_storage_buffer_range_bytes: u64::from(limits.max_storage_buffer_range),
                max_memory_allocation_size_bytes: {
                    let mut m3 = vk::PhysicalDeviceMaintenance3Properties::default();
                    let mut p = vk::PhysicalDeviceProperties2::default().push_next(&mut m3);
                    // SAFETY: maintenance3 is core in Vulkan 1.1, which kiln requires.
                    unsafe { self.instance.get_physical_device_properties2(pd, &mut p) };
                    m3.max_memory_allocation_size
                },
                max_buffer_size_bytes: has_maint4.then_some(maint4.max_buffer_size),
                max_texel_buffer_elements: u64::from(limits.max_texel_buffer_elements),
                max_compute_work_group_count: limits.max_compute_work_group_count,
                max_compute_work_group_invocations: limits.max_compute_work_group_invocations,
                timestamp_period_ns: limits.timestamp_period,
                timestamp_valid_bits,
                max_push_constants_size_bytes: limits.max_push_constants_size,
            },
            // SAFETY: pd belongs to this instance.
            shader_int64: unsafe { self.instance.get_physical_device_features(pd) }.shader_int64
                == vk::TRUE,
            cooperative_matrix: has(ash::khr::cooperative_matrix::NAME),
            matrix_units: self.matrix_units(pd, &has, int8),
            shader_float16: float16,
            compute_queue_family: compute_family,
        })
    }
}

/// A component type of a cooperative matrix in a few characters (`f16`, `s8`).
fn component_name(t: vk::ComponentTypeKHR) -> String {
    match t {
        vk::ComponentTypeKHR::FLOAT16 => "f16".into(),
        vk::ComponentTypeKHR::FLOAT32 => "f32".into(),
        vk::ComponentTypeKHR::FLOAT64 => "f64".into(),
        vk::ComponentTypeKHR::SINT8 => "s8".into(),
        vk::ComponentTypeKHR::SINT16 => "s16".into(),
        vk::ComponentTypeKHR::SINT32 => "s32".into(),
        vk::ComponentTypeKHR::SINT64 => "s64".into(),
        vk::ComponentTypeKHR::UINT8 => "u8".into(),
        vk::ComponentTypeKHR::UINT16 => "u16".into(),
        vk::ComponentTypeKHR::UINT32 => "u32".into(),
        vk::ComponentTypeKHR::UINT64 => "u64".into(),
        other => format!("type {}", other.as_raw()),
    }
}

impl Vulkan {
    /// Whether shaders may compute in 16-bit floats and in 8-bit integers
    /// (`VK_KHR_shader_float16_int8`).
    fn float16_int8(&self, pd: vk::PhysicalDevice, has: &dyn Fn(&CStr) -> bool) -> (bool, bool) {
        if !has(ash::khr::shader_float16_int8::NAME) {
            return (false, false);
        }
        let mut f16_int8 = vk::PhysicalDeviceShaderFloat16Int8Features::default();
        let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut f16_int8);
        // SAFETY: the device reports the extension whose struct is chained.
        unsafe {
            self.instance
                .get_physical_device_features2(pd, &mut features)
        };
        (
            f16_int8.shader_float16 == vk::TRUE,
            f16_int8.shader_int8 == vk::TRUE,
        )
    }

    /// What the device's matrix units multiply, where kiln can drive them: the
    /// extension and its feature, the Vulkan memory model its shaders are written in
    /// (`VK_KHR_vulkan_memory_model`, enabled by extension because the instance is 1.1),
    /// and basic subgroup operations in compute shaders (a workgroup's subgroups share
    /// out a tile's strips).
    fn matrix_units(
        &self,
        pd: vk::PhysicalDevice,
        has: &dyn Fn(&CStr) -> bool,
        int8: bool,
    ) -> MatrixUnits {
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut subgroup);
        // SAFETY: pd belongs to this instance; subgroup properties are core in 1.1.
        unsafe {
            self.instance
                .get_physical_device_properties2(pd, &mut props)
        };
        let mut units = MatrixUnits {
            subgroup_size: subgroup.subgroup_size,
            int8,
            ..MatrixUnits::default()
        };
        let has_coop = has(ash::khr::cooperative_matrix::NAME);
        let has_model = has(ash::khr::vulkan_memory_model::NAME);
        let mut coop = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
        let mut model = vk::PhysicalDeviceVulkanMemoryModelFeatures::default();
        let mut features = vk::PhysicalDeviceFeatures2::default();
        if has_coop {
            features = features.push_next(&mut coop);
        }
        if has_model {
            features = features.push_next(&mut model);
        }
        // SAFETY: the chain holds only structs whose extensions the device reports.
        unsafe {
            self.instance
                .get_physical_device_features2(pd, &mut features)
        };
        if !has_coop {
            return units;
        }
        let compute_basic = subgroup
            .supported_stages
            .contains(vk::ShaderStageFlags::COMPUTE)
            && subgroup
                .supported_operations
                .contains(vk::SubgroupFeatureFlags::BASIC);
        let why = if coop.cooperative_matrix != vk::TRUE {
            Some("it offers VK_KHR_cooperative_matrix without its cooperativeMatrix feature")
        } else if !has_model || model.vulkan_memory_model != vk::TRUE {
            Some(
                "it lacks the Vulkan memory model (VK_KHR_vulkan_memory_model) that cooperative-matrix shaders are written in",
            )
        } else if !compute_basic {
            Some("its compute shaders lack basic subgroup operations")
        } else {
            None
        };
        if let Some(why) = why {
            units.unusable = Some(why.into());
            return units;
        }
        let loader = ash::khr::cooperative_matrix::Instance::new(&self.entry, &self.instance);
        // SAFETY: pd belongs to this instance, which reports the extension for it.
        match unsafe { loader.get_physical_device_cooperative_matrix_properties(pd) } {
            Ok(list) => {
                units.shapes = list
                    .iter()
                    .filter(|p| p.scope == vk::ScopeKHR::SUBGROUP)
                    .map(|p| MatrixUnitShape {
                        m: p.m_size,
                        n: p.n_size,
                        k: p.k_size,
                        a: component_name(p.a_type),
                        b: component_name(p.b_type),
                        c: component_name(p.c_type),
                        result: component_name(p.result_type),
                        saturating: p.saturating_accumulation == vk::TRUE,
                    })
                    .collect();
                if units.shapes.is_empty() {
                    units.unusable = Some("it lists no subgroup-scope matrix shapes".into());
                }
            }
            Err(r) => {
                units.unusable = Some(format!(
                    "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR failed ({r})"
                ))
            }
        }
        units
    }
}

impl Drop for Vulkan {
    fn drop(&mut self) {
        // SAFETY: every device context holds an Arc to self, so none is alive now; the
        // messenger belongs to this instance and goes first.
        unsafe {
            if let Some((loader, messenger)) = self.messenger.take() {
                loader.destroy_debug_utils_messenger(messenger, None);
            }
            self.instance.destroy_instance(None)
        };
    }
}

/// Prefers a compute-only family (no graphics work competes there), else any with compute.
pub(crate) fn pick_compute_family(families: &[vk::QueueFamilyProperties]) -> Option<u32> {
    let has =
        |f: &vk::QueueFamilyProperties, flag| f.queue_flags.contains(flag) && f.queue_count > 0;
    families
        .iter()
        .position(|f| {
            has(f, vk::QueueFlags::COMPUTE) && !f.queue_flags.contains(vk::QueueFlags::GRAPHICS)
        })
        .or_else(|| {
            families
                .iter()
                .position(|f| has(f, vk::QueueFlags::COMPUTE))
        })
        .map(|i| i as u32)
}

fn memory_flag_names(flags: vk::MemoryPropertyFlags) -> Vec<String> {
    [
        (vk::MemoryPropertyFlags::DEVICE_LOCAL, "device_local"),
        (vk::MemoryPropertyFlags::HOST_VISIBLE, "host_visible"),
        (vk::MemoryPropertyFlags::HOST_COHERENT, "host_coherent"),
        (vk::MemoryPropertyFlags::HOST_CACHED, "host_cached"),
        (
            vk::MemoryPropertyFlags::LAZILY_ALLOCATED,
            "lazily_allocated",
        ),
        (vk::MemoryPropertyFlags::PROTECTED, "protected"),
    ]
    .iter()
    .filter(|(f, _)| flags.contains(*f))
    .map(|(_, n)| (*n).to_owned())
    .collect()
}

fn c_chars_to_string(chars: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
