//! How the in-memory checkpointer keeps a checkpoint: everything but its id packed into one
//! byte buffer, ids as 16 bytes, channel names as indexes into a table per thread and namespace.
//!
//! A run writes a checkpoint per step and a process may hold thousands of threads, so the
//! dozen small strings a checkpoint would otherwise own (ids, versions, channel names, the
//! timestamp) and their allocator overhead cost more than the data itself.
//!
//! Layout (varints are LEB128; an id is `0` + 16 bytes, or `1` + length + UTF-8 text, and an
//! absent id is `2`):
//!
//! ```text
//! parent id · step (zigzag) · source · created_at (0 + u64 LE millis, or 1 + text)
//! · metadata JSON (length-prefixed, empty for {}) · n × (channel, version id)
//! · body (length-prefixed) · n × (channel, previous version id, kind, data)
//! ```

use std::cmp::Ordering;

use serde_json::Value;

use crate::checkpoint::{BlobKind, CheckpointSource};

/// A checkpoint or channel version id: a UUID (as kit makes them) in 16 bytes, any other text
/// as it is. Orders like the text it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Id {
    Uuid([u8; 16]),
    Text(Box<str>),
}

impl Id {
    pub(super) fn new(text: &str) -> Id {
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
    pub(super) fn cmp_str(&self, other: &str) -> Ordering {
        self.with_str(|s| s.cmp(other))
    }

    /// Compares with another id as their texts compare. Two UUIDs compare by their bytes (a
    /// lowercase hyphenated UUID sorts as its bytes do), without writing either out.
    pub(super) fn cmp_id(&self, other: &Id) -> Ordering {
        match (self, other) {
            (Id::Uuid(a), Id::Uuid(b)) => a.cmp(b),
            (_, Id::Text(b)) => self.cmp_str(b),
            (Id::Text(a), Id::Uuid(_)) => other.cmp_str(a).reverse(),
        }
    }
}

/// The 16 bytes of a lowercase hyphenated UUID (the only form that comes back the same).
fn uuid_bytes(text: &str) -> Option<[u8; 16]> {
    if text.len() != 36 {
        return None;
    }
    let u = uuid::Uuid::try_parse(text).ok()?;
    let same = *u
        .hyphenated()
        .encode_lower(&mut uuid::Uuid::encode_buffer())
        == *text;
    same.then(|| u.into_bytes())
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.with_str(|s| f.write_str(s))
    }
}

/// A checkpoint's fields, as [`pack`] takes them.
pub(super) struct Fields<'a> {
    pub parent_id: Option<&'a str>,
    pub step: i64,
    pub source: CheckpointSource,
    pub created_at: &'a str,
    pub metadata: &'a Value,
    /// (channel index, version).
    pub channel_versions: Vec<(u32, &'a str)>,
    pub body: &'a [u8],
    pub blobs: Vec<BlobFields<'a>>,
}

/// A blob the checkpoint wrote, as [`pack`] takes it.
pub(super) struct BlobFields<'a> {
    pub channel: u32,
    pub prev_version: Option<&'a str>,
    pub kind: BlobKind,
    pub data: &'a [u8],
}

/// A blob read back.
pub(super) struct UnpackedBlob<'a> {
    pub channel: u32,
    pub prev_version: Option<String>,
    pub kind: BlobKind,
    pub data: &'a [u8],
}

/// A checkpoint read back from its buffer, but for its blobs ([`unpack_blobs`]); byte fields
/// borrow from it.
pub(super) struct Unpacked<'a> {
    pub parent_id: Option<String>,
    pub step: i64,
    pub source: CheckpointSource,
    pub created_at: String,
    pub metadata: Value,
    pub channel_versions: Vec<(u32, String)>,
    pub body: &'a [u8],
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

pub(super) fn pack(fields: &Fields<'_>) -> Box<[u8]> {
    let blob_bytes: usize = fields.blobs.iter().map(|b| b.data.len() + 24).sum();
    let mut out = Vec::with_capacity(96 + fields.body.len() + blob_bytes);
    put_opt_id(&mut out, fields.parent_id);
    put_varint(&mut out, zigzag(fields.step));
    out.push(source_code(fields.source));
    match crate::ids::millis_from_rfc3339(fields.created_at) {
        Some(ms) => {
            out.push(0);
            out.extend_from_slice(&ms.to_le_bytes());
        }
        None => {
            out.push(1);
            put_bytes(&mut out, fields.created_at.as_bytes());
        }
    }
    let metadata = match fields.metadata {
        Value::Object(m) if m.is_empty() => Vec::new(),
        Value::Null => Vec::new(),
        other => serde_json::to_vec(other).unwrap_or_default(),
    };
    put_bytes(&mut out, &metadata);
    put_varint(&mut out, fields.channel_versions.len() as u64);
    for (channel, version) in &fields.channel_versions {
        put_varint(&mut out, u64::from(*channel));
        put_id(&mut out, version);
    }
    put_bytes(&mut out, fields.body);
    put_varint(&mut out, fields.blobs.len() as u64);
    for blob in &fields.blobs {
        put_varint(&mut out, u64::from(blob.channel));
        put_opt_id(&mut out, blob.prev_version);
        out.push(match blob.kind {
            BlobKind::Full => 0,
            BlobKind::Delta => 1,
        });
        put_bytes(&mut out, blob.data);
    }
    out.into_boxed_slice()
}

/// Reads a buffer [`pack`] wrote; `None` only if it was not written by `pack`.
pub(super) fn unpack(bytes: &[u8]) -> Option<Unpacked<'_>> {
    let mut r = Reader { buf: bytes, at: 0 };
    let parent_id = r.opt_id()?;
    let step = unzigzag(r.varint()?);
    let source = source_of(r.byte()?)?;
    let created_at = match r.byte()? {
        0 => {
            let ms = u64::from_le_bytes(r.take(8)?.try_into().ok()?);
            crate::ids::rfc3339_from_millis(ms, true)
        }
        1 => r.text()?,
        _ => return None,
    };
    let metadata = match r.bytes()? {
        [] => Value::Object(Default::default()),
        json => serde_json::from_slice(json).ok()?,
    };
    let mut channel_versions = Vec::new();
    for _ in 0..r.varint()? {
        let channel = u32::try_from(r.varint()?).ok()?;
        channel_versions.push((channel, r.id()?));
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

/// Reads only the blobs of a buffer [`pack`] wrote, stepping over the rest undecoded (a load
/// walks many checkpoints' blobs and needs nothing else of them).
pub(super) fn unpack_blobs(bytes: &[u8]) -> Option<Vec<UnpackedBlob<'_>>> {
    let mut r = Reader { buf: bytes, at: 0 };
    r.skip_id()?;
    r.varint()?;
    r.byte()?;
    match r.byte()? {
        0 => r.take(8)?,
        1 => r.bytes()?,
        _ => return None,
    };
    r.bytes()?;
    for _ in 0..r.varint()? {
        r.varint()?;
        r.skip_id()?;
    }
    r.bytes()?;
    r.blobs()
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

fn put_id(out: &mut Vec<u8>, id: &str) {
    match uuid_bytes(id) {
        Some(bytes) => {
            out.push(0);
            out.extend_from_slice(&bytes);
        }
        None => {
            out.push(1);
            put_bytes(out, id.as_bytes());
        }
    }
}

fn put_opt_id(out: &mut Vec<u8>, id: Option<&str>) {
    match id {
        Some(id) => put_id(out, id),
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

    fn id(&mut self) -> Option<String> {
        self.opt_id()?
    }

    /// `Some(None)` for an absent id, `None` for bad data.
    fn opt_id(&mut self) -> Option<Option<String>> {
        match self.byte()? {
            0 => {
                let bytes: [u8; 16] = self.take(16)?.try_into().ok()?;
                Some(Some(Id::Uuid(bytes).to_string()))
            }
            1 => Some(Some(self.text()?)),
            2 => Some(None),
            _ => None,
        }
    }

    /// Steps over an id (or an absent one) without decoding it.
    fn skip_id(&mut self) -> Option<()> {
        match self.byte()? {
            0 => self.take(16).map(drop),
            1 => self.bytes().map(drop),
            2 => Some(()),
            _ => None,
        }
    }

    fn blobs(&mut self) -> Option<Vec<UnpackedBlob<'a>>> {
        let n = usize::try_from(self.varint()?).ok()?;
        // Each blob takes at least 4 bytes: never reserve more than the buffer could hold.
        let mut blobs = Vec::with_capacity(n.min(self.buf.len() / 4));
        for _ in 0..n {
            let channel = u32::try_from(self.varint()?).ok()?;
            let prev_version = self.opt_id()?;
            let kind = match self.byte()? {
                0 => BlobKind::Full,
                1 => BlobKind::Delta,
                _ => return None,
            };
            blobs.push(UnpackedBlob {
                channel,
                prev_version,
                kind,
                data: self.bytes()?,
            });
        }
        Some(blobs)
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

    /// Where the source byte sits: after the parent id and the step.
    fn source_offset(parent: Option<&str>, step: i64) -> usize {
        let mut head = Vec::new();
        put_opt_id(&mut head, parent);
        put_varint(&mut head, zigzag(step));
        head.len()
    }

    #[test]
    fn a_checkpoint_reads_back_as_written() {
        let v1 = crate::ids::time_ordered();
        let metadata = serde_json::json!({"source": "loop", "writes": {"n": [1, 2]}});
        for (parent, created, step) in [
            (Some(v1.as_str()), "2026-11-21T12:11:53.690Z", 7),
            (None, "yesterday", -1),
            (Some("custom parent"), "2026-11-21T12:11:53Z", i64::MAX),
        ] {
            let fields = Fields {
                parent_id: parent,
                step,
                source: CheckpointSource::Update,
                created_at: created,
                metadata: &metadata,
                channel_versions: vec![(0, v1.as_str()), (300, "v-text")],
                body: br#"{"next":[]}"#,
                blobs: vec![
                    BlobFields {
                        channel: 0,
                        prev_version: Some(&v1),
                        kind: BlobKind::Delta,
                        data: &[1, 2, 3],
                    },
                    BlobFields {
                        channel: 300,
                        prev_version: None,
                        kind: BlobKind::Full,
                        data: &[0; 200],
                    },
                ],
            };
            let packed = pack(&fields);
            let back = unpack(&packed).expect("unpacks");
            assert_eq!(back.parent_id.as_deref(), parent);
            assert_eq!(back.step, step);
            assert_eq!(back.source, CheckpointSource::Update);
            assert_eq!(back.created_at, created);
            assert_eq!(back.metadata, metadata);
            assert_eq!(
                back.channel_versions,
                [(0, v1.clone()), (300, "v-text".to_string())]
            );
            assert_eq!(back.body, fields.body);
            let blobs = unpack_blobs(&packed).expect("blobs unpack");
            assert_eq!(blobs.len(), 2);
            assert_eq!(blobs[0].channel, 0);
            assert_eq!(blobs[0].prev_version.as_deref(), Some(v1.as_str()));
            assert_eq!(blobs[0].kind, BlobKind::Delta);
            assert_eq!(blobs[0].data, [1, 2, 3]);
            assert_eq!(blobs[1].prev_version, None);
            assert_eq!(blobs[1].kind, BlobKind::Full);
            assert_eq!((blobs[1].channel, blobs[1].data.len()), (300, 200));
            // Truncated data and unknown tags are refused, not misread.
            assert!(unpack(&packed[..source_offset(parent, step)]).is_none());
            assert!(unpack_blobs(&packed[..packed.len() - 1]).is_none());
            let mut bad_source = packed.to_vec();
            bad_source[source_offset(parent, step)] = 9;
            assert!(unpack(&bad_source).is_none());
        }
    }
}
