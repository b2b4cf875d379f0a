//! The options as written: `name = value` pairs, each parsed into an
//! [`Opt`] with its spans. Which options an attribute takes, and how they
//! combine, is `attr.rs`'s business; here a bad pair is recorded and
//! skipped up to the next comma, so one typo does not hide the next.

use proc_macro2::Span;
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, LitBool, LitInt, LitStr, Token};

use crate::ctxt::Ctxt;
use crate::duration::{DurationArg, Millis};

mod kw {
    syn::custom_keyword!(key);
    syn::custom_keyword!(keys);
    syn::custom_keyword!(mode);
    syn::custom_keyword!(permits);
    syn::custom_keyword!(ttl);
    syn::custom_keyword!(wait);
    syn::custom_keyword!(on_busy);
    syn::custom_keyword!(hold_at_least);
    syn::custom_keyword!(renew);
    syn::custom_keyword!(on_lost);
    syn::custom_keyword!(fair);
    syn::custom_keyword!(client);
    syn::custom_keyword!(lease);
    syn::custom_keyword!(scope);
    syn::custom_keyword!(fingerprint);
}

/// One option's value, as written.
pub(crate) enum Opt {
    Key(LitStr),
    Keys(KeyList),
    Mode(LitStr),
    Permits(LitInt),
    Ttl(DurationInput),
    Wait(DurationInput),
    OnBusy(LitStr),
    HoldAtLeast(DurationInput),
    Renew(LitBool),
    OnLost(LitStr),
    Fair(LitBool),
    Client(Expr),
    Crate(LitStr),
    Lease(DurationInput),
    Scope(LitStr),
    Fingerprint(LitStr),
}

/// `keys = ["a:<x>", "b:<y>"]`.
pub(crate) struct KeyList {
    /// The brackets, where an error about the whole list points.
    pub(crate) span: Span,
    pub(crate) keys: Vec<LitStr>,
}

/// An option with the span of its name.
pub(crate) struct Written {
    /// The option's name (`fair` in `fair = true`), where an error about
    /// the option itself (not its value) points.
    pub(crate) name: Span,
    pub(crate) opt: Opt,
}

impl Opt {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Opt::Key(_) => "key",
            Opt::Keys(_) => "keys",
            Opt::Mode(_) => "mode",
            Opt::Permits(_) => "permits",
            Opt::Ttl(_) => "ttl",
            Opt::Wait(_) => "wait",
            Opt::OnBusy(_) => "on_busy",
            Opt::HoldAtLeast(_) => "hold_at_least",
            Opt::Renew(_) => "renew",
            Opt::OnLost(_) => "on_lost",
            Opt::Fair(_) => "fair",
            Opt::Client(_) => "client",
            Opt::Crate(_) => "crate",
            Opt::Lease(_) => "lease",
            Opt::Scope(_) => "scope",
            Opt::Fingerprint(_) => "fingerprint",
        }
    }

    /// The value's span.
    pub(crate) fn span(&self) -> Span {
        match self {
            Opt::Key(l)
            | Opt::Mode(l)
            | Opt::OnBusy(l)
            | Opt::OnLost(l)
            | Opt::Crate(l)
            | Opt::Scope(l)
            | Opt::Fingerprint(l) => l.span(),
            Opt::Keys(list) => list.span,
            Opt::Permits(l) => l.span(),
            Opt::Ttl(d) | Opt::Wait(d) | Opt::HoldAtLeast(d) | Opt::Lease(d) => d.span(),
            Opt::Renew(l) | Opt::Fair(l) => l.span,
            Opt::Client(e) => e.span(),
        }
    }
}

/// What was written: the options that parsed, and the names of those
/// that were attempted but did not (so that a bad `key = ..` is not also
/// reported missing).
pub(crate) struct Options {
    pub(crate) options: Vec<Written>,
    pub(crate) failed: Vec<String>,
}

/// `name = value` pairs separated by commas; `expected` lists the option
/// names for an unknown one ("`key`, `ttl`, ..").
pub(crate) fn parse_options(input: ParseStream<'_>, expected: &str, cx: &mut Ctxt) -> Options {
    let mut out = Options {
        options: Vec::new(),
        failed: Vec::new(),
    };
    while !input.is_empty() {
        let name = input
            .fork()
            .parse::<proc_macro2::Ident>()
            .ok()
            .map(|i| i.to_string());
        match parse_option(input, expected) {
            Ok(option) => out.options.push(option),
            Err(e) => {
                cx.push(e);
                skip_to_comma(input);
                // A misspelled option counts as the one it most likely
                // meant, which is then not also reported missing.
                let meant = name.as_deref().and_then(|name| suggestion(name, expected));
                out.failed.extend(meant.map(str::to_owned));
                out.failed.extend(name);
            }
        }
        if input.is_empty() {
            break;
        }
        if let Err(e) = input.parse::<Token![,]>() {
            cx.push(e);
            skip_to_comma(input);
            let _ = input.parse::<Option<Token![,]>>();
        }
    }
    out
}

fn skip_to_comma(input: ParseStream<'_>) {
    while !input.is_empty() && !input.peek(Token![,]) {
        if input.parse::<proc_macro2::TokenTree>().is_err() {
            break;
        }
    }
}

fn parse_option(input: ParseStream<'_>, expected: &str) -> syn::Result<Written> {
    let name = input.span();
    let lookahead = input.lookahead1();
    let opt = if lookahead.peek(kw::key) {
        input.parse::<kw::key>()?;
        Opt::Key(value(input, "key", "\"order:<order_id>\"")?)
    } else if lookahead.peek(kw::keys) {
        input.parse::<kw::keys>()?;
        Opt::Keys(key_list(input)?)
    } else if lookahead.peek(kw::mode) {
        input.parse::<kw::mode>()?;
        Opt::Mode(value(input, "mode", "\"read\"")?)
    } else if lookahead.peek(kw::permits) {
        input.parse::<kw::permits>()?;
        Opt::Permits(permits(input)?)
    } else if lookahead.peek(kw::ttl) {
        input.parse::<kw::ttl>()?;
        Opt::Ttl(duration_value(input, "ttl")?)
    } else if lookahead.peek(kw::wait) {
        input.parse::<kw::wait>()?;
        Opt::Wait(duration_value(input, "wait")?)
    } else if lookahead.peek(kw::on_busy) {
        input.parse::<kw::on_busy>()?;
        Opt::OnBusy(value(input, "on_busy", "\"skip\"")?)
    } else if lookahead.peek(kw::hold_at_least) {
        input.parse::<kw::hold_at_least>()?;
        Opt::HoldAtLeast(duration_value(input, "hold_at_least")?)
    } else if lookahead.peek(kw::renew) {
        input.parse::<kw::renew>()?;
        Opt::Renew(value(input, "renew", "false")?)
    } else if lookahead.peek(kw::on_lost) {
        input.parse::<kw::on_lost>()?;
        Opt::OnLost(value(input, "on_lost", "\"signal\"")?)
    } else if lookahead.peek(kw::fair) {
        input.parse::<kw::fair>()?;
        Opt::Fair(value(input, "fair", "true")?)
    } else if lookahead.peek(kw::lease) {
        input.parse::<kw::lease>()?;
        Opt::Lease(duration_value(input, "lease")?)
    } else if lookahead.peek(kw::scope) {
        input.parse::<kw::scope>()?;
        Opt::Scope(value(input, "scope", "\"payments\"")?)
    } else if lookahead.peek(kw::fingerprint) {
        input.parse::<kw::fingerprint>()?;
        Opt::Fingerprint(value(input, "fingerprint", "\"<msg.body>\"")?)
    } else if lookahead.peek(kw::client) {
        input.parse::<kw::client>()?;
        input.parse::<Token![=]>()?;
        Opt::Client(input.parse()?)
    } else if lookahead.peek(Token![crate]) {
        input.parse::<Token![crate]>()?;
        Opt::Crate(value(input, "crate", "\"redlock_runtime\"")?)
    } else if input.peek(syn::Ident) || input.peek(syn::Lit) {
        let token: proc_macro2::TokenTree = input.parse()?;
        let hint = suggestion(&token.to_string(), expected)
            .map(|name| format!("did you mean `{name}`? "))
            .unwrap_or_default();
        return Err(syn::Error::new(
            token.span(),
            format!("unknown option `{token}`: {hint}expected one of {expected}"),
        ));
    } else {
        return Err(lookahead.error());
    };
    Ok(Written { name, opt })
}

/// `= <literal>`, with a message naming the option and an example value
/// when the literal is of the wrong kind.
fn value<T: Parse>(input: ParseStream<'_>, name: &str, example: &str) -> syn::Result<T> {
    input.parse::<Token![=]>()?;
    let fork = input.fork();
    match input.parse::<T>() {
        Ok(value) => Ok(value),
        Err(_) => Err(syn::Error::new(
            next_span(&fork, input),
            format!("`{name}` takes a literal such as `{name} = {example}`"),
        )),
    }
}

/// The span of the next token, for an error about a value of the wrong
/// kind.
fn next_span(fork: ParseStream<'_>, input: ParseStream<'_>) -> Span {
    fork.parse::<proc_macro2::TokenTree>()
        .map(|t| t.span())
        .unwrap_or_else(|_| input.span())
}

/// `= 4`: an integer literal (checked against zero in `attr.rs`).
fn permits(input: ParseStream<'_>) -> syn::Result<LitInt> {
    input.parse::<Token![=]>()?;
    let fork = input.fork();
    input.parse::<LitInt>().map_err(|_| {
        syn::Error::new(
            next_span(&fork, input),
            "`permits` takes an integer literal, the semaphore's limit: how many calls may run \
             at once, such as `permits = 4`",
        )
    })
}

/// `= ["a:<x>", "b:<y>"]`.
fn key_list(input: ParseStream<'_>) -> syn::Result<KeyList> {
    input.parse::<Token![=]>()?;
    let example = "`keys = [\"account:<from>\", \"account:<to>\"]`";
    if !input.peek(syn::token::Bracket) {
        return Err(syn::Error::new(
            next_span(&input.fork(), input),
            format!("`keys` takes a list of key templates in brackets, such as {example}"),
        ));
    }
    let content;
    let bracket = syn::bracketed!(content in input);
    let elems = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?;
    let mut keys = Vec::new();
    for elem in elems {
        match elem {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(lit),
                ..
            }) => keys.push(lit),
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    format!(
                        "each element of `keys` is a key template: a string literal, as in \
                         {example}"
                    ),
                ));
            }
        }
    }
    Ok(KeyList {
        span: bracket.span.join(),
        keys,
    })
}

/// A duration option as written: a literal, checked now, or an expression
/// of type `Duration`, checked by the compiler and (its range) at run time.
pub(crate) enum DurationInput {
    Lit(LitStr),
    Expr(Expr),
}

impl DurationInput {
    pub(crate) fn check(
        self,
        literal: fn(&LitStr) -> syn::Result<Millis>,
        cx: &mut Ctxt,
    ) -> Option<DurationArg> {
        match self {
            Self::Lit(lit) => literal(&lit)
                .map(DurationArg::Const)
                .map_err(|e| cx.push(e))
                .ok(),
            Self::Expr(expr) => Some(DurationArg::Expr(expr)),
        }
    }

    fn span(&self) -> Span {
        match self {
            Self::Lit(lit) => lit.span(),
            Self::Expr(expr) => expr.span(),
        }
    }
}

/// `name = "15s"` or `name = <expression of type Duration>`.
fn duration_value(input: ParseStream<'_>, name: &str) -> syn::Result<DurationInput> {
    if input.peek2(LitStr) {
        return Ok(DurationInput::Lit(value(input, name, "\"15s\"")?));
    }
    input.parse::<Token![=]>()?;
    let expr = input.parse::<Expr>();
    if let Ok(Expr::Lit(syn::ExprLit {
        lit: lit @ (syn::Lit::Int(_) | syn::Lit::Float(_)),
        ..
    })) = &expr
    {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`{name} = {}` has no unit: write a literal such as `{name} = \"15s\"`, or an \
                 expression of type `Duration`",
                lit.to_token_stream()
            ),
        ));
    }
    expr.map(DurationInput::Expr).map_err(|e| {
        syn::Error::new(
            e.span(),
            format!(
                "`{name}` takes a literal such as `{name} = \"15s\"` or an expression of type \
                 `Duration` such as `{name} = CONFIG.lock_ttl`"
            ),
        )
    })
}

/// The option a misspelled `written` most likely meant, among `expected`
/// ("`key`, `ttl`, .."): the nearest by edit distance (a transposition
/// counts one), when it is at most 2 and less than the name itself, so
/// that `tll` and `ttll` find `ttl` and `timeout` finds nothing; or the
/// option other lock libraries name so (`timeout`: `wait`, `lease`: `ttl`)
/// when it is one here.
fn suggestion<'a>(written: &str, expected: &'a str) -> Option<&'a str> {
    let names = || expected.split(", ").map(|name| name.trim_matches('`'));
    let alias = match written {
        "timeout" | "wait_time" | "acquire_timeout" => Some("wait"),
        "lease" | "expiry" | "expire" | "lease_time" | "ttl_ms" => Some("ttl"),
        _ => None,
    };
    if let Some(alias) = alias {
        return names().find(|name| *name == alias);
    }
    names()
        .map(|name| (strsim::damerau_levenshtein(written, name), name))
        .filter(|(distance, name)| *distance <= 2 && *distance < name.len())
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::suggestion;

    const LOCK: &str = "`key`, `keys`, `mode`, `ttl`, `wait`, `on_busy`, `hold_at_least`, \
                        `renew`, `on_lost`, `fair`, `client`, `crate`";

    #[test]
    fn a_near_miss_finds_the_option_and_a_stranger_finds_none() {
        assert_eq!(suggestion("tll", LOCK), Some("ttl"));
        assert_eq!(suggestion("ttll", LOCK), Some("ttl"));
        assert_eq!(suggestion("on_bussy", LOCK), Some("on_busy"));
        assert_eq!(suggestion("hold_at_lest", LOCK), Some("hold_at_least"));
        assert_eq!(suggestion("renwe", LOCK), Some("renew"));
        assert_eq!(suggestion("timeout", LOCK), Some("wait"));
        assert_eq!(suggestion("lease", LOCK), Some("ttl"));
        assert_eq!(suggestion("priority", LOCK), None);
        assert_eq!(suggestion("x", LOCK), None);
        // Only options of this attribute are suggested.
        assert_eq!(suggestion("permit", LOCK), None);
        assert_eq!(suggestion("permit", "`key`, `permits`"), Some("permits"));
    }
}
