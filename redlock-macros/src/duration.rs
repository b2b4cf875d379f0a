//! Duration literals (`"15s"`, `"500ms"`, `"1h 30m"`), checked when the
//! macro expands so that a typo is a compile error on the literal; and
//! [`DurationArg`], a duration option once checked (a literal's value, or
//! an expression of type `Duration`).

use std::time::Duration;

use proc_macro2::TokenStream;
use quote::quote_spanned;
use syn::{Expr, LitStr};

/// A duration option, checked.
pub(crate) enum DurationArg {
    /// A literal's value.
    Const(Millis),
    /// An expression the function evaluates on each call.
    Expr(Expr),
}

/// A checked duration, kept with the literal it came from.
pub(crate) struct Millis {
    value: Duration,
    span: proc_macro2::Span,
}

impl Millis {
    /// `::core::time::Duration::new(secs, nanos)`: exact, and const.
    pub(crate) fn to_tokens(&self) -> TokenStream {
        let secs = self.value.as_secs();
        let nanos = self.value.subsec_nanos();
        quote_spanned!(self.span=> ::core::time::Duration::new(#secs, #nanos))
    }
}

const DAY: Duration = Duration::from_secs(24 * 60 * 60);
const YEAR: Duration = Duration::from_secs(365 * 24 * 60 * 60);

fn parse(lit: &LitStr, name: &str) -> syn::Result<Duration> {
    let text = lit.value();
    humantime::parse_duration(text.trim()).map_err(|e| {
        syn::Error::new(
            lit.span(),
            format!(
                "invalid `{name}` {text:?}: {e}; write a duration such as \"15s\", \"500ms\", \
                 \"2m\" or \"1h 30m\" (units: ms, s, m, h, d)"
            ),
        )
    })
}

fn checked(lit: &LitStr, value: Duration) -> Millis {
    Millis {
        value,
        span: lit.span(),
    }
}

/// The lease: at least 1 ms (Redis counts in milliseconds), at most a year.
pub(crate) fn ttl(lit: &LitStr) -> syn::Result<Millis> {
    let value = parse(lit, "ttl")?;
    if value < Duration::from_millis(1) {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`ttl` must be at least 1ms, not {:?}: a lease that short expires before the \
                 body starts; use a few seconds or more",
                lit.value()
            ),
        ));
    }
    if value > YEAR {
        return Err(syn::Error::new(
            lit.span(),
            "`ttl` is longer than a year: the lease is how long a crashed holder keeps others \
             out, so keep it to seconds or minutes (the watchdog renews it while the body runs)",
        ));
    }
    Ok(checked(lit, value))
}

/// `#[idempotent]`'s `ttl`: how long a result is kept, at least 1 s, at
/// most a year.
pub(crate) fn retention(lit: &LitStr) -> syn::Result<Millis> {
    let value = parse(lit, "ttl")?;
    if value < Duration::from_secs(1) || value > YEAR {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`ttl` {:?} is how long the result is kept and replayed to duplicates: give \
                 between 1s and a year, such as \"24h\"",
                lit.value()
            ),
        ));
    }
    Ok(checked(lit, value))
}

/// `#[idempotent]`'s `lease`: at least 30 ms (it is renewed every third of
/// it), at most a day.
pub(crate) fn lease(lit: &LitStr) -> syn::Result<Millis> {
    let value = parse(lit, "lease")?;
    if value < Duration::from_millis(30) || value > DAY {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`lease` {:?} is how long a crashed worker keeps the key (renewed every third \
                 of it while the work runs): give between 30ms and a day, such as \"30s\"",
                lit.value()
            ),
        ));
    }
    Ok(checked(lit, value))
}

/// How long to wait for another holder: zero (try once) up to a day.
pub(crate) fn wait(lit: &LitStr) -> syn::Result<Millis> {
    let value = parse(lit, "wait")?;
    if value > DAY {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`wait` {:?} is longer than a day: a caller blocked that long is a bug waiting \
                 to happen; wait seconds, or use `on_busy = \"skip\"` for work that another node \
                 is already doing",
                lit.value()
            ),
        ));
    }
    Ok(checked(lit, value))
}

/// A minimum hold: more than zero, at most a year.
pub(crate) fn hold_at_least(lit: &LitStr) -> syn::Result<Millis> {
    let value = parse(lit, "hold_at_least")?;
    if value.is_zero() {
        return Err(syn::Error::new(
            lit.span(),
            "`hold_at_least` of zero holds nothing: remove the option, or give the minimum time \
             other nodes must stay out, such as \"30s\"",
        ));
    }
    if value > YEAR {
        return Err(syn::Error::new(
            lit.span(),
            "`hold_at_least` is longer than a year: give the minimum time other nodes must stay \
             out, such as \"30s\"",
        ));
    }
    Ok(checked(lit, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> LitStr {
        LitStr::new(s, proc_macro2::Span::call_site())
    }

    #[test]
    fn accepts_humantime_forms() {
        let ms = |s: &str| ttl(&lit(s)).map(|m| m.value).ok();
        assert_eq!(ms("15s"), Some(Duration::from_secs(15)));
        assert_eq!(ms("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(ms("1h 30m"), Some(Duration::from_secs(5400)));
        assert_eq!(ms(" 2min "), Some(Duration::from_secs(120)));
    }

    #[test]
    fn rejects_what_cannot_work() {
        assert!(ttl(&lit("0s")).is_err());
        assert!(ttl(&lit("500us")).is_err());
        assert!(ttl(&lit("15 parsecs")).is_err());
        assert!(ttl(&lit("")).is_err());
        assert!(wait(&lit("25h")).is_err());
        assert!(wait(&lit("0s")).is_ok());
        assert!(wait(&lit("24h")).is_ok());
        assert!(hold_at_least(&lit("0ms")).is_err());
    }
}
