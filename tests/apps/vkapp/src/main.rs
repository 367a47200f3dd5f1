//! `kiln-test-app MODE [ITERATIONS] [STEP_MS] [MIB]`: a small Vulkan application whose GPU
//! memory behaves as an application's does when it fails in one of the ways `kiln watch`
//! tells apart. Each iteration prints `step N` (flushed), allocates its working set with
//! `vkAllocateMemory` (device-local), submits an empty command buffer and waits for it,
//! holds the memory for STEP_MS, then frees it:
//!
//! - `steady`: the same working set every iteration (6 x 8 MiB); exits 0.
//! - `leak`: as steady, and each iteration keeps one MIB-MiB allocation it never frees.
//! - `fragment`: each iteration allocates 64 blocks of 4 KiB and frees all but 16 (the count
//!   of live allocations creeps, their bytes hardly); when an allocation is refused (a
//!   device's allocation-count limit) it says so and exits 1.
//! - `oom`: as steady, but from the fourth iteration one step keeps allocating 64 MiB
//!   blocks until the driver refuses (`out of memory`), then exits 1.
//! - `crash`: as steady, then aborts (SIGABRT) in the fourth iteration.
//! - `churn`: ITERATIONS allocations and frees as fast as it can, of 256 KiB, 1 MiB and
//!   4 MiB in turn (sizes an application that does not suballocate asks for), a submission
//!   every 64, then prints the time they took (`churn_ns N`): the allocation-heavy load
//!   of `kiln bench watch`.
//!
//! Test code: it talks to Vulkan through raw `ash` calls.

use std::io::Write;

use ash::vk;

const MIB: u64 = 1 << 20;

struct Gpu {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    queue: vk::Queue,
    pool: vk::CommandPool,
    memory_type: u32,
}

fn open() -> Result<Gpu, String> {
    // SAFETY: loading the system's Vulkan loader.
    let entry = unsafe { ash::Entry::load() }.map_err(|e| format!("no Vulkan loader: {e}"))?;
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: a valid create info.
    let instance = unsafe { entry.create_instance(&info, None) }
        .map_err(|e| format!("vkCreateInstance: {e}"))?;
    // SAFETY: a live instance.
    let pd = *unsafe { instance.enumerate_physical_devices() }
        .map_err(|e| format!("vkEnumeratePhysicalDevices: {e}"))?
        .first()
        .ok_or("no Vulkan device")?;
    // SAFETY: pd belongs to the instance.
    let memory = unsafe { instance.get_physical_device_memory_properties(pd) };
    let memory_type = memory
        .memory_types_as_slice()
        .iter()
        .position(|t| {
            t.property_flags
                .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
        })
        .unwrap_or(0) as u32;
    let priorities = [1.0f32];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&priorities)];
    let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
    // SAFETY: pd belongs to the instance; family 0 exists on every device.
    let device = unsafe { instance.create_device(pd, &info, None) }
        .map_err(|e| format!("vkCreateDevice: {e}"))?;
    // SAFETY: the queue created above.
    let queue = unsafe { device.get_device_queue(0, 0) };
    // SAFETY: a live device.
    let pool = unsafe {
        device.create_command_pool(
            &vk::CommandPoolCreateInfo::default().queue_family_index(0),
            None,
        )
    }
    .map_err(|e| format!("vkCreateCommandPool: {e}"))?;
    Ok(Gpu {
        _entry: entry,
        instance,
        device,
        queue,
        pool,
        memory_type,
    })
}

impl Gpu {
    fn alloc(&self, bytes: u64) -> Result<vk::DeviceMemory, vk::Result> {
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(bytes)
            .memory_type_index(self.memory_type);
        // SAFETY: a live device and a valid memory type.
        unsafe { self.device.allocate_memory(&info, None) }
    }

    fn free(&self, memory: vk::DeviceMemory) {
        // SAFETY: memory of this device, no longer in use.
        unsafe { self.device.free_memory(memory, None) };
    }

    /// Submits an empty command buffer and waits for it.
    fn submit(&self) -> Result<(), vk::Result> {
        // SAFETY: the device's own pool, queue and a fence waited for before it is freed.
        unsafe {
            let cb = self.device.allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(self.pool)
                    .command_buffer_count(1),
            )?[0];
            self.device
                .begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())?;
            self.device.end_command_buffer(cb)?;
            let fence = self
                .device
                .create_fence(&vk::FenceCreateInfo::default(), None)?;
            let cbs = [cb];
            let submit = [vk::SubmitInfo::default().command_buffers(&cbs)];
            let result = self
                .device
                .queue_submit(self.queue, &submit, fence)
                .and_then(|()| self.device.wait_for_fences(&[fence], true, 10_000_000_000));
            self.device.destroy_fence(fence, None);
            self.device.free_command_buffers(self.pool, &cbs);
            result
        }
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: everything made from the device is freed by now.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_command_pool(self.pool, None);
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("steady");
    let number = |i: usize, default: u64| {
        args.get(i)
            .and_then(|a| a.parse::<u64>().ok())
            .unwrap_or(default)
    };
    let iterations = number(1, 8);
    let step = std::time::Duration::from_millis(number(2, 300));
    let leak_mib = number(3, 8);
    let gpu = match open() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("kiln-test-app: {e}");
            std::process::exit(2);
        }
    };
    if mode == "churn" {
        let started = std::time::Instant::now();
        let sizes = [256 << 10, MIB, 4 * MIB];
        for i in 0..iterations {
            match gpu.alloc(sizes[i as usize % sizes.len()]) {
                Ok(m) => gpu.free(m),
                Err(e) => {
                    eprintln!("kiln-test-app: vkAllocateMemory: {e}");
                    std::process::exit(1);
                }
            }
            if i % 64 == 63
                && let Err(e) = gpu.submit()
            {
                eprintln!("kiln-test-app: vkQueueSubmit: {e}");
                std::process::exit(1);
            }
        }
        say(format!("churn_ns {}", started.elapsed().as_nanos()));
        return;
    }
    let mut kept: Vec<vk::DeviceMemory> = Vec::new();
    for i in 0..iterations {
        say(format!("step {i}"));
        let mut working = Vec::new();
        let blocks: (u64, u64) = if mode == "fragment" {
            (64, 4 << 10)
        } else {
            (6, 8 * MIB)
        };
        for _ in 0..blocks.0 {
            match gpu.alloc(blocks.1) {
                Ok(m) => working.push(m),
                Err(e) => {
                    say(format!(
                        "error: vkAllocateMemory of {} bytes failed: {e}",
                        blocks.1
                    ));
                    std::process::exit(1);
                }
            }
        }
        if let Err(e) = gpu.submit() {
            say(format!("error: vkQueueSubmit: {e}"));
            std::process::exit(1);
        }
        match mode {
            "leak" => match gpu.alloc(leak_mib * MIB) {
                Ok(m) => kept.push(m),
                Err(e) => {
                    say(format!("error: out of memory: {e}"));
                    std::process::exit(1);
                }
            },
            "fragment" => {
                // Every fourth block stays: the count of live allocations creeps.
                for (n, m) in working.drain(..).enumerate() {
                    if n % 4 == 0 {
                        kept.push(m);
                    } else {
                        gpu.free(m);
                    }
                }
            }
            "oom" if i >= 3 => loop {
                match gpu.alloc(64 * MIB) {
                    Ok(m) => working.push(m),
                    Err(e) => {
                        say(format!("error: out of memory in step {i}: {e}"));
                        std::process::exit(1);
                    }
                }
            },
            "crash" if i >= 3 => std::process::abort(),
            _ => {}
        }
        std::thread::sleep(step);
        for m in working {
            gpu.free(m);
        }
    }
    for m in kept {
        gpu.free(m);
    }
    say("done".into());
}
