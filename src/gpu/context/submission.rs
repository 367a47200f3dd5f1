//! Submission: recording commands, submitting them, waiting at most the fence timeout (a
//! submission a wait gave up on stays in flight), GPU timestamps and device loss.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ash::vk;

use super::PUSH_CONSTANT_BYTES;
use super::device::DeviceContext;
use super::memory::GpuBuffer;
use super::pipeline::{Binding, Pipeline};
use crate::gpu::error::{GpuError, GpuResult};

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

impl DeviceContext {
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
