//! The attribute's arguments, checked: which options the attribute takes
//! (`#[distributed_lock]` or `#[distributed_semaphore]`), how they combine,
//! and what the body runs holding ([`Take`]).
//!
//! Checking never stops at the first problem: every bad option is recorded
//! in a [`Ctxt`] and all of them are reported together, each spanned on the
//! offending token.

use proc_macro2::{Span, TokenStream};
use syn::parse::ParseStream;
use syn::{Expr, LitInt, Path};

use crate::ctxt::Ctxt;
use crate::duration::{self, DurationArg};
use crate::key::KeyTemplate;
use crate::options::{self, KeyList, Opt, Written};

/// Which attribute is expanding.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attr {
    /// `#[distributed_lock]`.
    Lock,
    /// `#[distributed_semaphore]`.
    Semaphore,
    /// `#[idempotent]`.
    Idempotent,
}

impl Attr {
    /// `distributed_lock`, for messages (`#[distributed_lock]`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Attr::Lock => "distributed_lock",
            Attr::Semaphore => "distributed_semaphore",
            Attr::Idempotent => "idempotent",
        }
    }

    /// What the body runs holding, for messages: "the lock".
    pub(crate) fn held(self) -> &'static str {
        match self {
            Attr::Lock => "the lock",
            Attr::Semaphore => "a permit",
            Attr::Idempotent => "its key's record",
        }
    }

    /// The option names, for "expected one of" messages.
    fn options(self) -> &'static str {
        match self {
            Attr::Lock => {
                "`key`, `keys`, `mode`, `ttl`, `wait`, `on_busy`, `hold_at_least`, `renew`, \
                 `on_lost`, `fair`, `client`, `crate`"
            }
            Attr::Semaphore => {
                "`key`, `permits`, `ttl`, `wait`, `on_busy`, `renew`, `on_lost`, `client`, `crate`"
            }
            Attr::Idempotent => {
                "`key`, `ttl`, `lease`, `wait`, `scope`, `fingerprint`, `client`, `crate`"
            }
        }
    }

    /// Why `option` does not apply to this attribute, if it does not.
    fn refuses(self, option: &Opt) -> Option<String> {
        let lock_only = matches!(
            option,
            Opt::Keys(_)
                | Opt::Mode(_)
                | Opt::Permits(_)
                | Opt::OnBusy(_)
                | Opt::HoldAtLeast(_)
                | Opt::Renew(_)
                | Opt::OnLost(_)
                | Opt::Fair(_)
        );
        let idempotent_only = matches!(option, Opt::Lease(_) | Opt::Scope(_) | Opt::Fingerprint(_));
        if self == Attr::Idempotent && lock_only {
            return Some(format!(
                "`{}` does not apply to `#[idempotent]`, which runs the body once per key and \
                 replays its result; its options are {}",
                option.name(),
                self.options()
            ));
        }
        if self != Attr::Idempotent && idempotent_only {
            return Some(format!(
                "`{}` is an option of `#[idempotent]`, not of `#[{}]`; remove it",
                option.name(),
                self.name()
            ));
        }
        let reason: Option<&'static str> = match (self, option) {
            (Attr::Lock, Opt::Permits(_)) => Some(
                "`permits` is an option of `#[distributed_semaphore]`: to let several calls run \
                 at once, write `#[distributed_semaphore(key = \"..\", permits = 4)]`",
            ),
            (Attr::Semaphore, Opt::Keys(_)) => Some(
                "`keys` does not apply to `#[distributed_semaphore]`: a semaphore has one key; \
                 write `key = \"..\"`",
            ),
            (Attr::Semaphore, Opt::Mode(_)) => Some(
                "`mode` does not apply to `#[distributed_semaphore]`: each call takes one \
                 permit; for a read/write lock write `#[distributed_lock(key = \"..\", mode = \
                 \"read\")]`",
            ),
            (Attr::Semaphore, Opt::Fair(_)) => Some(
                "`fair` does not apply to `#[distributed_semaphore]`: a semaphore does not queue \
                 its waiters in arrival order; remove it",
            ),
            (Attr::Semaphore, Opt::HoldAtLeast(_)) => Some(
                "`hold_at_least` does not apply to `#[distributed_semaphore]`: a permit is given \
                 back when the body ends; remove it",
            ),
            _ => None,
        };
        reason.map(str::to_owned)
    }
}

/// What the function does when another owner holds the lock.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnBusy {
    /// Return the lock error through the function's `Result`.
    Error,
    /// Skip the body and return `()`, `None` or `Ok(None)`.
    Skip,
}

/// What happens to the body when the lock is lost while it runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnLost {
    Cancel,
    Signal,
}

/// What the attribute wraps the body in.
#[derive(Clone, Copy)]
pub(crate) enum Around {
    /// A lock attribute's: the body runs holding `Take` (`call.rs`).
    Held(Take),
    /// `#[idempotent]`'s: the body runs once per key (`once.rs`).
    Once,
}

/// What the body of a lock attribute runs holding.
#[derive(Clone, Copy)]
pub(crate) enum Take {
    /// `client.lock(key)`: no `mode`, or `mode = "exclusive"`.
    Lock,
    /// `client.rw_lock(key).read()`: `mode = "read"`.
    Read,
    /// `client.rw_lock(key).write()`: `mode = "write"`.
    Write,
    /// `client.multi_lock([k1, k2, ..])`: `keys = [..]`.
    Multi,
    /// `client.semaphore(key, limit)`, one permit per call:
    /// `#[distributed_semaphore(permits = limit)]`.
    Permit { limit: u32, span: Span },
}

/// The checked arguments. Fields left `None` take the runtime's defaults.
pub(crate) struct LockArgs {
    pub(crate) around: Around,
    /// `key`'s template, or `keys`' templates in order; empty when missing
    /// (an error was recorded).
    pub(crate) keys: Vec<KeyTemplate>,
    pub(crate) ttl: Option<DurationArg>,
    pub(crate) wait: Option<DurationArg>,
    pub(crate) on_busy: OnBusy,
    pub(crate) hold_at_least: Option<DurationArg>,
    pub(crate) renew: bool,
    pub(crate) on_lost: OnLost,
    pub(crate) fair: bool,
    pub(crate) client: Option<Expr>,
    pub(crate) crate_path: Option<Path>,
    /// `#[idempotent]`: `lease = ".."`.
    pub(crate) lease: Option<DurationArg>,
    /// `#[idempotent]`: `scope = ".."`.
    pub(crate) scope: Option<syn::LitStr>,
    /// `#[idempotent]`: `fingerprint = ".."`, a template as `key`'s.
    pub(crate) fingerprint: Option<KeyTemplate>,
}

/// The options that decide [`Take`], with their spans, until they are
/// checked together.
#[derive(Default)]
struct Shape {
    key: Option<Span>,
    keys: Option<Span>,
    mode: Option<(Take, Span)>,
    permits: Option<(u32, Span)>,
    /// The options only a plain lock has (`fair`, `hold_at_least`), in
    /// the order written, with their names' spans.
    plain_only: Vec<(&'static str, Span)>,
}

/// Parses `attr`'s arguments, recording every problem in `cx`.
pub(crate) fn parse(attr: Attr, args: TokenStream, cx: &mut Ctxt) -> LockArgs {
    let mut out = LockArgs {
        around: Around::Held(Take::Lock),
        keys: Vec::new(),
        ttl: None,
        wait: None,
        on_busy: OnBusy::Error,
        hold_at_least: None,
        renew: true,
        on_lost: OnLost::Cancel,
        fair: false,
        client: None,
        crate_path: None,
        lease: None,
        scope: None,
        fingerprint: None,
    };
    let parsed = syn::parse::Parser::parse2(
        |input: ParseStream<'_>| Ok(options::parse_options(input, attr.options(), cx)),
        args,
    );
    let written = match parsed {
        Ok(written) => written,
        Err(e) => {
            cx.push(e);
            return out;
        }
    };

    let mut shape = Shape::default();
    let mut seen: Vec<&'static str> = Vec::new();
    for Written {
        name: name_span,
        opt,
    } in written.options
    {
        let name = opt.name();
        if seen.contains(&name) {
            cx.error(opt.span(), format!("`{name}` specified more than once"));
            continue;
        }
        seen.push(name);
        if let Some(reason) = attr.refuses(&opt) {
            cx.error(name_span, reason);
            continue;
        }
        match opt {
            Opt::Key(lit) => {
                shape.key = Some(name_span);
                match KeyTemplate::parse(&lit) {
                    Ok(key) => out.keys.insert(0, key),
                    Err(e) => cx.push(e),
                }
            }
            Opt::Keys(list) => {
                shape.keys = Some(name_span);
                out.keys.extend(key_list(list, cx));
            }
            Opt::Mode(lit) => match lit.value().as_str() {
                "exclusive" => shape.mode = Some((Take::Lock, lit.span())),
                "read" => shape.mode = Some((Take::Read, lit.span())),
                "write" => shape.mode = Some((Take::Write, lit.span())),
                other => cx.error(
                    lit.span(),
                    format!(
                        "unknown `mode` {other:?}: expected \"exclusive\" (a plain lock, the \
                         default), \"read\" (the shared read lock of a read/write lock) or \
                         \"write\" (its exclusive write lock)"
                    ),
                ),
            },
            Opt::Permits(lit) => {
                if let Some(limit) = permits(&lit, cx) {
                    shape.permits = Some((limit, lit.span()));
                }
            }
            Opt::Ttl(input) if attr == Attr::Idempotent => {
                out.ttl = input.check(duration::retention, cx);
            }
            Opt::Ttl(input) => out.ttl = input.check(duration::ttl, cx),
            Opt::Lease(input) => out.lease = input.check(duration::lease, cx),
            Opt::Scope(lit) => {
                let len = lit.value().len();
                if len == 0 || len > 256 {
                    cx.error(
                        lit.span(),
                        "`scope` names what work this is (\"payments\"): 1 to 256 bytes",
                    );
                } else {
                    out.scope = Some(lit);
                }
            }
            Opt::Fingerprint(lit) => match KeyTemplate::parse(&lit) {
                Ok(template) => out.fingerprint = Some(template),
                Err(e) => cx.push(e),
            },
            Opt::Wait(input) => out.wait = input.check(duration::wait, cx),
            Opt::HoldAtLeast(input) => {
                shape.plain_only.push(("hold_at_least", name_span));
                out.hold_at_least = input.check(duration::hold_at_least, cx);
            }
            Opt::OnBusy(lit) => match lit.value().as_str() {
                "error" => out.on_busy = OnBusy::Error,
                "skip" => out.on_busy = OnBusy::Skip,
                other => cx.error(
                    lit.span(),
                    format!(
                        "unknown `on_busy` value {other:?}: expected \"error\" (return the lock \
                         error, the default) or \"skip\" (skip the body and return `()`, `None` \
                         or `Ok(None)`)"
                    ),
                ),
            },
            Opt::OnLost(lit) => match lit.value().as_str() {
                "cancel" => out.on_lost = OnLost::Cancel,
                "signal" => out.on_lost = OnLost::Signal,
                other => cx.error(
                    lit.span(),
                    format!(
                        "unknown `on_lost` value {other:?}: expected \"cancel\" (stop the body \
                         when the lock is lost, the default) or \"signal\" (let it run on and \
                         check `current_lock()`)"
                    ),
                ),
            },
            Opt::Renew(lit) => out.renew = lit.value,
            Opt::Fair(lit) => {
                shape.plain_only.push(("fair", name_span));
                out.fair = lit.value;
            }
            Opt::Client(expr) => out.client = Some(expr),
            Opt::Crate(lit) => match lit.parse::<Path>() {
                Ok(path) => out.crate_path = Some(path),
                Err(_) => cx.error(
                    lit.span(),
                    format!(
                        "`crate` must be a path such as \"redlock_runtime\" or \
                         \"::my_locks\", not {:?}",
                        lit.value()
                    ),
                ),
            },
        }
    }
    let failed = |name: &str| written.failed.iter().any(|n| n == name);
    if shape.key.is_none() && shape.keys.is_none() && !failed("key") && !failed("keys") {
        cx.error(Span::call_site(), missing_key(attr));
    }
    out.around = around(attr, &shape, cx);
    if attr == Attr::Semaphore && !seen.contains(&"permits") && !failed("permits") {
        cx.error(
            Span::call_site(),
            "missing `permits`: write `#[distributed_semaphore(key = \"jobs\", permits = 4)]`, \
             where `permits` is the semaphore's limit: how many calls may run at once",
        );
    }
    out
}

fn missing_key(attr: Attr) -> &'static str {
    match attr {
        Attr::Lock => {
            "missing `key`: write `#[distributed_lock(key = \"order:<order_id>\")]`, where \
             `<order_id>` names an argument of the function (or `keys = [\"a:<x>\", \
             \"b:<y>\"]` to hold several locks at once)"
        }
        Attr::Semaphore => {
            "missing `key`: write `#[distributed_semaphore(key = \"jobs:<queue>\", permits = \
             4)]`, where `<queue>` names an argument of the function"
        }
        Attr::Idempotent => {
            "missing `key`: write `#[idempotent(key = \"payment:<msg.id>\")]`, where \
             `<msg.id>` names an argument of the function (or a field of one): the body runs \
             once per key"
        }
    }
}

/// What the body runs in, from the attribute, `key`/`keys`, `mode` and
/// `permits`; refuses the combinations the runtime does not have.
fn around(attr: Attr, shape: &Shape, cx: &mut Ctxt) -> Around {
    if let (Some(_), Some(keys)) = (shape.key, shape.keys) {
        cx.error(
            keys,
            "`key` and `keys` together: write `key = \"..\"` for one lock, or `keys = [..]` for \
             several locks taken together, not both",
        );
    }
    let (take, what) = match (attr, shape.keys, shape.mode) {
        (Attr::Idempotent, ..) => return Around::Once,
        (Attr::Semaphore, ..) => {
            // `permits` is checked by the caller; 1 stands in for a bad one.
            let (limit, span) = shape.permits.unwrap_or((1, Span::call_site()));
            return Around::Held(Take::Permit { limit, span });
        }
        (Attr::Lock, Some(_), Some((_, mode))) => {
            cx.error(
                mode,
                "`mode` does not apply to `keys`: a multi-lock takes exclusive locks; remove \
                 `mode`, or lock one key with `key = \"..\"` and `mode = \"read\"`",
            );
            (Take::Multi, "`keys`")
        }
        (Attr::Lock, Some(_), None) => (Take::Multi, "`keys`"),
        (Attr::Lock, None, Some((Take::Read, _))) => (Take::Read, "`mode = \"read\"`"),
        (Attr::Lock, None, Some((Take::Write, _))) => (Take::Write, "`mode = \"write\"`"),
        (Attr::Lock, None, _) => return Around::Held(Take::Lock),
    };
    let why = if matches!(take, Take::Multi) {
        "a multi-lock takes its keys in one fixed order"
    } else {
        "a read/write lock serves waiting writers first"
    };
    for &(name, span) in &shape.plain_only {
        let message = if name == "fair" {
            format!(
                "`fair` does not apply to {what}: {why}, not through the fair queue of a plain \
                 lock; remove `fair`"
            )
        } else {
            format!(
                "`hold_at_least` does not apply to {what}: only a plain lock (no `mode`, or \
                 `mode = \"exclusive\"`) is held past its body; remove `hold_at_least`"
            )
        };
        cx.error(span, message);
    }
    Around::Held(take)
}

/// `keys = [..]`: each element a key template; at least one, no two alike.
fn key_list(list: KeyList, cx: &mut Ctxt) -> Vec<KeyTemplate> {
    let mut keys: Vec<KeyTemplate> = Vec::new();
    if list.keys.is_empty() {
        cx.error(
            list.span,
            "`keys = []` names no lock: list the keys to hold together, such as `keys = \
             [\"account:<from>\", \"account:<to>\"]` (for one lock, write `key = \"..\"`)",
        );
        return keys;
    }
    for lit in &list.keys {
        match KeyTemplate::parse(lit) {
            Ok(key) => {
                let written = key.as_written();
                if keys.iter().any(|k| k.as_written() == written) {
                    cx.error(
                        lit.span(),
                        format!("`keys` lists {written:?} twice: list each key once"),
                    );
                } else {
                    keys.push(key);
                }
            }
            Err(e) => cx.push(e),
        }
    }
    keys
}

/// `permits = 4`: an unsuffixed (or `u32`) integer, at least 1.
fn permits(lit: &LitInt, cx: &mut Ctxt) -> Option<u32> {
    if !matches!(lit.suffix(), "" | "u32") {
        cx.error(
            lit.span(),
            format!(
                "`permits` is a `u32`: write `permits = {}`, without the `{}` suffix",
                lit.base10_digits(),
                lit.suffix()
            ),
        );
        return None;
    }
    match lit.base10_parse::<u32>() {
        Ok(0) => {
            cx.error(
                lit.span(),
                "`permits = 0` lets no call in: the semaphore's limit (how many calls may run at \
                 once) is at least 1",
            );
            None
        }
        Ok(limit) => Some(limit),
        Err(_) => {
            cx.error(
                lit.span(),
                format!(
                    "`permits = {}` is too large: the semaphore's limit is a `u32`",
                    lit.base10_digits()
                ),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `attr(args)` takes, and its errors' messages.
    fn parsed(attr: Attr, args: &str) -> (LockArgs, Vec<String>) {
        let mut cx = Ctxt::default();
        let args = parse(attr, args.parse().expect("tokens"), &mut cx);
        let errors = match cx.into_result() {
            Ok(()) => Vec::new(),
            Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
        };
        (args, errors)
    }

    #[test]
    fn mode_keys_and_permits_decide_what_the_body_holds() {
        let (args, errors) = parsed(Attr::Lock, r#"key = "p:<id>", mode = "read""#);
        assert!(
            errors.is_empty() && matches!(args.around, Around::Held(Take::Read)),
            "{errors:?}"
        );
        let (args, errors) = parsed(Attr::Lock, r#"key = "p:<id>", mode = "write""#);
        assert!(
            errors.is_empty() && matches!(args.around, Around::Held(Take::Write)),
            "{errors:?}"
        );
        let (args, errors) = parsed(
            Attr::Lock,
            r#"key = "p", mode = "exclusive", fair = true, hold_at_least = "1s""#,
        );
        assert!(
            errors.is_empty() && matches!(args.around, Around::Held(Take::Lock)),
            "{errors:?}"
        );
        let (args, errors) = parsed(Attr::Lock, r#"keys = ["a:<x>", "b:<y>"], wait = "1s""#);
        assert!(
            errors.is_empty() && matches!(args.around, Around::Held(Take::Multi)),
            "{errors:?}"
        );
        assert_eq!(args.keys.len(), 2);
        let (args, errors) = parsed(Attr::Semaphore, r#"key = "jobs", permits = 3"#);
        assert!(errors.is_empty(), "{errors:?}");
        assert!(matches!(
            args.around,
            Around::Held(Take::Permit { limit: 3, .. })
        ));
    }

    #[test]
    fn combinations_the_runtime_lacks_are_refused() {
        for (attr, args, expected) in [
            (
                Attr::Lock,
                r#"key = "p", mode = "upgrade""#,
                "unknown `mode`",
            ),
            (
                Attr::Lock,
                r#"key = "p", mode = "read", fair = false"#,
                "`fair`",
            ),
            (
                Attr::Lock,
                r#"key = "p", mode = "write", hold_at_least = "1s""#,
                "`hold_at_least`",
            ),
            (Attr::Lock, r#"keys = []"#, "names no lock"),
            (
                Attr::Lock,
                r#"key = "a", keys = ["b"]"#,
                "`key` and `keys` together",
            ),
            (
                Attr::Lock,
                r#"keys = ["a"], mode = "exclusive""#,
                "`mode` does not apply",
            ),
            (
                Attr::Lock,
                r#"keys = ["a"], fair = true"#,
                "`fair` does not apply to `keys`",
            ),
            (Attr::Lock, r#"keys = ["a", "a"]"#, "twice"),
            (
                Attr::Lock,
                r#"key = "a", permits = 2"#,
                "`#[distributed_semaphore]`",
            ),
            (Attr::Semaphore, r#"key = "a""#, "missing `permits`"),
            (
                Attr::Semaphore,
                r#"key = "a", permits = 0"#,
                "`permits = 0`",
            ),
            (
                Attr::Semaphore,
                r#"key = "a", permits = "2""#,
                "integer literal",
            ),
            (
                Attr::Semaphore,
                r#"key = "a", permits = 2, keys = ["b"]"#,
                "one key",
            ),
            (Attr::Semaphore, r#"permits = 2"#, "missing `key`"),
        ] {
            let (_, errors) = parsed(attr, args);
            assert_eq!(errors.len(), 1, "{args}: {errors:?}");
            assert!(errors[0].contains(expected), "{args}: {errors:?}");
        }
    }
}
