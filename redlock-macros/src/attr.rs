//! The attribute's arguments: `key = "..", ttl = "15s", client = self.locks, ..`.
//!
//! Parsing never stops at the first problem: every bad option is recorded in
//! a [`Ctxt`] and all of them are reported together, each spanned on the
//! offending token.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Expr, LitBool, LitStr, Path, Token};

use crate::duration::{self, Millis};
use crate::key::KeyTemplate;

/// The option names, for "expected one of" messages.
const OPTIONS: &str = "`key`, `ttl`, `wait`, `on_busy`, `hold_at_least`, `renew`, `on_lost`, `fair`, `client`, `crate`";

mod kw {
    syn::custom_keyword!(key);
    syn::custom_keyword!(ttl);
    syn::custom_keyword!(wait);
    syn::custom_keyword!(on_busy);
    syn::custom_keyword!(hold_at_least);
    syn::custom_keyword!(renew);
    syn::custom_keyword!(on_lost);
    syn::custom_keyword!(fair);
    syn::custom_keyword!(client);
}

/// Errors collected while parsing and checking, reported all at once.
#[derive(Default)]
pub(crate) struct Ctxt {
    errors: Option<syn::Error>,
    /// A `key = ..` was written but did not parse (so it is not "missing").
    key_attempted: bool,
}

impl Ctxt {
    pub(crate) fn error(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.errors {
            Some(errors) => errors.combine(error),
            None => self.errors = Some(error),
        }
    }

    /// Whether any error was recorded.
    pub(crate) fn errors(&self) -> bool {
        self.errors.is_some()
    }

    pub(crate) fn into_result(self) -> Result<(), syn::Error> {
        match self.errors {
            Some(errors) => Err(errors),
            None => Ok(()),
        }
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

/// The checked arguments. Fields left `None` take the runtime's defaults.
pub(crate) struct LockArgs {
    pub(crate) key: Option<KeyTemplate>,
    pub(crate) ttl: Option<DurationArg>,
    pub(crate) wait: Option<DurationArg>,
    pub(crate) on_busy: OnBusy,
    pub(crate) hold_at_least: Option<DurationArg>,
    pub(crate) renew: bool,
    pub(crate) on_lost: OnLost,
    pub(crate) fair: bool,
    pub(crate) client: Option<Expr>,
    pub(crate) crate_path: Option<Path>,
}

/// Parses the attribute's arguments, recording every problem in `cx`.
pub(crate) fn parse(args: TokenStream, cx: &mut Ctxt) -> LockArgs {
    let mut out = LockArgs {
        key: None,
        ttl: None,
        wait: None,
        on_busy: OnBusy::Error,
        hold_at_least: None,
        renew: true,
        on_lost: OnLost::Cancel,
        fair: false,
        client: None,
        crate_path: None,
    };
    let parsed = syn::parse::Parser::parse2(
        |input: ParseStream<'_>| Ok(parse_options(input, cx)),
        args.clone(),
    );
    let options = match parsed {
        Ok(options) => options,
        Err(e) => {
            cx.push(e);
            return out;
        }
    };

    let mut seen: Vec<&'static str> = Vec::new();
    for option in options {
        let name = option.name();
        if seen.contains(&name) {
            cx.error(option.span(), format!("`{name}` specified more than once"));
            continue;
        }
        seen.push(name);
        match option {
            Opt::Key(lit) => match KeyTemplate::parse(&lit) {
                Ok(key) => out.key = Some(key),
                Err(e) => cx.push(e),
            },
            Opt::Ttl(input) => out.ttl = input.check(duration::ttl, cx),
            Opt::Wait(input) => out.wait = input.check(duration::wait, cx),
            Opt::HoldAtLeast(input) => {
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
            Opt::Fair(lit) => out.fair = lit.value,
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
    if out.key.is_none() && !seen.contains(&"key") && !cx.key_attempted {
        cx.error(
            Span::call_site(),
            "missing `key`: write `#[distributed_lock(key = \"order:<order_id>\")]`, where \
             `<order_id>` names an argument of the function",
        );
    }
    out
}

/// A duration option as written: a literal, checked now, or an expression
/// of type `Duration`, checked by the compiler and (its range) at run time.
enum DurationInput {
    Lit(LitStr),
    Expr(Expr),
}

/// A duration option, checked.
pub(crate) enum DurationArg {
    /// A literal's value.
    Const(Millis),
    /// An expression the function evaluates on each call.
    Expr(Expr),
}

impl DurationInput {
    fn check(
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

enum Opt {
    Key(LitStr),
    Ttl(DurationInput),
    Wait(DurationInput),
    OnBusy(LitStr),
    HoldAtLeast(DurationInput),
    Renew(LitBool),
    OnLost(LitStr),
    Fair(LitBool),
    Client(Expr),
    Crate(LitStr),
}

impl Opt {
    fn name(&self) -> &'static str {
        match self {
            Opt::Key(_) => "key",
            Opt::Ttl(_) => "ttl",
            Opt::Wait(_) => "wait",
            Opt::OnBusy(_) => "on_busy",
            Opt::HoldAtLeast(_) => "hold_at_least",
            Opt::Renew(_) => "renew",
            Opt::OnLost(_) => "on_lost",
            Opt::Fair(_) => "fair",
            Opt::Client(_) => "client",
            Opt::Crate(_) => "crate",
        }
    }

    fn span(&self) -> Span {
        match self {
            Opt::Key(l) | Opt::OnBusy(l) | Opt::OnLost(l) | Opt::Crate(l) => l.span(),
            Opt::Ttl(d) | Opt::Wait(d) | Opt::HoldAtLeast(d) => d.span(),
            Opt::Renew(l) | Opt::Fair(l) => l.span,
            Opt::Client(e) => e.span(),
        }
    }
}

/// `name = value` pairs separated by commas. A bad pair is recorded and
/// skipped up to the next comma, so one typo does not hide the next.
fn parse_options(input: ParseStream<'_>, cx: &mut Ctxt) -> Vec<Opt> {
    let mut options = Vec::new();
    let mut key_attempted = false;
    while !input.is_empty() {
        let name = input
            .fork()
            .parse::<proc_macro2::Ident>()
            .ok()
            .map(|i| i.to_string());
        match parse_option(input) {
            Ok(option) => options.push(option),
            Err(e) => {
                cx.push(e);
                skip_to_comma(input);
                key_attempted |= name.is_some_and(|n| n == "key");
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
    if key_attempted {
        cx.key_attempted = true;
    }
    options
}

fn skip_to_comma(input: ParseStream<'_>) {
    while !input.is_empty() && !input.peek(Token![,]) {
        if input.parse::<proc_macro2::TokenTree>().is_err() {
            break;
        }
    }
}

fn parse_option(input: ParseStream<'_>) -> syn::Result<Opt> {
    let lookahead = input.lookahead1();
    if lookahead.peek(kw::key) {
        input.parse::<kw::key>()?;
        Ok(Opt::Key(value(input, "key", "\"order:<order_id>\"")?))
    } else if lookahead.peek(kw::ttl) {
        input.parse::<kw::ttl>()?;
        Ok(Opt::Ttl(duration_value(input, "ttl")?))
    } else if lookahead.peek(kw::wait) {
        input.parse::<kw::wait>()?;
        Ok(Opt::Wait(duration_value(input, "wait")?))
    } else if lookahead.peek(kw::on_busy) {
        input.parse::<kw::on_busy>()?;
        Ok(Opt::OnBusy(value(input, "on_busy", "\"skip\"")?))
    } else if lookahead.peek(kw::hold_at_least) {
        input.parse::<kw::hold_at_least>()?;
        Ok(Opt::HoldAtLeast(duration_value(input, "hold_at_least")?))
    } else if lookahead.peek(kw::renew) {
        input.parse::<kw::renew>()?;
        Ok(Opt::Renew(value(input, "renew", "false")?))
    } else if lookahead.peek(kw::on_lost) {
        input.parse::<kw::on_lost>()?;
        Ok(Opt::OnLost(value(input, "on_lost", "\"signal\"")?))
    } else if lookahead.peek(kw::fair) {
        input.parse::<kw::fair>()?;
        Ok(Opt::Fair(value(input, "fair", "true")?))
    } else if lookahead.peek(kw::client) {
        input.parse::<kw::client>()?;
        input.parse::<Token![=]>()?;
        Ok(Opt::Client(input.parse()?))
    } else if lookahead.peek(Token![crate]) {
        input.parse::<Token![crate]>()?;
        Ok(Opt::Crate(value(input, "crate", "\"redlock_runtime\"")?))
    } else if input.peek(syn::Ident) || input.peek(syn::Lit) {
        let token: proc_macro2::TokenTree = input.parse()?;
        Err(syn::Error::new(
            token.span(),
            format!("unknown option `{token}`: expected one of {OPTIONS}"),
        ))
    } else {
        Err(lookahead.error())
    }
}

/// `= <literal>`, with a message naming the option and an example value
/// when the literal is of the wrong kind.
fn value<T: Parse>(input: ParseStream<'_>, name: &str, example: &str) -> syn::Result<T> {
    input.parse::<Token![=]>()?;
    let fork = input.fork();
    match input.parse::<T>() {
        Ok(value) => Ok(value),
        Err(_) => {
            let span = fork
                .parse::<proc_macro2::TokenTree>()
                .map(|t| t.span())
                .unwrap_or_else(|_| input.span());
            Err(syn::Error::new(
                span,
                format!("`{name}` takes a literal such as `{name} = {example}`"),
            ))
        }
    }
}
