//! How a run-once result is stored in a record's [`Completion`]: the
//! status says whether the work returned `Ok` or a stored `Err`, the
//! headers field carries [`FORMAT`] (and, for a result not stored, why),
//! the body the value as JSON. A record whose headers do not start with
//! [`FORMAT`] was written by another version (or another writer) and is
//! refused as [`Incompatible`](IdempotentError::Incompatible), never
//! overwritten.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::IdempotentError;
use crate::records::Completion;

/// This version's format tag.
const FORMAT: &str = "redlock-idempotent/1";

/// The work returned `Ok`.
const OK: u16 = 200;
/// The work returned an `Err` its call chose to store.
const ERR: u16 = 500;

/// Reads a stored error (`run_storing_errors`'s `E`).
pub(crate) type ReadErr<E> = fn(&[u8]) -> Result<E, serde_json::Error>;

/// A result as stored: `Ok` for the work's value, `Err` for its error.
pub(crate) fn encode<V: Serialize + ?Sized>(ok: bool, value: &V, limit: usize) -> Completion {
    let status = if ok { OK } else { ERR };
    match serde_json::to_vec(value) {
        Ok(body) if body.len() <= limit => Completion::new(status, FORMAT.into(), body),
        Ok(body) => {
            let meta = format!("{FORMAT} too-large {} {limit}", body.len());
            Completion::unreplayable(status, meta.into_bytes())
        }
        Err(e) => {
            let meta = format!("{FORMAT} unserializable {e}");
            Completion::unreplayable(status, meta.into_bytes())
        }
    }
}

/// The stored result: the work's `Ok` value, or its stored `Err`, decoded
/// by `err` (`None`: this call cannot read stored errors).
pub(crate) fn decode<T, E>(
    completion: &Completion,
    err: Option<ReadErr<E>>,
) -> Result<Result<T, E>, IdempotentError>
where
    T: DeserializeOwned,
{
    let incompatible = |reason: String| IdempotentError::Incompatible { reason };
    let meta = String::from_utf8_lossy(&completion.headers);
    let Some(rest) = meta.strip_prefix(FORMAT) else {
        return Err(incompatible(
            "the record was not written by this version's run-once calls".to_owned(),
        ));
    };
    if !completion.replayable {
        let mut words = rest.split_whitespace();
        return Err(match (words.next(), words.next(), words.next()) {
            (Some("too-large"), Some(size), Some(limit)) => IdempotentError::TooLarge {
                size: size.parse().unwrap_or(0),
                limit: limit.parse().unwrap_or(0),
            },
            (Some("unserializable"), ..) => IdempotentError::NotSerializable {
                reason: rest.trim_start()["unserializable".len()..]
                    .trim()
                    .to_owned(),
            },
            _ => incompatible(format!(
                "an unknown reason for a result not stored: {rest:?}"
            )),
        });
    }
    match completion.status {
        OK => serde_json::from_slice(&completion.body)
            .map(Ok)
            .map_err(|e| {
                incompatible(format!(
                    "the stored result does not decode as `{}`: {e}",
                    std::any::type_name::<T>()
                ))
            }),
        ERR => match err {
            Some(decode) => decode(&completion.body).map(Err).map_err(|e| {
                incompatible(format!(
                    "the stored error does not decode as `{}`: {e}",
                    std::any::type_name::<E>()
                ))
            }),
            None => Err(incompatible(
                "the record holds a stored error, which this call cannot read (it was stored \
                 by `run_storing_errors`)"
                    .to_owned(),
            )),
        },
        other => Err(incompatible(format!("an unknown stored status {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_round_trips() {
        let c = encode(true, &vec![1u32, 2, 3], 1024);
        let back: Result<Vec<u32>, ()> = decode(&c, None).expect("decodes");
        assert_eq!(back, Ok(vec![1, 2, 3]));
    }

    #[test]
    fn a_stored_error_round_trips_only_where_errors_are_read() {
        let c = encode(false, "declined", 1024);
        let read = |b: &[u8]| serde_json::from_slice::<String>(b);
        let back: Result<u32, String> = decode(&c, Some(read)).expect("decodes");
        assert_eq!(back, Err("declined".to_owned()));
        let refused = decode::<u32, String>(&c, None);
        assert!(matches!(refused, Err(IdempotentError::Incompatible { .. })));
    }

    #[test]
    fn a_result_over_the_limit_is_kept_as_too_large() {
        let c = encode(true, &"x".repeat(100), 10);
        assert!(!c.replayable);
        let refused = decode::<String, ()>(&c, None);
        assert!(matches!(
            refused,
            Err(IdempotentError::TooLarge {
                size: 102,
                limit: 10
            })
        ));
    }

    #[test]
    fn an_unserializable_result_is_kept_as_such() {
        let mut map = std::collections::HashMap::new();
        map.insert(vec![1u8], 1u8);
        let c = encode(true, &map, 1024);
        let refused = decode::<u8, ()>(&c, None);
        assert!(
            matches!(refused, Err(IdempotentError::NotSerializable { ref reason }) if reason.contains("key must be a string")),
            "{refused:?}"
        );
    }

    #[test]
    fn another_format_or_type_is_incompatible_and_says_which() {
        let http = Completion::new(200, b"content-type:text/plain\n".to_vec(), b"hi".to_vec());
        assert!(matches!(
            decode::<String, ()>(&http, None),
            Err(IdempotentError::Incompatible { .. })
        ));
        let c = encode(true, "text", 1024);
        let Err(IdempotentError::Incompatible { reason }) = decode::<u64, ()>(&c, None) else {
            panic!("a string is not a u64");
        };
        assert!(reason.contains("u64"), "{reason}");
    }
}
