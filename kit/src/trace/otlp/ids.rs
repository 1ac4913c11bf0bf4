//! Trace and span ids: kit's UUIDs as OTLP's 16- and 8-byte ids.

/// The OTLP trace id of a kit trace id (the root run's UUID): its 16 bytes. Ids that are not
/// UUIDs are hashed; the result is never all zero.
///
/// ```
/// let id = kit::trace::otlp::trace_id("0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071");
/// assert_eq!(id[0], 0x01);
/// assert_eq!(id[15], 0x71);
/// ```
pub fn trace_id(id: &str) -> [u8; 16] {
    let mut bytes = uuid_bytes(id);
    if bytes == [0; 16] {
        bytes[15] = 1;
    }
    bytes
}

/// The OTLP span id of a kit run id: the last 8 bytes of its UUID (for kit's UUIDv7 ids: the
/// per-millisecond counter and random bits). Never all zero.
///
/// ```
/// let id = kit::trace::otlp::span_id("0190f3c2-a7b8-7c3e-9a1b-2c3d4e5f6071");
/// assert_eq!(id, [0x9a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x60, 0x71]);
/// ```
pub fn span_id(id: &str) -> [u8; 8] {
    let bytes = uuid_bytes(id);
    let mut out = [0u8; 8];
    out.copy_from_slice(&bytes[8..]);
    if out == [0; 8] {
        out.copy_from_slice(&bytes[..8]);
    }
    if out == [0; 8] {
        out[7] = 1;
    }
    out
}

pub(super) fn uuid_bytes(id: &str) -> [u8; 16] {
    match uuid::Uuid::parse_str(id.trim()) {
        Ok(u) => *u.as_bytes(),
        Err(_) => {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(id.as_bytes());
            let mut out = [0u8; 16];
            out.copy_from_slice(&digest[..16]);
            out
        }
    }
}
