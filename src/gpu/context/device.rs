//! Opening a device and its lifetime: the shared device, allocator and fence every buffer
//! holds, the bound on fence waits, and the teardown that leaks rather than free in use.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ash::vk;
use gpu_allocator::vulkan::{Allocator, AllocatorCreateDesc};

use super::{BINDINGS, PUSH_CONSTANT_BYTES, TEXEL_BINDING};
use crate::gpu::error::{GpuError, GpuResult};
use crate::gpu::info::DeviceInfo;
use crate::gpu::instance::Vulkan;

/// The bound on every fence wait unless a profile or `--fence-timeout` sets another.
pub const DEFAULT_FENCE_TIMEOUT: Duration = Duration::from_secs(10);

/// An allocator, shared with the buffers it made so that each is freed into its own.
pub(super) type Pool = Arc<Mutex<Option<Allocator>>>;

/// The device, the allocator and the submission fence, shared with every buffer so that
/// they outlive all buffers, and so that a buffer is never freed under pending work.
pub(super) struct Shared {
    pub(super) vulkan: Arc<Vulkan>,
    pub(super) device: ash::Device,
    /// The device's own allocator: released before the device is destroyed.
    allocator: Pool,
    fence: vk::Fence,
    /// Set while a submission is pending that a bounded wait gave up on.
    pub(super) in_flight: AtomicBool,
    /// The bound on waits, in nanoseconds.
    fence_timeout_ns: AtomicU64,
}

impl Shared {
    /// Waits (bounded) for a submission left pending by a timeout; false if it still runs.
    pub(super) fn settle(&self) -> bool {
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

/// An open device ready for compute work.
pub struct DeviceContext {
    pub(super) shared: Arc<Shared>,
    /// The allocator buffers come from now: the device's own, or a workload's.
    pub(super) pool: Pool,
    pub(super) info: DeviceInfo,
    pub(super) queue: vk::Queue,
    command_pool: vk::CommandPool,
    pub(super) command_buffer: vk::CommandBuffer,
    pub(super) fence: vk::Fence,
    pub(super) query_pool: Option<vk::QueryPool>,
    pub(super) set_layout: vk::DescriptorSetLayout,
    pub(super) pipeline_layout: vk::PipelineLayout,
    pub(super) descriptor_pools: Vec<vk::DescriptorPool>,
    /// Shader modules by shader name.
    pub(super) modules: HashMap<&'static str, vk::ShaderModule>,
    /// Pipelines by shader name and specialization constants.
    pub(super) pipelines: HashMap<(&'static str, Vec<u32>), vk::Pipeline>,
    /// Work submitted but not seen to finish (after a timeout).
    pub(super) in_flight: Option<String>,
    pub(super) physical: vk::PhysicalDevice,
    /// Set once the device is lost; every later call fails with it.
    pub(super) lost: Option<String>,
    pub(super) simulate_loss: bool,
    pub(super) fence_timeout: Duration,
    /// Device calls begun and submissions seen to finish: the watchdog's evidence that
    /// the device moves.
    pub(super) completed: Arc<AtomicU64>,
}

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

    pub(super) fn check_alive(&self) -> GpuResult<()> {
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
