//! Vectors: their stored form (little-endian `f32`s) and cosine similarity.

use crate::store::StoreError;

/// The stored bytes of a vector.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn to_bytes(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 4);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// A vector from its stored bytes; a length that is not a multiple of four is corrupt.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn from_bytes(bytes: &[u8], what: &str) -> Result<Vec<f32>, StoreError> {
    if !bytes.len().is_multiple_of(4) {
        return Err(StoreError::Corrupt(format!(
            "the stored vector of {what} has {} bytes, not a whole number of f32s",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Cosine similarity of two vectors of one length (0 when either is all zeros).
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

/// Checks a vector's length against the index's and that it holds only finite numbers.
pub(crate) fn check(v: &[f32], dims: usize, what: impl Fn() -> String) -> Result<(), StoreError> {
    if v.len() != dims {
        return Err(StoreError::Dimensions {
            what: what(),
            found: v.len(),
            expected: dims,
        });
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(StoreError::Embedding(format!(
            "{} holds a NaN or an infinite number; check the embedder",
            what()
        )));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_compare() {
        let v = [0.5f32, -1.25, 3.0];
        assert_eq!(from_bytes(&to_bytes(&v), "x").unwrap(), v);
        assert!(from_bytes(&[1, 2, 3], "x").is_err());
        assert!((cosine(&v, &v) - 1.0).abs() < 1e-9);
        assert!((cosine(&[1.0, 0.0], &[0.0, 1.0])).abs() < 1e-9);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
        assert!(check(&v, 4, || "q".into()).is_err());
        assert!(check(&[f32::NAN, 0.0, 0.0], 3, || "q".into()).is_err());
    }
}
