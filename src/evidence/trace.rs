//! A watched application's allocation trace: what kiln's Vulkan layer wrote into the ring
//! ([`super::ring`], the file `trace.ring`), drained as JSON lines into `trace.jsonl`
//! while the application runs. The ring outlives everyone: when kiln was killed before
//! its last drain, [`read_trace`] reads what `trace.jsonl` holds and drains the rest of
//! the ring itself, so the verdict sees every record the layer wrote.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ring::{self, Call, Header, Record, RecordKind, Slot};
use super::{EvidenceError, EvidenceResult};

/// The drained records, one JSON object a line.
pub const TRACE_FILE: &str = "trace.jsonl";
/// The ring the layer writes.
pub const RING_FILE: &str = "trace.ring";

/// A `VkResult` error a call returned, by its name in the evidence
/// (`VK_ERROR_OUT_OF_DEVICE_MEMORY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VkError {
    /// `VK_ERROR_OUT_OF_HOST_MEMORY`.
    OutOfHostMemory,
    /// `VK_ERROR_OUT_OF_DEVICE_MEMORY`.
    OutOfDeviceMemory,
    /// `VK_ERROR_DEVICE_LOST`.
    DeviceLost,
    /// `VK_ERROR_TOO_MANY_OBJECTS`: more allocations than the device allows at once.
    TooManyObjects,
    /// `VK_ERROR_FRAGMENTATION`.
    Fragmentation,
    /// Any other code.
    Other(i32),
}

impl VkError {
    const NAMED: [(VkError, i32, &'static str); 5] = [
        (VkError::OutOfHostMemory, -1, "VK_ERROR_OUT_OF_HOST_MEMORY"),
        (
            VkError::OutOfDeviceMemory,
            -2,
            "VK_ERROR_OUT_OF_DEVICE_MEMORY",
        ),
        (VkError::DeviceLost, -4, "VK_ERROR_DEVICE_LOST"),
        (VkError::TooManyObjects, -10, "VK_ERROR_TOO_MANY_OBJECTS"),
        (
            VkError::Fragmentation,
            -1_000_161_000,
            "VK_ERROR_FRAGMENTATION",
        ),
    ];

    /// The error of a raw `VkResult`.
    pub fn from_raw(raw: i32) -> VkError {
        VkError::NAMED
            .iter()
            .find(|(_, r, _)| *r == raw)
            .map_or(VkError::Other(raw), |(e, _, _)| *e)
    }

    /// Its name as Vulkan spells it.
    pub fn name(self) -> String {
        match VkError::NAMED.iter().find(|(e, _, _)| *e == self) {
            Some((_, _, name)) => (*name).to_owned(),
            None => match self {
                VkError::Other(raw) => format!("VkResult({raw})"),
                _ => String::new(),
            },
        }
    }

    fn from_name(name: &str) -> VkError {
        if let Some((e, _, _)) = VkError::NAMED.iter().find(|(_, _, n)| *n == name) {
            return *e;
        }
        name.strip_prefix("VkResult(")
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|r| r.parse().ok())
            .map_or(VkError::Other(0), VkError::Other)
    }

    /// An answer that says memory ran out (of the device, of the host, of allocation
    /// slots or to fragmentation), as opposed to a lost device.
    pub fn is_memory(self) -> bool {
        !matches!(self, VkError::DeviceLost | VkError::Other(_))
    }
}

impl Serialize for VkError {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for VkError {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(VkError::from_name(&String::deserialize(d)?))
    }
}

/// One line of `trace.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceRecord {
    /// The record's sequence number in the ring (for [`TraceEvent::Counts`], the ring's
    /// cursor when they were read).
    pub seq: u64,
    /// Milliseconds since the watch started (the run's clock).
    pub t_ms: f64,
    /// The process that wrote it.
    pub pid: u32,
    /// What it says.
    #[serde(flatten)]
    pub event: TraceEvent,
}

/// What a trace record says. `device` is the first eight bytes of the device's
/// `deviceUUID` in hex (the first 16 hex digits of a device's UUID), empty where the
/// application's Vulkan could not say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TraceEvent {
    /// A process of the application loaded the layer.
    Attach,
    /// The application created a device.
    Device {
        /// The device.
        device: String,
        /// Its `maxMemoryAllocationSize` (0: not said).
        max_allocation_bytes: u64,
        /// Its `maxMemoryAllocationCount`: allocations it lets live at once (0: not said).
        max_allocations: u64,
    },
    /// One memory heap of a device it created.
    Heap {
        /// The device.
        device: String,
        /// The heap's index.
        heap: u16,
        /// Its size.
        bytes: u64,
        /// Device-local (VRAM).
        device_local: bool,
    },
    /// One memory type of a device it created.
    MemoryType {
        /// The device.
        device: String,
        /// The type's index.
        memory_type: u16,
        /// Its heap.
        heap: u16,
        /// Its `VkMemoryPropertyFlags`.
        flags: u32,
    },
    /// `vkAllocateMemory` succeeded.
    Alloc {
        /// The device.
        device: String,
        /// Its size.
        bytes: u64,
        /// Its heap.
        heap: u16,
        /// Its memory type.
        memory_type: u16,
        /// The `VkDeviceMemory` handle.
        handle: u64,
    },
    /// `vkAllocateMemory` was refused.
    AllocFailed {
        /// The device.
        device: String,
        /// The size asked for.
        bytes: u64,
        /// The heap asked of.
        heap: u16,
        /// The memory type asked for.
        memory_type: u16,
        /// The driver's answer.
        result: VkError,
    },
    /// `vkFreeMemory` of an allocation the layer saw made.
    Free {
        /// The device.
        device: String,
        /// The size freed.
        bytes: u64,
        /// Its heap.
        heap: u16,
        /// Its memory type.
        memory_type: u16,
        /// The handle.
        handle: u64,
    },
    /// The device's first `VK_ERROR_DEVICE_LOST`.
    DeviceLost {
        /// The device.
        device: String,
        /// The call that returned it.
        call: String,
    },
    /// A call other than an allocation answered out-of-memory.
    OutOfMemory {
        /// The device.
        device: String,
        /// The call.
        call: String,
        /// The answer.
        result: VkError,
        /// The size the call asked for, where it says one (`vkCreateBuffer`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_bytes: Option<u64>,
    },
    /// The application created a buffer or an image: its own size, which its allocator
    /// may place with others in one allocation.
    Resource {
        /// The device.
        device: String,
        /// A buffer or an image.
        resource: ResourceKind,
        /// Its size (an image's as the driver's memory requirements say it).
        bytes: u64,
        /// Its handle.
        handle: u64,
    },
    /// The application destroyed a buffer or an image it created.
    ResourceDestroyed {
        /// The device.
        device: String,
        /// A buffer or an image.
        resource: ResourceKind,
        /// Its handle.
        handle: u64,
    },
    /// The layer stopped tracing a process: its own code failed (caught before it could
    /// reach the application, which went on unchanged); nothing later of that process is
    /// in the trace.
    Stopped {
        /// The call the layer was in.
        call: String,
    },
    /// The driver's memory budget of a heap when an allocation was refused.
    Budget {
        /// The device.
        device: String,
        /// The heap.
        heap: u16,
        /// What the driver would let the process have.
        budget_bytes: u64,
        /// What the process had.
        usage_bytes: u64,
    },
    /// The ring's own counts when it was drained: exact even when records were lost.
    Counts {
        /// Processes that attached.
        attached: u64,
        /// Calls that returned `VK_ERROR_DEVICE_LOST` after each device's first.
        lost_device_calls: u64,
        /// Records overwritten before they were drained, or torn.
        lost_records: u64,
        /// Per size class `k` (sizes up to 2^k bytes): allocations, frees, refusals.
        classes: Vec<[u64; 3]>,
    },
}

/// What the application created: a buffer or an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// `vkCreateBuffer`.
    Buffer,
    /// `vkCreateImage`.
    Image,
}

impl ResourceKind {
    /// The kind a record's call names.
    fn of(call: Call) -> ResourceKind {
        if call == Call::CreateImage {
            ResourceKind::Image
        } else {
            ResourceKind::Buffer
        }
    }

    /// Its name, plural, as people say it.
    pub fn plural(self) -> &'static str {
        match self {
            ResourceKind::Buffer => "buffers",
            ResourceKind::Image => "images",
        }
    }
}

/// The hex of a record's device word, as [`TraceEvent`] gives it.
fn device_hex(word: u64) -> String {
    if word == 0 {
        return String::new();
    }
    word.to_le_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// True when a device's UUID (`6d657361-3232-...`, dashes allowed) is the one a trace's
/// `device` names.
pub fn same_device(uuid: &str, traced: &str) -> bool {
    let digits: String = uuid
        .chars()
        .filter(char::is_ascii_hexdigit)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    !traced.is_empty() && digits.starts_with(traced)
}

/// A ring record as a trace line, timed from the ring's start.
fn line_of(seq: u64, r: &Record, started_unix_ns: u64) -> TraceRecord {
    let device = device_hex(r.device);
    let event = match r.kind {
        RecordKind::Attach => TraceEvent::Attach,
        RecordKind::Device => TraceEvent::Device {
            device,
            max_allocation_bytes: r.bytes,
            max_allocations: r.memory,
        },
        RecordKind::Heap => TraceEvent::Heap {
            device,
            heap: r.heap,
            bytes: r.bytes,
            device_local: r.memory != 0,
        },
        RecordKind::MemoryType => TraceEvent::MemoryType {
            device,
            memory_type: r.memory_type,
            heap: r.heap,
            flags: r.memory as u32,
        },
        RecordKind::Alloc => TraceEvent::Alloc {
            device,
            bytes: r.bytes,
            heap: r.heap,
            memory_type: r.memory_type,
            handle: r.memory,
        },
        RecordKind::AllocFailed => TraceEvent::AllocFailed {
            device,
            bytes: r.bytes,
            heap: r.heap,
            memory_type: r.memory_type,
            result: VkError::from_raw(r.result),
        },
        RecordKind::Free => TraceEvent::Free {
            device,
            bytes: r.bytes,
            heap: r.heap,
            memory_type: r.memory_type,
            handle: r.memory,
        },
        RecordKind::DeviceLost => TraceEvent::DeviceLost {
            device,
            call: call_name(r.call),
        },
        RecordKind::OutOfMemory => TraceEvent::OutOfMemory {
            device,
            call: call_name(r.call),
            result: VkError::from_raw(r.result),
            request_bytes: (r.bytes > 0).then_some(r.bytes),
        },
        RecordKind::Stopped => TraceEvent::Stopped {
            call: call_name(r.call),
        },
        RecordKind::Resource => TraceEvent::Resource {
            device,
            resource: ResourceKind::of(r.call),
            bytes: r.bytes,
            handle: r.memory,
        },
        RecordKind::ResourceDestroyed => TraceEvent::ResourceDestroyed {
            device,
            resource: ResourceKind::of(r.call),
            handle: r.memory,
        },
        RecordKind::Budget => TraceEvent::Budget {
            device,
            heap: r.heap,
            budget_bytes: r.bytes,
            usage_bytes: r.memory,
        },
    };
    TraceRecord {
        seq,
        t_ms: r.t_unix_ns.saturating_sub(started_unix_ns) as f64 / 1e6,
        pid: r.pid,
        event,
    }
}

fn call_name(call: Call) -> String {
    call.name().to_owned()
}

/// Makes a ring of `slots` slots at `path` for a watch that started at `started_unix_ns`:
/// its header written, the slots left to the file's holes.
pub fn create_ring(path: &Path, slots: u64, started_unix_ns: u64) -> EvidenceResult<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(path)
        .map_err(|e| EvidenceError::io(path, e))?;
    file.write_all(&ring::new_header(slots, started_unix_ns))
        .and_then(|()| file.set_len(ring::file_bytes(slots)))
        .map_err(|e| EvidenceError::io(path, e))
}

/// Reads a ring's records as they are written, each once.
pub struct Drainer {
    path: PathBuf,
    /// The next sequence number to read.
    next: u64,
    /// A slot found half written, and how many drains found it so.
    stuck: Option<(u64, u32)>,
    /// Records lost so far (overwritten before they were read, or torn).
    lost: u64,
}

/// How many drains a half-written slot is waited for before it is taken for torn (its
/// writer died mid-record).
const STUCK_DRAINS: u32 = 3;

impl Drainer {
    /// A drainer of the ring at `path`, from its first record.
    pub fn new(path: &Path) -> Drainer {
        Drainer::from_seq(path, 0)
    }

    /// A drainer of the ring at `path` from sequence number `next`.
    pub fn from_seq(path: &Path, next: u64) -> Drainer {
        Drainer {
            path: path.to_owned(),
            next,
            stuck: None,
            lost: 0,
        }
    }

    /// How many records the writers are ahead of this drainer (reads the header alone):
    /// a drainer falling a ring behind loses records, so the watch drains early when
    /// this passes a share of the ring's slots.
    pub fn behind(&self) -> Option<(u64, u64)> {
        let mut file = std::fs::File::open(&self.path).ok()?;
        let mut head = vec![0u8; ring::HEADER_BYTES as usize];
        file.read_exact(&mut head).ok()?;
        let header = ring::read_header(&head).ok()?;
        Some((header.cursor.saturating_sub(self.next), header.slots))
    }

    /// The records written since the last drain, then a [`TraceEvent::Counts`] line. With
    /// `last` (every writer has ended) a slot still half written is torn, not waited for.
    pub fn drain(&mut self, last: bool, now_ms: f64) -> EvidenceResult<Vec<TraceRecord>> {
        let corrupt = |message: String| {
            EvidenceError::File(crate::fsutil::FileError::NotKilns {
                path: self.path.clone(),
                message,
            })
        };
        let mut file =
            std::fs::File::open(&self.path).map_err(|e| EvidenceError::io(&self.path, e))?;
        let mut head = vec![0u8; ring::HEADER_BYTES as usize];
        file.read_exact(&mut head)
            .map_err(|e| EvidenceError::io(&self.path, e))?;
        let header = ring::read_header(&head).map_err(|e| corrupt(e.to_string()))?;
        let mut out = Vec::new();
        // A whole lap behind: what the writers overwrote is lost.
        if header.cursor.saturating_sub(self.next) > header.slots {
            let from = header.cursor - header.slots;
            self.lost += from - self.next;
            self.next = from;
        }
        let slots = read_slots(&mut file, &header, self.next, header.cursor)
            .map_err(|e| EvidenceError::io(&self.path, e))?;
        for (seq, bytes) in (self.next..header.cursor).zip(slots.chunks(ring::SLOT_BYTES as usize))
        {
            match ring::decode_slot(seq, bytes) {
                Slot::Whole(r) => out.push(line_of(seq, &r, header.started_unix_ns)),
                Slot::Overwritten => self.lost += 1,
                Slot::Pending => {
                    let waited = match self.stuck {
                        Some((s, n)) if s == seq => n + 1,
                        _ => 1,
                    };
                    if !last && waited < STUCK_DRAINS {
                        self.stuck = Some((seq, waited));
                        break;
                    }
                    // Its writer died mid-record, or ended without finishing it.
                    self.lost += 1;
                }
            }
            self.next = seq + 1;
        }
        out.push(TraceRecord {
            seq: header.cursor,
            t_ms: now_ms,
            pid: 0,
            event: counts(&header, self.lost),
        });
        Ok(out)
    }
}

fn counts(header: &Header, lost: u64) -> TraceEvent {
    TraceEvent::Counts {
        attached: header.attached,
        lost_device_calls: header.lost_device_calls,
        lost_records: lost,
        classes: header.classes.clone(),
    }
}

/// The bytes of the slots of sequence numbers `from..to` (at most one lap), in order.
fn read_slots(
    file: &mut std::fs::File,
    header: &Header,
    from: u64,
    to: u64,
) -> std::io::Result<Vec<u8>> {
    use std::io::{Seek, SeekFrom};
    let mut out = Vec::new();
    let mut seq = from;
    while seq < to {
        // Up to the end of the ring's file, then from its first slot.
        let in_lap = header.slots - seq % header.slots;
        let n = (to - seq).min(in_lap);
        file.seek(SeekFrom::Start(ring::slot_offset(header, seq)))?;
        let start = out.len();
        out.resize(start + (n * ring::SLOT_BYTES) as usize, 0);
        file.read_exact(&mut out[start..])?;
        seq += n;
    }
    Ok(out)
}

/// A run's allocation trace, as far as it was written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// Every record, in the order the ring took them.
    pub records: Vec<TraceRecord>,
    /// Processes that loaded the layer.
    pub attached: u64,
    /// Records lost (overwritten before they were drained, or torn).
    pub lost_records: u64,
    /// Calls that returned `VK_ERROR_DEVICE_LOST` after each device's first.
    pub lost_device_calls: u64,
    /// Per size class: allocations, frees, refusals (exact, from the ring's counts).
    pub classes: Vec<[u64; 3]>,
}

/// The trace in run directory `dir`: `trace.jsonl`, and what the ring holds beyond it (a
/// kiln killed before its last drain). None when the run kept no trace.
pub fn read_trace(dir: &Path) -> EvidenceResult<Option<Trace>> {
    let lines = dir.join(TRACE_FILE);
    let ring_path = dir.join(RING_FILE);
    if !lines.is_file() && !ring_path.is_file() {
        return Ok(None);
    }
    let mut records: Vec<TraceRecord> = if lines.is_file() {
        super::read_jsonl::<TraceRecord>(&lines)?.0
    } else {
        Vec::new()
    };
    if ring_path.is_file() {
        let next = records
            .iter()
            .filter(|r| !matches!(r.event, TraceEvent::Counts { .. }))
            .map(|r| r.seq + 1)
            .max()
            .unwrap_or(0);
        let last_ms = records.last().map_or(0.0, |r| r.t_ms);
        let mut drainer = Drainer::from_seq(&ring_path, next);
        // What the drains before counted lost stays lost.
        drainer.lost = lost_of(&records);
        records.extend(drainer.drain(true, last_ms)?);
    }
    let mut trace = Trace::default();
    for r in records {
        if let TraceEvent::Counts {
            attached,
            lost_device_calls,
            lost_records,
            classes,
        } = r.event
        {
            // The last counts are the ring's latest.
            trace.attached = attached;
            trace.lost_device_calls = lost_device_calls;
            trace.lost_records = lost_records;
            trace.classes = classes;
        } else {
            trace.records.push(r);
        }
    }
    Ok(Some(trace))
}

fn lost_of(records: &[TraceRecord]) -> u64 {
    records
        .iter()
        .rev()
        .find_map(|r| match r.event {
            TraceEvent::Counts { lost_records, .. } => Some(lost_records),
            _ => None,
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// A ring file written through the layer's own writer, over a shared mapping's stand-in:
    /// the words are written, then the file laid out from them.
    fn ring_file(dir: &Path, slots: u64, records: &[Record]) -> PathBuf {
        let header = ring::new_header(slots, 1_000_000);
        let mut words: Vec<AtomicU64> = header
            .chunks(8)
            .map(|c| AtomicU64::new(u64::from_le_bytes(c.try_into().unwrap())))
            .collect();
        words.resize_with((ring::file_bytes(slots) / 8) as usize, || AtomicU64::new(0));
        let w = ring::RingWriter::new(&words).unwrap();
        for r in records {
            if r.kind == RecordKind::Alloc {
                w.count(ring::Counted::Alloc, r.bytes);
            }
            w.push(r);
        }
        let bytes: Vec<u8> = words
            .iter()
            .flat_map(|w| w.load(std::sync::atomic::Ordering::Relaxed).to_le_bytes())
            .collect();
        let path = dir.join(RING_FILE);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn alloc(n: u64) -> Record {
        let mut r = Record::new(RecordKind::Alloc);
        r.pid = 77;
        r.t_unix_ns = 1_000_000 + n * 1_000_000;
        r.device = u64::from_le_bytes(*b"\x6d\x65\x73\x61\x32\x32\x2e\x33");
        r.bytes = 8 << 20;
        r.memory = 100 + n;
        r
    }

    #[test]
    fn a_drain_takes_each_record_once_and_counts_what_a_lap_overwrote() {
        let dir = tempfile::tempdir().unwrap();
        let records: Vec<Record> = (0..6).map(alloc).collect();
        let path = ring_file(dir.path(), 4, &records);
        let mut d = Drainer::new(&path);
        let out = d.drain(false, 9.0).unwrap();
        // Six written into four slots: the first two are gone.
        let seqs: Vec<u64> = out.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [2, 3, 4, 5, 6]);
        assert_eq!(out[0].t_ms, 2.0);
        assert!(
            matches!(&out[0].event, TraceEvent::Alloc { device, bytes: 8388608, handle: 102, .. } if device == "6d65736132322e33")
        );
        let TraceEvent::Counts {
            lost_records,
            classes,
            ..
        } = &out[4].event
        else {
            panic!("{:?}", out[4]);
        };
        assert_eq!((*lost_records, classes[23][0]), (2, 6));
        // Nothing new: only the counts.
        assert_eq!(d.drain(false, 10.0).unwrap().len(), 1);
        assert!(same_device(
            "6d657361-3232-2e33-2e36-000000000000",
            "6d65736132322e33"
        ));
        assert!(!same_device("6d657361-3232-2e33-2e36-000000000000", ""));
    }

    #[test]
    fn a_torn_slot_is_waited_for_then_counted_lost_and_the_verdict_drains_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let records: Vec<Record> = (0..3).map(alloc).collect();
        let path = ring_file(dir.path(), 8, &records);
        // Tear the second record's payload.
        let mut bytes = std::fs::read(&path).unwrap();
        let at = (ring::HEADER_BYTES + ring::SLOT_BYTES + 24) as usize;
        bytes[at] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let mut d = Drainer::new(&path);
        assert_eq!(
            d.drain(false, 1.0).unwrap().len(),
            2,
            "the first, then counts"
        );
        assert_eq!(d.drain(false, 2.0).unwrap().len(), 1, "still waited for");
        let out = d.drain(false, 3.0).unwrap();
        assert_eq!(out.len(), 2, "given up: the third, then counts");
        // trace.jsonl holds the first drain only (kiln killed after it): the verdict reads
        // the rest from the ring, the torn record counted lost.
        let mut first = Drainer::new(&path).drain(false, 1.0).unwrap();
        first.truncate(1);
        let text: String = first
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        std::fs::write(dir.path().join(TRACE_FILE), text).unwrap();
        let trace = read_trace(dir.path()).unwrap().unwrap();
        let seqs: Vec<u64> = trace.records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [0, 2]);
        assert_eq!(trace.lost_records, 1);
        assert_eq!(trace.classes[23][0], 3);
        // A run that kept no trace has none.
        assert_eq!(read_trace(&dir.path().join("nothing")).unwrap(), None);
    }

    #[test]
    fn vulkan_errors_read_back_by_name() {
        for raw in [-1, -2, -4, -10, -1_000_161_000, -13] {
            let e = VkError::from_raw(raw);
            let text = serde_json::to_string(&e).unwrap();
            assert_eq!(serde_json::from_str::<VkError>(&text).unwrap(), e, "{text}");
        }
        assert!(VkError::from_raw(-10).is_memory());
        assert!(!VkError::from_raw(-4).is_memory());
        assert_eq!(VkError::from_raw(-13).name(), "VkResult(-13)");
    }
}
