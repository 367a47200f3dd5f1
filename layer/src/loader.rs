//! The loader-layer interface (vk_layer.h), which ash does not carry: what a Vulkan layer
//! needs to negotiate with the loader, find its link in a create-info chain, key its
//! dispatch tables, and load and hand out functions. Shared by kiln's layer and the test
//! suite's emulated-discrete layer (`#[path]`), so that the two cannot disagree on it.

use std::ffi::c_void;

use ash::vk;

/// `LAYER_NEGOTIATE_INTERFACE_STRUCT`.
pub const LAYER_NEGOTIATE_INTERFACE_STRUCT: i32 = 1;
/// `VK_LAYER_LINK_INFO`.
pub const VK_LAYER_LINK_INFO: i32 = 0;
/// The loader-layer interface version this layer speaks.
pub const INTERFACE_VERSION: u32 = 2;

/// `VkNegotiateLayerInterface`.
#[repr(C)]
pub struct NegotiateLayerInterface {
    pub s_type: i32,
    pub p_next: *mut c_void,
    pub loader_layer_interface_version: u32,
    pub pfn_get_instance_proc_addr: Option<vk::PFN_vkGetInstanceProcAddr>,
    pub pfn_get_device_proc_addr: Option<vk::PFN_vkGetDeviceProcAddr>,
    pub pfn_get_physical_device_proc_addr: *const c_void,
}

/// `VkLayerInstanceLink`.
#[repr(C)]
pub struct LayerInstanceLink {
    pub p_next: *mut LayerInstanceLink,
    pub pfn_next_get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    pub pfn_next_get_physical_device_proc_addr: *const c_void,
}

/// `VkLayerDeviceLink`.
#[repr(C)]
pub struct LayerDeviceLink {
    pub p_next: *mut LayerDeviceLink,
    pub pfn_next_get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    pub pfn_next_get_device_proc_addr: vk::PFN_vkGetDeviceProcAddr,
}

/// `VkLayerInstanceCreateInfo` and `VkLayerDeviceCreateInfo`, as far as the link.
#[repr(C)]
pub struct LayerCreateInfo<L> {
    pub s_type: vk::StructureType,
    pub p_next: *const c_void,
    pub function: i32,
    pub link: *mut L,
    _union_rest: *const c_void,
}

/// The loader's link-info struct of sType `s_type` in a create-info chain.
pub unsafe fn link_info<L>(
    mut p: *const c_void,
    s_type: vk::StructureType,
) -> *mut LayerCreateInfo<L> {
    while !p.is_null() {
        let info = p as *mut LayerCreateInfo<L>;
        // SAFETY: every struct of a pNext chain starts with sType and pNext.
        unsafe {
            if (*info).s_type == s_type && (*info).function == VK_LAYER_LINK_INFO {
                return info;
            }
            p = (*info).p_next;
        }
    }
    std::ptr::null_mut()
}

/// The dispatch key of a dispatchable handle: shared by an instance and its physical
/// devices, and by a device and its queues.
pub unsafe fn key<H: vk::Handle>(handle: H) -> usize {
    // SAFETY: dispatchable handles point at an object whose first word is the key.
    unsafe { *(handle.as_raw() as *const usize) }
}

/// The loader's generic function type.
pub type Void = unsafe extern "system" fn();

/// Loads the named command through a proc-address function, as its own type.
macro_rules! load {
    ($gpa:expr, $handle:expr, $name:literal, $ty:ty) => {
        // SAFETY: the loader returns a function of the named command's type, or null.
        unsafe { ($gpa)($handle, $name.as_ptr()).map(|f| std::mem::transmute::<Void, $ty>(f)) }
    };
}

/// A layer's function as the loader's generic function type.
macro_rules! hook {
    ($f:expr, $ty:ty) => {
        // SAFETY: a function pointer cast to the loader's generic function type.
        Some(unsafe { std::mem::transmute::<$ty, Void>($f as $ty) })
    };
}
