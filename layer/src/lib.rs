//! `VK_LAYER_KILN_trace`: the Vulkan layer `kiln watch` loads into the application it
//! starts. It records what the application asks of the device's memory and what the
//! driver answers, into the shared ring that `KILN_TRACE_RING` names (the file layout is
//! kiln's `src/evidence/ring.rs`, compiled here as it is there):
//!
//! - each device created: its `maxMemoryAllocationSize` and count, its heaps and memory
//!   types, so that kiln knows which heap is VRAM;
//! - every `vkAllocateMemory` (size, heap, memory type, the handle) and `vkFreeMemory`
//!   (the size it freed), counted per size class in the ring's header as well;
//! - every failed allocation, with the driver's budget and usage of the heap at that
//!   moment where `VK_EXT_memory_budget` is there to ask;
//! - the first `VK_ERROR_DEVICE_LOST` of each device (the call that returned it; later
//!   ones only counted), and any other call that returned out-of-memory.
//!
//! A record is in the page cache once written, so the application crashing (or kiln
//! being killed) loses none of it. Without a ring to write to (no `KILN_TRACE_RING`, a
//! file that is not a ring) the layer passes every call through and records nothing: it
//! never changes what the application sees. It starts no threads and takes no lock on the
//! paths of submission and waiting other than a read lock of its device table.
//!
//! Nothing of the layer's own may reach the application: every entry point catches a
//! panic of the layer's (which would otherwise abort the process at the C boundary), says
//! nothing on its output, stops the tracing for the process and says so in the ring
//! (`Stopped`); the thread-local cache is read with `try_with`, because an engine's static
//! destructor or atexit handler calls Vulkan after the thread's locals are gone.

#[path = "../../src/evidence/ring.rs"]
#[allow(dead_code)]
mod ring;

use std::collections::{BTreeMap, HashMap};
use std::ffi::{CStr, c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

use ash::vk;
use ash::vk::Handle;

use ring::{Call, Counted, Record, RecordKind, RingWriter};

#[macro_use]
mod loader;

use loader::{
    INTERFACE_VERSION, LAYER_NEGOTIATE_INTERFACE_STRUCT, LayerDeviceLink, LayerInstanceLink,
    NegotiateLayerInterface, Void, key, link_info,
};

// ---------------------------------------------------------------------------------------
// The ring.

/// The ring this process writes to, opened at the first instance; None without one.
static RING: OnceLock<Option<RingWriter<'static>>> = OnceLock::new();

fn ring() -> Option<&'static RingWriter<'static>> {
    RING.get_or_init(open_ring).as_ref()
}

/// Maps the ring's file shared, for the life of the process (it is never unmapped: a
/// record written is the file's at once).
fn open_ring() -> Option<RingWriter<'static>> {
    use std::os::fd::AsRawFd;
    let path = std::env::var_os("KILN_TRACE_RING")?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .ok()?;
    let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    if len < ring::HEADER_BYTES as usize {
        return None;
    }
    // SAFETY: a shared read-write mapping of a file opened read-write, of its own length;
    // the mapping outlives the descriptor, and nothing unmaps it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            // Faulted in now, at the first instance, not one page at a time on the
            // application's allocation path.
            libc::MAP_SHARED | libc::MAP_POPULATE,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: the mapping is page-aligned, `len` bytes long and lives as long as the
    // process; the words are only ever accessed atomically.
    let words: &'static [AtomicU64] =
        unsafe { std::slice::from_raw_parts(p as *const AtomicU64, len / 8) };
    let writer = RingWriter::new(words)?;
    // SAFETY: registers a handler that only stores to an atomic; it runs in a fork's child.
    unsafe { libc::pthread_atfork(None, None, Some(forget_pid)) };
    writer.attached();
    writer.push(&record(RecordKind::Attach));
    Some(writer)
}

/// Nanoseconds since the Unix epoch, from the kernel's coarse clock: a few milliseconds
/// of resolution (a record's order is its sequence number; its time places it on a
/// timeline read to the millisecond at best) for a fraction of the precise clock's cost,
/// which was a third of a record's.
fn now_unix_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// This process's id, asked of the kernel once (glibc no longer caches it: a system call
/// on every record cost more than the rest of the record); a fork forgets it.
static PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

extern "C" fn forget_pid() {
    PID.store(0, Ordering::Relaxed);
}

fn pid() -> u32 {
    match PID.load(Ordering::Relaxed) {
        0 => {
            let pid = std::process::id();
            PID.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

/// A record of `kind` from this process, now.
fn record(kind: RecordKind) -> Record {
    let mut r = Record::new(kind);
    r.pid = pid();
    r.t_unix_ns = now_unix_ns();
    r
}

// ---------------------------------------------------------------------------------------
// Never the application's problem.

/// Set once the layer's own code failed in this process: from then on it passes every
/// call through and records nothing more.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// Runs an entry point's body. A panic of the layer's own (a bug of kiln's) must never
/// unwind into the application, where it would abort the process: it is caught, said in
/// the ring ([`stop`]), and the call answers `fallback`. The records inside a body are
/// [`traced`] on their own, so that a failure there keeps the driver's real answer.
fn entry<T>(call: Call, fallback: T, body: impl FnOnce() -> T) -> T {
    quiet_panics();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|_| {
        stop(call);
        fallback
    })
}

/// Runs the layer's recording of a call (never the call passed down): nothing once the
/// tracing stopped, and a panic in it stops the tracing.
fn traced(call: Call, work: impl FnOnce()) {
    if STOPPED.load(Ordering::Acquire) {
        return;
    }
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).is_err() {
        stop(call);
    }
}

/// Stops the tracing for this process, said once in the ring (where one is open: a stop
/// opens nothing).
fn stop(call: Call) {
    if STOPPED.swap(true, Ordering::AcqRel) {
        return;
    }
    if let Some(ring) = RING.get().and_then(Option::as_ref) {
        let mut r = record(RecordKind::Stopped);
        r.call = call;
        ring.push(&r);
    }
}

/// Makes the layer's panics silent: the hook is the layer's own copy of the standard
/// library's (a Rust application has its own), and what it would print belongs in the
/// ring, never on the application's stderr.
fn quiet_panics() {
    // The unit tests' harness reports its own tests' panics through the same hook.
    if cfg!(test) {
        return;
    }
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
}

// ---------------------------------------------------------------------------------------
// Dispatch state.

struct InstanceData {
    instance: vk::Instance,
    next_gipa: vk::PFN_vkGetInstanceProcAddr,
    destroy_instance: Option<vk::PFN_vkDestroyInstance>,
    /// `vkGetPhysicalDeviceProperties2`, where the instance may call it (Vulkan 1.1, or
    /// the KHR extension enabled), and whether the 1.1 structs may be chained to it.
    properties2: Option<(vk::PFN_vkGetPhysicalDeviceProperties2, bool)>,
    memory_properties: Option<vk::PFN_vkGetPhysicalDeviceMemoryProperties>,
    memory_properties2: Option<vk::PFN_vkGetPhysicalDeviceMemoryProperties2>,
    enumerate_device_extensions: Option<vk::PFN_vkEnumerateDeviceExtensionProperties>,
}

/// The next layer's device commands this layer wraps.
#[derive(Default)]
struct DeviceFns {
    destroy_device: Option<vk::PFN_vkDestroyDevice>,
    allocate_memory: Option<vk::PFN_vkAllocateMemory>,
    free_memory: Option<vk::PFN_vkFreeMemory>,
    queue_submit: Option<vk::PFN_vkQueueSubmit>,
    queue_submit2: Option<vk::PFN_vkQueueSubmit2>,
    queue_submit2_khr: Option<vk::PFN_vkQueueSubmit2>,
    queue_wait_idle: Option<vk::PFN_vkQueueWaitIdle>,
    device_wait_idle: Option<vk::PFN_vkDeviceWaitIdle>,
    wait_for_fences: Option<vk::PFN_vkWaitForFences>,
    get_fence_status: Option<vk::PFN_vkGetFenceStatus>,
    wait_semaphores: Option<vk::PFN_vkWaitSemaphores>,
    wait_semaphores_khr: Option<vk::PFN_vkWaitSemaphores>,
    queue_present: Option<vk::PFN_vkQueuePresentKHR>,
    acquire_next_image: Option<vk::PFN_vkAcquireNextImageKHR>,
    map_memory: Option<vk::PFN_vkMapMemory>,
    bind_buffer_memory: Option<vk::PFN_vkBindBufferMemory>,
    bind_image_memory: Option<vk::PFN_vkBindImageMemory>,
    create_buffer: Option<vk::PFN_vkCreateBuffer>,
    create_image: Option<vk::PFN_vkCreateImage>,
    destroy_buffer: Option<vk::PFN_vkDestroyBuffer>,
    destroy_image: Option<vk::PFN_vkDestroyImage>,
    image_requirements: Option<vk::PFN_vkGetImageMemoryRequirements>,
    get_query_pool_results: Option<vk::PFN_vkGetQueryPoolResults>,
}

/// A hasher for `VkDeviceMemory` handles (pointers or counters, unique by construction):
/// one multiplication, where the standard hasher's resistance to crafted keys buys
/// nothing and costs the allocation path tens of nanoseconds.
#[derive(Default)]
struct HandleHasher(u64);

impl std::hash::Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type Handles = HashMap<u64, Allocation, std::hash::BuildHasherDefault<HandleHasher>>;

/// One live allocation, for the size its free gives back.
#[derive(Clone, Copy)]
struct Allocation {
    bytes: u64,
    heap: u16,
    memory_type: u16,
}

struct DeviceData {
    instance: Arc<InstanceData>,
    physical: vk::PhysicalDevice,
    next_gdpa: vk::PFN_vkGetDeviceProcAddr,
    fns: DeviceFns,
    /// The first eight bytes of the device's `deviceUUID` (0 where it cannot be asked).
    uuid: u64,
    /// Memory type index -> heap index.
    type_heaps: Vec<u16>,
    /// `VK_EXT_memory_budget` can be asked of the physical device.
    budget: bool,
    /// A call of this device has returned `VK_ERROR_DEVICE_LOST`.
    lost: AtomicBool,
    allocations: Mutex<Handles>,
}

static INSTANCES: Mutex<BTreeMap<usize, Arc<InstanceData>>> = Mutex::new(BTreeMap::new());
static DEVICES: RwLock<BTreeMap<usize, Arc<DeviceData>>> = RwLock::new(BTreeMap::new());

/// Locks a map, even one a panicking thread left poisoned (every update is one insert or
/// remove, so its data stays whole).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

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

/// Bumped whenever a device is created or destroyed: a thread's cached device is good
/// only while this is what it was when cached.
static GENERATION: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The device this thread called last: (generation, dispatch key, its data). An
    /// application calls one device from one thread again and again; this spares each
    /// call the table's lock.
    static LAST: std::cell::RefCell<Option<(u64, usize, Arc<DeviceData>)>> =
        const { std::cell::RefCell::new(None) };
}

/// The device a device or queue handle belongs to.
fn device_of<H: vk::Handle + Copy>(handle: H) -> Option<Arc<DeviceData>> {
    if handle.as_raw() == 0 {
        return None;
    }
    // SAFETY: a dispatchable handle the loader gave us.
    let k = unsafe { key(handle) };
    let generation = GENERATION.load(Ordering::Acquire);
    // `try_with`: at the process's exit (an engine's static destructor, an atexit
    // handler) the thread's locals may be gone already; the table answers then.
    let cached = LAST
        .try_with(|last| {
            last.try_borrow().ok().and_then(|last| {
                last.as_ref()
                    .filter(|(g, key, _)| *g == generation && *key == k)
                    .map(|(_, _, d)| d.clone())
            })
        })
        .ok()
        .flatten();
    if cached.is_some() {
        return cached;
    }
    let found = DEVICES
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&k)
        .cloned()?;
    let _ = LAST.try_with(|last| {
        if let Ok(mut last) = last.try_borrow_mut() {
            *last = Some((generation, k, found.clone()));
        }
    });
    Some(found)
}

impl DeviceData {
    /// Records a call that failed: the device's first loss (later ones counted), or an
    /// out-of-memory answer.
    fn failed(&self, call: Call, result: vk::Result, request_bytes: u64) {
        let Some(ring) = ring() else {
            return;
        };
        let kind = match result {
            vk::Result::ERROR_DEVICE_LOST => {
                if self.lost.swap(true, Ordering::AcqRel) {
                    ring.lost_again();
                    return;
                }
                RecordKind::DeviceLost
            }
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
                RecordKind::OutOfMemory
            }
            _ => return,
        };
        let mut r = record(kind);
        r.call = call;
        r.device = self.uuid;
        r.result = result.as_raw();
        if kind == RecordKind::OutOfMemory {
            r.bytes = request_bytes;
        }
        ring.push(&r);
    }

    /// Records a buffer or an image the application made (`call` says which), with its
    /// own size.
    fn resource(&self, call: Call, handle: Option<u64>, bytes: u64) {
        let (Some(ring), Some(handle)) = (ring(), handle) else {
            return;
        };
        let mut r = record(RecordKind::Resource);
        r.call = call;
        r.device = self.uuid;
        r.bytes = bytes;
        r.memory = handle;
        ring.push(&r);
    }

    /// Records the end of a buffer or an image the application made.
    fn resource_destroyed(&self, call: Call, handle: u64) {
        let Some(ring) = ring() else {
            return;
        };
        let mut r = record(RecordKind::ResourceDestroyed);
        r.call = call;
        r.device = self.uuid;
        r.memory = handle;
        ring.push(&r);
    }

    /// Records what `vkAllocateMemory` answered: the allocation (kept for its free), or
    /// the refusal with the heap's budget at that moment.
    fn allocated(
        &self,
        info: &vk::MemoryAllocateInfo<'_>,
        memory: Option<vk::DeviceMemory>,
        result: vk::Result,
    ) {
        let Some(ring) = ring() else {
            return;
        };
        let memory_type = info.memory_type_index as u16;
        let heap = self
            .type_heaps
            .get(usize::from(memory_type))
            .copied()
            .unwrap_or(u16::MAX);
        let bytes = info.allocation_size;
        let mut r = record(if memory.is_some() {
            RecordKind::Alloc
        } else {
            RecordKind::AllocFailed
        });
        r.call = Call::AllocateMemory;
        r.device = self.uuid;
        r.bytes = bytes;
        r.heap = heap;
        r.memory_type = memory_type;
        r.result = result.as_raw();
        if let Some(memory) = memory {
            let handle = vk::Handle::as_raw(memory);
            r.memory = handle;
            lock(&self.allocations).insert(
                handle,
                Allocation {
                    bytes,
                    heap,
                    memory_type,
                },
            );
            ring.count(Counted::Alloc, bytes);
            ring.push(&r);
            return;
        }
        ring.count(Counted::Failed, bytes);
        ring.push(&r);
        if let Some((budget, usage)) = self.heap_budget(heap) {
            let mut b = record(RecordKind::Budget);
            b.device = self.uuid;
            b.heap = heap;
            b.bytes = budget;
            b.memory = usage;
            ring.push(&b);
        }
        if result == vk::Result::ERROR_DEVICE_LOST {
            self.failed(Call::AllocateMemory, result, 0);
        }
    }

    /// Records a `vkFreeMemory` of an allocation the layer saw made.
    fn freed(&self, memory: vk::DeviceMemory) {
        let Some(ring) = ring() else {
            return;
        };
        let handle = vk::Handle::as_raw(memory);
        if let Some(a) = lock(&self.allocations).remove(&handle) {
            let mut r = record(RecordKind::Free);
            r.device = self.uuid;
            r.bytes = a.bytes;
            r.heap = a.heap;
            r.memory_type = a.memory_type;
            r.memory = handle;
            ring.count(Counted::Free, a.bytes);
            ring.push(&r);
        }
    }

    /// The driver's budget and this process's usage of `heap`, where it can be asked.
    fn heap_budget(&self, heap: u16) -> Option<(u64, u64)> {
        if !self.budget {
            return None;
        }
        let f = self.instance.memory_properties2?;
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        {
            let mut props = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
            // SAFETY: the physical device belongs to the instance; it supports the
            // budget extension, checked at device creation.
            unsafe { f(self.physical, &mut props) };
        }
        let h = usize::from(heap);
        Some((*budget.heap_budget.get(h)?, *budget.heap_usage.get(h)?))
    }
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
    if v.s_type != LAYER_NEGOTIATE_INTERFACE_STRUCT
        || v.loader_layer_interface_version < INTERFACE_VERSION
    {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    v.loader_layer_interface_version = INTERFACE_VERSION;
    v.pfn_get_instance_proc_addr = Some(kiln_trace_get_instance_proc_addr);
    v.pfn_get_device_proc_addr = Some(kiln_trace_get_device_proc_addr);
    v.pfn_get_physical_device_proc_addr = std::ptr::null();
    vk::Result::SUCCESS
}

/// Device commands the layer wraps.
fn device_hook(name: &[u8]) -> Option<Void> {
    match name {
        b"vkDestroyDevice" => hook!(destroy_device, vk::PFN_vkDestroyDevice),
        b"vkAllocateMemory" => hook!(allocate_memory, vk::PFN_vkAllocateMemory),
        b"vkFreeMemory" => hook!(free_memory, vk::PFN_vkFreeMemory),
        b"vkQueueSubmit" => hook!(queue_submit, vk::PFN_vkQueueSubmit),
        b"vkQueueSubmit2" => hook!(queue_submit2, vk::PFN_vkQueueSubmit2),
        b"vkQueueSubmit2KHR" => hook!(queue_submit2_khr, vk::PFN_vkQueueSubmit2),
        b"vkQueueWaitIdle" => hook!(queue_wait_idle, vk::PFN_vkQueueWaitIdle),
        b"vkDeviceWaitIdle" => hook!(device_wait_idle, vk::PFN_vkDeviceWaitIdle),
        b"vkWaitForFences" => hook!(wait_for_fences, vk::PFN_vkWaitForFences),
        b"vkGetFenceStatus" => hook!(get_fence_status, vk::PFN_vkGetFenceStatus),
        b"vkWaitSemaphores" => hook!(wait_semaphores, vk::PFN_vkWaitSemaphores),
        b"vkWaitSemaphoresKHR" => hook!(wait_semaphores_khr, vk::PFN_vkWaitSemaphores),
        b"vkQueuePresentKHR" => hook!(queue_present, vk::PFN_vkQueuePresentKHR),
        b"vkAcquireNextImageKHR" => hook!(acquire_next_image, vk::PFN_vkAcquireNextImageKHR),
        b"vkMapMemory" => hook!(map_memory, vk::PFN_vkMapMemory),
        b"vkBindBufferMemory" => hook!(bind_buffer_memory, vk::PFN_vkBindBufferMemory),
        b"vkBindImageMemory" => hook!(bind_image_memory, vk::PFN_vkBindImageMemory),
        b"vkCreateBuffer" => hook!(create_buffer, vk::PFN_vkCreateBuffer),
        b"vkCreateImage" => hook!(create_image, vk::PFN_vkCreateImage),
        b"vkDestroyBuffer" => hook!(destroy_buffer, vk::PFN_vkDestroyBuffer),
        b"vkDestroyImage" => hook!(destroy_image, vk::PFN_vkDestroyImage),
        b"vkGetQueryPoolResults" => hook!(get_query_pool_results, vk::PFN_vkGetQueryPoolResults),
        _ => None,
    }
}

unsafe extern "system" fn kiln_trace_get_instance_proc_addr(
    instance: vk::Instance,
    p_name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    entry(Call::Setup, None, || {
        if p_name.is_null() {
            return None;
        }
        // SAFETY: the caller passes a NUL-terminated name.
        let name = unsafe { CStr::from_ptr(p_name) }.to_bytes();
        match name {
            b"vkGetInstanceProcAddr" => {
                return hook!(
                    kiln_trace_get_instance_proc_addr,
                    vk::PFN_vkGetInstanceProcAddr
                );
            }
            b"vkGetDeviceProcAddr" => {
                return hook!(kiln_trace_get_device_proc_addr, vk::PFN_vkGetDeviceProcAddr);
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
        device_hook(name).or(next)
    })
}

unsafe extern "system" fn kiln_trace_get_device_proc_addr(
    device: vk::Device,
    p_name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    entry(Call::Setup, None, || {
        if p_name.is_null() {
            return None;
        }
        // SAFETY: the caller passes a NUL-terminated name.
        let name = unsafe { CStr::from_ptr(p_name) }.to_bytes();
        if name == b"vkGetDeviceProcAddr" {
            return hook!(kiln_trace_get_device_proc_addr, vk::PFN_vkGetDeviceProcAddr);
        }
        let data = device_of(device)?;
        // SAFETY: the next layer's gdpa, with a device it created.
        let next = unsafe { (data.next_gdpa)(device, p_name) };
        next?;
        device_hook(name).or(next)
    })
}

// ---------------------------------------------------------------------------------------
// Instance.

/// The API version and enabled extension names of an instance's create info.
unsafe fn instance_asks(info: &vk::InstanceCreateInfo<'_>) -> (u32, Vec<Vec<u8>>) {
    // SAFETY: the application's create info: a valid application info or null.
    let api =
        unsafe { info.p_application_info.as_ref() }.map_or(vk::API_VERSION_1_0, |a| a.api_version);
    let names = if info.enabled_extension_count == 0 || info.pp_enabled_extension_names.is_null() {
        Vec::new()
    } else {
        // SAFETY: as many NUL-terminated names as the count says.
        unsafe {
            std::slice::from_raw_parts(
                info.pp_enabled_extension_names,
                info.enabled_extension_count as usize,
            )
        }
        .iter()
        // SAFETY: each name is NUL-terminated.
        .map(|&n| unsafe { CStr::from_ptr(n) }.to_bytes().to_vec())
        .collect()
    };
    (api, names)
}

unsafe extern "system" fn create_instance(
    p_create_info: *const vk::InstanceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_instance: *mut vk::Instance,
) -> vk::Result {
    entry(Call::Setup, vk::Result::ERROR_INITIALIZATION_FAILED, || {
        if p_create_info.is_null() {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        }
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
        // Attach to the ring now, so that kiln knows the application uses Vulkan even if it
        // never creates a device.
        let _ = ring();
        // SAFETY: the call succeeded, so *p_instance is the new instance; the create info is
        // the application's.
        let (instance, (api, extensions)) =
            unsafe { (*p_instance, instance_asks(&*p_create_info)) };
        let core11 = api >= vk::API_VERSION_1_1;
        let properties2 = if core11 {
            load!(
                next_gipa,
                instance,
                c"vkGetPhysicalDeviceProperties2",
                vk::PFN_vkGetPhysicalDeviceProperties2
            )
            .map(|f| (f, true))
        } else if extensions
            .iter()
            .any(|e| e.as_slice() == b"VK_KHR_get_physical_device_properties2")
        {
            load!(
                next_gipa,
                instance,
                c"vkGetPhysicalDeviceProperties2KHR",
                vk::PFN_vkGetPhysicalDeviceProperties2
            )
            .map(|f| (f, false))
        } else {
            None
        };
        let memory_properties2 = if core11 {
            load!(
                next_gipa,
                instance,
                c"vkGetPhysicalDeviceMemoryProperties2",
                vk::PFN_vkGetPhysicalDeviceMemoryProperties2
            )
        } else if properties2.is_some() {
            load!(
                next_gipa,
                instance,
                c"vkGetPhysicalDeviceMemoryProperties2KHR",
                vk::PFN_vkGetPhysicalDeviceMemoryProperties2
            )
        } else {
            None
        };
        let data = InstanceData {
            instance,
            next_gipa,
            destroy_instance: load!(
                next_gipa,
                instance,
                c"vkDestroyInstance",
                vk::PFN_vkDestroyInstance
            ),
            properties2,
            memory_properties: load!(
                next_gipa,
                instance,
                c"vkGetPhysicalDeviceMemoryProperties",
                vk::PFN_vkGetPhysicalDeviceMemoryProperties
            ),
            memory_properties2,
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
    })
}

unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    entry(Call::Setup, (), || {
        if instance == vk::Instance::null() {
            return;
        }
        // SAFETY: instance is a dispatchable handle.
        let data = lock(&INSTANCES).remove(&unsafe { key(instance) });
        if let Some(f) = data.and_then(|d| d.destroy_instance) {
            // SAFETY: the application's arguments, passed down.
            unsafe { f(instance, p_allocator) };
        }
    })
}

// ---------------------------------------------------------------------------------------
// Device.

/// Whether the physical device offers `VK_EXT_memory_budget`.
unsafe fn has_budget(instance: &InstanceData, pd: vk::PhysicalDevice) -> bool {
    let Some(f) = instance.enumerate_device_extensions else {
        return false;
    };
    let mut count = 0u32;
    // SAFETY: counting the physical device's extensions.
    if unsafe { f(pd, std::ptr::null(), &mut count, std::ptr::null_mut()) } != vk::Result::SUCCESS {
        return false;
    }
    let mut props = vec![vk::ExtensionProperties::default(); count as usize];
    // SAFETY: a buffer of `count` properties.
    let result = unsafe { f(pd, std::ptr::null(), &mut count, props.as_mut_ptr()) };
    if result.as_raw() < 0 {
        return false;
    }
    props.truncate(count as usize);
    props.iter().any(|p| {
        // SAFETY: the driver writes NUL-terminated names.
        let name = unsafe { CStr::from_ptr(p.extension_name.as_ptr()) };
        name == ash::ext::memory_budget::NAME
    })
}

/// The device's identity and memory model, recorded once: the first half of its UUID,
/// its allocation limits, heaps and types. Returns the UUID word and each type's heap.
unsafe fn describe(instance: &InstanceData, pd: vk::PhysicalDevice) -> (u64, Vec<u16>) {
    let mut uuid = 0u64;
    let mut max_bytes = 0u64;
    let mut max_count = 0u64;
    if let Some((f, core11)) = instance.properties2 {
        let mut id = vk::PhysicalDeviceIDProperties::default();
        let mut maintenance3 = vk::PhysicalDeviceMaintenance3Properties::default();
        {
            let mut props = vk::PhysicalDeviceProperties2::default();
            if core11 {
                props = props.push_next(&mut id).push_next(&mut maintenance3);
            }
            // SAFETY: pd belongs to the instance; the chained structs are core in 1.1.
            unsafe { f(pd, &mut props) };
            max_count = u64::from(props.properties.limits.max_memory_allocation_count);
        }
        if core11 {
            let mut first = [0u8; 8];
            first.copy_from_slice(&id.device_uuid[..8]);
            uuid = u64::from_le_bytes(first);
            max_bytes = maintenance3.max_memory_allocation_size;
        }
    }
    let mut memory = vk::PhysicalDeviceMemoryProperties::default();
    if let Some(f) = instance.memory_properties {
        // SAFETY: pd belongs to the instance.
        unsafe { f(pd, &mut memory) };
    }
    let types: Vec<u16> = memory
        .memory_types_as_slice()
        .iter()
        .map(|t| t.heap_index as u16)
        .collect();
    if let Some(ring) = ring() {
        let mut r = record(RecordKind::Device);
        r.device = uuid;
        r.bytes = max_bytes;
        r.memory = max_count;
        ring.push(&r);
        for (i, heap) in memory.memory_heaps_as_slice().iter().enumerate() {
            let mut r = record(RecordKind::Heap);
            r.device = uuid;
            r.heap = i as u16;
            r.bytes = heap.size;
            r.memory = u64::from(heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL));
            ring.push(&r);
        }
        for (i, t) in memory.memory_types_as_slice().iter().enumerate() {
            let mut r = record(RecordKind::MemoryType);
            r.device = uuid;
            r.memory_type = i as u16;
            r.heap = t.heap_index as u16;
            r.memory = u64::from(t.property_flags.as_raw());
            ring.push(&r);
        }
    }
    (uuid, types)
}

unsafe extern "system" fn create_device(
    pd: vk::PhysicalDevice,
    p_create_info: *const vk::DeviceCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_device: *mut vk::Device,
) -> vk::Result {
    entry(Call::Setup, vk::Result::ERROR_INITIALIZATION_FAILED, || {
        let Some(instance) = instance_of(pd) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        if p_create_info.is_null() {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        }
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
        // SAFETY: the application's arguments, passed down.
        let result = unsafe { create(pd, p_create_info, p_allocator, p_device) };
        if result != vk::Result::SUCCESS {
            return result;
        }
        // SAFETY: the call succeeded, so *p_device is the new device.
        let device = unsafe { *p_device };
        // SAFETY: pd belongs to the instance.
        let (uuid, type_heaps) = unsafe { describe(&instance, pd) };
        // SAFETY: as above.
        let budget = instance.memory_properties2.is_some() && unsafe { has_budget(&instance, pd) };
        let fns = DeviceFns {
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
            queue_submit2: load!(next_gdpa, device, c"vkQueueSubmit2", vk::PFN_vkQueueSubmit2),
            queue_submit2_khr: load!(
                next_gdpa,
                device,
                c"vkQueueSubmit2KHR",
                vk::PFN_vkQueueSubmit2
            ),
            queue_wait_idle: load!(
                next_gdpa,
                device,
                c"vkQueueWaitIdle",
                vk::PFN_vkQueueWaitIdle
            ),
            device_wait_idle: load!(
                next_gdpa,
                device,
                c"vkDeviceWaitIdle",
                vk::PFN_vkDeviceWaitIdle
            ),
            wait_for_fences: load!(
                next_gdpa,
                device,
                c"vkWaitForFences",
                vk::PFN_vkWaitForFences
            ),
            get_fence_status: load!(
                next_gdpa,
                device,
                c"vkGetFenceStatus",
                vk::PFN_vkGetFenceStatus
            ),
            wait_semaphores: load!(
                next_gdpa,
                device,
                c"vkWaitSemaphores",
                vk::PFN_vkWaitSemaphores
            ),
            wait_semaphores_khr: load!(
                next_gdpa,
                device,
                c"vkWaitSemaphoresKHR",
                vk::PFN_vkWaitSemaphores
            ),
            queue_present: load!(
                next_gdpa,
                device,
                c"vkQueuePresentKHR",
                vk::PFN_vkQueuePresentKHR
            ),
            acquire_next_image: load!(
                next_gdpa,
                device,
                c"vkAcquireNextImageKHR",
                vk::PFN_vkAcquireNextImageKHR
            ),
            map_memory: load!(next_gdpa, device, c"vkMapMemory", vk::PFN_vkMapMemory),
            bind_buffer_memory: load!(
                next_gdpa,
                device,
                c"vkBindBufferMemory",
                vk::PFN_vkBindBufferMemory
            ),
            bind_image_memory: load!(
                next_gdpa,
                device,
                c"vkBindImageMemory",
                vk::PFN_vkBindImageMemory
            ),
            create_buffer: load!(next_gdpa, device, c"vkCreateBuffer", vk::PFN_vkCreateBuffer),
            create_image: load!(next_gdpa, device, c"vkCreateImage", vk::PFN_vkCreateImage),
            destroy_buffer: load!(
                next_gdpa,
                device,
                c"vkDestroyBuffer",
                vk::PFN_vkDestroyBuffer
            ),
            destroy_image: load!(next_gdpa, device, c"vkDestroyImage", vk::PFN_vkDestroyImage),
            image_requirements: load!(
                next_gdpa,
                device,
                c"vkGetImageMemoryRequirements",
                vk::PFN_vkGetImageMemoryRequirements
            ),
            get_query_pool_results: load!(
                next_gdpa,
                device,
                c"vkGetQueryPoolResults",
                vk::PFN_vkGetQueryPoolResults
            ),
        };
        let data = DeviceData {
            instance,
            physical: pd,
            next_gdpa,
            fns,
            uuid,
            type_heaps,
            budget,
            lost: AtomicBool::new(false),
            allocations: Mutex::new(Handles::default()),
        };
        DEVICES
            .write()
            .unwrap_or_else(|e| e.into_inner())
            // SAFETY: device is the dispatchable handle just created.
            .insert(unsafe { key(device) }, Arc::new(data));
        GENERATION.fetch_add(1, Ordering::AcqRel);
        vk::Result::SUCCESS
    })
}

unsafe extern "system" fn destroy_device(
    device: vk::Device,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    entry(Call::Setup, (), || {
        if device == vk::Device::null() {
            return;
        }
        let data = DEVICES
            .write()
            .unwrap_or_else(|e| e.into_inner())
            // SAFETY: device is a dispatchable handle.
            .remove(&unsafe { key(device) });
        GENERATION.fetch_add(1, Ordering::AcqRel);
        if let Some(f) = data.and_then(|d| d.fns.destroy_device) {
            // SAFETY: the application's arguments, passed down.
            unsafe { f(device, p_allocator) };
        }
    })
}

// ---------------------------------------------------------------------------------------
// Memory.

unsafe extern "system" fn allocate_memory(
    device: vk::Device,
    p_allocate_info: *const vk::MemoryAllocateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_memory: *mut vk::DeviceMemory,
) -> vk::Result {
    entry(
        Call::AllocateMemory,
        vk::Result::ERROR_INITIALIZATION_FAILED,
        || {
            let Some(data) = device_of(device) else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            let Some(f) = data.fns.allocate_memory else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            // SAFETY: the application's arguments, passed down.
            let result = unsafe { f(device, p_allocate_info, p_allocator, p_memory) };
            traced(Call::AllocateMemory, || {
                // SAFETY: the application's allocate info (the call above would have
                // failed on null), and on success the memory it wrote.
                let (info, memory) = unsafe {
                    (
                        p_allocate_info.as_ref(),
                        (result == vk::Result::SUCCESS).then(|| *p_memory),
                    )
                };
                if let Some(info) = info {
                    data.allocated(info, memory, result);
                }
            });
            result
        },
    )
}

unsafe extern "system" fn free_memory(
    device: vk::Device,
    memory: vk::DeviceMemory,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    entry(Call::AllocateMemory, (), || {
        let Some(data) = device_of(device) else {
            return;
        };
        if memory != vk::DeviceMemory::null() {
            traced(Call::AllocateMemory, || data.freed(memory));
        }
        if let Some(f) = data.fns.free_memory {
            // SAFETY: the application's arguments, passed down.
            unsafe { f(device, memory, p_allocator) };
        }
    })
}

// ---------------------------------------------------------------------------------------
// Calls whose failure is recorded: each passes its arguments down and records a device
// loss or an out-of-memory answer.

macro_rules! watched {
    ($name:ident, $field:ident, $call:expr, ($h:ident: $hty:ty $(, $a:ident: $aty:ty)*)) => {
        unsafe extern "system" fn $name($h: $hty $(, $a: $aty)*) -> vk::Result {
            entry($call, vk::Result::ERROR_INITIALIZATION_FAILED, || {
                let Some(data) = device_of($h) else {
                    return vk::Result::ERROR_INITIALIZATION_FAILED;
                };
                let Some(f) = data.fns.$field else {
                    return vk::Result::ERROR_INITIALIZATION_FAILED;
                };
                // SAFETY: the application's arguments, passed down.
                let result = unsafe { f($h $(, $a)*) };
                if result.as_raw() < 0 {
                    traced($call, || data.failed($call, result, 0));
                }
                result
            })
        }
    };
}

watched!(queue_submit, queue_submit, Call::QueueSubmit,
    (queue: vk::Queue, count: u32, submits: *const vk::SubmitInfo<'_>, fence: vk::Fence));
watched!(queue_submit2, queue_submit2, Call::QueueSubmit,
    (queue: vk::Queue, count: u32, submits: *const vk::SubmitInfo2<'_>, fence: vk::Fence));
watched!(queue_submit2_khr, queue_submit2_khr, Call::QueueSubmit,
    (queue: vk::Queue, count: u32, submits: *const vk::SubmitInfo2<'_>, fence: vk::Fence));
watched!(queue_wait_idle, queue_wait_idle, Call::QueueWaitIdle,
    (queue: vk::Queue));
watched!(device_wait_idle, device_wait_idle, Call::DeviceWaitIdle,
    (device: vk::Device));
watched!(wait_for_fences, wait_for_fences, Call::WaitForFences,
    (device: vk::Device, count: u32, fences: *const vk::Fence, all: vk::Bool32, timeout: u64));
watched!(get_fence_status, get_fence_status, Call::GetFenceStatus,
    (device: vk::Device, fence: vk::Fence));
watched!(wait_semaphores, wait_semaphores, Call::WaitSemaphores,
    (device: vk::Device, info: *const vk::SemaphoreWaitInfo<'_>, timeout: u64));
watched!(wait_semaphores_khr, wait_semaphores_khr, Call::WaitSemaphores,
    (device: vk::Device, info: *const vk::SemaphoreWaitInfo<'_>, timeout: u64));
watched!(queue_present, queue_present, Call::QueuePresent,
    (queue: vk::Queue, info: *const vk::PresentInfoKHR<'_>));
watched!(acquire_next_image, acquire_next_image, Call::AcquireNextImage,
    (device: vk::Device, swapchain: vk::SwapchainKHR, timeout: u64, semaphore: vk::Semaphore,
     fence: vk::Fence, index: *mut u32));
watched!(map_memory, map_memory, Call::MapMemory,
    (device: vk::Device, memory: vk::DeviceMemory, offset: vk::DeviceSize, size: vk::DeviceSize,
     flags: vk::MemoryMapFlags, data: *mut *mut c_void));
watched!(bind_buffer_memory, bind_buffer_memory, Call::BindMemory,
    (device: vk::Device, buffer: vk::Buffer, memory: vk::DeviceMemory, offset: vk::DeviceSize));
watched!(bind_image_memory, bind_image_memory, Call::BindMemory,
    (device: vk::Device, image: vk::Image, memory: vk::DeviceMemory, offset: vk::DeviceSize));
watched!(get_query_pool_results, get_query_pool_results,
    Call::GetQueryPoolResults,
    (device: vk::Device, pool: vk::QueryPool, first: u32, count: u32, size: usize,
     data: *mut c_void, stride: vk::DeviceSize, flags: vk::QueryResultFlags));

/// `vkCreateBuffer`, watched as the others are, its refusal recorded with the size asked
/// for (a request the driver refused is the evidence of an over-the-limit step).
unsafe extern "system" fn create_buffer(
    device: vk::Device,
    p_create_info: *const vk::BufferCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_buffer: *mut vk::Buffer,
) -> vk::Result {
    entry(
        Call::CreateResource,
        vk::Result::ERROR_INITIALIZATION_FAILED,
        || {
            let Some(data) = device_of(device) else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            let Some(f) = data.fns.create_buffer else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            // SAFETY: the application's arguments, passed down.
            let result = unsafe { f(device, p_create_info, p_allocator, p_buffer) };
            traced(Call::CreateResource, || {
                // SAFETY: the application's create info, or null.
                let bytes = unsafe { p_create_info.as_ref() }.map_or(0, |i| i.size);
                if result == vk::Result::SUCCESS {
                    // SAFETY: on success the driver wrote the buffer.
                    let buffer = unsafe { p_buffer.as_ref() }.map(|b| b.as_raw());
                    data.resource(Call::CreateResource, buffer, bytes);
                } else if result.as_raw() < 0 {
                    data.failed(Call::CreateResource, result, bytes);
                }
            });
            result
        },
    )
}

/// `vkCreateImage`, watched as the others are, and each image it made recorded with its
/// size as the driver's memory requirements say it (an image's create info gives no
/// bytes).
unsafe extern "system" fn create_image(
    device: vk::Device,
    p_create_info: *const vk::ImageCreateInfo<'_>,
    p_allocator: *const vk::AllocationCallbacks<'_>,
    p_image: *mut vk::Image,
) -> vk::Result {
    entry(
        Call::CreateImage,
        vk::Result::ERROR_INITIALIZATION_FAILED,
        || {
            let Some(data) = device_of(device) else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            let Some(f) = data.fns.create_image else {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            };
            // SAFETY: the application's arguments, passed down.
            let result = unsafe { f(device, p_create_info, p_allocator, p_image) };
            traced(Call::CreateImage, || {
                if result == vk::Result::SUCCESS {
                    // SAFETY: on success the driver wrote the image.
                    let Some(image) = (unsafe { p_image.as_ref() }).copied() else {
                        return;
                    };
                    let mut needs = vk::MemoryRequirements::default();
                    if let Some(req) = data.fns.image_requirements {
                        // SAFETY: an image of this device, just made.
                        unsafe { req(device, image, &mut needs) };
                    }
                    data.resource(Call::CreateImage, Some(image.as_raw()), needs.size);
                } else if result.as_raw() < 0 {
                    data.failed(Call::CreateImage, result, 0);
                }
            });
            result
        },
    )
}

/// `vkDestroyBuffer`: the buffer's end recorded, the call passed down.
unsafe extern "system" fn destroy_buffer(
    device: vk::Device,
    buffer: vk::Buffer,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    entry(Call::CreateResource, (), || {
        let Some(data) = device_of(device) else {
            return;
        };
        if buffer != vk::Buffer::null() {
            traced(Call::CreateResource, || {
                data.resource_destroyed(Call::CreateResource, buffer.as_raw());
            });
        }
        if let Some(f) = data.fns.destroy_buffer {
            // SAFETY: the application's arguments, passed down.
            unsafe { f(device, buffer, p_allocator) };
        }
    })
}

/// `vkDestroyImage`: the image's end recorded, the call passed down.
unsafe extern "system" fn destroy_image(
    device: vk::Device,
    image: vk::Image,
    p_allocator: *const vk::AllocationCallbacks<'_>,
) {
    entry(Call::CreateImage, (), || {
        let Some(data) = device_of(device) else {
            return;
        };
        if image != vk::Image::null() {
            traced(Call::CreateImage, || {
                data.resource_destroyed(Call::CreateImage, image.as_raw());
            });
        }
        if let Some(f) = data.fns.destroy_image {
            // SAFETY: the application's arguments, passed down.
            unsafe { f(device, image, p_allocator) };
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_of_the_layer_never_reaches_the_application() {
        // The body's answer where it runs to its end; the fallback where the layer's own
        // code panics, and the tracing stopped from then on, the panic said nowhere.
        assert_eq!(entry(Call::Setup, 0, || 5), 5);
        assert!(!STOPPED.load(Ordering::Acquire));
        let mut recorded = false;
        traced(Call::AllocateMemory, || recorded = true);
        assert!(recorded, "traced while not stopped");
        assert_eq!(
            entry(Call::Setup, 7, || -> i32 { panic!("a bug of kiln's") }),
            7
        );
        assert!(STOPPED.load(Ordering::Acquire));
        let mut after = false;
        traced(Call::AllocateMemory, || after = true);
        assert!(!after, "nothing is recorded once the tracing stopped");
        // The call still passes through after a stop.
        assert_eq!(entry(Call::Setup, 0, || 3), 3);
    }
}
