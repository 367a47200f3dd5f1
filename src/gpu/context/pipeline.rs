//! Pipelines and descriptor bindings: the one layout every kiln shader uses (three storage
//! buffers, a texel view of the first, push constants), its sets and compiled pipelines.

use ash::vk;

use super::device::DeviceContext;
use super::memory::GpuBuffer;
use super::{BINDINGS, TEXEL_BINDING};
use crate::gpu::error::{GpuError, GpuResult};
use crate::gpu::shaders::ShaderCode;

/// A compiled compute pipeline.
#[derive(Debug, Clone, Copy)]
pub struct Pipeline(pub(super) vk::Pipeline);

/// A descriptor set naming three buffers at bindings 0, 1 and 2.
#[derive(Debug, Clone, Copy)]
pub struct Binding(pub(super) vk::DescriptorSet);

const SETS_PER_POOL: u32 = 256;

impl DeviceContext {
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
}
