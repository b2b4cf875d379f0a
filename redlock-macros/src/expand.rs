//! The rewrite: the user's `async fn`, with its body run inside
//! `LockRequest::run` (or `try_run`) holding the lock; the request comes
//! from `__private::request`.
//!
//! A method that `#[async_trait]` has already rewritten (a plain `fn`
//! returning `Pin<Box<dyn Future<Output = T> ..>>` whose body is
//! `Box::pin(async move { .. })`) is rewritten the same way inside its
//! `async move` block.
//!
//! Generated code names only `<crate>::__private::…` (`::redlock_runtime`
//! unless `crate = ".."` says otherwise) and `::core::…`.

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt as _;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, Pat, ReturnType, Signature, Type};

use crate::attr::{self, Ctxt, DurationArg, LockArgs, OnBusy, OnLost};
use crate::key::{KeyTemplate, Piece};
use crate::shape::{AsyncFn, Binding, Boxed, Shape, arguments, shape};

/// Entry point: never panics; on any error the original item is emitted
/// next to the errors (with its lints quieted, so that only the errors
/// show), and the rest of the crate still compiles.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut cx = Ctxt::default();
    let args = attr::parse(args, &mut cx);
    let func = match syn::parse2::<AsyncFn>(item.clone()) {
        Ok(func) => func,
        Err(e) => {
            cx.push(e);
            return with_errors(item, cx);
        }
    };
    let shape = shape(&func, &mut cx);
    if let Some(shape) = &shape {
        check(&func, shape, &args, &mut cx);
    }
    match (cx.errors(), shape) {
        (false, Some(shape)) => rewrite(func, shape, args),
        _ => with_errors(item, cx),
    }
}

/// The item as written, then the errors. The item is not rewritten, so an
/// argument named only in the key would be reported unused, and so on:
/// its lints are turned off.
fn with_errors(item: TokenStream, cx: Ctxt) -> TokenStream {
    match cx.into_result() {
        Ok(()) => item,
        Err(e) => {
            let errors = e.to_compile_error();
            quote!(#[allow(unused)] #item #errors)
        }
    }
}

/// Checks the function against the arguments; every problem goes to `cx`.
fn check(func: &AsyncFn, shape: &Shape, args: &LockArgs, cx: &mut Ctxt) {
    let sig = &func.sig;
    if let Some(key) = &args.key {
        check_placeholders(key, sig, cx);
    }
    let returns_unit = match shape {
        Shape::Async => matches!(sig.output, ReturnType::Default),
        Shape::Boxed(boxed) => matches!(&boxed.output, Type::Tuple(t) if t.elems.is_empty()),
    };
    if args.on_busy == OnBusy::Error && returns_unit {
        cx.error(
            sig.ident.span(),
            format!(
                "`{}` returns `()`, so a lock failure has nowhere to go: return `Result<T, E>` \
                 where `E: From<redlock_runtime::LockError>`, or add `on_busy = \"skip\"` to \
                 skip the body when another holder has the lock",
                sig.ident
            ),
        );
    }
}

fn check_placeholders(key: &KeyTemplate, sig: &Signature, cx: &mut Ctxt) {
    let arguments = arguments(sig);
    for p in key.placeholders() {
        match arguments.iter().find(|(name, _)| *name == p.root) {
            Some((_, Binding::Whole(_))) => {}
            Some((_, Binding::InPattern(pattern))) => cx.error(
                key.span,
                format!(
                    "placeholder `<{}>` names `{}`, which the pattern `{pattern}` binds: \
                     placeholders name whole arguments; give the argument a name (`arg: T`) and \
                     write `<arg.field>`",
                    p.display(),
                    p.root
                ),
            ),
            None if p.root == "self" => cx.error(
                key.span,
                format!(
                    "placeholder `<{}>` needs a method: `{}` has no `self` argument",
                    p.display(),
                    sig.ident
                ),
            ),
            None => {
                let names: Vec<String> = arguments
                    .iter()
                    .filter(|(_, b)| matches!(b, Binding::Whole(_)))
                    .map(|(n, _)| format!("`{n}`"))
                    .collect();
                let known = if names.is_empty() {
                    format!("`{}` has no arguments to name", sig.ident)
                } else {
                    format!("the arguments of `{}` are {}", sig.ident, names.join(", "))
                };
                cx.error(
                    key.span,
                    format!("unknown placeholder `<{}>`: {known}", p.display()),
                );
            }
        }
    }
}

/// Whether the type mentions `impl Trait` (a fake `let x: impl Trait` would
/// not compile).
fn has_impl_trait(ty: &Type) -> bool {
    fn walk(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|t| match t {
            TokenTree::Ident(i) => i == "impl",
            TokenTree::Group(g) => walk(g.stream()),
            _ => false,
        })
    }
    walk(ty.to_token_stream())
}

/// Gives every token of `tokens` the span `span`, so that an error about
/// the whole expression points there.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
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
fn spanned_call(path: TokenStream, args: TokenStream, span: Span) -> TokenStream {
    let path = respan(path, span);
    let mut args = Group::new(Delimiter::Parenthesis, args);
    args.set_span(span);
    quote!(#path #args)
}

/// `{ tokens }` with the braces spanned on `span`.
fn braced(tokens: TokenStream, span: Span) -> Group {
    let mut group = Group::new(Delimiter::Brace, tokens);
    group.set_span(span);
    group
}

/// `let mut arg = arg;` at the top of the body for each `mut arg: T`
/// argument, whose `mut` moves there from the signature. Assigning to a
/// field of an argument captured by an `async move` block (`req.attempts =
/// 1;`) would otherwise be reported as an unused assignment
/// (`unused_assignments`), read or not.
fn rebind_mut_arguments(sig: &mut Signature) -> TokenStream {
    let mut rebinds = TokenStream::new();
    for arg in &mut sig.inputs {
        let FnArg::Typed(typed) = arg else { continue };
        let Pat::Ident(p) = &mut *typed.pat else {
            continue;
        };
        if p.by_ref.is_some() || p.subpat.is_some() {
            continue;
        }
        if let Some(mutability) = p.mutability.take() {
            let ident = &p.ident;
            rebinds.extend(quote! {
                #[allow(unused_variables)]
                let #mutability #ident = #ident;
            });
        }
    }
    rebinds
}

fn rewrite(func: AsyncFn, shape: Shape, args: LockArgs) -> TokenStream {
    let AsyncFn {
        attrs,
        vis,
        mut sig,
        brace_span,
        inner_attrs,
        body,
    } = func;
    let krate = match &args.crate_path {
        Some(path) => path.to_token_stream(),
        None => quote!(::redlock_runtime),
    };
    let private = quote!(#krate::__private);

    let key_var = Ident::new("__redlock_key", Span::mixed_site());
    let client_var = Ident::new("__redlock_client", Span::mixed_site());
    let options_var = Ident::new("__redlock_options", Span::mixed_site());
    let site_var = Ident::new("__REDLOCK_SITE", Span::mixed_site());
    let value_var = Ident::new("__redlock_value", Span::mixed_site());
    let request_var = Ident::new("__redlock_request", Span::mixed_site());
    let fake_var = Ident::new("__redlock_fake_return", Span::mixed_site());

    // The key, built before the body runs so the body may move its arguments.
    let arguments = arguments(&sig);
    let key = args.key.as_ref().map(|key| {
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
        quote! {
            let mut #key_var = #private::Key::with_capacity(#capacity);
            #(#pieces)*
            #key_var.finish()
        }
    });

    let client = match &args.client {
        Some(expr) => {
            let span = expr.span();
            let mut inner = Group::new(Delimiter::Parenthesis, expr.to_token_stream());
            inner.set_span(span);
            let borrow = respan(quote!(&), span);
            spanned_call(quote!(#private::client), quote!(#borrow #inner), span)
        }
        None => quote!(#private::installed_client()),
    };

    // A literal is a constant; an expression goes through
    // `__private::duration`, spanned on it, so one of another type is the
    // error's place ("expected `Duration`").
    let duration = |d: &DurationArg| match d {
        DurationArg::Const(d) => d.to_tokens(),
        DurationArg::Expr(expr) => spanned_call(
            quote!(#private::duration),
            expr.to_token_stream(),
            expr.span(),
        ),
    };
    let some_or_none = |d: &Option<DurationArg>| match d {
        Some(d) => {
            let d = duration(d);
            quote!(::core::option::Option::Some(#d))
        }
        None => quote!(::core::option::Option::None),
    };
    let ttl = some_or_none(&args.ttl);
    let hold_at_least = some_or_none(&args.hold_at_least);
    let wait = match &args.wait {
        Some(d) => duration(d),
        None => quote!(::core::time::Duration::ZERO),
    };
    let renew = args.renew;
    let fair = args.fair;
    // The metrics' `lock` label: the template, placeholders and all; made
    // into an `Arc<str>` once, by the function's `Site`.
    let label = args
        .key
        .as_ref()
        .map(KeyTemplate::as_written)
        .unwrap_or_default();
    let name = sig.ident.unraw().to_string();
    let on_lost = match args.on_lost {
        OnLost::Cancel => quote!(#private::OnLost::Cancel),
        OnLost::Signal => quote!(#private::OnLost::Signal),
    };

    // The body, and the type it returns: the function's (an `async fn`), or
    // the future's `Output` (`#[async_trait]`).
    let (ret, rebinds, body, body_span) = match &shape {
        Shape::Async => {
            let ret = match &sig.output {
                ReturnType::Default => None,
                ReturnType::Type(_, ty) => Some((**ty).clone()),
            };
            let rebinds = rebind_mut_arguments(&mut sig);
            (ret, rebinds, body, brace_span)
        }
        // `#[async_trait]` moved the arguments into its block already.
        Shape::Boxed(boxed) => {
            let ret = match &boxed.output {
                Type::Tuple(t) if t.elems.is_empty() => None,
                ty => Some(ty.clone()),
            };
            (
                ret,
                TokenStream::new(),
                boxed.body.clone(),
                boxed.brace_span,
            )
        }
    };
    let (ret_ty, ret_span) = match &ret {
        None => (quote!(()), sig.ident.span()),
        Some(ty) => (ty.to_token_stream(), ty.span()),
    };

    // The body, as a future whose output type is pinned to the return type
    // by an unreachable `return` (so `?` and type errors inside the body
    // resolve and point as they would without the macro).
    let fake_return = match &ret {
        Some(ty) if has_impl_trait(ty) => quote!(),
        _ => quote! {
            #[allow(
                unreachable_code,
                clippy::diverging_sub_expression,
                clippy::let_unit_value,
                clippy::needless_return
            )]
            if false {
                let #fake_var: #ret_ty = loop {};
                return #fake_var;
            }
        },
    };
    let body = quote_spanned!(body_span=> async move { #rebinds #fake_return #body });

    // The conversions into the return type are spanned on it, so that a
    // return type that cannot take them is the error's place. (The error
    // binding shares that span: hygiene needs the same span at both ends.)
    let error_var = Ident::new("__redlock_error", ret_span);
    let call = match args.on_busy {
        OnBusy::Error => {
            let from_error = spanned_call(
                quote!(#private::FromLockError::from_lock_error),
                quote!(#error_var),
                ret_span,
            );
            quote! {
                match match #private::request(#client_var, #key_var, #options_var) {
                    ::core::result::Result::Ok(#request_var) => #private::LockRequest::run(#request_var, #body).await,
                    ::core::result::Result::Err(#error_var) => ::core::result::Result::Err(#error_var),
                } {
                    ::core::result::Result::Ok(#value_var) => #value_var,
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
                quote!(#error_var, #options_var.site),
                ret_span,
            );
            quote! {
                match match #private::request(#client_var, #key_var, #options_var) {
                    ::core::result::Result::Ok(#request_var) => #private::LockRequest::try_run(#request_var, #body).await,
                    ::core::result::Result::Err(#error_var) => ::core::result::Result::Err(#error_var),
                } {
                    ::core::result::Result::Ok(::core::option::Option::Some(#value_var)) => #value_var,
                    ::core::result::Result::Ok(::core::option::Option::None) => #skipped,
                    ::core::result::Result::Err(#error_var) => #failed,
                }
            }
        }
    };

    let locked = quote! {
        let #key_var = { #key };
        let #client_var = #client;
        let #options_var = {
            static #site_var: #private::Site = #private::Site::new(
                #label,
                ::core::concat!(::core::module_path!(), "::", #name),
            );
            #private::Options {
                ttl: #ttl,
                wait: #wait,
                renew: #renew,
                hold_at_least: #hold_at_least,
                on_lost: #on_lost,
                fair: #fair,
                site: &#site_var,
            }
        };
        #call
    };
    let block = match shape {
        Shape::Async => braced(quote!(#(#inner_attrs)* #locked), brace_span),
        // `Box::pin(async move { <the lock, around the original block> })`.
        Shape::Boxed(boxed) => {
            let Boxed {
                pin_path,
                paren_span,
                async_move,
                brace_span: async_span,
                ..
            } = *boxed;
            let inner = braced(locked, async_span);
            let mut call = Group::new(Delimiter::Parenthesis, quote!(#async_move #inner));
            call.set_span(paren_span);
            braced(quote!(#(#inner_attrs)* #pin_path #call), brace_span)
        }
    };
    // The user's own braces: the item keeps its span, so lints such as
    // `dead_code` still see a user-written function.
    quote! {
        #(#attrs)*
        #vis #sig #block
    }
}
