//! The keyed hash: HMAC-SHA-256 with a secret the user supplies.

use sha2::{Digest, Sha256};

use super::PiiError;

/// SHA-256's block size in bytes.
const BLOCK: usize = 64;

/// The shortest key accepted, in bytes.
const MIN_KEY_BYTES: usize = 16;

/// A secret key for the keyed hash strategy ([`PiiMiddleware::keyed_hash`]).
///
/// The unkeyed [`PiiStrategy::Hash`] writes the first 32 bits of a plain SHA-256, as
/// LangChain does: anyone can hash every card number of an issuer range or a list of known
/// email addresses and read the values back. With a key, values are replaced by
/// `<{type}_hmac:{first 128 bits of HMAC-SHA-256(key, value), in hex}>`: equal values still
/// give equal replacements, but without the key nobody can test a guess.
///
/// The key is never shown: its `Debug` output is `HashKey(<redacted>)`. Keep it in your
/// secret store and use the same key wherever replacements must agree.
///
/// ```
/// use kit::middleware::pii::{HashKey, PiiMiddleware, PiiType};
///
/// let key = HashKey::new(b"a 32-byte secret from the vault.").unwrap();
/// assert_eq!(format!("{key:?}"), "HashKey(<redacted>)");
/// let emails = PiiMiddleware::new(PiiType::Email).keyed_hash(key);
/// let out = emails.apply("from ann@example.com").unwrap();
/// assert!(out.starts_with("from <email_hmac:") && out.len() == "from <email_hmac:>".len() + 32);
///
/// let err = HashKey::new("short").unwrap_err();
/// assert!(err.to_string().contains("at least 16 bytes"), "{err}");
/// ```
///
/// [`PiiMiddleware::keyed_hash`]: super::PiiMiddleware::keyed_hash
/// [`PiiStrategy::Hash`]: super::PiiStrategy::Hash
#[derive(Clone)]
pub struct HashKey {
    /// SHA-256 after absorbing the key XOR ipad block.
    inner: Sha256,
    /// SHA-256 after absorbing the key XOR opad block.
    outer: Sha256,
}

impl std::fmt::Debug for HashKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HashKey(<redacted>)")
    }
}

impl HashKey {
    /// A key from secret bytes: at least 16 of them ([`PiiError::WeakHashKey`] otherwise);
    /// 32 random bytes are a good choice.
    pub fn new(secret: impl AsRef<[u8]>) -> Result<Self, PiiError> {
        let secret = secret.as_ref();
        if secret.len() < MIN_KEY_BYTES {
            return Err(PiiError::WeakHashKey { len: secret.len() });
        }
        Ok(Self::from_bytes(secret))
    }

    /// The HMAC-SHA-256 precomputation (RFC 2104): a key longer than a block is hashed first,
    /// then padded with zeros to one block.
    fn from_bytes(secret: &[u8]) -> Self {
        let mut block = [0u8; BLOCK];
        if secret.len() > BLOCK {
            block[..32].copy_from_slice(&Sha256::digest(secret));
        } else {
            block[..secret.len()].copy_from_slice(secret);
        }
        let pad = |byte: u8| {
            let mut padded = block;
            padded.iter_mut().for_each(|b| *b ^= byte);
            let mut hasher = Sha256::new();
            hasher.update(padded);
            hasher
        };
        HashKey {
            inner: pad(0x36),
            outer: pad(0x5c),
        }
    }

    /// HMAC-SHA-256 of `message` under this key.
    pub(super) fn mac(&self, message: &[u8]) -> [u8; 32] {
        let mut inner = self.inner.clone();
        inner.update(message);
        let mut outer = self.outer.clone();
        outer.update(inner.finalize());
        outer.finalize().into()
    }

    /// The replacement of one value: `<{type}_hmac:{32 hex digits}>`.
    pub(super) fn replacement(&self, pii_type: &str, value: &str) -> String {
        let mac = self.mac(value.as_bytes());
        let hex: String = mac[..16].iter().map(|b| format!("{b:02x}")).collect();
        format!("<{pii_type}_hmac:{hex}>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn hmac_sha256_matches_the_rfc_4231_test_vectors() {
        let cases: [(Vec<u8>, Vec<u8>, &str); 5] = [
            (
                vec![0x0b; 20],
                b"Hi There".to_vec(),
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            ),
            (
                b"Jefe".to_vec(),
                b"what do ya want for nothing?".to_vec(),
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                vec![0xaa; 20],
                vec![0xdd; 50],
                "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
            ),
            (
                unhex("0102030405060708090a0b0c0d0e0f10111213141516171819"),
                vec![0xcd; 50],
                "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
            ),
            (
                vec![0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First".to_vec(),
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            ),
        ];
        for (key, data, expected) in cases {
            assert_eq!(hex(&HashKey::from_bytes(&key).mac(&data)), expected);
        }
    }

    #[test]
    fn a_short_key_is_refused_with_the_fix() {
        let err = HashKey::new([7u8; 15]).unwrap_err();
        assert_eq!(err, PiiError::WeakHashKey { len: 15 });
        assert!(HashKey::new([7u8; 16]).is_ok());
    }

    #[test]
    fn replacements_are_stable_per_key_and_differ_across_keys() {
        let a = HashKey::new("0123456789abcdef").unwrap();
        let b = HashKey::new("0123456789abcdeF").unwrap();
        let one = a.replacement("email", "ann@example.com");
        assert_eq!(one, a.replacement("email", "ann@example.com"));
        assert_ne!(one, b.replacement("email", "ann@example.com"));
        assert_eq!(one.len(), "<email_hmac:>".len() + 32);
    }
}
