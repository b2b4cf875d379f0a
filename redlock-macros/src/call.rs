//! The statements that replace the body: build the key (or keys), get the
//! client, build the request for what the body runs holding ([`Take`]),
//! then run the body under it with `run` (`on_busy = "error"`) or
//! `try_run` (`on_busy = "skip"`), converting a failure into the return
//! type.
//!
//! A plain lock goes through `__private::request`; a read/write lock, a
//! multi-lock and a semaphore are built with the runtime's public builders
//! (`LockClient::rw_lock`, `multi_lock`, `semaphore`). Nothing else is
//! called: `<crate>::..` (`::redlock_runtime` unless `crate = ".."` says
//! otherwise) and `::core::..`.

use proc_macro2::{Delimiter, Group, Literal, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, Lifetime};

use crate::attr::{LockArgs, OnBusy, OnLost, Take};
use crate::duration::DurationArg;
use crate::key::{KeyTemplate, Piece};
use crate::shape::Binding;

/// Gives every token of `tokens` the span `span`, so that an error about
/// the whole expression points there.
pub(crate) fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut t| {
            if let TokenTree::Group(g) = &t {
                let mut group = Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                t = TokenTree::Group(group);
            } else {
                t.set_span(span);
            }
            t
        })
        .collect()
}

/// `path(args)` with the path and the parentheses spanned on `span` (the
/// arguments keep theirs), so that an unmet bound points there.
pub(crate) fn spanned_call(path: TokenStream, args: TokenStream, span: Span) -> TokenStream {
    let path = respan(path, span);
    let mut args = Group::new(Delimiter::Parenthesis, args);
    args.set_span(span);
    quote!(#path #args)
}

/// The generated locals, hygienic (`Span::mixed_site()`).
pub(crate) struct Vars {
    pub(crate) key: Ident,
    pub(crate) client: Ident,
    site: Ident,
    site_static: Ident,
    request: Ident,
    failure: Ident,
    value: Ident,
    keys_label: Lifetime,
}

impl Vars {
    pub(crate) fn new() -> Self {
        let ident = |name: &str| Ident::new(name, Span::mixed_site());
        Vars {
            key: ident("__redlock_key"),
            client: ident("__redlock_client"),
            site: ident("__redlock_site"),
            site_static: ident("__REDLOCK_SITE"),
            request: ident("__redlock_request"),
            failure: ident("__redlock_failure"),
            value: ident("__redlock_value"),
            keys_label: Lifetime::new("'__redlock_keys", Span::mixed_site()),
        }
    }
}

/// The function being rewritten, as the call needs it.
pub(crate) struct Function<'a> {
    /// Its arguments' names and bindings (`shape::arguments`).
    pub(crate) arguments: &'a [(String, Binding)],
    /// Its name, without `r#`.
    pub(crate) name: String,
    /// The body, as an `async move { .. }` block.
    pub(crate) body: TokenStream,
    /// The return type's span (the function's name for `()`), where a
    /// return type that cannot take a failure is reported.
    pub(crate) ret_span: Span,
}

/// The statements that replace the body.
/// `::redlock_runtime`, or the path `crate = ".."` gives.
pub(crate) fn crate_path(args: &LockArgs) -> TokenStream {
    match &args.crate_path {
        Some(path) => path.to_token_stream(),
        None => quote!(::redlock_runtime),
    }
}

/// The client: `__private::client(&(expr))` for `client = expr`, spanned on
/// the expression, else the installed one. A `Result<LockClient, LockError>`.
pub(crate) fn client_block(args: &LockArgs, private: &TokenStream) -> TokenStream {
    match &args.client {
        Some(expr) => {
            let span = expr.span();
            let mut inner = Group::new(Delimiter::Parenthesis, expr.to_token_stream());
            inner.set_span(span);
            let borrow = respan(quote!(&), span);
            spanned_call(quote!(#private::client), quote!(#borrow #inner), span)
        }
        None => quote!(#private::installed_client()),
    }
}

pub(crate) fn locked(args: &LockArgs, take: Take, func: Function<'_>) -> TokenStream {
    let krate = crate_path(args);
    let private = quote!(#krate::__private);
    let v = Vars::new();
    let Vars {
        key: key_var,
        client: client_var,
        site: site_var,
        site_static,
        request: request_var,
        ..
    } = &v;

    // The key (or keys), built before the body runs so the body may move
    // its arguments.
    let key = match take {
        Take::Multi => {
            let label = &v.keys_label;
            let failure = &v.failure;
            let keys = args.keys.iter().map(|key| {
                let key = key_block(key, func.arguments, &private, key_var);
                quote! {
                    match #key {
                        ::core::result::Result::Ok(#key_var) => #key_var,
                        ::core::result::Result::Err(#failure) => {
                            break #label ::core::result::Result::Err(#failure)
                        }
                    }
                }
            });
            quote!(#label: { ::core::result::Result::Ok([#(#keys),*]) })
        }
        _ => one_key(args, func.arguments, &private, key_var),
    };

    let client = client_block(args, &private);

    // The metrics' `lock` label: the template as written, placeholders and
    // all (the templates, for `keys`); made into an `Arc<str>` once, by
    // the function's `Site`.
    let label = args
        .keys
        .iter()
        .map(KeyTemplate::as_written)
        .collect::<Vec<_>>()
        .join(", ");
    let name = &func.name;
    let request = request(args, take, &krate, &v);
    let call = call(args, take, &krate, &v, func.body, func.ret_span);
    quote! {
        let #key_var = #key;
        let #client_var = #client;
        let #site_var: &'static #private::Site = {
            static #site_static: #private::Site = #private::Site::new(
                #label,
                ::core::concat!(::core::module_path!(), "::", #name),
            );
            &#site_static
        };
        let #request_var = #request;
        #call
    }
}

/// The block of the attribute's one `key` (see [`key_block`]); `{}` when
/// it has none (`attr.rs` recorded the error, so the block is never
/// compiled).
pub(crate) fn one_key(
    args: &LockArgs,
    arguments: &[(String, Binding)],
    private: &TokenStream,
    key_var: &Ident,
) -> TokenStream {
    match args.keys.first() {
        Some(key) => key_block(key, arguments, private, key_var),
        None => quote!({}),
    }
}

/// `{ let mut key = Key::with_capacity(n); key.text(..); key.value(&arg); key.finish() }`:
/// a `Result<String, LockError>`.
pub(crate) fn key_block(
    key: &KeyTemplate,
    arguments: &[(String, Binding)],
    private: &TokenStream,
    key_var: &Ident,
) -> TokenStream {
    let capacity: usize = key
        .pieces
        .iter()
        .map(|p| match p {
            Piece::Text(t) => t.len(),
            Piece::Value(_) => 16,
        })
        .sum();
    let pieces = key.pieces.iter().map(|piece| match piece {
        Piece::Text(text) => quote!(#key_var.text(#text);),
        Piece::Value(p) => {
            let root = arguments.iter().find_map(|(name, binding)| match binding {
                Binding::Whole(ident) if *name == p.root => Some(ident),
                _ => None,
            });
            // `check` made sure every placeholder names an argument.
            let value = root.map(|root| p.borrow_tokens(key.span, root));
            quote_spanned!(key.span=> #key_var.value(#value);)
        }
    });
    quote! {{
        let mut #key_var = #private::Key::with_capacity(#capacity);
        #(#pieces)*
        #key_var.finish()
    }}
}

/// A literal is a constant; an expression goes through
/// `__private::duration`, spanned on it, so one of another type is the
/// error's place ("expected `Duration`").
pub(crate) fn duration(d: &DurationArg, private: &TokenStream) -> TokenStream {
    match d {
        DurationArg::Const(d) => d.to_tokens(),
        DurationArg::Expr(expr) => spanned_call(
            quote!(#private::duration),
            expr.to_token_stream(),
            expr.span(),
        ),
    }
}

/// The request, a `Result<_, LockError>` (the client's or the key's
/// failure): `__private::request` for a plain lock, the public builders
/// for the others.
fn request(args: &LockArgs, take: Take, krate: &TokenStream, v: &Vars) -> TokenStream {
    let private = quote!(#krate::__private);
    let Vars {
        key, client, site, ..
    } = v;
    let some_or_none = |d: &Option<DurationArg>| match d {
        Some(d) => {
            let d = duration(d, &private);
            quote!(::core::option::Option::Some(#d))
        }
        None => quote!(::core::option::Option::None),
    };
    let wait = match &args.wait {
        Some(d) => duration(d, &private),
        None => quote!(::core::time::Duration::ZERO),
    };
    let renew = args.renew;
    let on_lost = match args.on_lost {
        OnLost::Cancel => quote!(#private::OnLost::Cancel),
        OnLost::Signal => quote!(#private::OnLost::Signal),
    };
    let builder = match take {
        Take::Lock => {
            let ttl = some_or_none(&args.ttl);
            let hold_at_least = some_or_none(&args.hold_at_least);
            let fair = args.fair;
            return quote! {
                #private::request(#client, #key, #private::Options {
                    ttl: #ttl,
                    wait: #wait,
                    renew: #renew,
                    hold_at_least: #hold_at_least,
                    on_lost: #on_lost,
                    fair: #fair,
                    site: #site,
                })
            };
        }
        Take::Read => quote!(#krate::RwLock::read(&#krate::LockClient::rw_lock(&#client, #key))),
        Take::Write => quote!(#krate::RwLock::write(&#krate::LockClient::rw_lock(&#client, #key))),
        Take::Multi => quote!(#krate::LockClient::multi_lock(&#client, #key)),
        Take::Permit { limit, span } => {
            let mut limit = Literal::u32_suffixed(limit);
            limit.set_span(span);
            quote!(#krate::LockClient::semaphore(&#client, #key, #limit))
        }
    };
    let ttl = args.ttl.as_ref().map(|d| {
        let d = duration(d, &private);
        quote!(.ttl(#d))
    });
    let failure = &v.failure;
    quote! {
        match (#client, #key) {
            (::core::result::Result::Ok(#client), ::core::result::Result::Ok(#key)) => {
                ::core::result::Result::Ok(
                    #builder
                        #ttl
                        .wait(#wait)
                        .renew(#renew)
                        .on_lost(#on_lost)
                        .label(#private::Site::label(#site))
                )
            }
            (::core::result::Result::Err(#failure), _)
            | (_, ::core::result::Result::Err(#failure)) => ::core::result::Result::Err(#failure),
        }
    }
}

/// Runs the body under the request, and makes the function's value of the
/// outcome.
fn call(
    args: &LockArgs,
    take: Take,
    krate: &TokenStream,
    v: &Vars,
    body: TokenStream,
    ret_span: Span,
) -> TokenStream {
    let private = quote!(#krate::__private);
    let Vars {
        request,
        value,
        site,
        ..
    } = v;
    let request_type = match take {
        Take::Lock | Take::Read | Take::Write => quote!(#private::LockRequest),
        Take::Multi => quote!(#krate::MultiLock),
        Take::Permit { .. } => quote!(#krate::Semaphore),
    };
    // The conversions into the return type are spanned on it, so that a
    // return type that cannot take them is the error's place. (The error
    // binding shares that span: hygiene needs the same span at both ends.)
    let error_var = Ident::new("__redlock_error", ret_span);
    match args.on_busy {
        OnBusy::Error => {
            let from_error = spanned_call(
                quote!(#private::FromLockError::from_lock_error),
                quote!(#error_var),
                ret_span,
            );
            quote! {
                match match #request {
                    ::core::result::Result::Ok(#request) => #request_type::run(#request, #body).await,
                    ::core::result::Result::Err(#error_var) => ::core::result::Result::Err(#error_var),
                } {
                    ::core::result::Result::Ok(#value) => #value,
                    ::core::result::Result::Err(#error_var) => #from_error,
                }
            }
        }
        // Which value says "skipped", and what a failure becomes, is the
        // return type's (`__private::Skip`): decided by type, not by name.
        OnBusy::Skip => {
            let skipped = spanned_call(quote!(#private::Skip::skipped), quote!(), ret_span);
            let failed = spanned_call(
                quote!(#private::Skip::failed),
                quote!(#error_var, #site),
                ret_span,
            );
            quote! {
                match match #request {
                    ::core::result::Result::Ok(#request) => #request_type::try_run(#request, #body).await,
                    ::core::result::Result::Err(#error_var) => ::core::result::Result::Err(#error_var),
                } {
                    ::core::result::Result::Ok(::core::option::Option::Some(#value)) => #value,
                    ::core::result::Result::Ok(::core::option::Option::None) => #skipped,
                    ::core::result::Result::Err(#error_var) => #failed,
                }
            }
        }
    }
}
