//! How a checkpoint is kept in bytes: everything but its thread, namespace and id in one
//! buffer, ids as 16 bytes, channel names as indexes into a table the back-end keeps.
//!
//! The in-memory checkpointer keeps the buffer as it is; SQLite stores its two parts (the
//! *head*: links, metadata, body and blob headers; the *data*: the blobs' bytes) as two columns
//! of one row, so listing a history never reads channel data.
//!
//! A run writes a checkpoint per step and a process or a file may hold many threads, so the
//! dozen small strings a checkpoint would otherwise own (ids, versions, channel names, the
//! timestamp) cost more than the data itself. Most of them name the checkpoint itself or its
//! parent (a channel changed by this step has this checkpoint's id as its version; a delta
//! extends the version its parent wrote), and those take one byte.
//!
//! Layout (varints are LEB128):
//!
//! ```text
//! buffer = head length (u32 LE) · head · data
//! head   = parent id · step (zigzag) · source · created_at · metadata JSON (length-prefixed,
//!          empty for {}) · n × (channel, version id) · body (length-prefixed)
//!          · m × (channel, previous version id, kind, data length)
//! data   = the m blobs' bytes, in order
//! id         = 0 + 16 bytes (a UUID as kit writes them) | 1 + length + UTF-8 text | 2 (absent)
//!            | 3 (this checkpoint's id) | 4 (its parent's id)
//! created_at = 0 + varint milliseconds | 1 + length + text | 2 (the millisecond in this
//!              checkpoint's UUIDv7 id)
//! ```
//!
//! SQLite files hold this layout (schema version 3): change it only with a migration.

use std::cmp::Ordering;

use serde_json::Value;

use crate::checkpoint::{BlobKind, CheckpointMeta, CheckpointSource};

/// A checkpoint or channel version id: a UUID (as kit makes them) in 16 bytes, any other text
/// as it is. Orders like the text it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Id {
    Uuid([u8; 16]),
    Text(Box<str>),
}

impl Id {
    pub(crate) fn new(text: &str) -> Id {
        match uuid_bytes(text) {
            Some(bytes) => Id::Uuid(bytes),
            None => Id::Text(text.into()),
        }
    }

    /// Runs `f` on the id's text without allocating.
    fn with_str<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        match self {
            Id::Uuid(bytes) => {
                let mut buf = uuid::Uuid::encode_buffer();
                f(uuid::Uuid::from_bytes(*bytes)
                    .hyphenated()
                    .encode_lower(&mut buf))
            }
            Id::Text(text) => f(text),
        }
    }

    /// Compares with an id given as text.
    pub(crate) fn cmp_str(&self, other: &str) -> Ordering {
        self.with_str(|s| s.cmp(other))
    }

    /// Compares with another id as their texts compare. Two UUIDs compare by their bytes (a
    /// lowercase hyphenated UUID sorts as its bytes do), without writing either out.
    pub(crate) fn cmp_id(&self, other: &Id) -> Ordering {
        match (self, other) {
            (Id::Uuid(a), Id::Uuid(b)) => a.cmp(b),
            (_, Id::Text(b)) => self.cmp_str(b),
            (Id::Text(a), Id::Uuid(_)) => other.cmp_str(a).reverse(),
        }
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.with_str(|s| f.write_str(s))
    }
}

/// The 16 bytes of a lowercase hyphenated UUID: the only form whose bytes write back as the
/// same text. Anything else (upper case, braces, other lengths) is `None` and stays text.
pub(crate) fn uuid_bytes(text: &str) -> Option<[u8; 16]> {
    /// Where each byte's two hex digits start in `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    const AT: [usize; 16] = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
    /// The value of each lowercase hex digit; 0xff for every other byte. A `static`: a `const`
    /// array indexed at run time is copied onto the stack at every call.
    static HEX: [u8; 256] = {
        let mut table = [0xff; 256];
        let mut c = 0;
        while c < 10 {
            table[b'0' as usize + c] = c as u8;
            c += 1;
        }
        let mut c = 0;
        while c < 6 {
            table[b'a' as usize + c] = 10 + c as u8;
            c += 1;
        }
        table
    };
    // Every id of every checkpoint goes through here: a table lookup per digit.
    let b: &[u8; 36] = text.as_bytes().try_into().ok()?;
    if b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    let mut out = [0u8; 16];
    let mut bad = 0u8;
    for (byte, at) in out.iter_mut().zip(AT) {
        let (hi, lo) = (HEX[usize::from(b[at])], HEX[usize::from(b[at + 1])]);
        bad |= hi | lo;
        *byte = (hi << 4) | (lo & 0x0f);
    }
    (bad & 0xf0 == 0).then_some(out)
}

/// The text of a UUID given as bytes (lowercase, hyphenated).
pub(crate) fn uuid_text(bytes: &[u8; 16]) -> String {
    crate::ids::uuid_string(uuid::Uuid::from_bytes(*bytes))
}

/// A checkpoint's fields, as [`pack`] takes them.
pub(crate) struct Fields<'a> {
    pub parent_id: Option<&'a str>,
    /// `parent_id` already parsed, when the caller has it (the in-memory store keeps its
    /// head's, and a new checkpoint's parent is almost always the head): no parse then.
    pub parent_parsed: Option<&'a Id>,
    pub step: i64,
    pub source: CheckpointSource,
    pub created_at: &'a str,
    pub metadata: Metadata<'a>,
    /// (channel index, version).
    pub channel_versions: Vec<(u32, &'a str)>,
    pub body: &'a [u8],
    pub blobs: Vec<BlobFields<'a>>,
}

/// A checkpoint's metadata as [`pack`] takes it: any JSON value, or an object by its map.
#[derive(Clone, Copy)]
pub(crate) enum Metadata<'a> {
    Value(&'a Value),
    Object(&'a serde_json::Map<String, Value>),
}

/// A blob the checkpoint wrote, as [`pack`] takes it.
pub(crate) struct BlobFields<'a> {
    pub channel: u32,
    pub prev_version: Option<&'a str>,
    pub kind: BlobKind,
    pub data: &'a [u8],
}

/// A blob read back from a head: how it links, and how long its data is.
pub(crate) struct BlobHead {
    pub channel: u32,
    pub prev_version: Option<String>,
    pub kind: BlobKind,
    pub len: usize,
}

/// A blob read back with its data.
pub(crate) struct UnpackedBlob<'a> {
    pub channel: u32,
    pub prev_version: Option<String>,
    pub kind: BlobKind,
    pub data: &'a [u8],
}

/// A checkpoint read back from its head, but for its blobs ([`blob_heads`]); the body borrows
/// from the head.
pub(crate) struct Unpacked<'a> {
    pub parent_id: Option<String>,
    pub step: i64,
    pub source: CheckpointSource,
    pub created_at: String,
    pub metadata: Value,
    pub channel_versions: Vec<(u32, String)>,
    pub body: &'a [u8],
}

impl Unpacked<'_> {
    /// The checkpoint's metadata; the nodes due next are read from the executor's body.
    pub(crate) fn meta(&self, id: String) -> CheckpointMeta {
        // A listing goes on past a body it cannot read (loading that checkpoint reports it).
        let next = super::borrowed::next_nodes(self.body).unwrap_or_else(|e| {
            tracing::warn!(checkpoint = %id, error = %e, "a checkpoint's body does not read");
            Vec::new()
        });
        CheckpointMeta {
            id,
            parent_id: self.parent_id.clone(),
            step: self.step,
            source: self.source,
            created_at: self.created_at.clone(),
            next,
            metadata: self.metadata.clone(),
        }
    }
}

fn source_code(source: CheckpointSource) -> u8 {
    match source {
        CheckpointSource::Input => 0,
        CheckpointSource::Loop => 1,
        CheckpointSource::Update => 2,
        CheckpointSource::Fork => 3,
    }
}

fn source_of(code: u8) -> Option<CheckpointSource> {
    Some(match code {
        0 => CheckpointSource::Input,
        1 => CheckpointSource::Loop,
        2 => CheckpointSource::Update,
        3 => CheckpointSource::Fork,
        _ => return None,
    })
}

/// The millisecond a UUIDv7 was made in (its first 48 bits).
fn uuid_millis(bytes: &[u8; 16]) -> u64 {
    bytes[..6]
        .iter()
        .fold(0u64, |ms, &b| (ms << 8) | u64::from(b))
}

/// Packs checkpoint `id` into `head length · head · data` (see the module docs). `own` is the
/// same id, parsed: the caller keeps it as the checkpoint's key. `None` for a head of 4 GiB or
/// more (metadata or a body that large), which the length cannot say.
pub(crate) fn pack(id: &str, own: &Id, fields: &Fields<'_>) -> Option<Box<[u8]>> {
    // Enough for the head and the data at once: one allocation, shrunk to fit at the end.
    let data_len: usize = fields.blobs.iter().map(|b| b.data.len()).sum();
    let mut out = Vec::with_capacity(
        64 + fields.body.len()
            + 24 * fields.channel_versions.len()
            + 32 * fields.blobs.len()
            + data_len,
    );
    out.extend_from_slice(&[0; 4]);
    let refs = Refs {
        own: id,
        parent: fields.parent_id,
    };
    match (fields.parent_id, fields.parent_parsed) {
        (Some(_), Some(Id::Uuid(bytes))) => {
            out.push(0);
            out.extend_from_slice(bytes);
        }
        (parent, _) => put_opt_id(&mut out, parent),
    }
    put_varint(&mut out, zigzag(fields.step));
    out.push(source_code(fields.source));
    let own_millis = match own {
        Id::Uuid(bytes) => Some(uuid_millis(bytes)),
        Id::Text(_) => None,
    };
    match crate::ids::millis_from_rfc3339(fields.created_at) {
        Some(ms) if Some(ms) == own_millis => out.push(2),
        Some(ms) => {
            out.push(0);
            put_varint(&mut out, ms);
        }
        None => {
            out.push(1);
            put_bytes(&mut out, fields.created_at.as_bytes());
        }
    }
    match fields.metadata {
        Metadata::Value(Value::Object(m)) | Metadata::Object(m) if m.is_empty() => {
            put_varint(&mut out, 0);
        }
        Metadata::Value(Value::Null) => put_varint(&mut out, 0),
        Metadata::Value(other) => {
            put_bytes(&mut out, &serde_json::to_vec(other).unwrap_or_default());
        }
        Metadata::Object(m) => put_bytes(&mut out, &serde_json::to_vec(m).unwrap_or_default()),
    }
    put_varint(&mut out, fields.channel_versions.len() as u64);
    for (channel, version) in &fields.channel_versions {
        put_varint(&mut out, u64::from(*channel));
        refs.put(&mut out, Some(version));
    }
    put_bytes(&mut out, fields.body);
    put_varint(&mut out, fields.blobs.len() as u64);
    for blob in &fields.blobs {
        put_varint(&mut out, u64::from(blob.channel));
        refs.put(&mut out, blob.prev_version);
        out.push(match blob.kind {
            BlobKind::Full => 0,
            BlobKind::Delta => 1,
        });
        put_varint(&mut out, blob.data.len() as u64);
    }
    let head_len = u32::try_from(out.len() - 4).ok()?;
    out[..4].copy_from_slice(&head_len.to_le_bytes());
    for blob in &fields.blobs {
        out.extend_from_slice(blob.data);
    }
    Some(out.into_boxed_slice())
}

/// A checkpoint whose metadata and body together reach 4 GiB.
pub(crate) fn too_large(id: &str) -> crate::checkpoint::CheckpointError {
    crate::checkpoint::CheckpointError::Backend(format!(
        "checkpoint {id} was not stored: its metadata and executor body take 4 GiB or more; \
         keep large values in the state's channels, not in run metadata"
    ))
}

/// The head and the data of a buffer [`pack`] wrote.
pub(crate) fn split(packed: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = u32::from_le_bytes(packed.get(..4)?.try_into().ok()?);
    let rest = &packed[4..];
    let len = usize::try_from(len).ok()?;
    (len <= rest.len()).then(|| rest.split_at(len))
}

/// Reads the head of checkpoint `id`; `None` only if [`pack`] did not write it.
pub(crate) fn unpack<'a>(id: &str, head: &'a [u8]) -> Option<Unpacked<'a>> {
    let mut r = Reader { buf: head, at: 0 };
    let parent_id = r.opt_id(id, None)?;
    let step = unzigzag(r.varint()?);
    let source = source_of(r.byte()?)?;
    let created_at = match r.byte()? {
        0 => crate::ids::rfc3339_from_millis(r.varint()?, true),
        1 => r.text()?,
        2 => crate::ids::rfc3339_from_millis(uuid_millis(&uuid_bytes(id)?), true),
        _ => return None,
    };
    let metadata = match r.bytes()? {
        [] => Value::Object(Default::default()),
        json => serde_json::from_slice(json).ok()?,
    };
    let n = usize::try_from(r.varint()?).ok()?;
    // Each entry takes at least 2 bytes: never reserve more than the head could hold.
    let mut channel_versions = Vec::with_capacity(n.min(head.len() / 2));
    for _ in 0..n {
        let channel = u32::try_from(r.varint()?).ok()?;
        channel_versions.push((channel, r.opt_id(id, parent_id.as_deref())??));
    }
    let body = r.bytes()?;
    Some(Unpacked {
        parent_id,
        step,
        source,
        created_at,
        metadata,
        channel_versions,
        body,
    })
}

/// Reads only the blob headers of checkpoint `id`'s head, stepping over the rest undecoded (a
/// load walks many checkpoints' blobs and needs nothing else of them).
pub(crate) fn blob_heads(id: &str, head: &[u8]) -> Option<Vec<BlobHead>> {
    let mut r = Reader { buf: head, at: 0 };
    let parent_id = r.opt_id(id, None)?;
    r.varint()?;
    r.byte()?;
    match r.byte()? {
        0 => r.varint().map(drop)?,
        1 => r.bytes().map(drop)?,
        2 => {}
        _ => return None,
    };
    r.bytes()?;
    for _ in 0..r.varint()? {
        r.varint()?;
        r.skip_id()?;
    }
    r.bytes()?;
    let n = usize::try_from(r.varint()?).ok()?;
    // Each blob takes at least 4 bytes of the head.
    let mut blobs = Vec::with_capacity(n.min(head.len() / 4));
    for _ in 0..n {
        let channel = u32::try_from(r.varint()?).ok()?;
        let prev_version = r.opt_id(id, parent_id.as_deref())?;
        let kind = match r.byte()? {
            0 => BlobKind::Full,
            1 => BlobKind::Delta,
            _ => return None,
        };
        let len = usize::try_from(r.varint()?).ok()?;
        blobs.push(BlobHead {
            channel,
            prev_version,
            kind,
            len,
        });
    }
    Some(blobs)
}

/// The blobs of checkpoint `id` with their data; `None` if head and data do not belong
/// together.
pub(crate) fn unpack_blobs<'a>(
    id: &str,
    head: &[u8],
    data: &'a [u8],
) -> Option<Vec<UnpackedBlob<'a>>> {
    let mut at = 0usize;
    let blobs = blob_heads(id, head)?
        .into_iter()
        .map(|b| {
            let end = at.checked_add(b.len)?;
            let bytes = data.get(at..end)?;
            at = end;
            Some(UnpackedBlob {
                channel: b.channel,
                prev_version: b.prev_version,
                kind: b.kind,
                data: bytes,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    (at == data.len()).then_some(blobs)
}

/// The ids an id field may refer to instead of spelling out.
struct Refs<'a> {
    own: &'a str,
    parent: Option<&'a str>,
}

impl Refs<'_> {
    fn put(&self, out: &mut Vec<u8>, id: Option<&str>) {
        match id {
            Some(id) if id == self.own => out.push(3),
            Some(id) if Some(id) == self.parent => out.push(4),
            other => put_opt_id(out, other),
        }
    }
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_opt_id(out: &mut Vec<u8>, id: Option<&str>) {
    match id.map(|id| (id, uuid_bytes(id))) {
        Some((_, Some(bytes))) => {
            out.push(0);
            out.extend_from_slice(&bytes);
        }
        Some((id, None)) => {
            out.push(1);
            put_bytes(out, id.as_bytes());
        }
        None => out.push(2),
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.buf.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(slice)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn varint(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(n);
            }
        }
        None
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        self.take(n)
    }

    fn text(&mut self) -> Option<String> {
        std::str::from_utf8(self.bytes()?).ok().map(String::from)
    }

    /// `Some(None)` for an absent id, `None` for bad data. `own` and `parent` are what the
    /// reference tags stand for (a parent id itself cannot refer to a parent).
    fn opt_id(&mut self, own: &str, parent: Option<&str>) -> Option<Option<String>> {
        match self.byte()? {
            0 => {
                let bytes: [u8; 16] = self.take(16)?.try_into().ok()?;
                Some(Some(uuid_text(&bytes)))
            }
            1 => Some(Some(self.text()?)),
            2 => Some(None),
            3 => Some(Some(own.to_string())),
            4 => Some(Some(parent?.to_string())),
            _ => None,
        }
    }

    /// Steps over an id (or an absent one) without decoding it.
    fn skip_id(&mut self) -> Option<()> {
        match self.byte()? {
            0 => self.take(16).map(drop),
            1 => self.bytes().map(drop),
            2..=4 => Some(()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_text_and_order() {
        let a = crate::ids::time_ordered();
        let b = crate::ids::time_ordered();
        for text in [
            a.as_str(),
            "custom-1",
            "01A1FE05-29DA-7000-800C-47C39201259F",
            "{01a1fe05-29da-7000-800c-47c39201259f}",
            "01a1fe0529da7000800c47c39201259f",
            "01a1fe05-29da-7000-800c-47c39201259g",
            "",
        ] {
            let id = Id::new(text);
            assert_eq!(id.to_string(), text);
            assert_eq!(id.cmp_str(text), Ordering::Equal);
        }
        assert!(matches!(Id::new(&a), Id::Uuid(_)));
        assert!(matches!(
            Id::new("01A1FE05-29DA-7000-800C-47C39201259F"),
            Id::Text(_)
        ));
        assert_eq!(Id::new(&a).cmp_str(&b), Ordering::Less);
        assert_eq!(Id::new(&b).cmp_str(&a), Ordering::Greater);
        assert_eq!(Id::new("x").cmp_str(&a), "x".cmp(a.as_str()));
        // Id against Id orders exactly as the texts do, for every mix of forms.
        let texts = [
            a.clone(),
            b.clone(),
            "x".to_string(),
            "0".to_string(),
            "01a211e1-1f29-7000-800f-dc547b173b83".to_string(),
            "01A211E1-1F29-7000-800F-DC547B173B83".to_string(),
        ];
        for x in &texts {
            for y in &texts {
                assert_eq!(Id::new(x).cmp_id(&Id::new(y)), x.cmp(y), "{x} vs {y}");
            }
        }
    }

    #[test]
    fn uuid_bytes_reads_what_the_uuid_crate_writes() {
        for _ in 0..200 {
            let u = uuid::Uuid::from_u128(fastrand::u128(..));
            let text = u.hyphenated().to_string();
            assert_eq!(uuid_bytes(&text), Some(*u.as_bytes()));
            assert_eq!(uuid_text(u.as_bytes()), text);
        }
        // Hyphens anywhere else, or a 37th character, are not a UUID.
        assert_eq!(uuid_bytes("01a1fe0529da-7000-800c-47c39201259f-"), None);
        assert_eq!(uuid_bytes("01a1fe05-29da-7000-800c-47c39201259f0"), None);
        assert_eq!(uuid_bytes("01a1fe05-29da-7000-800c-47c3920125é"), None);
    }

    fn fields<'a>(
        parent: Option<&'a str>,
        created: &'a str,
        step: i64,
        metadata: &'a Value,
        versions: Vec<(u32, &'a str)>,
        blobs: Vec<BlobFields<'a>>,
    ) -> Fields<'a> {
        Fields {
            parent_id: parent,
            parent_parsed: None,
            step,
            source: CheckpointSource::Update,
            created_at: created,
            metadata: Metadata::Value(metadata),
            channel_versions: versions,
            body: br#"{"next":[{"node":"a"},{"node":"b","send":0}]}"#,
            blobs,
        }
    }

    #[test]
    fn a_checkpoint_reads_back_as_written() {
        let own = crate::ids::time_ordered();
        let v1 = crate::ids::time_ordered();
        let parent = crate::ids::time_ordered();
        let own_time =
            crate::ids::rfc3339_from_millis(uuid_millis(&uuid_bytes(&own).unwrap()), true);
        let metadata = serde_json::json!({"source": "loop", "writes": {"n": [1, 2]}});
        let empty = serde_json::json!({});
        for (id, parent, created, step, meta) in [
            (
                own.as_str(),
                Some(parent.as_str()),
                own_time.as_str(),
                7,
                &metadata,
            ),
            (
                own.as_str(),
                Some(parent.as_str()),
                "2026-11-21T12:11:53.690Z",
                7,
                &empty,
            ),
            ("c-2", None, "yesterday", -1, &metadata),
            (
                "c-3",
                Some("custom parent"),
                "2026-11-21T12:11:53Z",
                i64::MAX,
                &empty,
            ),
        ] {
            let versions = vec![
                (0, id),
                (300, "v-text"),
                (7, v1.as_str()),
                (8, parent.unwrap_or("p")),
            ];
            let blobs = vec![
                BlobFields {
                    channel: 0,
                    prev_version: parent,
                    kind: BlobKind::Delta,
                    data: &[1, 2, 3],
                },
                BlobFields {
                    channel: 300,
                    prev_version: None,
                    kind: BlobKind::Full,
                    data: &[0; 200],
                },
                BlobFields {
                    channel: 7,
                    prev_version: Some(&v1),
                    kind: BlobKind::Delta,
                    data: &[],
                },
            ];
            let f = fields(parent, created, step, meta, versions, blobs);
            let packed = pack(id, &Id::new(id), &f).expect("packs");
            let (head, data) = split(&packed).expect("splits");
            assert_eq!(data.len(), 203);
            let back = unpack(id, head).expect("unpacks");
            assert_eq!(back.parent_id.as_deref(), parent);
            assert_eq!(back.step, step);
            assert_eq!(back.source, CheckpointSource::Update);
            assert_eq!(back.created_at, created);
            assert_eq!(&back.metadata, meta);
            let want: Vec<(u32, String)> = f
                .channel_versions
                .iter()
                .map(|(c, v)| (*c, v.to_string()))
                .collect();
            assert_eq!(back.channel_versions, want);
            assert_eq!(back.body, f.body);
            let meta_back = back.meta(id.to_string());
            assert_eq!(meta_back.next, ["a", "b"]);
            assert_eq!(meta_back.id, id);
            let blobs = unpack_blobs(id, head, data).expect("blobs unpack");
            assert_eq!(blobs.len(), 3);
            assert_eq!(blobs[0].channel, 0);
            assert_eq!(blobs[0].prev_version.as_deref(), parent);
            assert_eq!(blobs[0].kind, BlobKind::Delta);
            assert_eq!(blobs[0].data, [1, 2, 3]);
            assert_eq!(blobs[1].prev_version, None);
            assert_eq!(blobs[1].kind, BlobKind::Full);
            assert_eq!((blobs[1].channel, blobs[1].data.len()), (300, 200));
            assert_eq!(blobs[2].prev_version.as_deref(), Some(v1.as_str()));
            assert!(blobs[2].data.is_empty());
            // Head and data that do not belong together are refused, not misread.
            assert!(unpack_blobs(id, head, &data[1..]).is_none());
            assert!(unpack_blobs(id, head, &[data, &[0]].concat()).is_none());
            // So are truncated heads.
            for cut in 0..head.len() {
                assert!(
                    unpack(id, &head[..cut]).is_none() || blob_heads(id, &head[..cut]).is_none(),
                    "a head cut at {cut} of {} read back",
                    head.len()
                );
            }
        }
    }

    #[test]
    fn references_take_one_byte() {
        let own = crate::ids::time_ordered();
        let parent = crate::ids::time_ordered();
        let created =
            crate::ids::rfc3339_from_millis(uuid_millis(&uuid_bytes(&own).unwrap()), true);
        let empty = serde_json::json!({});
        let f = fields(
            Some(&parent),
            &created,
            41,
            &empty,
            vec![(0, own.as_str()), (1, parent.as_str())],
            vec![BlobFields {
                channel: 0,
                prev_version: Some(&parent),
                kind: BlobKind::Delta,
                data: b"[1]",
            }],
        );
        let packed = pack(&own, &Id::new(&own), &f).expect("packs");
        let (head, _) = split(&packed).expect("splits");
        // parent (17) · step (1) · source (1) · time (1) · metadata (1) · 2 versions (1 + 2×2)
        // · body (1 + len) · 1 blob (1 + 4)
        assert_eq!(head.len(), 17 + 1 + 1 + 1 + 1 + 5 + 1 + f.body.len() + 5);
    }

    #[test]
    fn unknown_tags_and_dangling_references_are_refused() {
        let own = crate::ids::time_ordered();
        let empty = serde_json::json!({});
        let f = fields(
            None,
            "2026-11-21T12:11:53.690Z",
            1,
            &empty,
            vec![(0, own.as_str())],
            vec![],
        );
        let packed = pack(&own, &Id::new(&own), &f).expect("packs");
        let (head, _) = split(&packed).expect("splits");
        // The source byte sits after the absent parent (1 byte) and the step (1 byte).
        let mut bad = head.to_vec();
        bad[2] = 9;
        assert!(unpack(&own, &bad).is_none());
        // A parent reference where there is no parent.
        let mut dangling = head.to_vec();
        let version_tag = dangling.len() - f.body.len() - 1 - 1 - 1;
        assert_eq!(
            dangling[version_tag], 3,
            "the version refers to the checkpoint"
        );
        dangling[version_tag] = 4;
        assert!(unpack(&own, &dangling).is_none());
        assert!(split(&[1, 0]).is_none());
        assert!(split(&[9, 0, 0, 0, 1]).is_none());
    }
}
