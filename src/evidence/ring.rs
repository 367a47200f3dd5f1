//! The allocation trace's shared ring: a file that kiln's Vulkan layer (`layer/`, loaded
//! into an application `kiln watch` starts) appends records to, and that `kiln watch`
//! drains into `trace.jsonl`. The file outlives both: a record the layer wrote is in the
//! page cache the moment it is written, so an application that crashes, or a kiln that is
//! killed, loses nothing already written, and `kiln verdict` drains what is left.
//!
//! Layout: a header of [`HEADER_BYTES`], then [`Header::slots`] slots of [`SLOT_BYTES`],
//! all little-endian 64-bit words. A writer (any process of the watched tree) claims the
//! next sequence number from the header's cursor, writes its slot's payload and check
//! word, and writes the slot's sequence word last: a slot whose sequence word and check
//! agree is whole. A reader needs no lock and no shared mapping: it reads the file, and a
//! slot it reads half-written fails its check and is read again on the next drain. The
//! header also counts every allocation, free and failure per size class, so the histogram
//! stays exact even when the reader falls a whole ring behind and records are lost.
//!
//! The layer's crate compiles this very file (`#[path]`), so writer and reader cannot
//! disagree on the layout; it may use nothing but `std` and `thiserror`.

use std::sync::atomic::{AtomicU64, Ordering};

/// `KILNTRC1`, the file's first word.
pub const MAGIC: u64 = u64::from_le_bytes(*b"KILNTRC1");
/// The layout's version; a layer and a kiln of different versions do not share a ring.
/// Version 2 added the application's buffers and images ([`RecordKind::Resource`]).
pub const VERSION: u64 = 2;
/// The header's size: one page.
pub const HEADER_BYTES: u64 = 4096;
/// One slot: eight words.
pub const SLOT_BYTES: u64 = 64;
/// Words per slot.
const SLOT_WORDS: usize = 8;
/// The slots of a ring kiln makes: 16 MiB of file, tens of seconds of the busiest
/// application's allocations between two drains.
pub const DEFAULT_SLOTS: u64 = 1 << 18;
/// Size classes: class `k` holds sizes in (2^(k-1), 2^k] bytes, class 0 sizes 0 and 1.
pub const SIZE_CLASSES: usize = 48;

/// Header words, by index.
mod word {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 1;
    pub const SLOTS: usize = 2;
    pub const STARTED_UNIX_NS: usize = 3;
    pub const CURSOR: usize = 4;
    pub const ATTACHED: usize = 5;
    pub const LOST_DEVICE_CALLS: usize = 6;
    /// Three words per size class: allocations, frees, failed allocations.
    pub const CLASSES: usize = 16;
}

/// The size class of an allocation of `bytes`.
pub fn size_class(bytes: u64) -> usize {
    let k = if bytes <= 1 {
        0
    } else {
        (64 - (bytes - 1).leading_zeros()) as usize
    };
    k.min(SIZE_CLASSES - 1)
}

/// The largest size of class `k`, in bytes (the class holds sizes above half of it).
pub fn class_limit_bytes(k: usize) -> u64 {
    1u64.checked_shl(k as u32).unwrap_or(u64::MAX)
}

/// What a record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// A process loaded the layer and attached to the ring.
    Attach,
    /// The application created a device: `bytes` is `maxMemoryAllocationSize`, `memory`
    /// its `maxMemoryAllocationCount` (each 0 where the application's Vulkan cannot say).
    Device,
    /// One memory heap of a device created: `heap`, its size in `bytes`, and in `memory`
    /// 1 when it is device-local.
    Heap,
    /// One memory type of a device created: `memory_type`, its `heap`, and in `memory` its
    /// property flags.
    MemoryType,
    /// `vkAllocateMemory` succeeded: `bytes` in `memory_type` of `heap`, handle `memory`.
    Alloc,
    /// `vkAllocateMemory` failed with `result`.
    AllocFailed,
    /// `vkFreeMemory` of the handle `memory` (its size and type as allocated).
    Free,
    /// A call (`call`) returned `VK_ERROR_DEVICE_LOST`.
    DeviceLost,
    /// A call other than `vkAllocateMemory` returned an out-of-memory error (`result`);
    /// `bytes` is the size asked for where the call says it (`vkCreateBuffer`), else 0.
    OutOfMemory,
    /// The driver's memory budget of `heap` when an allocation failed: the budget in
    /// `bytes`, the process's usage in `memory`.
    Budget,
    /// The layer stopped tracing in this process: its own code failed in `call` (a bug
    /// of kiln's, caught before it could reach the application). Nothing after it is
    /// recorded for the process; the application goes on unchanged.
    Stopped,
    /// The application created a buffer (`call` [`Call::CreateResource`]) or an image
    /// ([`Call::CreateImage`]): its handle in `memory`, its size in `bytes` (a buffer's
    /// own, an image's as the driver's memory requirements say it). What it keeps, in
    /// its own sizes, where its allocator places many in each block it allocates.
    Resource,
    /// The application destroyed the buffer or image of handle `memory` (`call` as at
    /// its creation).
    ResourceDestroyed,
}

impl RecordKind {
    const ALL: [RecordKind; 13] = [
        RecordKind::Attach,
        RecordKind::Device,
        RecordKind::Heap,
        RecordKind::MemoryType,
        RecordKind::Alloc,
        RecordKind::AllocFailed,
        RecordKind::Free,
        RecordKind::DeviceLost,
        RecordKind::OutOfMemory,
        RecordKind::Budget,
        RecordKind::Stopped,
        RecordKind::Resource,
        RecordKind::ResourceDestroyed,
    ];

    fn code(self) -> u64 {
        RecordKind::ALL
            .iter()
            .position(|k| *k == self)
            .map_or(0, |i| i as u64 + 1)
    }

    fn from_code(code: u64) -> Option<RecordKind> {
        let i = usize::try_from(code.checked_sub(1)?).ok()?;
        RecordKind::ALL.get(i).copied()
    }
}

/// The Vulkan call a record is about (for device losses and out-of-memory errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Not a call's record.
    None,
    /// `vkAllocateMemory`.
    AllocateMemory,
    /// `vkQueueSubmit`, `vkQueueSubmit2`.
    QueueSubmit,
    /// `vkQueueWaitIdle`.
    QueueWaitIdle,
    /// `vkDeviceWaitIdle`.
    DeviceWaitIdle,
    /// `vkWaitForFences`.
    WaitForFences,
    /// `vkGetFenceStatus`.
    GetFenceStatus,
    /// `vkWaitSemaphores`.
    WaitSemaphores,
    /// `vkQueuePresentKHR`.
    QueuePresent,
    /// `vkAcquireNextImageKHR`.
    AcquireNextImage,
    /// `vkMapMemory`.
    MapMemory,
    /// `vkBindBufferMemory`, `vkBindImageMemory` and their second versions.
    BindMemory,
    /// `vkCreateBuffer`.
    CreateResource,
    /// `vkGetQueryPoolResults`.
    GetQueryPoolResults,
    /// `vkCreateImage`.
    CreateImage,
    /// `vkCreateInstance`, `vkCreateDevice` and the layer's other bookkeeping.
    Setup,
}

impl Call {
    const ALL: [Call; 16] = [
        Call::None,
        Call::AllocateMemory,
        Call::QueueSubmit,
        Call::QueueWaitIdle,
        Call::DeviceWaitIdle,
        Call::WaitForFences,
        Call::GetFenceStatus,
        Call::WaitSemaphores,
        Call::QueuePresent,
        Call::AcquireNextImage,
        Call::MapMemory,
        Call::BindMemory,
        Call::CreateResource,
        Call::GetQueryPoolResults,
        Call::CreateImage,
        Call::Setup,
    ];

    fn code(self) -> u64 {
        Call::ALL.iter().position(|c| *c == self).unwrap_or(0) as u64
    }

    fn from_code(code: u64) -> Call {
        usize::try_from(code)
            .ok()
            .and_then(|i| Call::ALL.get(i).copied())
            .unwrap_or(Call::None)
    }

    /// The Vulkan command's name.
    pub fn name(self) -> &'static str {
        match self {
            Call::None => "",
            Call::AllocateMemory => "vkAllocateMemory",
            Call::QueueSubmit => "vkQueueSubmit",
            Call::QueueWaitIdle => "vkQueueWaitIdle",
            Call::DeviceWaitIdle => "vkDeviceWaitIdle",
            Call::WaitForFences => "vkWaitForFences",
            Call::GetFenceStatus => "vkGetFenceStatus",
            Call::WaitSemaphores => "vkWaitSemaphores",
            Call::QueuePresent => "vkQueuePresentKHR",
            Call::AcquireNextImage => "vkAcquireNextImageKHR",
            Call::MapMemory => "vkMapMemory",
            Call::BindMemory => "vkBindBufferMemory",
            Call::CreateResource => "vkCreateBuffer",
            Call::GetQueryPoolResults => "vkGetQueryPoolResults",
            Call::CreateImage => "vkCreateImage",
            Call::Setup => "vkCreateInstance/vkCreateDevice",
        }
    }
}

/// One record of the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// What it says.
    pub kind: RecordKind,
    /// The call it is about.
    pub call: Call,
    /// The process that wrote it.
    pub pid: u32,
    /// When, in nanoseconds since the Unix epoch.
    pub t_unix_ns: u64,
    /// The device: the first eight bytes of its `deviceUUID`, little-endian.
    pub device: u64,
    /// A size in bytes (see [`RecordKind`]).
    pub bytes: u64,
    /// A handle or a count (see [`RecordKind`]).
    pub memory: u64,
    /// A heap index.
    pub heap: u16,
    /// A memory type index.
    pub memory_type: u16,
    /// A `VkResult`.
    pub result: i32,
}

impl Record {
    /// A record of `kind` with every other field empty.
    pub fn new(kind: RecordKind) -> Record {
        Record {
            kind,
            call: Call::None,
            pid: 0,
            t_unix_ns: 0,
            device: 0,
            bytes: 0,
            memory: 0,
            heap: 0,
            memory_type: 0,
            result: 0,
        }
    }

    /// The payload words (all but the sequence and check words).
    fn payload(&self) -> [u64; 6] {
        [
            self.kind.code() | (self.call.code() << 8) | (u64::from(self.pid) << 32),
            self.t_unix_ns,
            self.device,
            self.bytes,
            self.memory,
            u64::from(self.heap)
                | (u64::from(self.memory_type) << 16)
                | (u64::from(self.result as u32) << 32),
        ]
    }

    fn from_payload(p: &[u64; 6]) -> Option<Record> {
        Some(Record {
            kind: RecordKind::from_code(p[0] & 0xff)?,
            call: Call::from_code((p[0] >> 8) & 0xff),
            pid: (p[0] >> 32) as u32,
            t_unix_ns: p[1],
            device: p[2],
            bytes: p[3],
            memory: p[4],
            heap: (p[5] & 0xffff) as u16,
            memory_type: ((p[5] >> 16) & 0xffff) as u16,
            result: (p[5] >> 32) as u32 as i32,
        })
    }
}

/// The check word of a slot: the sequence number and the payload mixed, so that a slot
/// read while another process wrote it (or a lap later) does not pass for whole.
fn check(seq: u64, payload: &[u64; 6]) -> u64 {
    let mut h = seq ^ 0x9e37_79b9_7f4a_7c15;
    for w in payload {
        h = mix(h ^ w);
    }
    h
}

/// splitmix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The bytes of a new ring's file: its header, the slots left to the file's holes.
pub fn new_header(slots: u64, started_unix_ns: u64) -> Vec<u8> {
    let mut words = vec![0u64; (HEADER_BYTES / 8) as usize];
    words[word::MAGIC] = MAGIC;
    words[word::VERSION] = VERSION;
    words[word::SLOTS] = slots;
    words[word::STARTED_UNIX_NS] = started_unix_ns;
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The length of a ring's file with `slots` slots.
pub fn file_bytes(slots: u64) -> u64 {
    HEADER_BYTES + slots * SLOT_BYTES
}

/// A ring as a writer sees it: the words of a shared mapping of its file.
pub struct RingWriter<'a> {
    words: &'a [AtomicU64],
    slots: u64,
}

impl<'a> RingWriter<'a> {
    /// The ring in `words` (the whole file), or None when it is not a ring of this layout
    /// or is shorter than its header says.
    pub fn new(words: &'a [AtomicU64]) -> Option<RingWriter<'a>> {
        let at = |i: usize| words.get(i).map(|w| w.load(Ordering::Acquire));
        if at(word::MAGIC)? != MAGIC || at(word::VERSION)? != VERSION {
            return None;
        }
        let slots = at(word::SLOTS)?;
        let needed = usize::try_from(file_bytes(slots) / 8).ok()?;
        (slots > 0 && words.len() >= needed).then_some(RingWriter { words, slots })
    }

    /// Appends `record`; the slot a lap behind is overwritten if the reader has not
    /// drained it (the reader counts it lost).
    pub fn push(&self, record: &Record) {
        let seq = self.words[word::CURSOR].fetch_add(1, Ordering::AcqRel);
        let base = (HEADER_BYTES / 8) as usize + (seq % self.slots) as usize * SLOT_WORDS;
        let payload = record.payload();
        // Mark the slot as being written, so that a reader never takes the old payload
        // with the new sequence number.
        self.words[base].store(0, Ordering::Release);
        for (i, w) in payload.iter().enumerate() {
            self.words[base + 1 + i].store(*w, Ordering::Relaxed);
        }
        self.words[base + 7].store(check(seq, &payload), Ordering::Relaxed);
        self.words[base].store(seq + 1, Ordering::Release);
    }

    /// Counts one call of `op` for an allocation of `bytes`.
    pub fn count(&self, op: Counted, bytes: u64) {
        let i = word::CLASSES + size_class(bytes) * 3 + op as usize;
        self.words[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a process attaching.
    pub fn attached(&self) {
        self.words[word::ATTACHED].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a call that returned `VK_ERROR_DEVICE_LOST` after the first of its device
    /// (only the first is a record).
    pub fn lost_again(&self) {
        self.words[word::LOST_DEVICE_CALLS].fetch_add(1, Ordering::Relaxed);
    }

    /// The run's start as kiln wrote it, in nanoseconds since the Unix epoch.
    pub fn started_unix_ns(&self) -> u64 {
        self.words[word::STARTED_UNIX_NS].load(Ordering::Relaxed)
    }
}

/// What the header counts per size class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// A successful `vkAllocateMemory`.
    Alloc = 0,
    /// A `vkFreeMemory` of an allocation the layer saw.
    Free = 1,
    /// A failed `vkAllocateMemory`.
    Failed = 2,
}

/// Why a file is not a ring kiln can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// Shorter than a header.
    #[error("shorter than a trace ring's header ({0} bytes)")]
    Short(usize),
    /// Not a ring, or a ring of another layout.
    #[error("not a kiln trace ring of version {VERSION}")]
    NotARing,
}

/// A ring's header, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Its slots.
    pub slots: u64,
    /// The run's start, in nanoseconds since the Unix epoch.
    pub started_unix_ns: u64,
    /// Records claimed so far (the next sequence number).
    pub cursor: u64,
    /// Processes that attached.
    pub attached: u64,
    /// Calls that returned `VK_ERROR_DEVICE_LOST` after each device's first.
    pub lost_device_calls: u64,
    /// Per size class: allocations, frees, failed allocations.
    pub classes: Vec<[u64; 3]>,
}

/// The header at the start of a ring's file.
pub fn read_header(bytes: &[u8]) -> Result<Header, RingError> {
    if bytes.len() < HEADER_BYTES as usize {
        return Err(RingError::Short(bytes.len()));
    }
    let w = |i: usize| le_word(&bytes[i * 8..i * 8 + 8]);
    if w(word::MAGIC) != MAGIC || w(word::VERSION) != VERSION || w(word::SLOTS) == 0 {
        return Err(RingError::NotARing);
    }
    let classes = (0..SIZE_CLASSES)
        .map(|k| {
            let i = word::CLASSES + k * 3;
            [w(i), w(i + 1), w(i + 2)]
        })
        .collect();
    Ok(Header {
        slots: w(word::SLOTS),
        started_unix_ns: w(word::STARTED_UNIX_NS),
        cursor: w(word::CURSOR),
        attached: w(word::ATTACHED),
        lost_device_calls: w(word::LOST_DEVICE_CALLS),
        classes,
    })
}

fn le_word(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// The byte offset in the file of the slot of sequence number `seq`.
pub fn slot_offset(header: &Header, seq: u64) -> u64 {
    HEADER_BYTES + (seq % header.slots) * SLOT_BYTES
}

/// What a slot held when read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The record of the sequence number asked for, whole.
    Whole(Record),
    /// Not written yet, or read while being written: read it again later.
    Pending,
    /// A later lap's record: the one asked for was overwritten before it was read.
    Overwritten,
}

/// Decodes the 64 bytes of the slot expected to hold sequence number `seq`.
pub fn decode_slot(seq: u64, bytes: &[u8]) -> Slot {
    if bytes.len() < SLOT_BYTES as usize {
        return Slot::Pending;
    }
    let w = |i: usize| le_word(&bytes[i * 8..i * 8 + 8]);
    let marker = w(0);
    if marker == 0 || marker <= seq {
        return Slot::Pending;
    }
    let payload = [w(1), w(2), w(3), w(4), w(5), w(6)];
    if marker > seq + 1 {
        // Written by a later lap, whole or not: the record asked for is gone.
        return Slot::Overwritten;
    }
    if check(seq, &payload) != w(7) {
        return Slot::Pending;
    }
    match Record::from_payload(&payload) {
        Some(r) => Slot::Whole(r),
        None => Slot::Pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(slots: u64) -> Vec<AtomicU64> {
        let header = new_header(slots, 1_000);
        let mut words: Vec<AtomicU64> = header
            .chunks(8)
            .map(|c| AtomicU64::new(le_word(c)))
            .collect();
        words.resize_with((file_bytes(slots) / 8) as usize, || AtomicU64::new(0));
        words
    }

    fn bytes(words: &[AtomicU64]) -> Vec<u8> {
        words
            .iter()
            .flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes())
            .collect()
    }

    fn alloc(n: u64) -> Record {
        Record {
            kind: RecordKind::Alloc,
            call: Call::AllocateMemory,
            pid: 4242,
            t_unix_ns: 5_000 + n,
            device: 0x1122_3344_5566_7788,
            bytes: 1 << 20,
            memory: 0xdead_0000 + n,
            heap: 0,
            memory_type: 3,
            result: -2,
        }
    }

    #[test]
    fn records_read_back_whole_in_order() {
        let words = ring(8);
        let w = RingWriter::new(&words).unwrap();
        for n in 0..5 {
            w.push(&alloc(n));
        }
        let file = bytes(&words);
        let h = read_header(&file).unwrap();
        assert_eq!((h.slots, h.cursor, h.started_unix_ns), (8, 5, 1_000));
        for seq in 0..5 {
            let at = slot_offset(&h, seq) as usize;
            assert_eq!(
                decode_slot(seq, &file[at..at + 64]),
                Slot::Whole(alloc(seq))
            );
        }
        // The next is not written yet.
        let at = slot_offset(&h, 5) as usize;
        assert_eq!(decode_slot(5, &file[at..at + 64]), Slot::Pending);
    }

    #[test]
    fn a_slot_a_lap_ahead_is_overwritten_and_a_torn_one_is_pending() {
        let words = ring(4);
        let w = RingWriter::new(&words).unwrap();
        for n in 0..6 {
            w.push(&alloc(n));
        }
        let mut file = bytes(&words);
        let h = read_header(&file).unwrap();
        let at = slot_offset(&h, 1) as usize;
        assert_eq!(decode_slot(1, &file[at..at + 64]), Slot::Overwritten);
        // A payload changed under the sequence word fails its check.
        let at = slot_offset(&h, 5) as usize;
        file[at + 32] ^= 1;
        assert_eq!(decode_slot(5, &file[at..at + 64]), Slot::Pending);
    }

    #[test]
    fn size_classes_count_in_the_header() {
        assert_eq!(size_class(0), 0);
        assert_eq!(size_class(1), 0);
        assert_eq!(size_class(4096), 12);
        assert_eq!(size_class(4097), 13);
        assert_eq!(size_class(1 << 20), 20);
        assert_eq!(size_class(u64::MAX), SIZE_CLASSES - 1);
        assert_eq!(class_limit_bytes(20), 1 << 20);
        let words = ring(4);
        let w = RingWriter::new(&words).unwrap();
        w.count(Counted::Alloc, 1 << 20);
        w.count(Counted::Alloc, 1 << 20);
        w.count(Counted::Free, 1 << 20);
        w.count(Counted::Failed, 3 << 30);
        w.attached();
        let h = read_header(&bytes(&words)).unwrap();
        assert_eq!(h.classes[20], [2, 1, 0]);
        assert_eq!(h.classes[32], [0, 0, 1]);
        assert_eq!(h.attached, 1);
    }

    #[test]
    fn a_file_that_is_not_a_ring_is_refused() {
        assert_eq!(read_header(&[0; 10]), Err(RingError::Short(10)));
        assert_eq!(read_header(&[0; 4096]), Err(RingError::NotARing));
        let words: Vec<AtomicU64> = (0..16).map(|_| AtomicU64::new(0)).collect();
        assert!(RingWriter::new(&words).is_none());
        // A header that promises more slots than the mapping holds.
        let short = ring(64);
        assert!(RingWriter::new(&short[..600]).is_none());
    }
}
