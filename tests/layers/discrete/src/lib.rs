//! `VK_LAYER_KILN_emulated_discrete`: a test-only Vulkan layer that presents the CPU Vulkan
//! device (lavapipe) as a discrete GPU, so kiln's memory code meets heaps and types as on
//! real cards: device-local VRAM that cannot be mapped, a host heap, optionally a BAR
//! window, `VK_EXT_memory_budget`, and heap sizes that are enforced.
//!
//! Every fake memory type is backed by the driver's real type 0. The layer exports only
//! `vkNegotiateLoaderLayerInterfaceVersion`; the loader gets the rest through the
//! layer's own proc-address functions. It starts no threads (the loader unloads it at the
//! last `vkDestroyInstance`). Devices whose real type is not CPU pass straight through.
//!
//! Settings, read at `vkCreateInstance` (a value it does not know fails the instance):
//! - `KILN_EMULATE_VENDOR`: `nvidia` (default), `amd` or `intel`.
//! - `KILN_EMULATE_BAR`: `none` (default), `rebar` (all of VRAM host-visible) or `small`
//!   (a 256 MiB device-local heap 2 holds the host-visible VRAM type).
//! - `KILN_EMULATE_VRAM_BYTES`, `KILN_EMULATE_HOST_BYTES`: heap sizes (default 1 GiB each).
//! - `KILN_EMULATE_MAX_STORAGE_RANGE`: lowers `maxStorageBufferRange`.
//! - `KILN_EMULATE_MAX_ALLOCATIONS`: sets `maxMemoryAllocationCount` and refuses the
//!   allocation past it with `VK_ERROR_TOO_MANY_OBJECTS`.
//! - `KILN_EMULATE_LOSE_AFTER_SUBMITS`: the device is lost after this many submissions of
//!   the process: the next `vkQueueSubmit`, and every `vkWaitForFences` after it, return
//!   `VK_ERROR_DEVICE_LOST` (a driver's watchdog resetting the GPU). With
//!   `KILN_EMULATE_LOSS_WAIT_MS` the losing submission is accepted instead and the wait for
//!   it ends lost after that many milliseconds, as Windows' TDR ends a dispatch it judged
//!   hung.
//! - `KILN_EMULATE_LOSE_AT_S`: the device is lost this many seconds after
//!   `KILN_FAKE_NVML_EPOCH` (the run's clock, shared with the fake NVML), as above.
//! - `KILN_EMULATE_PCI_ADDRESS` (`0000:3b:00.0`): the card's place on the bus, given
//!   through `VK_EXT_pci_bus_info` (advertised); `KILN_EMULATE_UUID` (32 hex digits, dashes
//!   and `GPU-` allowed): its `deviceUUID`, so that Vulkan, NVML and sysfs meet on one card.
//! - `KILN_EMULATE_NAME`, `KILN_EMULATE_DRIVER_VERSION` (dotted, `550.90.07`): the card's
//!   name and its driver's version, packed as the vendor packs it (else the driver's own),
//!   so that the card agrees with what a fake vendor library says of it.
//! - `KILN_EMULATE_LOG`: a file that gets one line per event, appended and flushed:
//!   `alloc type=T heap=H bytes=N flags=device_local|...`, `free type=T heap=H bytes=N`,
//!   `map type=T`, `map-refused type=T`, `refused-heap-full type=T heap=H bytes=N`,
//!   `refused-too-many type=T heap=H bytes=N`, `refused-bad-type type=T bytes=N`.

mod config;

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_void};
use std::sync::{Arc, Mutex, MutexGuard};

use ash::vk;

use config::{Config, flag_names};

#[path = "../../../../layer/src/loader.rs"]
#[macro_use]
mod loader;

use loader::{
    INTERFACE_VERSION, LAYER_NEGOTIATE_INTERFACE_STRUCT, LayerDeviceLink, LayerInstanceLink,
    NegotiateLayerInterface, Void, key, link_info,
};

// ---------------------------------------------------------------------------------------
// Dispatch state.

struct InstanceData {
    instance: vk::Instance,
    next_gipa: vk::PFN_vkGetInstanceProcAddr,
    config: Arc<Config>,
    destroy_instance: Option<vk::PFN_vkDestroyInstance>,
    properties: Option<vk::PFN_vkGetPhysicalDeviceProperties>,
    properties2: Option<vk::PFN_vkGetPhysicalDeviceProperties2>,
    properties2_khr: Option<vk::PFN_vkGetPhysicalDeviceProperties2>,
    memory_properties: Option<vk::PFN_vkGetPhysicalDeviceMemoryProperties>,
    memory_properties2: Option<vk::PFN_vkGetPhysicalDeviceMemoryProperties2>,
    memory_properties2_khr: Option<vk::PFN_vkGetPhysicalDeviceMemoryProperties2>,
    enumerate_device_extensions: Option<vk::PFN_vkEnumerateDeviceExtensionProperties>,
}

struct DeviceData {
    emulated: bool,
    config: Arc<Config>,
    next_gdpa: vk::PFN_vkGetDeviceProcAddr,
    destroy_device: Option<vk::PFN_vkDestroyDevice>,
    allocate_memory: Option<vk::PFN_vkAllocateMemory>,
    free_memory: Option<vk::PFN_vkFreeMemory>,
    queue_submit: Option<vk::PFN_vkQueueSubmit>,
    wait_for_fences: Option<vk::PFN_vkWaitForFences>,
    map_memory: Option<vk::PFN_vkMapMemory>,
    map_memory2_khr: Option<vk::PFN_vkMapMemory2KHR>,
    buffer_requirements: Option<vk::PFN_vkGetBufferMemoryRequirements>,
    buffer_requirements2: Option<vk::PFN_vkGetBufferMemoryRequirements2>,
    buffer_requirements2_khr: Option<vk::PFN_vkGetBufferMemoryRequirements2>,
    device_buffer_requirements: Option<vk::PFN_vkGetDeviceBufferMemoryRequirements>,
    device_buffer_requirements_khr: Option<vk::PFN_vkGetDeviceBufferMemoryRequirements>,
    image_requirements: Option<vk::PFN_vkGetImageMemoryRequirements>,
    image_requirements2: Option<vk::PFN_vkGetImageMemoryRequirements2>,
    image_requirements2_khr: Option<vk::PFN_vkGetImageMemoryRequirements2>,
    device_image_requirements: Option<vk::PFN_vkGetDeviceImageMemoryRequirements>,
    device_image_requirements_khr: Option<vk::PFN_vkGetDeviceImageMemoryRequirements>,
}

/// One live allocation: its fake type and heap, and its size.
#[derive(Clone, Copy)]
struct Allocation {
    memory_type: u32,
    heap: u32,
    bytes: u64,
}

/// This process's live allocations, and their sum per fake heap.
struct Memory {
    allocations: BTreeMap<(usize, u64), Allocation>,
    usage: [u64; vk::MAX_MEMORY_HEAPS],
}

static INSTANCES: Mutex<BTreeMap<usize, Arc<InstanceData>>> = Mutex::new(BTreeMap::new());
static DEVICES: Mutex<BTreeMap<usize, Arc<DeviceData>>> = Mutex::new(BTreeMap::new());
static MEMORY: Mutex<Memory> = Mutex::new(Memory {
    allocations: BTreeMap::new(),
    usage: [0; vk::MAX_MEMORY_HEAPS],
});

/// Locks a map, even one a panicking thread left poisoned (its data stays consistent:
/// every update is a single insert or remove).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The instance of a physical device (they share the dispatch key); with one instance
/// alive, that one.
fn instance_of(pd: vk::PhysicalDevice) -> Option<Arc<InstanceData>> {
    if pd == vk::PhysicalDevice::null() {
        return None;
    }
    // SAFETY: pd is a dispatchable handle the loader gave us.
    let k = unsafe { key(pd) };
    let map = lock(&INSTANCES);
    map.get(&k).cloned().or_else(|| {
        (map.len() == 1)
            .then(|| map.values().next().cloned())
            .flatten()
    })
}

fn device_of(device: vk::Device) -> Option<Arc<DeviceData>> {
    if device == vk::Device::null() {
        return None;
    }
    // SAFETY: device is a dispatchable handle the loader gave us.
    let k = unsafe { key(device) };
    lock(&DEVICES).get(&k).cloned()
}

/// True when the real device is a CPU device, the only kind this layer disguises.
unsafe fn is_emulated(data: &InstanceData, pd: vk::PhysicalDevice) -> bool {
    let Some(f) = data.properties else {
        return false;
    };
    let mut props = vk::PhysicalDeviceProperties::default();
    // SAFETY: pd belongs to data's instance.
    unsafe { f(pd, &mut props) };
    props.device_type == vk::PhysicalDeviceType::CPU
}

// ---------------------------------------------------------------------------------------
// Entry points.

/// The layer's only exported symbol: hands the loader the layer's proc-address functions.
///
/// # Safety
/// Called by the Vulkan loader with a valid `VkNegotiateLayerInterface`.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn vkNegotiateLoaderLayerInterfaceVersion(
    p_version_struct: *mut NegotiateLayerInterface,
) -> vk::Result {
    // SAFETY: the loader passes a valid struct, or null.
    let Some(v) = (unsafe { p_version_struct.as_mut() }) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if v.s_type != LAYER_NEGOTIATE_INTERFACE_STRUCT {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    if v.loader_layer_interface_version < INTERFACE_VERSION {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    v.loader_layer_interface_version = INTERFACE_VERSION;
    v.pfn_get_instance_proc_addr = Some(kiln_layer_get_instance_proc_addr);
    v.pfn_get_device_proc_addr = Some(kiln_layer_get_device_proc_addr);
    v.pfn_get_physical_device_proc_addr = std::ptr::null();
    vk::Result::SUCCESS
}

/// Physical-device commands the layer changes.
fn physical_device_hook(name: &[u8]) -> Option<Void> {
    match name {
        b"vkGetPhysicalDeviceProperties" => hook!(
            get_physical_device_properties,
            vk::PFN_vkGetPhysicalDeviceProperties
        ),
        b"vkGetPhysicalDeviceProperties2" => hook!(
            get_physical_device_properties2,
            vk::PFN_vkGetPhysicalDeviceProperties2
        ),
        b"vkGetPhysicalDeviceProperties2KHR" => hook!(
            get_physical_device_properties2_khr,
            vk::PFN_vkGetPhysicalDeviceProperties2
        ),
        b"vkGetPhysicalDeviceMemoryProperties" => hook!(
            get_physical_device_memory_properties,
            vk::PFN_vkGetPhysicalDeviceMemoryProperties
        ),
        b"vkGetPhysicalDeviceMemoryProperties2" => hook!(
            get_physical_device_memory_properties2,
            vk::PFN_vkGetPhysicalDeviceMemoryProperties2
        ),
        b"vkGetPhysicalDeviceMemoryProperties2KHR" => hook!(
            get_physical_device_memory_properties2_khr,
            vk::PFN_vkGetPhysicalDeviceMemoryProperties2
        ),
        b"vkEnumerateDeviceExtensionProperties" => hook!(
            enumerate_device_extension_properties,
            vk::PFN_vkEnumerateDeviceExtensionProperties
        ),
        _ => None,
    }
}

/// Device commands the layer changes.
fn device_hook(name: &[u8]) -> Option<Void> {
    match name {
        b"vkDestroyDevice" => hook!(destroy_device, vk::PFN_vkDestroyDevice),
        b"vkAllocateMemory" => hook!(allocate_memory, vk::PFN_vkAllocateMemory),
        b"vkFreeMemory" => hook!(free_memory, vk::PFN_vkFreeMemory),
        b"vkQueueSubmit" => hook!(queue_submit, vk::PFN_vkQueueSubmit),
        b"vkWaitForFences" => hook!(wait_for_fences, vk::PFN_vkWaitForFences),
        b"vkMapMemory" => hook!(map_memory, vk::PFN_vkMapMemory),
        b"vkMapMemory2KHR" => hook!(map_memory2_khr, vk::PFN_vkMapMemory2KHR),
        b"vkGetBufferMemoryRequirements" => hook!(
            get_buffer_memory_requirements,
            vk::PFN_vkGetBufferMemoryRequirements
        ),
        b"vkGetBufferMemoryRequirements2" => hook!(
            get_buffer_memory_requirements2,
            vk::PFN_vkGetBufferMemoryRequirements2
        ),
        b"vkGetBufferMemoryRequirements2KHR" => hook!(
            get_buffer_memory_requirements2_khr,
            vk::PFN_vkGetBufferMemoryRequirements2
        ),
        b"vkGetDeviceBufferMemoryRequirements" => hook!(
            get_device_buffer_memory_requirements,
            vk::PFN_vkGetDeviceBufferMemoryRequirements
        ),
        b"vkGetDeviceBufferMemoryRequirementsKHR" => hook!(
            get_device_buffer_memory_requirements_khr,
            vk::PFN_vkGetDeviceBufferMemoryRequirements
        ),
        b"vkGetImageMemoryRequirements" => hook!(
            get_image_memory_requirements,
            vk::PFN_vkGetImageMemoryRequirements
        ),
        b"vkGetImageMemoryRequirements2" => hook!(
            get_image_memory_requirements2,
            vk::PFN_vkGetImageMemoryRequirements2
        ),
        b"vkGetImageMemoryRequirements2KHR" => hook!(
            get_image_memory_requirements2_khr,
            vk::PFN_vkGetImageMemoryRequirements2
        ),
        b"vkGetDeviceImageMemoryRequirements" => hook!(
            get_device_image_memory_requirements,
            vk::PFN_vkGetDeviceImageMemoryRequirements
        ),
        b"vkGetDeviceImageMemoryRequirementsKHR" => hook!(
            get_device_image_memory_requirements_khr,
            vk::PFN_vkGetDeviceImageMemoryRequirements
        ),
        _ => None,
    }
}

unsafe extern "system" fn kiln_layer_get_instance_proc_addr(
    instance: vk::Instance,
    p_name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    if p_name.is_null() {
        return None;
    }
    // SAFETY: the caller passes a NUL-terminated name.
    let name = unsafe { CStr::from_ptr(p_name) }.to_bytes();
    match name {
        b"vkGetInstanceProcAddr" => {
            return hook!(
                kiln_layer_get_instance_proc_addr,
                vk::PFN_vkGetInstanceProcAddr
            );
        }
        b"vkGetDeviceProcAddr" => {
            return hook!(kiln_layer_get_device_proc_addr, vk::PFN_vkGetDeviceProcAddr);
        }
        b"vkCreateInstance" => return hook!(create_instance, vk::PFN_vkCreateInstance),
        b"vkDestroyInstance" => return hook!(destroy_instance, vk::PFN_vkDestroyInstance),
        b"vkCreateDevice" => return hook!(create_device, vk::PFN_vkCreateDevice),
        _ => {}
    }
    if instance == vk::Instance::null() {
        return None;
    }
    // SAFETY: instance is a dispatchable handle.
    let data = lock(&INSTANCES).get(&unsafe { key(instance) }).cloned()?;
    // SAFETY: the next layer's gipa, with an instance it created.
    let next = unsafe { (data.next_gipa)(instance, p_name) };
    next?;
    physical_device_hook(name)
        .or_else(|| device_hook(name))
        .or(next)
}

unsafe extern "system" fn kiln_layer_get_device_proc_addr(
    device: vk::Device,
    p_name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    if p_name.is_null() {
        return None;
    }
    // SAFETY: the caller passes a NUL-terminated name.
    let name = unsafe { CStr::from_ptr(p_name) }.to_bytes();
    if name == b"vkGetDeviceProcAddr" {
        return hook!(kiln_layer_get_device_proc_addr, vk::PFN_vkGetDeviceProcAddr);
    }
    let data = device_of(device)?;
    // SAFETY: the next layer's gdpa, with a device it created.
    let next = unsafe { (data.next_gdpa)(device, p_name) };
    next?;
    device_hook(name).or(next)
}

// ---------------------------------------------------------------------------------------
// Instance.

unsafe extern "system" fn create_instance(
    p_create_info: *const vk::InstanceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_instance: *mut vk::Instance,
) -> vk::Result {
    // SAFETY: the loader's chain holds its link info for this layer.
    let info = unsafe {
        link_info::<LayerInstanceLink>(
            (*p_create_info).p_next,
            vk::StructureType::LOADER_INSTANCE_CREATE_INFO,
        )
    };
    // SAFETY: info, when not null, points into the loader's chain.
    if info.is_null() || unsafe { (*info).link.is_null() } {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    // SAFETY: checked non-null above; advancing the link hands the next layer its own.
    let next_gipa = unsafe {
        let link = (*info).link;
        (*info).link = (*link).p_next;
        (*link).pfn_next_get_instance_proc_addr
    };
    let config = match Config::from_env() {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("VK_LAYER_KILN_emulated_discrete: {e}");
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        }
    };
    let Some(create) = load!(
        next_gipa,
        vk::Instance::null(),
        c"vkCreateInstance",
        vk::PFN_vkCreateInstance
    ) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the application's arguments, passed down.
    let result = unsafe { create(p_create_info, p_allocator, p_instance) };
    if result != vk::Result::SUCCESS {
        return result;
    }
    // SAFETY: the call succeeded, so *p_instance is the new instance.
    let instance = unsafe { *p_instance };
    let data = InstanceData {
        instance,
        next_gipa,
        config,
        destroy_instance: load!(
            next_gipa,
            instance,
            c"vkDestroyInstance",
            vk::PFN_vkDestroyInstance
        ),
        properties: load!(
            next_gipa,
            instance,
            c"vkGetPhysicalDeviceProperties",
            vk::PFN_vkGetPhysicalDeviceProperties
        ),
        properties2: load!(
            next_gipa,
            instance,
            c"vkGetPhysicalDeviceProperties2",
            vk::PFN_vkGetPhysicalDeviceProperties2
        ),
        properties2_khr: load!(
            next_gipa,
            instance,
            c"vkGetPhysicalDeviceProperties2KHR",
            vk::PFN_vkGetPhysicalDeviceProperties2
        ),
        memory_properties: load!(
            next_gipa,
            instance,
            c"vkGetPhysicalDeviceMemoryProperties",
            vk::PFN_vkGetPhysicalDeviceMemoryProperties
        ),
        memory_properties2: load!(
            next_gipa,
            instance,
            c"vkGetPhysicalDeviceMemoryProperties2",
            vk::PFN_vkGetPhysicalDeviceMemoryProperties2
        ),
        memory_properties2_khr: load!(
            next_gipa,
            instance,
            c"vkGetPhysicalDeviceMemoryProperties2KHR",
            vk::PFN_vkGetPhysicalDeviceMemoryProperties2
        ),
        enumerate_device_extensions: load!(
            next_gipa,
            instance,
            c"vkEnumerateDeviceExtensionProperties",
            vk::PFN_vkEnumerateDeviceExtensionProperties
        ),
    };
    // SAFETY: instance is the dispatchable handle just created.
    lock(&INSTANCES).insert(unsafe { key(instance) }, Arc::new(data));
    vk::Result::SUCCESS
}

unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    if instance == vk::Instance::null() {
        return;
    }
    // SAFETY: instance is a dispatchable handle.
    let data = lock(&INSTANCES).remove(&unsafe { key(instance) });
    if let Some(f) = data.and_then(|d| d.destroy_instance) {
        // SAFETY: the application's arguments, passed down.
        unsafe { f(instance, p_allocator) };
    }
}

// ---------------------------------------------------------------------------------------
// Physical device: identity, memory model, extensions.

fn disguise(config: &Config, props: &mut vk::PhysicalDeviceProperties) {
    props.device_type = vk::PhysicalDeviceType::DISCRETE_GPU;
    props.vendor_id = config.vendor_id;
    props.device_id = config.device_id;
    if let Some(v) = config.driver_version {
        props.driver_version = v;
    }
    props.device_name = [0; vk::MAX_PHYSICAL_DEVICE_NAME_SIZE];
    for (dst, src) in props.device_name.iter_mut().zip(
        config
            .device_name
            .bytes()
            .take(vk::MAX_PHYSICAL_DEVICE_NAME_SIZE - 1),
    ) {
        *dst = src as c_char;
    }
    if let Some(range) = config.max_storage_range {
        props.limits.max_storage_buffer_range = props.limits.max_storage_buffer_range.min(range);
    }
    if let Some(count) = config.max_allocations {
        props.limits.max_memory_allocation_count = count;
    }
}

unsafe extern "system" fn get_physical_device_properties(
    pd: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceProperties,
) {
    let Some(data) = instance_of(pd) else { return };
    let Some(f) = data.properties else { return };
    // SAFETY: the application's arguments, passed down.
    unsafe { f(pd, p_properties) };
    // SAFETY: the driver filled the struct the application gave.
    if let Some(props) = unsafe { p_properties.as_mut() }
        && props.device_type == vk::PhysicalDeviceType::CPU
    {
        disguise(&data.config, props);
    }
}

/// Calls `down` with every struct of `s_type` taken out of the output chain at `head`
/// (the driver underneath may not know it), puts them back, and returns them for the layer
/// to fill.
///
/// # Safety
/// `head` is a valid output chain: every struct starts with sType and pNext.
unsafe fn without_in_chain(
    head: *mut vk::BaseOutStructure<'_>,
    s_type: vk::StructureType,
    down: impl FnOnce(),
) -> Vec<*mut vk::BaseOutStructure<'static>> {
    let mut removed: Vec<(*mut vk::BaseOutStructure<'_>, *mut vk::BaseOutStructure<'_>)> =
        Vec::new();
    // SAFETY: walking the chain the caller vouches for.
    unsafe {
        let mut prev = head;
        while !(*prev).p_next.is_null() {
            let cur = (*prev).p_next;
            if (*cur).s_type == s_type {
                removed.push((prev, cur));
                (*prev).p_next = (*cur).p_next;
            } else {
                prev = cur;
            }
        }
        down();
        for &(prev, cur) in removed.iter().rev() {
            (*prev).p_next = cur;
        }
    }
    removed.into_iter().map(|(_, cur)| cur.cast()).collect()
}

unsafe fn properties2(
    pd: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceProperties2<'_>,
    khr: bool,
) {
    let Some(data) = instance_of(pd) else { return };
    let f = if khr {
        data.properties2_khr.or(data.properties2)
    } else {
        data.properties2.or(data.properties2_khr)
    };
    let Some(f) = f else { return };
    // SAFETY: pd belongs to data's instance.
    let emulated = unsafe { is_emulated(&data, pd) };
    if !emulated || p_properties.is_null() {
        // SAFETY: the application's arguments, passed down.
        unsafe { f(pd, p_properties) };
        return;
    }
    // The PCI struct is the layer's to fill (the driver may not know the extension): out
    // of the chain for the call down, back after, then filled, with the card's UUID.
    let pci_type = vk::StructureType::PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT;
    // SAFETY: the application's output chain; every struct starts with sType and pNext,
    // and each is of the type its sType says.
    unsafe {
        if data.config.pci.is_some() {
            without_in_chain(p_properties.cast(), pci_type, || f(pd, p_properties));
        } else {
            f(pd, p_properties);
        }
        disguise(&data.config, &mut (*p_properties).properties);
        let mut cur = (*p_properties).p_next as *mut vk::BaseOutStructure<'_>;
        while !cur.is_null() {
            match (*cur).s_type {
                vk::StructureType::PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT => {
                    if let Some([domain, bus, device, function]) = data.config.pci {
                        let p = &mut *(cur as *mut vk::PhysicalDevicePCIBusInfoPropertiesEXT<'_>);
                        (p.pci_domain, p.pci_bus, p.pci_device, p.pci_function) =
                            (domain, bus, device, function);
                    }
                }
                vk::StructureType::PHYSICAL_DEVICE_ID_PROPERTIES => {
                    if let Some(uuid) = data.config.uuid {
                        (*(cur as *mut vk::PhysicalDeviceIDProperties<'_>)).device_uuid = uuid;
                    }
                }
                vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES => {
                    if let Some(uuid) = data.config.uuid {
                        (*(cur as *mut vk::PhysicalDeviceVulkan11Properties<'_>)).device_uuid =
                            uuid;
                    }
                }
                _ => {}
            }
            cur = (*cur).p_next;
        }
    }
}

unsafe extern "system" fn get_physical_device_properties2(
    pd: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    // SAFETY: forwarded as given.
    unsafe { properties2(pd, p_properties, false) }
}

unsafe extern "system" fn get_physical_device_properties2_khr(
    pd: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceProperties2<'_>,
) {
    // SAFETY: forwarded as given.
    unsafe { properties2(pd, p_properties, true) }
}

/// Overwrites the driver's heaps and types with the fake ones.
fn fake_memory(config: &Config, mem: &mut vk::PhysicalDeviceMemoryProperties) {
    mem.memory_heaps = [vk::MemoryHeap::default(); vk::MAX_MEMORY_HEAPS];
    mem.memory_types = [vk::MemoryType::default(); vk::MAX_MEMORY_TYPES];
    for (dst, heap) in mem.memory_heaps.iter_mut().zip(&config.heaps) {
        *dst = vk::MemoryHeap {
            size: heap.size,
            flags: heap.flags,
        };
    }
    for (dst, t) in mem.memory_types.iter_mut().zip(&config.types) {
        *dst = vk::MemoryType {
            property_flags: t.flags,
            heap_index: t.heap,
        };
    }
    mem.memory_heap_count = config.heaps.len() as u32;
    mem.memory_type_count = config.types.len() as u32;
}

unsafe extern "system" fn get_physical_device_memory_properties(
    pd: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceMemoryProperties,
) {
    let Some(data) = instance_of(pd) else { return };
    let Some(f) = data.memory_properties else {
        return;
    };
    // SAFETY: the application's arguments, passed down.
    unsafe { f(pd, p_properties) };
    // SAFETY: pd belongs to data's instance.
    let emulated = unsafe { is_emulated(&data, pd) };
    // SAFETY: the application's struct, filled by the driver.
    if emulated && let Some(mem) = unsafe { p_properties.as_mut() } {
        fake_memory(&data.config, mem);
    }
}

unsafe fn memory_properties2(
    pd: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceMemoryProperties2<'_>,
    khr: bool,
) {
    let Some(data) = instance_of(pd) else { return };
    let f = if khr {
        data.memory_properties2_khr.or(data.memory_properties2)
    } else {
        data.memory_properties2.or(data.memory_properties2_khr)
    };
    let Some(f) = f else { return };
    // SAFETY: pd belongs to data's instance.
    let emulated = unsafe { is_emulated(&data, pd) };
    if !emulated || p_properties.is_null() {
        // SAFETY: the application's arguments, passed down.
        unsafe { f(pd, p_properties) };
        return;
    }
    // Take the budget struct out of the chain (the driver may not know it), call down,
    // put it back and fill it.
    let budget_type = vk::StructureType::PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT;
    // SAFETY: the application's output chain; every struct starts with sType and pNext.
    let budgets: Vec<*mut vk::PhysicalDeviceMemoryBudgetPropertiesEXT<'_>> =
        unsafe { without_in_chain(p_properties.cast(), budget_type, || f(pd, p_properties)) }
            .into_iter()
            .map(|b| b.cast())
            .collect();
    // SAFETY: the driver filled the struct the application gave.
    unsafe {
        fake_memory(&data.config, &mut (*p_properties).memory_properties);
    }
    let usage = lock(&MEMORY).usage;
    for b in budgets {
        // SAFETY: b is a budget struct of the application's chain.
        let b = unsafe { &mut *b };
        b.heap_budget = [0; vk::MAX_MEMORY_HEAPS];
        b.heap_usage = [0; vk::MAX_MEMORY_HEAPS];
        for (i, heap) in data.config.heaps.iter().enumerate() {
            b.heap_budget[i] = heap.size;
            b.heap_usage[i] = usage[i];
        }
    }
}

unsafe extern "system" fn get_physical_device_memory_properties2(
    pd: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceMemoryProperties2<'_>,
) {
    // SAFETY: forwarded as given.
    unsafe { memory_properties2(pd, p_properties, false) }
}

unsafe extern "system" fn get_physical_device_memory_properties2_khr(
    pd: vk::PhysicalDevice,
    p_properties: *mut vk::PhysicalDeviceMemoryProperties2<'_>,
) {
    // SAFETY: forwarded as given.
    unsafe { memory_properties2(pd, p_properties, true) }
}

/// The driver's own device extensions.
unsafe fn real_extensions(
    data: &InstanceData,
    pd: vk::PhysicalDevice,
) -> Option<Vec<vk::ExtensionProperties>> {
    let f = data.enumerate_device_extensions?;
    let mut count = 0u32;
    // SAFETY: the two-call idiom on a physical device of this instance.
    unsafe {
        if f(pd, std::ptr::null(), &mut count, std::ptr::null_mut()) != vk::Result::SUCCESS {
            return None;
        }
        let mut v = vec![vk::ExtensionProperties::default(); count as usize];
        let r = f(pd, std::ptr::null(), &mut count, v.as_mut_ptr());
        if r != vk::Result::SUCCESS && r != vk::Result::INCOMPLETE {
            return None;
        }
        v.truncate(count as usize);
        Some(v)
    }
}

fn has_extension(extensions: &[vk::ExtensionProperties], name: &std::ffi::CStr) -> bool {
    extensions
        .iter()
        .any(|e| e.extension_name_as_c_str().ok() == Some(name))
}

/// An extension's properties, as a driver lists it.
fn extension(name: &std::ffi::CStr, spec_version: u32) -> vk::ExtensionProperties {
    let mut e = vk::ExtensionProperties {
        spec_version,
        ..Default::default()
    };
    for (dst, src) in e.extension_name.iter_mut().zip(name.to_bytes()) {
        *dst = *src as c_char;
    }
    e
}

unsafe extern "system" fn enumerate_device_extension_properties(
    pd: vk::PhysicalDevice,
    p_layer_name: *const c_char,
    p_count: *mut u32,
    p_properties: *mut vk::ExtensionProperties,
) -> vk::Result {
    let Some(data) = instance_of(pd) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(f) = data.enumerate_device_extensions else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: pd belongs to data's instance.
    let emulated = !p_layer_name.is_null() || unsafe { is_emulated(&data, pd) };
    let real = if p_layer_name.is_null() && emulated {
        // SAFETY: as above.
        unsafe { real_extensions(&data, pd) }
    } else {
        None
    };
    // What a discrete card has that the driver underneath may not: the memory budget, and
    // the PCI address where the card has one.
    let mut wanted = vec![extension(
        ash::ext::memory_budget::NAME,
        ash::ext::memory_budget::SPEC_VERSION,
    )];
    if data.config.pci.is_some() {
        wanted.push(extension(
            ash::ext::pci_bus_info::NAME,
            ash::ext::pci_bus_info::SPEC_VERSION,
        ));
    }
    let Some(mut list) = real else {
        // SAFETY: the application's arguments, passed down.
        return unsafe { f(pd, p_layer_name, p_count, p_properties) };
    };
    let missing: Vec<vk::ExtensionProperties> = wanted
        .into_iter()
        .filter(|w| {
            w.extension_name_as_c_str()
                .is_ok_and(|name| !has_extension(&list, name))
        })
        .collect();
    if missing.is_empty() {
        // SAFETY: the application's arguments, passed down.
        return unsafe { f(pd, p_layer_name, p_count, p_properties) };
    }
    list.extend(missing);
    // SAFETY: p_count is the application's counter, p_properties its array of *p_count.
    unsafe {
        if p_properties.is_null() {
            *p_count = list.len() as u32;
            return vk::Result::SUCCESS;
        }
        let n = (*p_count as usize).min(list.len());
        std::ptr::copy_nonoverlapping(list.as_ptr(), p_properties, n);
        *p_count = n as u32;
        if n < list.len() {
            vk::Result::INCOMPLETE
        } else {
            vk::Result::SUCCESS
        }
    }
}

// ---------------------------------------------------------------------------------------
// Device.

unsafe extern "system" fn create_device(
    pd: vk::PhysicalDevice,
    p_create_info: *const vk::DeviceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_device: *mut vk::Device,
) -> vk::Result {
    let Some(instance) = instance_of(pd) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: the loader's chain holds its link info for this layer.
    let info = unsafe {
        link_info::<LayerDeviceLink>(
            (*p_create_info).p_next,
            vk::StructureType::LOADER_DEVICE_CREATE_INFO,
        )
    };
    // SAFETY: info, when not null, points into the loader's chain.
    if info.is_null() || unsafe { (*info).link.is_null() } {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    // SAFETY: checked non-null above; advancing the link hands the next layer its own.
    let (next_gipa, next_gdpa) = unsafe {
        let link = (*info).link;
        (*info).link = (*link).p_next;
        (
            (*link).pfn_next_get_instance_proc_addr,
            (*link).pfn_next_get_device_proc_addr,
        )
    };
    let Some(create) = load!(
        next_gipa,
        instance.instance,
        c"vkCreateDevice",
        vk::PFN_vkCreateDevice
    ) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    // SAFETY: pd belongs to the instance.
    let emulated = unsafe { is_emulated(&instance, pd) };
    // Strip the extensions only this layer provides (the memory budget, the PCI address):
    // the driver underneath would refuse them.
    let real = if emulated {
        // SAFETY: pd belongs to the instance.
        unsafe { real_extensions(&instance, pd) }
    } else {
        None
    };
    let ours = |name: &CStr| {
        real.as_ref().is_some_and(|r| {
            (name == ash::ext::memory_budget::NAME
                || (name == ash::ext::pci_bus_info::NAME && instance.config.pci.is_some()))
                && !has_extension(r, name)
        })
    };
    let strip = real.is_some();
    // SAFETY: the application's create info and its extension names.
    let mut local = unsafe { *p_create_info };
    let kept: Vec<*const c_char> = if local.enabled_extension_count == 0 {
        Vec::new()
    } else {
        // SAFETY: as above.
        unsafe {
            std::slice::from_raw_parts(
                local.pp_enabled_extension_names,
                local.enabled_extension_count as usize,
            )
        }
        .iter()
        .copied()
        // SAFETY: each name is NUL-terminated.
        .filter(|&n| !(strip && ours(unsafe { CStr::from_ptr(n) })))
        .collect()
    };
    if strip {
        local.enabled_extension_count = kept.len() as u32;
        local.pp_enabled_extension_names = kept.as_ptr();
    }
    // SAFETY: the application's arguments, with the extension list as above.
    let result = unsafe { create(pd, &local, p_allocator, p_device) };
    if result != vk::Result::SUCCESS {
        return result;
    }
    // SAFETY: the call succeeded, so *p_device is the new device.
    let device = unsafe { *p_device };
    let data = DeviceData {
        emulated,
        config: instance.config.clone(),
        next_gdpa,
        destroy_device: load!(
            next_gdpa,
            device,
            c"vkDestroyDevice",
            vk::PFN_vkDestroyDevice
        ),
        allocate_memory: load!(
            next_gdpa,
            device,
            c"vkAllocateMemory",
            vk::PFN_vkAllocateMemory
        ),
        free_memory: load!(next_gdpa, device, c"vkFreeMemory", vk::PFN_vkFreeMemory),
        queue_submit: load!(next_gdpa, device, c"vkQueueSubmit", vk::PFN_vkQueueSubmit),
        wait_for_fences: load!(
            next_gdpa,
            device,
            c"vkWaitForFences",
            vk::PFN_vkWaitForFences
        ),
        map_memory: load!(next_gdpa, device, c"vkMapMemory", vk::PFN_vkMapMemory),
        map_memory2_khr: load!(
            next_gdpa,
            device,
            c"vkMapMemory2KHR",
            vk::PFN_vkMapMemory2KHR
        ),
        buffer_requirements: load!(
            next_gdpa,
            device,
            c"vkGetBufferMemoryRequirements",
            vk::PFN_vkGetBufferMemoryRequirements
        ),
        buffer_requirements2: load!(
            next_gdpa,
            device,
            c"vkGetBufferMemoryRequirements2",
            vk::PFN_vkGetBufferMemoryRequirements2
        ),
        buffer_requirements2_khr: load!(
            next_gdpa,
            device,
            c"vkGetBufferMemoryRequirements2KHR",
            vk::PFN_vkGetBufferMemoryRequirements2
        ),
        device_buffer_requirements: load!(
            next_gdpa,
            device,
            c"vkGetDeviceBufferMemoryRequirements",
            vk::PFN_vkGetDeviceBufferMemoryRequirements
        ),
        device_buffer_requirements_khr: load!(
            next_gdpa,
            device,
            c"vkGetDeviceBufferMemoryRequirementsKHR",
            vk::PFN_vkGetDeviceBufferMemoryRequirements
        ),
        image_requirements: load!(
            next_gdpa,
            device,
            c"vkGetImageMemoryRequirements",
            vk::PFN_vkGetImageMemoryRequirements
        ),
        image_requirements2: load!(
            next_gdpa,
            device,
            c"vkGetImageMemoryRequirements2",
            vk::PFN_vkGetImageMemoryRequirements2
        ),
        image_requirements2_khr: load!(
            next_gdpa,
            device,
            c"vkGetImageMemoryRequirements2KHR",
            vk::PFN_vkGetImageMemoryRequirements2
        ),
        device_image_requirements: load!(
            next_gdpa,
            device,
            c"vkGetDeviceImageMemoryRequirements",
            vk::PFN_vkGetDeviceImageMemoryRequirements
        ),
        device_image_requirements_khr: load!(
            next_gdpa,
            device,
            c"vkGetDeviceImageMemoryRequirementsKHR",
            vk::PFN_vkGetDeviceImageMemoryRequirements
        ),
    };
    // SAFETY: device is the dispatchable handle just created.
    lock(&DEVICES).insert(unsafe { key(device) }, Arc::new(data));
    vk::Result::SUCCESS
}

unsafe extern "system" fn destroy_device(
    device: vk::Device,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    if device == vk::Device::null() {
        return;
    }
    // SAFETY: device is a dispatchable handle.
    let k = unsafe { key(device) };
    let data = lock(&DEVICES).remove(&k);
    {
        // Memory the application did not free goes with its device.
        let mut memory = lock(&MEMORY);
        let gone: Vec<(usize, u64)> = memory
            .allocations
            .range((k, 0)..=(k, u64::MAX))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            if let Some(a) = memory.allocations.remove(&id) {
                memory.usage[a.heap as usize] -= a.bytes;
            }
        }
    }
    if let Some(f) = data.and_then(|d| d.destroy_device) {
        // SAFETY: the application's arguments, passed down.
        unsafe { f(device, p_allocator) };
    }
}

/// Real memory-type bits to fake ones: every fake type lives in real type 0.
fn fake_bits(config: &Config, real: u32) -> u32 {
    if real & 1 != 0 {
        (1u32 << config.types.len()) - 1
    } else {
        0
    }
}

fn fix_requirements(data: &DeviceData, req: *mut vk::MemoryRequirements) {
    if !data.emulated {
        return;
    }
    // SAFETY: the driver filled the application's struct.
    if let Some(r) = unsafe { req.as_mut() } {
        r.memory_type_bits = fake_bits(&data.config, r.memory_type_bits);
    }
}

fn fix_requirements2(data: &DeviceData, req: *mut vk::MemoryRequirements2<'_>) {
    if !req.is_null() {
        // SAFETY: the application's struct, filled by the driver.
        fix_requirements(data, unsafe { &raw mut (*req).memory_requirements });
    }
}

unsafe extern "system" fn get_buffer_memory_requirements(
    device: vk::Device,
    buffer: vk::Buffer,
    p_requirements: *mut vk::MemoryRequirements,
) {
    let Some(data) = device_of(device) else {
        return;
    };
    if let Some(f) = data.buffer_requirements {
        // SAFETY: the application's arguments, passed down.
        unsafe { f(device, buffer, p_requirements) };
        fix_requirements(&data, p_requirements);
    }
}

unsafe fn buffer_requirements2(
    device: vk::Device,
    p_info: *const vk::BufferMemoryRequirementsInfo2<'_>,
    p_requirements: *mut vk::MemoryRequirements2<'_>,
    khr: bool,
) {
    let Some(data) = device_of(device) else {
        return;
    };
    let f = if khr {
        data.buffer_requirements2_khr.or(data.buffer_requirements2)
    } else {
        data.buffer_requirements2.or(data.buffer_requirements2_khr)
    };
    if let Some(f) = f {
        // SAFETY: the application's arguments, passed down.
        unsafe { f(device, p_info, p_requirements) };
        fix_requirements2(&data, p_requirements);
    }
}

unsafe extern "system" fn get_buffer_memory_requirements2(
    device: vk::Device,
    p_info: *const vk::BufferMemoryRequirementsInfo2<'_>,
    p_requirements: *mut vk::MemoryRequirements2<'_>,
) {
    // SAFETY: forwarded as given.
    unsafe { buffer_requirements2(device, p_info, p_requirements, false) }
}

unsafe extern "system" fn get_buffer_memory_requirements2_khr(
    device: vk::Device,
    p_info: *const vk::BufferMemoryRequirementsInfo2<'_>,
    p_requirements: *mut vk::MemoryRequirements2<'_>,
) {
    // SAFETY: forwarded as given.
    unsafe { buffer_requirements2(device, p_info, p_requirements, true) }
}

unsafe fn device_buffer_requirements(
    device: vk::Device,
    p_info: *const vk::DeviceBufferMemoryRequirements<'_>,
    p_requirements: *mut vk::MemoryRequirements2<'_>,
    khr: bool,
) {
    let Some(data) = device_of(device) else {
        return;
    };
    let f = if khr {
        data.device_buffer_requirements_khr
            .or(data.device_buffer_requirements)
    } else {
        data.device_buffer_requirements
            .or(data.device_buffer_requirements_khr)
    };
    if let Some(f) = f {
        // SAFETY: the application's arguments, passed down.
        unsafe { f(device, p_info, p_requirements) };
        fix_requirements2(&data, p_requirements);
    }
}

unsafe extern "system" fn get_device_buffer_memory_requirements(
    device: vk::Device,
    p_info: *const vk::DeviceBufferMemoryRequirements<'_>,
    p_requirements: *mut vk::MemoryRequirements2<'_>,
) {
    // SAFETY: forwarded as given.
    unsafe { device_buffer_requirements(device, p_info, p_requirements, false) }
}

unsafe extern "system" fn get_device_buffer_memory_requirements_khr(
    device: vk::Device,
    p_info: *const vk::DeviceBufferMemoryRequirements<'_>,
    p_requirements: *mut vk::MemoryRequirements2<'_>,
) {
    // SAFETY: forwarded as given.
    unsafe { device_buffer_requirements(device, p_info, p_requirements, true) }
}

unsafe extern "system" fn get_image_memory_requirements(
    device: vk::Device,
    image: vk::Image,
    p_requirements: *mut vk::MemoryRequirements,
) {
    let Some(data) = device_of(device) else {
        return;
    };
    if let Some(f) = data.image_requirements {
        // SAFETY: the application's arguments, passed down.
        unsafe { f(device, image, p_requirements) };
        fix_requirements(&data, p_requirements);
    }
}

unsafe fn image_requirements2(
    device: vk::Device,
    p_info: *const vk::ImageMemoryRequirementsInfo2<'_>,
    p_requirements: *mut vk::MemoryRequirements2<'_>,
    khr: bool,
) {
    let Some(data) = device_of(device) else {
        return;
    };
    let f = if khr {
        data.image_requirements2_khr.or(data.image_requirements2)
    } else {
        data.image_requirements2.or(data.image_requirements2_khr)
    };
    if let Some(f) = f {
        // SAFETY: the application's arguments, passed down.
        unsafe { f(device, p_info, p_requirements) };
        fix_requirements2(&data, p_requirements);
    }
}

unsafe extern "system" fn get_image_memory_requirements2(
    device: vk::Device,
    p_info: *const vk::ImageMemoryRequirementsInfo2<'_>,
    p_requirements: *mut vk::MemoryRequirements2<'_>,
) {
    // SAFETY: forwarded as given.
    unsafe { image_requirements2(device, p_info, p_requirements, false) }
}

unsafe extern "system" fn get_image_memory_requirements2_khr(
    device: vk::Device,
    p_info: *const vk::ImageMemoryRequirementsInfo2<'_>,
    p_requirements: *mut vk::MemoryRequirements2<'_>,
) {
    // SAFETY: forwarded as given.
    unsafe { image_requirements2(device, p_info, p_requirements, true) }
}

unsafe fn device_image_requirements(
    device: vk::Device,
    p_info: *const vk::DeviceImageMemoryRequirements<'_>,
    p_requirements: *mut vk::MemoryRequirements2<'_>,
    khr: bool,
) {
    let Some(data) = device_of(device) else {
        return;
    };
    let f = if khr {
        data.device_image_requirements_khr
            .or(data.device_image_requirements)
    } else {
        data.device_image_requirements
            .or(data.device_image_requirements_khr)
    };
    if let Some(f) = f {
        // SAFETY: the application's arguments, passed down.
        unsafe { f(device, p_info, p_requirements) };
        fix_requirements2(&data, p_requirements);
    }
}

unsafe extern "system" fn get_device_image_memory_requirements(
    device: vk::Device,
    p_info: *const vk::DeviceImageMemoryRequirements<'_>,
    p_requirements: *mut vk::MemoryRequirements2<'_>,
) {
    // SAFETY: forwarded as given.
    unsafe { device_image_requirements(device, p_info, p_requirements, false) }
}

unsafe extern "system" fn get_device_image_memory_requirements_khr(
    device: vk::Device,
    p_info: *const vk::DeviceImageMemoryRequirements<'_>,
    p_requirements: *mut vk::MemoryRequirements2<'_>,
) {
    // SAFETY: forwarded as given.
    unsafe { device_image_requirements(device, p_info, p_requirements, true) }
}

// ---------------------------------------------------------------------------------------
// Memory: allocation in fake types and heaps, maps only of host-visible types.

unsafe extern "system" fn allocate_memory(
    device: vk::Device,
    p_allocate_info: *const vk::MemoryAllocateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_memory: *mut vk::DeviceMemory,
) -> vk::Result {
    let Some(data) = device_of(device) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(f) = data.allocate_memory else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if !data.emulated || p_allocate_info.is_null() {
        // SAFETY: the application's arguments, passed down.
        return unsafe { f(device, p_allocate_info, p_allocator, p_memory) };
    }
    let config = &data.config;
    // SAFETY: checked non-null.
    let mut info = unsafe { *p_allocate_info };
    let type_index = info.memory_type_index;
    let bytes = info.allocation_size;
    let Some(fake) = config.types.get(type_index as usize).copied() else {
        config.log(format_args!(
            "refused-bad-type type={type_index} bytes={bytes}"
        ));
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let heap = fake.heap;
    let heap_size = config.heaps[heap as usize].size;
    {
        // Reserve the bytes first, so that racing allocations cannot both fit.
        let mut memory = lock(&MEMORY);
        if config
            .max_allocations
            .is_some_and(|max| memory.allocations.len() >= max as usize)
        {
            drop(memory);
            config.log(format_args!(
                "refused-too-many type={type_index} heap={heap} bytes={bytes}"
            ));
            return vk::Result::ERROR_TOO_MANY_OBJECTS;
        }
        let used = memory.usage[heap as usize];
        if used.saturating_add(bytes) > heap_size {
            drop(memory);
            config.log(format_args!(
                "refused-heap-full type={type_index} heap={heap} bytes={bytes}"
            ));
            return if config.heaps[heap as usize]
                .flags
                .contains(vk::MemoryHeapFlags::DEVICE_LOCAL)
            {
                vk::Result::ERROR_OUT_OF_DEVICE_MEMORY
            } else {
                vk::Result::ERROR_OUT_OF_HOST_MEMORY
            };
        }
        memory.usage[heap as usize] = used + bytes;
    }
    info.memory_type_index = 0;
    // SAFETY: the application's arguments, with the real type index.
    let result = unsafe { f(device, &info, p_allocator, p_memory) };
    let mut memory = lock(&MEMORY);
    if result != vk::Result::SUCCESS {
        memory.usage[heap as usize] -= bytes;
        return result;
    }
    // SAFETY: the call succeeded, so *p_memory is the new memory.
    let handle = vk::Handle::as_raw(unsafe { *p_memory });
    // SAFETY: device is a dispatchable handle.
    memory.allocations.insert(
        (unsafe { key(device) }, handle),
        Allocation {
            memory_type: type_index,
            heap,
            bytes,
        },
    );
    drop(memory);
    config.log(format_args!(
        "alloc type={type_index} heap={heap} bytes={bytes} flags={}",
        flag_names(fake.flags)
    ));
    vk::Result::SUCCESS
}

unsafe extern "system" fn free_memory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    let Some(data) = device_of(device) else {
        return;
    };
    if memory != vk::DeviceMemory::null() {
        // SAFETY: device is a dispatchable handle.
        let id = (unsafe { key(device) }, vk::Handle::as_raw(memory));
        let gone = {
            let mut m = lock(&MEMORY);
            let gone = m.allocations.remove(&id);
            if let Some(a) = gone {
                m.usage[a.heap as usize] -= a.bytes;
            }
            gone
        };
        if let Some(a) = gone {
            data.config.log(format_args!(
                "free type={} heap={} bytes={}",
                a.memory_type, a.heap, a.bytes
            ));
        }
    }
    if let Some(f) = data.free_memory {
        // SAFETY: the application's arguments, passed down.
        unsafe { f(device, memory, p_allocator) };
    }
}

/// The fake type of `memory`, when the layer allocated it on an emulated device.
fn may_map(data: &DeviceData, device: vk::Device, memory: vk::DeviceMemory) -> Option<u32> {
    if !data.emulated {
        return None;
    }
    // SAFETY: device is a dispatchable handle.
    let id = (unsafe { key(device) }, vk::Handle::as_raw(memory));
    let a = lock(&MEMORY).allocations.get(&id).copied()?;
    Some(a.memory_type)
}

fn host_visible(data: &DeviceData, memory_type: u32) -> bool {
    data.config
        .types
        .get(memory_type as usize)
        .is_some_and(|t| t.flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE))
}

unsafe extern "system" fn map_memory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
    size: vk::DeviceSize,
    flags: vk::MemoryMapFlags,
    pp_data: *mut *mut c_void,
) -> vk::Result {
    let Some(data) = device_of(device) else {
        return vk::Result::ERROR_MEMORY_MAP_FAILED;
    };
    let Some(f) = data.map_memory else {
        return vk::Result::ERROR_MEMORY_MAP_FAILED;
    };
    let fake_type = may_map(&data, device, memory);
    if let Some(t) = fake_type
        && !host_visible(&data, t)
    {
        data.config.log(format_args!("map-refused type={t}"));
        return vk::Result::ERROR_MEMORY_MAP_FAILED;
    }
    // SAFETY: the application's arguments, passed down.
    let result = unsafe { f(device, memory, offset, size, flags, pp_data) };
    if let Some(t) = fake_type
        && result == vk::Result::SUCCESS
    {
        data.config.log(format_args!("map type={t}"));
    }
    result
}

unsafe extern "system" fn map_memory2_khr(
    device: vk::Device,
    p_info: *const vk::MemoryMapInfoKHR<'_>,
    pp_data: *mut *mut c_void,
) -> vk::Result {
    let Some(data) = device_of(device) else {
        return vk::Result::ERROR_MEMORY_MAP_FAILED;
    };
    let Some(f) = data.map_memory2_khr else {
        return vk::Result::ERROR_MEMORY_MAP_FAILED;
    };
    // SAFETY: the application's map info, or null.
    let fake_type = unsafe { p_info.as_ref() }.and_then(|i| may_map(&data, device, i.memory));
    if let Some(t) = fake_type
        && !host_visible(&data, t)
    {
        data.config.log(format_args!("map-refused type={t}"));
        return vk::Result::ERROR_MEMORY_MAP_FAILED;
    }
    // SAFETY: the application's arguments, passed down.
    let result = unsafe { f(device, p_info, pp_data) };
    if let Some(t) = fake_type
        && result == vk::Result::SUCCESS
    {
        data.config.log(format_args!("map type={t}"));
    }
    result
}

// ---------------------------------------------------------------------------------------
// A lost device.

/// Submissions so far (of every emulated device of the process), and whether the device
/// was lost.
static SUBMITS: Mutex<(u64, bool)> = Mutex::new((0, false));

/// True once the emulated device is lost; counts a submission when `submitting`.
fn lost(config: &Config, submitting: bool) -> bool {
    if let Some(at) = config.lose_at_unix_s {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let mut s = lock(&SUBMITS);
        if now >= at && !s.1 {
            s.1 = true;
            config.log(format_args!("device-lost at={at:.3}"));
        }
        return s.1;
    }
    let Some(after) = config.lose_after_submits else {
        return false;
    };
    let mut s = lock(&SUBMITS);
    if submitting && !s.1 {
        if s.0 >= after {
            s.1 = true;
            config.log(format_args!("device-lost after={after}"));
        } else {
            s.0 += 1;
        }
    }
    s.1
}

unsafe extern "system" fn queue_submit(
    queue: vk::Queue,
    count: u32,
    submits: *const vk::SubmitInfo<'_>,
    fence: vk::Fence,
) -> vk::Result {
    let Some(data) = device_of_queue(queue) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(f) = data.queue_submit else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if data.emulated && lost(&data.config, true) {
        // A watchdog's loss: the work was accepted, and its wait ends lost (below).
        if data.config.loss_wait_ms.is_some() && !lock(&WATCHDOG_FIRED).0 {
            lock(&WATCHDOG_FIRED).0 = true;
            // SAFETY: the application's arguments, passed down.
            return unsafe { f(queue, count, submits, fence) };
        }
        return vk::Result::ERROR_DEVICE_LOST;
    }
    // SAFETY: the application's arguments, passed down.
    unsafe { f(queue, count, submits, fence) }
}

/// Whether the watchdog's accepted submission went out (.0), and its wait ended (.1).
static WATCHDOG_FIRED: Mutex<(bool, bool)> = Mutex::new((false, false));

unsafe extern "system" fn wait_for_fences(
    device: vk::Device,
    count: u32,
    fences: *const vk::Fence,
    all: vk::Bool32,
    timeout: u64,
) -> vk::Result {
    let Some(data) = device_of(device) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(f) = data.wait_for_fences else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    if data.emulated && lost(&data.config, false) {
        // The wait for the submission the watchdog judged hung lasts its delay, once.
        if let Some(ms) = data.config.loss_wait_ms {
            let first = {
                let mut w = lock(&WATCHDOG_FIRED);
                let first = w.0 && !w.1;
                w.1 = true;
                first
            };
            if first {
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
        }
        return vk::Result::ERROR_DEVICE_LOST;
    }
    // SAFETY: the application's arguments, passed down.
    unsafe { f(device, count, fences, all, timeout) }
}

/// The device a queue belongs to (a queue shares its device's dispatch key).
fn device_of_queue(queue: vk::Queue) -> Option<Arc<DeviceData>> {
    if queue == vk::Queue::null() {
        return None;
    }
    // SAFETY: queue is a dispatchable handle the loader gave us.
    let k = unsafe { key(queue) };
    lock(&DEVICES).get(&k).cloned()
}
