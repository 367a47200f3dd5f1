//! Memory: where each buffer role's memory lives, buffers and raw allocations (freed on
//! drop, leaked while the device may still write them) and the allocator's bookkeeping.

use std::sync::{Arc, Mutex};

use ash::vk;
use gpu_allocator::MemoryLocation;
use gpu_allocator::vulkan::{
    Allocation, AllocationCreateDesc, AllocationScheme, Allocator, AllocatorCreateDesc,
};

use super::device::{DeviceContext, Pool, Shared};
use crate::gpu::error::{GpuError, GpuResult};
use crate::gpu::info::DeviceInfo;

/// Where a buffer's memory lives. Every role chooses its memory types itself: on a
/// discrete card "CPU to GPU" memory may be the BAR window in VRAM, which would turn a
/// PCIe measurement into a VRAM-to-VRAM copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferKind {
    /// Device-local memory under test: a device-local type that is not host-visible (not
    /// the BAR window) where the device has one; never mapped.
    Device,
    /// Host-visible, coherent memory that the host reads back (results, word lists): in a
    /// heap that is not device-local where the device has one, host-cached preferred.
    Readback,
    /// Host-visible, coherent memory the host writes for the device to read (uploads,
    /// PCIe staging): in a heap that is not device-local where the device has one.
    Upload,
    /// Device-local memory sub-allocated from the allocator's shared blocks (the
    /// allocator's own behaviour is what is tested), of the same types as `Device`.
    DeviceShared,
}

impl BufferKind {
    /// The memory types this role may use on `info`, as a `memoryTypeBits` mask: the
    /// role's ideal types, else (a CPU device, an integrated GPU) the nearest there are.
    pub fn allowed_types(self, info: &DeviceInfo) -> u32 {
        let has = |t: &crate::gpu::MemoryTypeInfo, f: &str| t.flags.iter().any(|x| x == f);
        let device_local_heap = |t: &crate::gpu::MemoryTypeInfo| {
            info.heaps
                .iter()
                .find(|h| h.index == t.heap_index)
                .is_some_and(|h| h.device_local)
        };
        let mask = |pred: &dyn Fn(&crate::gpu::MemoryTypeInfo) -> bool| -> u32 {
            info.memory_types
                .iter()
                .filter(|t| pred(t) && t.index < 32)
                .fold(0, |m, t| m | (1 << t.index))
        };
        let (ideal, nearest) = match self {
            BufferKind::Device | BufferKind::DeviceShared => (
                mask(&|t| has(t, "device_local") && !has(t, "host_visible")),
                mask(&|t| has(t, "device_local")),
            ),
            BufferKind::Readback | BufferKind::Upload => (
                mask(&|t| {
                    has(t, "host_visible") && has(t, "host_coherent") && !device_local_heap(t)
                }),
                mask(&|t| has(t, "host_visible") && has(t, "host_coherent")),
            ),
        };
        if ideal != 0 { ideal } else { nearest }
    }

    /// True when `info` has this role's ideal memory (for staging: host memory outside
    /// VRAM, without which a PCIe rate would not measure the bus).
    pub fn ideal_on(self, info: &DeviceInfo) -> bool {
        let has = |t: &crate::gpu::MemoryTypeInfo, f: &str| t.flags.iter().any(|x| x == f);
        info.memory_types.iter().any(|t| {
            let device_local_heap = info
                .heaps
                .iter()
                .find(|h| h.index == t.heap_index)
                .is_some_and(|h| h.device_local);
            match self {
                BufferKind::Device | BufferKind::DeviceShared => {
                    has(t, "device_local") && !has(t, "host_visible")
                }
                BufferKind::Readback | BufferKind::Upload => {
                    has(t, "host_visible") && has(t, "host_coherent") && !device_local_heap
                }
            }
        })
    }
}

/// A raw device-local `VkDeviceMemory`, freed on drop.
pub struct RawMemory {
    shared: Arc<Shared>,
    memory: vk::DeviceMemory,
    size_bytes: u64,
}

impl RawMemory {
    /// Size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }
}

impl Drop for RawMemory {
    fn drop(&mut self) {
        if self.shared.settle() {
            // SAFETY: the memory was allocated on this device and nothing is pending.
            unsafe { self.shared.device.free_memory(self.memory, None) };
        }
    }
}

/// The allocator's bookkeeping: blocks and the live sub-allocations in each.
#[derive(Debug, Clone, Default)]
pub struct AllocatorStats {
    /// Per memory block: its size and its live (offset, size) sub-allocations.
    pub blocks: Vec<(u64, Vec<(u64, u64)>)>,
    /// Bytes in live sub-allocations.
    pub allocated_bytes: u64,
    /// Bytes in all blocks.
    pub capacity_bytes: u64,
}

impl AllocatorStats {
    /// The largest free span in any block.
    pub fn largest_free_span(&self) -> u64 {
        self.blocks
            .iter()
            .map(|(size, allocs)| {
                let mut spans = allocs.clone();
                spans.sort_unstable();
                let mut at = 0u64;
                let mut largest = 0u64;
                for (offset, len) in spans {
                    largest = largest.max(offset.saturating_sub(at));
                    at = at.max(offset + len);
                }
                largest.max(size.saturating_sub(at))
            })
            .max()
            .unwrap_or(0)
    }
}

/// A buffer with its memory. Freed on drop.
pub struct GpuBuffer {
    /// The allocator it came from; declared before `shared` so that it is released
    /// before the device can be.
    pool: Pool,
    shared: Arc<Shared>,
    pub(super) buffer: vk::Buffer,
    allocation: Option<Allocation>,
    pub(super) size_bytes: u64,
    pub(super) texel_view: Option<vk::BufferView>,
}

impl GpuBuffer {
    /// Size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// Property flags of the memory behind the buffer, by name (`host_cached`, ...).
    pub fn memory_flags(&self) -> Vec<&'static str> {
        let Some(a) = self.allocation.as_ref() else {
            return Vec::new();
        };
        let flags = a.memory_properties();
        [
            (vk::MemoryPropertyFlags::DEVICE_LOCAL, "device_local"),
            (vk::MemoryPropertyFlags::HOST_VISIBLE, "host_visible"),
            (vk::MemoryPropertyFlags::HOST_COHERENT, "host_coherent"),
            (vk::MemoryPropertyFlags::HOST_CACHED, "host_cached"),
        ]
        .iter()
        .filter(|(f, _)| flags.contains(*f))
        .map(|(_, n)| *n)
        .collect()
    }

    /// The buffer's bytes, when its memory is mapped (readback and upload buffers are).
    pub fn bytes(&self) -> Option<&[u8]> {
        self.allocation
            .as_ref()?
            .mapped_slice()
            .map(|s| &s[..self.size_bytes as usize])
    }

    /// The buffer's bytes for writing, when its memory is mapped.
    pub fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        let size = self.size_bytes as usize;
        self.allocation
            .as_mut()?
            .mapped_slice_mut()
            .map(|s| &mut s[..size])
    }

    /// The buffer's words, when its memory is mapped (readback buffers always are).
    pub fn words(&self) -> Option<&[u32]> {
        let a = self.allocation.as_ref()?;
        let ptr = a.mapped_ptr()?;
        // SAFETY: the mapping covers size_bytes, is at least 4-byte aligned
        // (minMemoryMapAlignment >= 64) and lives as long as the allocation.
        Some(unsafe {
            std::slice::from_raw_parts(ptr.as_ptr() as *const u32, (self.size_bytes / 4) as usize)
        })
    }

    /// The buffer's words for writing, when its memory is mapped.
    pub fn words_mut(&mut self) -> Option<&mut [u32]> {
        let a = self.allocation.as_ref()?;
        let ptr = a.mapped_ptr()?;
        // SAFETY: as in `words`; &mut self makes this the only view.
        Some(unsafe {
            std::slice::from_raw_parts_mut(ptr.as_ptr() as *mut u32, (self.size_bytes / 4) as usize)
        })
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        if !self.shared.settle() {
            // The device may still write this memory: leak it rather than free it.
            if let Some(allocation) = self.allocation.take() {
                std::mem::forget(allocation);
            }
            return;
        }
        // SAFETY: the buffer (and its view) were created on this device; the context
        // waits for submitted work before it hands control back, so the GPU no longer
        // uses them.
        unsafe {
            if let Some(view) = self.texel_view.take() {
                self.shared.device.destroy_buffer_view(view, None);
            }
            self.shared.device.destroy_buffer(self.buffer, None)
        };
        if let Some(allocation) = self.allocation.take()
            && let Ok(mut guard) = self.pool.lock()
            && let Some(allocator) = guard.as_mut()
        {
            // A failed free only leaks; nothing else can be done about it here.
            let _ = allocator.free(allocation);
        }
    }
}

impl DeviceContext {
    /// Creates a buffer of `size_bytes` in memory of the given kind.
    pub fn buffer(
        &mut self,
        kind: BufferKind,
        size_bytes: u64,
        name: &str,
    ) -> GpuResult<GpuBuffer> {
        self.check_alive()?;
        let running = format!("allocating {name} ({size_bytes} bytes)");
        let d = &self.shared.device;
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::UNIFORM_TEXEL_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        let create = vk::BufferCreateInfo::default()
            .size(size_bytes)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: a plain buffer creation on a live device.
        let buffer = unsafe { d.create_buffer(&create, None) }
            .map_err(|r| GpuError::from_vk("vkCreateBuffer", r, &running))?;
        // SAFETY: buffer was just created on this device.
        let mut requirements = unsafe { d.get_buffer_memory_requirements(buffer) };
        // The role's own memory types (never the BAR window for a staging buffer, never
        // host-visible VRAM for the memory under test), where the buffer allows them.
        let allowed = requirements.memory_type_bits & kind.allowed_types(&self.info);
        if allowed != 0 {
            requirements.memory_type_bits = allowed;
        }
        let (location, scheme) = match kind {
            BufferKind::Device => (
                MemoryLocation::GpuOnly,
                AllocationScheme::DedicatedBuffer(buffer),
            ),
            BufferKind::Readback => (
                MemoryLocation::GpuToCpu,
                AllocationScheme::GpuAllocatorManaged,
            ),
            BufferKind::Upload => (
                MemoryLocation::CpuToGpu,
                AllocationScheme::DedicatedBuffer(buffer),
            ),
            BufferKind::DeviceShared => (
                MemoryLocation::GpuOnly,
                AllocationScheme::GpuAllocatorManaged,
            ),
        };
        let allocation = {
            let mut guard = self.pool.lock().map_err(|_| {
                GpuError::Unsupported("memory allocator poisoned by an earlier panic".into())
            })?;
            let allocator = guard
                .as_mut()
                .ok_or_else(|| GpuError::Unsupported("memory allocator already released".into()))?;
            allocator.allocate(&AllocationCreateDesc {
                name,
                requirements,
                location,
                linear: true,
                allocation_scheme: scheme,
            })
        };
        let allocation = match allocation {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: the buffer has no memory and was never used.
                unsafe { d.destroy_buffer(buffer, None) };
                return Err(match e {
                    gpu_allocator::AllocationError::OutOfMemory => {
                        GpuError::OutOfMemory { running }
                    }
                    e => GpuError::Unsupported(format!("{running}: {e}")),
                });
            }
        };
        let mut out = GpuBuffer {
            pool: self.pool.clone(),
            shared: self.shared.clone(),
            buffer,
            allocation: None,
            size_bytes,
            texel_view: None,
        };
        // SAFETY: memory and offset come from an allocation made for these requirements.
        let bound =
            unsafe { d.bind_buffer_memory(buffer, allocation.memory(), allocation.offset()) };
        let coherent = allocation
            .memory_properties()
            .contains(vk::MemoryPropertyFlags::HOST_COHERENT);
        let mapped = allocation.mapped_ptr().is_some();
        out.allocation = Some(allocation);
        bound.map_err(|r| GpuError::from_vk("vkBindBufferMemory", r, &running))?;
        let host = matches!(kind, BufferKind::Readback | BufferKind::Upload);
        if host && !(coherent && mapped) {
            return Err(GpuError::Unsupported(
                "no host-visible, host-coherent memory type for result buffers".into(),
            ));
        }
        Ok(out)
    }

    /// Allocates raw device-local memory with `vkAllocateMemory`, bypassing the allocator.
    pub fn raw_memory(&mut self, size_bytes: u64) -> GpuResult<RawMemory> {
        self.check_alive()?;
        let running = format!("allocating {size_bytes} bytes of raw device memory");
        // The types a storage buffer may use, narrowed to the memory under test's, and no
        // more than the heap or one allocation may hold.
        let buffer_types = self.storage_buffer_types()?;
        let allowed = buffer_types & BufferKind::Device.allowed_types(&self.info);
        let type_index = self
            .info
            .memory_types
            .iter()
            .find(|t| t.index < 32 && allowed & (1 << t.index) != 0)
            .map(|t| (t.index, t.heap_index))
            .ok_or_else(|| GpuError::Unsupported("no device-local memory type".into()))?;
        let heap_bytes = self
            .info
            .heaps
            .iter()
            .find(|h| h.index == type_index.1)
            .map_or(0, |h| h.size_bytes);
        if size_bytes > heap_bytes || size_bytes > self.info.limits.max_memory_allocation_size_bytes
        {
            return Err(GpuError::OutOfMemory { running });
        }
        let type_index = type_index.0;
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(size_bytes)
            .memory_type_index(type_index);
        // SAFETY: a plain allocation on a live device.
        let memory = unsafe { self.shared.device.allocate_memory(&info, None) }
            .map_err(|r| GpuError::from_vk("vkAllocateMemory", r, &running))?;
        Ok(RawMemory {
            shared: self.shared.clone(),
            memory,
            size_bytes,
        })
    }

    /// The memory types a storage buffer may be bound to (`memoryTypeBits` of a small
    /// buffer with kiln's usage flags).
    fn storage_buffer_types(&self) -> GpuResult<u32> {
        let d = &self.shared.device;
        let create = vk::BufferCreateInfo::default()
            .size(crate::units::MIB)
            .usage(
                vk::BufferUsageFlags::STORAGE_BUFFER
                    | vk::BufferUsageFlags::TRANSFER_SRC
                    | vk::BufferUsageFlags::TRANSFER_DST,
            )
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: a plain buffer creation on a live device, destroyed right after its
        // requirements are read.
        unsafe {
            let buffer = d
                .create_buffer(&create, None)
                .map_err(|r| GpuError::from_vk("vkCreateBuffer", r, "probing memory types"))?;
            let bits = d.get_buffer_memory_requirements(buffer).memory_type_bits;
            d.destroy_buffer(buffer, None);
            Ok(bits)
        }
    }

    /// Runs `f` with an allocator of its own (a workload that tests allocation: its blocks,
    /// and only its, are what `allocator_stats` reports), released when `f` returns, so
    /// that the driver's usage after it shows what was really given back. Buffers made in
    /// `f` must not outlive it.
    pub fn with_own_allocator<T>(
        &mut self,
        f: impl FnOnce(&mut DeviceContext) -> T,
    ) -> GpuResult<T> {
        self.check_alive()?;
        let allocator = Allocator::new(&AllocatorCreateDesc {
            instance: self.shared.vulkan.instance.clone(),
            device: self.shared.device.clone(),
            physical_device: self.physical,
            debug_settings: Default::default(),
            buffer_device_address: false,
            allocation_sizes: Default::default(),
        })
        .map_err(|e| GpuError::Unsupported(format!("memory allocator: {e}")))?;
        let own: Pool = Arc::new(Mutex::new(Some(allocator)));
        let previous = std::mem::replace(&mut self.pool, own.clone());
        let out = f(self);
        self.pool = previous;
        if self.shared.settle()
            && let Ok(mut guard) = own.lock()
        {
            // Frees its blocks, the empty ones it keeps per memory type included.
            guard.take();
        }
        Ok(out)
    }

    /// The allocator's blocks and live sub-allocations.
    pub fn allocator_stats(&self) -> AllocatorStats {
        let Ok(guard) = self.pool.lock() else {
            return AllocatorStats::default();
        };
        let Some(allocator) = guard.as_ref() else {
            return AllocatorStats::default();
        };
        let report = allocator.generate_report();
        AllocatorStats {
            blocks: report
                .blocks
                .iter()
                .map(|b| {
                    let allocs = report.allocations[b.allocations.clone()]
                        .iter()
                        .map(|a| (a.offset, a.size))
                        .collect();
                    (b.size, allocs)
                })
                .collect(),
            allocated_bytes: report.total_allocated_bytes,
            capacity_bytes: report.total_capacity_bytes,
        }
    }

    /// What the driver says this process uses of the largest device-local heap
    /// (`VK_EXT_memory_budget`); None without the extension.
    pub fn device_local_usage(&self) -> Option<u64> {
        if !self.info.memory_budget_supported {
            return None;
        }
        let heap = self
            .info
            .heaps
            .iter()
            .filter(|h| h.device_local)
            .max_by_key(|h| h.size_bytes)?
            .index as usize;
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let mut props = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
        // SAFETY: the physical device belongs to the instance; the device supports the
        // budget extension (checked above).
        unsafe {
            self.shared
                .vulkan
                .instance
                .get_physical_device_memory_properties2(self.physical, &mut props)
        };
        Some(budget.heap_usage[heap])
    }
}
