//! Where the idempotency key comes from: the [`ExtractKey`] trait, with
//! [`HeaderKey`] (the `Idempotency-Key` header) as the default.

use std::fmt;

use http::HeaderName;
use http::request::Parts;

/// The longest idempotency key accepted, in bytes after unquoting.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// The default header: `Idempotency-Key`.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// A header's name as every message of the layer spells it: each word
/// capitalized (`Idempotency-Key`, `X-Request-Id`), as the IETF draft and
/// most API docs write it, whatever case it was configured or sent in.
pub(crate) fn spelled(name: &HeaderName) -> String {
    let mut out = String::with_capacity(name.as_str().len());
    let mut word_start = true;
    for c in name.as_str().chars() {
        out.push(if word_start {
            c.to_ascii_uppercase()
        } else {
            c
        });
        word_start = c == '-';
    }
    out
}

/// Why a request's idempotency key was refused (answered `400 Bad Request`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid idempotency key: {reason}")]
#[non_exhaustive]
pub struct InvalidKey {
    /// What is wrong with it, for the client (never quotes the key).
    pub reason: String,
}

impl InvalidKey {
    /// An error with this reason.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

/// Takes the client's idempotency key from a request.
///
/// `Ok(None)` means the request carries no key (passed through, or
/// answered `400` when the layer is built with `.required()`). A key
/// returned here is then checked by the layer: 1 to 255 printable ASCII
/// characters, else `400`.
///
/// Implemented by [`HeaderKey`] and by closures
/// `Fn(&Parts) -> Result<Option<String>, InvalidKey>`.
pub trait ExtractKey: Send + Sync + 'static {
    /// The key of this request, if it has one.
    ///
    /// # Errors
    /// [`InvalidKey`] when the request carries a key that cannot be used.
    fn extract_key(&self, parts: &Parts) -> Result<Option<String>, InvalidKey>;
}

impl<F> ExtractKey for F
where
    F: Fn(&Parts) -> Result<Option<String>, InvalidKey> + Send + Sync + 'static,
{
    fn extract_key(&self, parts: &Parts) -> Result<Option<String>, InvalidKey> {
        self(parts)
    }
}

/// The key from a request header, `Idempotency-Key` by default.
///
/// The value is read as the IETF draft (draft-ietf-httpapi-idempotency-key-header)
/// says, as an RFC 8941 string (`"8e03978e-40d5"`, with `\"` and `\\`
/// escapes), and, as most clients send it, also as a bare token
/// (`8e03978e-40d5`: visible ASCII, no spaces, quotes or backslashes).
/// The header must appear at most once.
#[derive(Clone, PartialEq, Eq)]
pub struct HeaderKey {
    name: HeaderName,
}

impl fmt::Debug for HeaderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HeaderKey")
            .field(&self.name.as_str())
            .finish()
    }
}

impl Default for HeaderKey {
    fn default() -> Self {
        Self::new(IDEMPOTENCY_KEY)
    }
}

impl HeaderKey {
    /// The key from header `name`.
    pub fn new(name: HeaderName) -> Self {
        Self { name }
    }

    /// The header read.
    pub fn name(&self) -> &HeaderName {
        &self.name
    }
}

impl ExtractKey for HeaderKey {
    fn extract_key(&self, parts: &Parts) -> Result<Option<String>, InvalidKey> {
        let mut values = parts.headers.get_all(&self.name).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(InvalidKey::new(format!(
                "the `{}` header appears more than once; send exactly one",
                spelled(&self.name)
            )));
        }
        parse_header_value(value.as_bytes()).map(Some)
    }
}

/// Parses a header value as an RFC 8941 string or a bare token.
pub(crate) fn parse_header_value(raw: &[u8]) -> Result<String, InvalidKey> {
    let raw = raw.trim_ascii();
    let key = match raw.first() {
        Some(b'"') => unquote(raw)?,
        _ => {
            if let Some(&bad) = raw
                .iter()
                .find(|&&b| !(0x21..=0x7e).contains(&b) || b == b'"' || b == b'\\')
            {
                return Err(InvalidKey::new(match bad {
                    b' ' | b'\t' => "an unquoted key must not contain spaces; quote it as an RFC 8941 string (\"...\") or drop them".to_owned(),
                    0x80.. => "the key must be ASCII".to_owned(),
                    b'"' | b'\\' => "an unquoted key must not contain quotes or backslashes".to_owned(),
                    _ => "the key must be printable ASCII".to_owned(),
                }));
            }
            String::from_utf8_lossy(raw).into_owned()
        }
    };
    validate(&key)?;
    Ok(key)
}

/// An RFC 8941 sf-string: `"` chars `"`, with `\"` and `\\` escapes.
fn unquote(raw: &[u8]) -> Result<String, InvalidKey> {
    let inner = match raw {
        [b'"', inner @ .., b'"'] => inner,
        _ => {
            return Err(InvalidKey::new(
                "a quoted key must end with a closing quote",
            ));
        }
    };
    let mut out = String::with_capacity(inner.len());
    let mut bytes = inner.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some(&e @ (b'"' | b'\\')) => out.push(char::from(e)),
                _ => {
                    return Err(InvalidKey::new(
                        "in a quoted key a backslash may only escape `\"` or `\\`",
                    ));
                }
            },
            b'"' => {
                return Err(InvalidKey::new(
                    "a quote inside a quoted key must be escaped as `\\\"`",
                ));
            }
            0x20..=0x7e => out.push(char::from(b)),
            0x80.. => return Err(InvalidKey::new("the key must be ASCII")),
            _ => return Err(InvalidKey::new("the key must be printable ASCII")),
        }
    }
    Ok(out)
}

/// Checks a key from any extractor: 1 to 255 printable ASCII characters.
pub(crate) fn validate(key: &str) -> Result<(), InvalidKey> {
    if key.is_empty() {
        // The rejection's body says what to send (1 to 255 printable ASCII
        // characters): once.
        return Err(InvalidKey::new("the key is empty"));
    }
    if key.len() > MAX_IDEMPOTENCY_KEY_LEN {
        return Err(InvalidKey::new(format!(
            "the key is {} bytes long; at most {MAX_IDEMPOTENCY_KEY_LEN} are allowed",
            key.len()
        )));
    }
    if !key.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(InvalidKey::new("the key must be printable ASCII"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> Result<String, InvalidKey> {
        parse_header_value(raw)
    }

    #[test]
    fn bare_tokens_and_rfc8941_strings_are_accepted() {
        assert_eq!(
            parse(b"8e03978e-40d5-43e8").as_deref(),
            Ok("8e03978e-40d5-43e8")
        );
        assert_eq!(parse(b"\"8e03978e\"").as_deref(), Ok("8e03978e"));
        assert_eq!(parse(b"\"a b\"").as_deref(), Ok("a b"));
        assert_eq!(
            parse(br#""say \"hi\" \\o/""#).as_deref(),
            Ok(r#"say "hi" \o/"#)
        );
        assert_eq!(parse(b"  padded ").as_deref(), Ok("padded"));
        let longest = "k".repeat(MAX_IDEMPOTENCY_KEY_LEN);
        assert_eq!(parse(longest.as_bytes()).as_deref(), Ok(longest.as_str()));
    }

    #[test]
    fn bad_keys_are_refused_with_a_reason() {
        for raw in [
            &b""[..],
            b"\"\"",
            b"\"open",
            b"\"",
            b"a b",
            b"caf\xc3\xa9",
            b"\"caf\xc3\xa9\"",
            b"\"bad \\n escape\"",
            b"\"inner \" quote\"",
            b"back\\slash",
            b"tab\there",
            b"\"ctl\x01\"",
        ] {
            let err = parse(raw).expect_err(&format!("{raw:?} must be refused"));
            assert!(!err.reason.is_empty());
        }
        let err = parse("k".repeat(300).as_bytes()).expect_err("300 bytes");
        assert!(err.reason.contains("300 bytes"), "{}", err.reason);
    }

    #[test]
    fn the_header_must_appear_once() {
        let req = http::Request::builder()
            .header("idempotency-key", "a")
            .header("idempotency-key", "b")
            .body(())
            .expect("request");
        let (parts, ()) = req.into_parts();
        let err = HeaderKey::default()
            .extract_key(&parts)
            .expect_err("two headers");
        // Spelled as every other message spells it.
        assert!(err.reason.contains("`Idempotency-Key`"), "{}", err.reason);
        let (parts, ()) = http::Request::new(()).into_parts();
        assert_eq!(HeaderKey::default().extract_key(&parts), Ok(None));
    }

    #[test]
    fn messages_spell_a_header_with_capitalized_words() {
        for (name, shown) in [
            ("idempotency-key", "Idempotency-Key"),
            ("x-request-id", "X-Request-Id"),
            ("key", "Key"),
            ("x--a", "X--A"),
        ] {
            assert_eq!(spelled(&HeaderName::from_static(name)), shown);
        }
    }
}
