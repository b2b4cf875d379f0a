//! SHA-256 digests: the request fingerprint, and the hashes that stand in
//! for scopes and keys in Redis and in logs.

use http::request::Parts;
use sha2::{Digest, Sha256};

/// Hex of the first 16 bytes (128 bits) of SHA-256 over `parts`, each
/// length-prefixed so that no two different inputs run together.
pub(crate) fn short_hash(parts: &[&[u8]]) -> String {
    let digest = digest(parts);
    hex(&digest[..16])
}

/// Hex SHA-256 of the request: method, path, query, content-type and body.
pub(crate) fn fingerprint(parts: &Parts, body: &[u8]) -> String {
    let content_type = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .map_or(&b""[..], |v| v.as_bytes());
    let digest = digest(&[
        parts.method.as_str().as_bytes(),
        parts.uri.path().as_bytes(),
        parts.uri.query().unwrap_or("").as_bytes(),
        content_type,
        body,
    ]);
    hex(&digest)
}

/// Hex SHA-256 of the bytes a layer's user chose to stand for the request
/// (`IdempotencyLayer::fingerprint`), apart from every default fingerprint.
pub(crate) fn chosen_fingerprint(covered: &[u8]) -> String {
    hex(&digest(&[b"chosen", covered]))
}

fn digest(parts: &[&[u8]]) -> Vec<u8> {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hasher.finalize().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, uri: &str, content_type: Option<&str>) -> Parts {
        let mut req = http::Request::builder().method(method).uri(uri);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        req.body(()).expect("request").into_parts().0
    }

    #[test]
    fn every_part_of_the_request_counts() {
        let base = fingerprint(&parts("POST", "/a?x=1", Some("application/json")), b"{}");
        assert_eq!(base.len(), 64);
        assert_eq!(
            base,
            fingerprint(&parts("POST", "/a?x=1", Some("application/json")), b"{}")
        );
        for other in [
            fingerprint(&parts("PATCH", "/a?x=1", Some("application/json")), b"{}"),
            fingerprint(&parts("POST", "/b?x=1", Some("application/json")), b"{}"),
            fingerprint(&parts("POST", "/a?x=2", Some("application/json")), b"{}"),
            fingerprint(&parts("POST", "/a?x=1", Some("text/plain")), b"{}"),
            fingerprint(&parts("POST", "/a?x=1", None), b"{}"),
            fingerprint(&parts("POST", "/a?x=1", Some("application/json")), b"{ }"),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn parts_do_not_run_together() {
        assert_ne!(short_hash(&[b"ab", b"c"]), short_hash(&[b"a", b"bc"]));
        assert_eq!(short_hash(&[b"x"]).len(), 32);
    }

    #[test]
    fn known_digest() {
        // SHA-256 of the empty string, by any other name.
        let mut h = Sha256::new();
        h.update(b"");
        assert_eq!(
            hex(&h.finalize()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
