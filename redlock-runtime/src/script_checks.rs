//! Every script is cluster-safe, and the check can fail.

use crate::primitive::fair::{FAIR_RELEASE, SCRIPTS as FAIR_SCRIPTS};
use crate::primitive::lease::LEASE_RENEW;
use crate::primitive::lock::{ACQUIRE_LOCK, RELEASE_LOCK};
use crate::primitive::name::FORCE_RELEASE;
use crate::primitive::{group, latch, lock, name, record, rw, semaphore};
use crate::scripts::*;

/// Every script: each primitive's, in its folder of `primitive/`.
fn every() -> impl Iterator<Item = (&'static str, &'static Lua)> {
    lock::SCRIPTS
        .into_iter()
        .chain(FAIR_SCRIPTS)
        .chain(rw::SCRIPTS)
        .chain(semaphore::SCRIPTS)
        .chain(latch::SCRIPTS)
        .chain(group::SCRIPTS)
        .chain([&LEASE_RENEW])
        .chain(record::SCRIPTS)
        .chain(name::SCRIPTS)
        .map(|script| (script.name(), script))
}

/// `text` less its Lua comments (`--` to the end of a line; no script
/// writes `--` inside a string): what the checks read is the code, not
/// the prose that explains it.
fn code(text: &str) -> String {
    text.lines()
        .map(|line| line.split_once("--").map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text of every `redis.call(...)` / `redis.pcall(...)` argument
/// list in `text`, up to its closing parenthesis.
fn calls(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("redis.") {
        let rest = &text[at..];
        let Some(open) = rest.find('(') else { continue };
        let head = &rest[..open];
        if head != "redis.call" && head != "redis.pcall" {
            continue;
        }
        let mut depth = 0;
        for (i, c) in rest[open..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push(&rest[open + 1..open + i]);
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Splits a call's arguments at the top-level commas.
fn arguments(call: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in call.char_indices() {
        match c {
            '(' | '{' => depth += 1,
            ')' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(call[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(call[start..].trim());
    out
}

/// Commands whose first argument is a key (or, for the publishes, a
/// channel that Redis Cluster routes by slot like a key).
const KEYED: [&str; 25] = [
    "GET",
    "APPEND",
    "SET",
    "DEL",
    "EXISTS",
    "PEXPIRE",
    "PTTL",
    "PUBLISH",
    "SPUBLISH",
    "LINDEX",
    "LPOP",
    "RPUSH",
    "LREM",
    "ZSCORE",
    "ZADD",
    "ZREM",
    "HSET",
    "ZRANGE",
    "ZRANGEBYSCORE",
    "ZREMRANGEBYSCORE",
    "ZCARD",
    "SADD",
    "SISMEMBER",
    "SMEMBERS",
    "ZCOUNT",
];

/// What in `text` a cluster or proxy would reject: a command name that
/// is not a literal, a key not taken from `KEYS`, a key built in Lua.
fn problems(text: &str) -> Vec<String> {
    let text = &code(text);
    let mut out = Vec::new();
    let found = calls(text);
    if found.is_empty() {
        out.push("no redis.call found".to_owned());
    }
    for call in found {
        let args = arguments(call);
        let command = args[0];
        // A literal command name: a quoted upper-case word.
        let Some(name) = command
            .strip_prefix('\'')
            .and_then(|c| c.strip_suffix('\''))
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_uppercase()))
        else {
            out.push(format!("command name is not a literal: {call}"));
            continue;
        };
        if KEYED.contains(&name) || name.starts_with('H') {
            // Its key is one of KEYS, or a parameter of a shared Lua
            // function that is only ever given one (checked below).
            let key = args.get(1).copied().unwrap_or("");
            if !from_keys(key) {
                out.push(format!("{name} on a key not from KEYS: {call}"));
            }
        } else if name != "TIME" {
            out.push(format!(
                "unknown command {name} (add it to KEYED if keyed): {call}"
            ));
        }
    }
    // A local named like a key parameter holds one of KEYS.
    for (at, _) in text.match_indices("local key") {
        let assigned = text[at..]
            .split_once('=')
            .map(|(_, rest)| rest.trim_start());
        if !assigned.is_some_and(|rest| rest.starts_with("KEYS[")) {
            out.push("a local `key` not taken from KEYS".to_owned());
        }
    }
    // No key is built inside Lua: no string concatenation at all.
    if text.contains("..") {
        out.push("string concatenation".to_owned());
    }
    for helper in HELPERS {
        let called = format!("{helper}(");
        for (at, _) in text.match_indices(&called) {
            if !text[..at].ends_with("function ") && !from_keys(&text[at + called.len()..]) {
                out.push(format!("{helper}(..) given a key not from KEYS"));
            }
        }
        // Called through `pcall(helper, key, ..)`.
        let protected = format!("pcall({helper}, ");
        for (at, _) in text.match_indices(&protected) {
            if !text[at + protected.len()..].starts_with("KEYS[") {
                out.push(format!("pcall({helper}, ..) given a key not from KEYS"));
            }
        }
    }
    out
}

/// The shared Lua functions whose first argument is a key.
const HELPERS: [&str; 10] = [
    "publish",
    "mark_waited",
    "hand_over",
    "next_fence",
    "next_fence_at",
    "purge",
    "drop_expired",
    "keep_key",
    "acquire_lock",
    "release_lock",
];

/// Whether `arg` (a call's key argument, or the text that starts with it)
/// is one of `KEYS`, or the key parameter of a shared function, which the
/// checks on [`HELPERS`] see given only keys from `KEYS`.
fn from_keys(arg: &str) -> bool {
    arg.starts_with("KEYS[")
        || ["key", "counter", "queue", "waiters", "waited", "channel"]
            .iter()
            .any(|p| {
                arg.strip_prefix(p)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(','))
            })
}

#[test]
fn every_script_is_cluster_safe() {
    for (name, script) in every() {
        for publish in [Publish::Plain, Publish::Sharded] {
            let found = problems(&script.text(publish));
            assert!(found.is_empty(), "{name} ({publish:?}): {found:?}");
        }
    }
}

#[test]
fn the_check_finds_what_a_cluster_rejects() {
    for bad in [
        "redis.call('GET', 'lock:' .. ARGV[1])",
        "redis.call('GET', ARGV[1])",
        "redis.call(ARGV[2], KEYS[1])",
        "local c = 'DEL'; redis.call(c, KEYS[1])",
        "redis.call('SET', KEYS[1] .. ':x', 1)",
        "redis.call('EVAL', 'return 1', 0)",
        "local x = next_fence(ARGV[1], 1, t)",
        "local key, token = ARGV[1], ARGV[2]\nredis.call('DEL', key)",
        "local ok, r = pcall(release_lock, ARGV[1], ARGV[2])",
        "local r = acquire_lock(ARGV[1], KEYS[1], ARGV[2])",
        "return 1",
        "publish(ARGV[1], '')",
        "local function publish(channel, message)\n  redis.call('PUBLISH', ARGV[1], message)\nend",
    ] {
        assert!(!problems(bad).is_empty(), "not caught: {bad}");
    }
    assert!(problems("redis.call('DEL', KEYS[1])").is_empty());
}

#[test]
fn sharded_variants_publish_with_spublish_only() {
    for (name, script) in every() {
        let (plain, sharded) = (
            code(&script.text(Publish::Plain)),
            code(&script.text(Publish::Sharded)),
        );
        assert!(!sharded.contains("'PUBLISH'"), "{name}");
        assert!(!plain.contains("SPUBLISH"), "{name}");
        // A script that calls `publish` has it defined first, in the
        // variant it is sent with; one that does not has one text.
        let calls_publish = plain
            .match_indices("publish(")
            .any(|(at, _)| !plain[..at].ends_with("function "));
        assert_eq!(calls_publish, script.publishes(), "{name}");
        assert_eq!(plain.contains("'PUBLISH'"), script.publishes(), "{name}");
        assert_eq!(sharded.contains("'SPUBLISH'"), script.publishes(), "{name}");
        if script.publishes() {
            let defined = plain.find("local function publish(");
            let first_call = plain
                .match_indices("publish(")
                .find(|(at, _)| !plain[..*at].ends_with("function "))
                .map(|(at, _)| at);
            assert!(
                defined < first_call,
                "{name}: publish called before defined"
            );
        } else {
            assert_eq!(plain, sharded, "{name}");
        }
    }
}

/// Every shared function, by name, with the part that defines it.
fn shared_functions() -> Vec<(String, &'static str)> {
    let parts = [
        FENCE,
        WAITING,
        ACQUIRE_LOCK,
        RELEASE_LOCK,
        FAIR_LINE,
        HAND_OVER,
        LEASES,
    ];
    let texts = parts
        .iter()
        .filter_map(|part| match part {
            Part::Lua(text) => Some(*text),
            Part::Publish => None,
        })
        .chain([PUBLISH, SPUBLISH]);
    let mut out = Vec::new();
    for text in texts {
        for (at, _) in text.match_indices("local function ") {
            let rest = &text[at + "local function ".len()..];
            let name = rest.split('(').next().unwrap_or_default();
            out.push((name.to_owned(), text));
        }
    }
    out
}

#[test]
fn every_shared_function_a_script_calls_is_joined_before_its_call() {
    let functions = shared_functions();
    assert!(functions.len() >= 14, "{}", functions.len());
    for (name, script) in every() {
        for publish in [Publish::Plain, Publish::Sharded] {
            let text = code(&script.text(publish));
            for (function, _) in &functions {
                let called = format!("{function}(");
                let defined = format!("local function {function}(");
                let first_call = text
                    .match_indices(&called)
                    .map(|(at, _)| at)
                    .find(|&at| !text[..at].ends_with("function ") && !is_word_tail(&text, at));
                let Some(first_call) = first_call else {
                    continue;
                };
                assert!(
                    text.find(&defined).is_some_and(|at| at < first_call),
                    "{name} ({publish:?}) calls {function} without its part before"
                );
            }
        }
    }
}

/// Whether the name found at `at` is the end of a longer word
/// (`next_fence(` inside `issue_next_fence(`).
fn is_word_tail(text: &str, at: usize) -> bool {
    text[..at]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

#[test]
fn no_script_writes_to_a_value_it_does_not_own() {
    // A waiter's signal is a key of its own (shared/waiting.lua): nothing
    // appends to a lock's value, and every holder check is exact (no
    // script accepts a value with a mark, as the previous version's did).
    for (name, script) in every() {
        let text = code(&script.text(Publish::Plain));
        assert!(!text.contains("'APPEND'"), "{name} appends to a value");
        assert!(
            !text.contains("string.sub(v, 1, -2)"),
            "{name} accepts a mark"
        );
        if name != "name/force_release" {
            assert!(!text.contains("== 31"), "{name} reads a mark byte");
        }
    }
    // The one script that reads the previous version's mark leaves it out
    // of an ended holder's id: the byte it checks is that mark.
    assert_eq!(WAITED_MARK as u32, 31);
    assert!(code(&FORCE_RELEASE.text(Publish::Plain)).contains("string.byte(token, -1) == 31"));
    // A grant message's fields are split by the byte its script writes.
    assert_eq!(crate::store::subscribe::GRANT_SEPARATOR as u32, 31);
    assert!(
        FAIR_RELEASE
            .text(Publish::Plain)
            .contains(r"'%s\31%.0f\31%.0f'")
    );
    // The previous version's waiters marked only tokens led by byte 126:
    // none of this version's is.
    assert_eq!(crate::owner::MARKED_BEFORE as u32, 126);
    assert!(crate::owner::token("n", 0).starts_with(crate::owner::PLAIN));
    assert!(!crate::owner::token("n", 0).starts_with(crate::owner::MARKED_BEFORE));
    assert!(!crate::owner::queued_token("n", 0).starts_with(crate::owner::MARKED_BEFORE));
}

/// Every message a script publishes, as its text writes it. Whoever may
/// subscribe to a lock's channel reads them (an ACL can grant channels
/// without keys), so none may carry an owner token, the secret that
/// releases and extends a lock (issue 32, part 5): a waiter is named by
/// `redis.sha1hex` of its token (see `store::subscribe::waiter_id`). A new
/// message goes here once it is known to carry no secret.
const MESSAGES: [&str; 6] = [
    "''",
    "'*'",
    "string.format('*%d', tonumber(freed))",
    "redis.sha1hex(head)",
    "head and redis.sha1hex(head) or ''",
    r"string.format('%s\31%.0f\31%.0f', redis.sha1hex(head), fence, now)",
];

#[test]
fn no_script_publishes_an_owner_token() {
    let mut published = std::collections::BTreeSet::new();
    for (name, script) in every() {
        let text = code(&script.text(Publish::Plain));
        for (at, _) in text.match_indices("publish(") {
            if text[..at].ends_with("function ") {
                continue;
            }
            let rest = &text[at + "publish".len()..];
            let as_call = format!("redis.call{rest}");
            let Some(call) = calls(&as_call).into_iter().next() else {
                panic!("{name}: an unclosed publish(..)");
            };
            let args = arguments(call);
            let message = args.get(1).copied().unwrap_or("");
            assert!(
                MESSAGES.contains(&message),
                "{name} publishes {message:?}: name a waiter by redis.sha1hex of its \
                 token, never by the token"
            );
            published.insert(message.to_owned());
        }
        // Nothing publishes but through `publish`, whose message is the
        // one its caller gives.
        for call in calls(&text) {
            let args = arguments(call);
            if matches!(args[0], "'PUBLISH'" | "'SPUBLISH'") {
                assert_eq!(args.get(2).copied(), Some("message"), "{name}: {call}");
            }
        }
    }
    // Each message listed is still published somewhere: the list is the
    // scripts', not a stale one.
    assert_eq!(published.len(), MESSAGES.len(), "{published:?}");
}

#[test]
fn each_script_is_named_by_its_file() {
    // The name a Redis call's span gives a script is the file a reader
    // opens to read it.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (name, script) in every() {
        let file = dir.join(script.file());
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{name}: cannot read {}: {e}", file.display()));
        assert_eq!(
            text,
            script.body(),
            "{name} is not the text of {}",
            file.display()
        );
    }
}

#[test]
fn a_compiled_script_is_found_by_its_sha() {
    let sha = lock::RELEASE.on(Publish::Sharded).get_hash().to_owned();
    assert_eq!(name_of(sha.as_bytes()), Some("lock/release"));
    assert_eq!(name_of(sha.to_uppercase().as_bytes()), Some("lock/release"));
    assert_eq!(name_of(b"0000000000000000000000000000000000000000"), None);
}
