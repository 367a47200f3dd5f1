//! An open device: compute queue, allocator, pipelines, buffers, descriptor bindings and
//! command submission with bounded waits and GPU timestamps.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ash::vk;
use gpu_allocator::MemoryLocation;
use gpu_allocator::vulkan::{
    Allocation, AllocationCreateDesc, AllocationScheme, Allocator, AllocatorCreateDesc,
};

use super::error::{GpuError, GpuResult};
use super::info::DeviceInfo;
use super::instance::Vulkan;
use super::shaders::ShaderCode;

/// The bound on every fence wait unless a profile or `--fence-timeout` sets another.
pub const DEFAULT_FENCE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes of push constants every kiln pipeline may use (the Vulkan minimum).
pub const PUSH_CONSTANT_BYTES: u32 = 128;
/// Storage-buffer bindings in every kiln descriptor set.
pub const BINDINGS: usize = 3;
/// Binding at which the first buffer is also visible as a uniform texel buffer of
/// `R32G32B32A32_UINT` texels (loads through it vectorise on some CPU drivers).
pub const TEXEL_BINDING: u32 = 3;

/// An allocator, shared with the buffers it made so that each is freed into its own.
type Pool = Arc<Mutex<Option<Allocator>>>;

/// The device, the allocator and the submission fence, shared with every buffer so that
/// they outlive all buffers, and so that a buffer is never freed under pending work.
struct Shared {
    vulkan: Arc<Vulkan>,
    device: ash::Device,
    /// The device's own allocator: released before the device is destroyed.
    allocator: Pool,
    fence: vk::Fence,
    /// Set while a submission is pending that a bounded wait gave up on.
    in_flight: AtomicBool,
    /// The bound on waits, in nanoseconds.
    fence_timeout_ns: AtomicU64,
}

impl Shared {
    /// Waits (bounded) for a submission left pending by a timeout; false if it still runs.
    fn settle(&self) -> bool {
        if !self.in_flight.load(Ordering::Acquire) {
            return true;
        }
        let timeout = self.fence_timeout_ns.load(Ordering::Relaxed);
        // SAFETY: the fence lives as long as self.
        let done = unsafe { self.device.wait_for_fences(&[self.fence], true, timeout) }.is_ok();
        if done {
            self.in_flight.store(false, Ordering::Release);
        }
        done
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if !self.settle() {
            // A hung device may still use every object: leak them rather than free
            // memory the device may write.
            return;
        }
        if let Ok(mut alloc) = self.allocator.lock() {
            alloc.take();
        }
        // SAFETY: every buffer holds an Arc to self and the context has released its
        // objects, so nothing created from the device is alive, and nothing is pending.
        unsafe {
            self.device.destroy_fence(self.fence, None);
            self.device.destroy_device(None)
        };
    }
}

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
    buffer: vk::Buffer,
    allocation: Option<Allocation>,
    size_bytes: u64,
    texel_view: Option<vk::BufferView>,
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

/// A compiled compute pipeline.
#[derive(Debug, Clone, Copy)]
pub struct Pipeline(vk::Pipeline);

/// A descriptor set naming three buffers at bindings 0, 1 and 2.
#[derive(Debug, Clone, Copy)]
pub struct Binding(vk::DescriptorSet);

/// Time a submission took.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Between the first and last GPU timestamp, when the queue has timestamps.
    pub gpu_ns: Option<u64>,
    /// Host wall time from submit to fence signalled.
    pub wall: Duration,
}

impl Timing {
    /// GPU time when known, else wall time, in nanoseconds.
    pub fn best_ns(&self) -> u64 {
        self.gpu_ns.unwrap_or(self.wall.as_nanos() as u64)
    }
}

/// An open device ready for compute work.
pub struct DeviceContext {
    shared: Arc<Shared>,
    /// The allocator buffers come from now: the device's own, or a workload's.
    pool: Pool,
    info: DeviceInfo,
    queue: vk::Queue,
    command_pool: vk::CommandPool,
    command_buffer: vk::CommandBuffer,
    fence: vk::Fence,
    query_pool: Option<vk::QueryPool>,
    set_layout: vk::DescriptorSetLayout,
    pipeline_layout: vk::PipelineLayout,
    descriptor_pools: Vec<vk::DescriptorPool>,
    /// Shader modules by shader name.
    modules: HashMap<&'static str, vk::ShaderModule>,
    /// Pipelines by shader name and specialization constants.
    pipelines: HashMap<(&'static str, Vec<u32>), vk::Pipeline>,
    /// Work submitted but not seen to finish (after a timeout).
    in_flight: Option<String>,
    physical: vk::PhysicalDevice,
    /// Set once the device is lost; every later call fails with it.
    lost: Option<String>,
    simulate_loss: bool,
    fence_timeout: Duration,
    /// Device calls begun and submissions seen to finish: the watchdog's evidence that
    /// the device moves.
    completed: Arc<AtomicU64>,
}

const SETS_PER_POOL: u32 = 256;

impl DeviceContext {
    /// Opens the device `info` describes, with one compute queue.
    pub fn open(vulkan: &Arc<Vulkan>, info: &DeviceInfo) -> GpuResult<DeviceContext> {
        let running = format!("opening device {} ({})", info.index, info.name);
        let physical =
            *vulkan
                .physical_devices()?
                .get(info.index)
                .ok_or_else(|| GpuError::NoSuchDevice {
                    selector: info.index.to_string(),
                })?;
        let family = info
            .compute_queue_family
            .ok_or_else(|| GpuError::Unsupported("no queue family supports compute".into()))?;
        let priorities = [1.0f32];
        let queue_info = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        // 64-bit integers allow the widest stores where the device has them.
        // SAFETY: physical belongs to the instance.
        let supported = unsafe { vulkan.instance.get_physical_device_features(physical) };
        let features =
            vk::PhysicalDeviceFeatures::default().shader_int64(supported.shader_int64 == vk::TRUE);
        // 16-bit float arithmetic where the device has it (the fp16 compute pass), and the
        // matrix units where kiln can drive them (the matrix workload), with the 8-bit
        // integers and the memory model their shaders use.
        let units = !info.matrix_units.shapes.is_empty();
        let mut f16_int8 = vk::PhysicalDeviceShaderFloat16Int8Features::default()
            .shader_float16(info.shader_float16)
            .shader_int8(units && info.matrix_units.int8);
        let mut coop =
            vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default().cooperative_matrix(true);
        let mut model =
            vk::PhysicalDeviceVulkanMemoryModelFeatures::default().vulkan_memory_model(true);
        let mut extensions = Vec::new();
        let mut create = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queue_info)
            .enabled_features(&features);
        if info.shader_float16 || f16_int8.shader_int8 == vk::TRUE {
            extensions.push(ash::khr::shader_float16_int8::NAME.as_ptr());
            create = create.push_next(&mut f16_int8);
        }
        if units {
            extensions.push(ash::khr::cooperative_matrix::NAME.as_ptr());
            extensions.push(ash::khr::vulkan_memory_model::NAME.as_ptr());
            create = create.push_next(&mut coop).push_next(&mut model);
        }
        create = create.enabled_extension_names(&extensions);
        let vk_err = |call, r| GpuError::from_vk(call, r, &running);
        // SAFETY: physical belongs to the instance; create points at live data.
        let device = unsafe { vulkan.instance.create_device(physical, &create, None) }
            .map_err(|r| vk_err("vkCreateDevice", r))?;
        let allocator = Allocator::new(&AllocatorCreateDesc {
            instance: vulkan.instance.clone(),
            device: device.clone(),
            physical_device: physical,
            debug_settings: Default::default(),
            buffer_device_address: false,
            allocation_sizes: Default::default(),
        });
        let allocator = match allocator {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: nothing was created from the device yet.
                unsafe { device.destroy_device(None) };
                return Err(GpuError::Unsupported(format!("memory allocator: {e}")));
            }
        };
        // SAFETY: plain object creation on a live device.
        let fence = match unsafe { device.create_fence(&vk::FenceCreateInfo::default(), None) } {
            Ok(f) => f,
            Err(r) => {
                drop(allocator);
                // SAFETY: nothing else was created from the device.
                unsafe { device.destroy_device(None) };
                return Err(vk_err("vkCreateFence", r));
            }
        };
        let shared = Arc::new(Shared {
            vulkan: vulkan.clone(),
            device,
            allocator: Arc::new(Mutex::new(Some(allocator))),
            fence,
            in_flight: AtomicBool::new(false),
            fence_timeout_ns: AtomicU64::new(DEFAULT_FENCE_TIMEOUT.as_nanos() as u64),
        });
        let d = &shared.device;
        // From here on, objects are created one at a time into `ctx` so that its Drop
        // releases whatever was made before a failure.
        // SAFETY: family was reported by this device with at least one queue.
        let queue = unsafe { d.get_device_queue(family, 0) };
        let mut ctx = DeviceContext {
            shared: shared.clone(),
            pool: shared.allocator.clone(),
            info: info.clone(),
            queue,
            command_pool: vk::CommandPool::null(),
            command_buffer: vk::CommandBuffer::null(),
            fence,
            query_pool: None,
            set_layout: vk::DescriptorSetLayout::null(),
            pipeline_layout: vk::PipelineLayout::null(),
            descriptor_pools: Vec::new(),
            modules: HashMap::new(),
            pipelines: HashMap::new(),
            in_flight: None,
            physical,
            lost: None,
            simulate_loss: false,
            fence_timeout: DEFAULT_FENCE_TIMEOUT,
            completed: Arc::new(AtomicU64::new(0)),
        };
        // SAFETY: plain object creation on a live device with live infos, for the whole block.
        unsafe {
            ctx.command_pool = d
                .create_command_pool(
                    &vk::CommandPoolCreateInfo::default()
                        .queue_family_index(family)
                        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                    None,
                )
                .map_err(|r| vk_err("vkCreateCommandPool", r))?;
            ctx.command_buffer = d
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(ctx.command_pool)
                        .level(vk::CommandBufferLevel::PRIMARY)
                        .command_buffer_count(1),
                )
                .map_err(|r| vk_err("vkAllocateCommandBuffers", r))?[0];
            if info.limits.timestamp_valid_bits > 0 {
                ctx.query_pool = Some(
                    d.create_query_pool(
                        &vk::QueryPoolCreateInfo::default()
                            .query_type(vk::QueryType::TIMESTAMP)
                            .query_count(2),
                        None,
                    )
                    .map_err(|r| vk_err("vkCreateQueryPool", r))?,
                );
            }
            let mut bindings: Vec<_> = (0..BINDINGS as u32)
                .map(|b| {
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(b)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE)
                })
                .collect();
            bindings.push(
                vk::DescriptorSetLayoutBinding::default()
                    .binding(TEXEL_BINDING)
                    .descriptor_type(vk::DescriptorType::UNIFORM_TEXEL_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE),
            );

            ctx.set_layout = d
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                    None,
                )
                .map_err(|r| vk_err("vkCreateDescriptorSetLayout", r))?;
            let ranges = [vk::PushConstantRange::default()
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
                .size(PUSH_CONSTANT_BYTES)];
            let layouts = [ctx.set_layout];
            ctx.pipeline_layout = d
                .create_pipeline_layout(
                    &vk::PipelineLayoutCreateInfo::default()
                        .set_layouts(&layouts)
                        .push_constant_ranges(&ranges),
                    None,
                )
                .map_err(|r| vk_err("vkCreatePipelineLayout", r))?;
        }
        Ok(ctx)
    }

    /// A counter of device calls begun and submissions seen to finish, to read from
    /// another thread: while it grows the device is working, and when it stops a watchdog
    /// can tell.
    pub fn completed_counter(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.completed)
    }

    /// Counts this context's progress on `counter` (another context's), so that one
    /// watchdog sees two contexts of a device working at once.
    pub fn share_completed_counter(&mut self, counter: Arc<AtomicU64>) {
        self.completed = counter;
    }

    /// The device this context drives.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Sets the bound on every fence wait.
    pub fn set_fence_timeout(&mut self, timeout: Duration) {
        self.fence_timeout = timeout;
        self.shared.fence_timeout_ns.store(
            timeout.as_nanos().min(u128::from(u64::MAX)) as u64,
            Ordering::Relaxed,
        );
    }

    /// The bound on every fence wait.
    pub fn fence_timeout(&self) -> Duration {
        self.fence_timeout
    }

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

    /// Binds three buffers (each whole) to bindings 0, 1 and 2 of a new descriptor set,
    /// and the first also as a texel buffer at `TEXEL_BINDING` when the device's texel
    /// limit allows its size.
    pub fn bind(&mut self, buffers: [&mut GpuBuffer; BINDINGS]) -> GpuResult<Binding> {
        self.check_alive()?;
        let max_range = self.info.limits.max_storage_buffer_range_bytes;
        if let Some(b) = buffers.iter().find(|b| b.size_bytes > max_range) {
            return Err(GpuError::Unsupported(format!(
                "a {} byte buffer exceeds maxStorageBufferRange ({max_range} bytes)",
                b.size_bytes
            )));
        }
        let set = match self.allocate_set()? {
            Some(set) => set,
            None => {
                self.add_descriptor_pool()?;
                self.allocate_set()?.ok_or_else(|| {
                    GpuError::Unsupported("a fresh descriptor pool could not allocate a set".into())
                })?
            }
        };
        let infos: Vec<[vk::DescriptorBufferInfo; 1]> = buffers
            .iter()
            .map(|b| {
                [vk::DescriptorBufferInfo::default()
                    .buffer(b.buffer)
                    .offset(0)
                    .range(b.size_bytes)]
            })
            .collect();
        let writes: Vec<_> = infos
            .iter()
            .enumerate()
            .map(|(i, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(info)
            })
            .collect();
        // SAFETY: set and buffers are alive; writes point at live infos.
        unsafe { self.shared.device.update_descriptor_sets(&writes, &[]) };
        let [data, ..] = buffers;
        if data.size_bytes / 16 <= self.info.limits.max_texel_buffer_elements {
            let view = match data.texel_view {
                Some(v) => v,
                None => {
                    let info = vk::BufferViewCreateInfo::default()
                        .buffer(data.buffer)
                        .format(vk::Format::R32G32B32A32_UINT)
                        .offset(0)
                        .range(data.size_bytes);
                    // SAFETY: the buffer is alive and was created with texel usage.
                    let v = unsafe { self.shared.device.create_buffer_view(&info, None) }.map_err(
                        |r| GpuError::from_vk("vkCreateBufferView", r, "binding buffers"),
                    )?;
                    data.texel_view = Some(v);
                    v
                }
            };
            let views = [view];
            let write = [vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(TEXEL_BINDING)
                .descriptor_type(vk::DescriptorType::UNIFORM_TEXEL_BUFFER)
                .texel_buffer_view(&views)];
            // SAFETY: as above.
            unsafe { self.shared.device.update_descriptor_sets(&write, &[]) };
        }
        Ok(Binding(set))
    }

    fn allocate_set(&mut self) -> GpuResult<Option<vk::DescriptorSet>> {
        let Some(&pool) = self.descriptor_pools.last() else {
            return Ok(None);
        };
        let layouts = [self.set_layout];
        let info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(pool)
            .set_layouts(&layouts);
        // SAFETY: pool and layout are alive.
        match unsafe { self.shared.device.allocate_descriptor_sets(&info) } {
            Ok(sets) => Ok(Some(sets[0])),
            Err(vk::Result::ERROR_OUT_OF_POOL_MEMORY | vk::Result::ERROR_FRAGMENTED_POOL) => {
                Ok(None)
            }
            Err(r) => Err(GpuError::from_vk(
                "vkAllocateDescriptorSets",
                r,
                "binding buffers",
            )),
        }
    }

    fn add_descriptor_pool(&mut self) -> GpuResult<()> {
        let sizes = [
            vk::DescriptorPoolSize::default()
                .ty(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(SETS_PER_POOL * BINDINGS as u32),
            vk::DescriptorPoolSize::default()
                .ty(vk::DescriptorType::UNIFORM_TEXEL_BUFFER)
                .descriptor_count(SETS_PER_POOL),
        ];
        let info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(SETS_PER_POOL)
            .pool_sizes(&sizes);
        // SAFETY: plain object creation.
        let pool = unsafe { self.shared.device.create_descriptor_pool(&info, None) }
            .map_err(|r| GpuError::from_vk("vkCreateDescriptorPool", r, "binding buffers"))?;
        self.descriptor_pools.push(pool);
        Ok(())
    }

    /// The pipeline for `shader` with specialization constants 0, 1, ... set to `spec`.
    pub fn pipeline(&mut self, shader: ShaderCode, spec: &[u32]) -> GpuResult<Pipeline> {
        self.check_alive()?;
        if let Some(&p) = self.pipelines.get(&(shader.name(), spec.to_vec())) {
            return Ok(Pipeline(p));
        }
        let running = format!("building pipeline {}", shader.name());
        let module = match self.modules.get(shader.name()) {
            Some(&m) => m,
            None => {
                let code = ash::util::read_spv(&mut std::io::Cursor::new(shader.spirv()))
                    .map_err(|e| GpuError::Unsupported(format!("embedded SPIR-V: {e}")))?;
                // SAFETY: a ShaderCode holds build.rs's SPIR-V (glslc's output, or the
                // committed .spv tests/tools.rs checks against its source); read_spv
                // checked its magic and size; the create info outlives the call.
                let m = unsafe {
                    self.shared.device.create_shader_module(
                        &vk::ShaderModuleCreateInfo::default().code(&code),
                        None,
                    )
                }
                .map_err(|r| GpuError::from_vk("vkCreateShaderModule", r, &running))?;
                self.modules.insert(shader.name(), m);
                m
            }
        };
        let entries: Vec<vk::SpecializationMapEntry> = (0..spec.len() as u32)
            .map(|i| {
                vk::SpecializationMapEntry::default()
                    .constant_id(i)
                    .offset(i * 4)
                    .size(4)
            })
            .collect();
        let data: Vec<u8> = spec.iter().flat_map(|v| v.to_le_bytes()).collect();
        let spec_info = vk::SpecializationInfo::default()
            .map_entries(&entries)
            .data(&data);
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main")
            .specialization_info(&spec_info);
        let create = [vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(self.pipeline_layout)];
        // SAFETY: module, layout and infos are alive.
        let pipeline = unsafe {
            self.shared
                .device
                .create_compute_pipelines(vk::PipelineCache::null(), &create, None)
        }
        .map_err(|(_, r)| GpuError::from_vk("vkCreateComputePipelines", r, &running))?[0];
        self.pipelines
            .insert((shader.name(), spec.to_vec()), pipeline);
        Ok(Pipeline(pipeline))
    }

    /// Starts recording commands for one submission; `what` names the work for errors.
    pub fn record(&mut self, what: impl Into<String>) -> GpuResult<Recording<'_>> {
        self.check_alive()?;
        self.finish_in_flight()?;
        let what = what.into();
        let d = &self.shared.device;
        let cb = self.command_buffer;
        // SAFETY: the command buffer is not pending (finish_in_flight) and belongs to a
        // pool created with RESET_COMMAND_BUFFER.
        unsafe {
            d.reset_command_buffer(cb, vk::CommandBufferResetFlags::empty())
                .map_err(|r| GpuError::from_vk("vkResetCommandBuffer", r, &what))?;
            d.begin_command_buffer(
                cb,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
            .map_err(|r| GpuError::from_vk("vkBeginCommandBuffer", r, &what))?;
            if let Some(qp) = self.query_pool {
                d.cmd_reset_query_pool(cb, qp, 0, 2);
                d.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, qp, 0);
            }
        }
        let mut rec = Recording { ctx: self, what };
        // Work from earlier submissions must be visible to this one.
        rec.barrier();
        Ok(rec)
    }

    fn check_alive(&self) -> GpuResult<()> {
        match &self.lost {
            Some(running) => Err(GpuError::DeviceLost {
                running: running.clone(),
            }),
            None => {
                // Every call starts only after the one before returned: a new call is
                // progress (allocations count, not only submissions).
                self.completed.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
        }
    }

    /// Waits (bounded) for a submission that an earlier wait gave up on.
    fn finish_in_flight(&mut self) -> GpuResult<()> {
        let Some(running) = self.in_flight.clone() else {
            return Ok(());
        };
        self.wait_fence(&running, self.fence_timeout)?;
        self.in_flight = None;
        self.shared.in_flight.store(false, Ordering::Release);
        Ok(())
    }

    fn wait_fence(&mut self, running: &str, timeout: Duration) -> GpuResult<()> {
        let d = &self.shared.device;
        let waiting = Instant::now();
        // SAFETY: the fence is alive.
        match unsafe { d.wait_for_fences(&[self.fence], true, timeout.as_nanos() as u64) } {
            Ok(()) => {
                self.completed.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(vk::Result::TIMEOUT) => {
                self.in_flight = Some(running.to_owned());
                self.shared.in_flight.store(true, Ordering::Release);
                Err(GpuError::Timeout {
                    running: running.to_owned(),
                    timeout_ms: timeout.as_millis() as u64,
                })
            }
            // A loss a watchdog made (Windows' TDR: 2 s by default) ends the wait about
            // that long after it began: how long is part of the evidence.
            Err(vk::Result::ERROR_DEVICE_LOST) => {
                let running = format!(
                    "{running} ({:.2} s into the wait for it)",
                    waiting.elapsed().as_secs_f64()
                );
                Err(self.fail("vkWaitForFences", vk::Result::ERROR_DEVICE_LOST, &running))
            }
            Err(r) => Err(self.fail("vkWaitForFences", r, running)),
        }
    }

    fn fail(&mut self, call: &'static str, r: vk::Result, running: &str) -> GpuError {
        let err = GpuError::from_vk(call, r, running);
        if matches!(err, GpuError::DeviceLost { .. }) {
            self.lost = Some(running.to_owned());
        }
        err
    }

    /// Makes the next submission report `VK_ERROR_DEVICE_LOST` and the device unusable
    /// from then on, exactly as a real loss does: for tests of everything above this layer.
    #[doc(hidden)]
    pub fn simulate_device_loss_on_next_submit(&mut self) {
        self.simulate_loss = true;
    }
}

impl Drop for DeviceContext {
    fn drop(&mut self) {
        let d = &self.shared.device;
        if !self.shared.settle() {
            // A hung device may never finish: leak rather than destroy objects the GPU
            // may still use.
            return;
        }
        // SAFETY: no submission is pending (checked above), so every object is idle.
        unsafe {
            let _ = d.device_wait_idle();
            for &p in self.pipelines.values() {
                d.destroy_pipeline(p, None);
            }
            for &m in self.modules.values() {
                d.destroy_shader_module(m, None);
            }
            for &p in &self.descriptor_pools {
                d.destroy_descriptor_pool(p, None);
            }
            d.destroy_pipeline_layout(self.pipeline_layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            if let Some(qp) = self.query_pool {
                d.destroy_query_pool(qp, None);
            }
            d.destroy_command_pool(self.command_pool, None);
        }
    }
}

/// Commands being recorded for one submission.
pub struct Recording<'a> {
    ctx: &'a mut DeviceContext,
    what: String,
}

impl Recording<'_> {
    /// Records a compute dispatch of `groups` workgroups along x.
    pub fn dispatch(&mut self, pipeline: Pipeline, binding: Binding, push: &[u32], groups: u32) {
        let d = &self.ctx.shared.device;
        let cb = self.ctx.command_buffer;
        let bytes: Vec<u8> = push.iter().flat_map(|v| v.to_le_bytes()).collect();
        debug_assert!(bytes.len() <= PUSH_CONSTANT_BYTES as usize);
        // SAFETY: all handles are alive and recording has begun.
        unsafe {
            d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline.0);
            d.cmd_bind_descriptor_sets(
                cb,
                vk::PipelineBindPoint::COMPUTE,
                self.ctx.pipeline_layout,
                0,
                &[binding.0],
                &[],
            );
            d.cmd_push_constants(
                cb,
                self.ctx.pipeline_layout,
                vk::ShaderStageFlags::COMPUTE,
                0,
                &bytes,
            );
            d.cmd_dispatch(cb, groups, 1, 1);
        }
    }

    /// Records a fill of `size_bytes` at `offset_bytes` with the 32-bit `value`.
    pub fn fill(&mut self, buffer: &GpuBuffer, offset_bytes: u64, size_bytes: u64, value: u32) {
        // SAFETY: buffer is alive; offset and size are multiples of 4 within it.
        unsafe {
            self.ctx.shared.device.cmd_fill_buffer(
                self.ctx.command_buffer,
                buffer.buffer,
                offset_bytes,
                size_bytes,
                value,
            )
        };
    }

    /// Records a copy of `size_bytes` between two buffers.
    pub fn copy(
        &mut self,
        src: &GpuBuffer,
        src_offset: u64,
        dst: &GpuBuffer,
        dst_offset: u64,
        size_bytes: u64,
    ) {
        let region = [vk::BufferCopy::default()
            .src_offset(src_offset)
            .dst_offset(dst_offset)
            .size(size_bytes)];
        // SAFETY: both buffers are alive; the regions lie within them.
        unsafe {
            self.ctx.shared.device.cmd_copy_buffer(
                self.ctx.command_buffer,
                src.buffer,
                dst.buffer,
                &region,
            )
        };
    }

    /// Makes every earlier write visible to every later command.
    pub fn barrier(&mut self) {
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
            .dst_access_mask(vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE)];
        // SAFETY: recording has begun.
        unsafe {
            self.ctx.shared.device.cmd_pipeline_barrier(
                self.ctx.command_buffer,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::DependencyFlags::empty(),
                &barrier,
                &[],
                &[],
            )
        };
    }

    /// Submits, waits at most the context's fence timeout, and times the work.
    pub fn submit_and_wait(self) -> GpuResult<Timing> {
        let timeout = self.ctx.fence_timeout;
        self.submit_and_wait_for(timeout)
    }

    /// Submits and waits at most `timeout`.
    pub fn submit_and_wait_for(mut self, timeout: Duration) -> GpuResult<Timing> {
        // Results written by the device must be visible to the host after the fence.
        let to_host = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ)];
        let ctx = &mut *self.ctx;
        let what = std::mem::take(&mut self.what);
        let d = ctx.shared.device.clone();
        let cb = ctx.command_buffer;
        // SAFETY: recording has begun on cb; fence and queue are alive and the fence is
        // unsignalled (reset below before submit).
        unsafe {
            d.cmd_pipeline_barrier(
                cb,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &to_host,
                &[],
                &[],
            );
            if let Some(qp) = ctx.query_pool {
                d.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, qp, 1);
            }
            d.end_command_buffer(cb)
                .map_err(|r| ctx.fail("vkEndCommandBuffer", r, &what))?;
            d.reset_fences(&[ctx.fence])
                .map_err(|r| ctx.fail("vkResetFences", r, &what))?;
        }
        if ctx.simulate_loss {
            ctx.simulate_loss = false;
            return Err(ctx.fail("vkQueueSubmit", vk::Result::ERROR_DEVICE_LOST, &what));
        }
        let cbs = [cb];
        let submit = [vk::SubmitInfo::default().command_buffers(&cbs)];
        let start = Instant::now();
        // SAFETY: as above.
        unsafe { d.queue_submit(ctx.queue, &submit, ctx.fence) }
            .map_err(|r| ctx.fail("vkQueueSubmit", r, &what))?;
        ctx.wait_fence(&what, timeout)?;
        let wall = start.elapsed();
        let gpu_ns = match ctx.query_pool {
            Some(qp) => {
                let mut stamps = [0u64; 2];
                // SAFETY: both queries were written by the finished submission.
                unsafe {
                    d.get_query_pool_results(qp, 0, &mut stamps, vk::QueryResultFlags::TYPE_64)
                }
                .ok()
                .map(|()| {
                    let bits = ctx.info.limits.timestamp_valid_bits;
                    let mask = if bits >= 64 {
                        u64::MAX
                    } else {
                        (1u64 << bits) - 1
                    };
                    let ticks = (stamps[1] & mask).wrapping_sub(stamps[0] & mask) & mask;
                    (ticks as f64 * f64::from(ctx.info.limits.timestamp_period_ns)) as u64
                })
            }
            None => None,
        };
        Ok(Timing { gpu_ns, wall })
    }
}
