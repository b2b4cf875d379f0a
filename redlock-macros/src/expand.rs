//! The rewrite: the user's `async fn`, with its body run inside
//! `LockRequest::run` (or `try_run`) holding the lock; the request comes
//! from `__private::request`.
//!
//! Generated code names only `<crate>::__private::…` (`::redlock_runtime`
//! unless `crate = ".."` says otherwise) and `::core::…`.

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, Ident, Pat, ReturnType, Signature, Type, Visibility};

use crate::attr::{self, Ctxt, DurationArg, LockArgs, OnBusy, OnLost};
use crate::key::{KeyTemplate, Piece};

/// Entry point: never panics; on any error the original item is emitted
/// unchanged next to the errors, so the rest of the crate still compiles.
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
    check(&func, &args, &mut cx);
    match cx.into_result() {
        Ok(()) => rewrite(func, args),
        Err(e) => {
            let errors = e.to_compile_error();
            quote!(#item #errors)
        }
    }
}

fn with_errors(item: TokenStream, cx: Ctxt) -> TokenStream {
    match cx.into_result() {
        Ok(()) => item,
        Err(e) => {
            let errors = e.to_compile_error();
            quote!(#item #errors)
        }
    }
}

/// A function with its body kept as raw tokens (never parsed), so that an
/// error inside the body is rustc's to report, at its own place.
struct AsyncFn {
    attrs: Vec<Attribute>,
    vis: Visibility,
    sig: Signature,
    brace_span: Span,
    inner_attrs: Vec<Attribute>,
    body: TokenStream,
}

impl Parse for AsyncFn {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        if !(input.peek(syn::Token![async])
            || input.peek(syn::Token![fn])
            || input.peek(syn::Token![const])
            || input.peek(syn::Token![unsafe])
            || input.peek(syn::Token![extern]))
        {
            return Err(syn::Error::new(
                Span::call_site(),
                "`#[distributed_lock]` goes on an `async fn`: a free function, or a method in an \
                 `impl` block",
            ));
        }
        let sig: Signature = input.parse()?;
        if input.peek(syn::Token![;]) {
            return Err(syn::Error::new(
                sig.ident.span(),
                "`#[distributed_lock]` needs the function's body: put it on the method in the \
                 `impl` block, not on the trait's declaration",
            ));
        }
        let content;
        let brace = syn::braced!(content in input);
        let inner_attrs = content.call(Attribute::parse_inner)?;
        let body: TokenStream = content.parse()?;
        Ok(AsyncFn {
            attrs,
            vis,
            sig,
            brace_span: brace.span.join(),
            inner_attrs,
            body,
        })
    }
}

/// How an argument binds its name.
enum Binding {
    /// `name: T` or `self`: usable in a placeholder.
    Whole,
    /// Bound inside a destructuring pattern: `(a, b): (u32, u32)`.
    InPattern(String),
}

fn arguments(sig: &Signature) -> Vec<(String, Binding)> {
    let mut out = Vec::new();
    for arg in &sig.inputs {
        match arg {
            FnArg::Receiver(_) => out.push(("self".to_owned(), Binding::Whole)),
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(p) if p.subpat.is_none() => {
                    out.push((p.ident.to_string(), Binding::Whole));
                }
                pat => {
                    let shown = pat.to_token_stream().to_string();
                    let mut names = Vec::new();
                    bound_names(pat, &mut names);
                    for name in names {
                        out.push((name, Binding::InPattern(shown.clone())));
                    }
                }
            },
        }
    }
    out
}

/// The names a pattern binds (the common pattern forms).
fn bound_names(pat: &Pat, out: &mut Vec<String>) {
    match pat {
        Pat::Ident(p) => {
            out.push(p.ident.to_string());
            if let Some((_, sub)) = &p.subpat {
                bound_names(sub, out);
            }
        }
        Pat::Tuple(t) => t.elems.iter().for_each(|p| bound_names(p, out)),
        Pat::TupleStruct(t) => t.elems.iter().for_each(|p| bound_names(p, out)),
        Pat::Struct(s) => s.fields.iter().for_each(|f| bound_names(&f.pat, out)),
        Pat::Slice(s) => s.elems.iter().for_each(|p| bound_names(p, out)),
        Pat::Reference(r) => bound_names(&r.pat, out),
        Pat::Paren(p) => bound_names(&p.pat, out),
        Pat::Type(t) => bound_names(&t.pat, out),
        Pat::Or(o) => o.cases.iter().for_each(|p| bound_names(p, out)),
        _ => {}
    }
}

/// Checks the function against the arguments; every problem goes to `cx`.
fn check(func: &AsyncFn, args: &LockArgs, cx: &mut Ctxt) {
    let sig = &func.sig;
    if sig.asyncness.is_none() {
        cx.error(
            sig.fn_token.span,
            format!(
                "`#[distributed_lock]` needs an `async fn`: the lock is taken with `.await` \
                 before the body runs; write `async fn {}(..)`",
                sig.ident
            ),
        );
    }
    if let Some(key) = &args.key {
        check_placeholders(key, sig, cx);
    }
    if args.on_busy == OnBusy::Error && matches!(sig.output, ReturnType::Default) {
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
            Some((_, Binding::Whole)) => {}
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
                    .filter(|(_, b)| matches!(b, Binding::Whole))
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

/// `Result<..>` by name (also `io::Result<T>`, `anyhow::Result<T>`).
fn returns_result(output: &ReturnType) -> bool {
    match output {
        ReturnType::Type(_, ty) => match &**ty {
            Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "Result"),
            _ => false,
        },
        ReturnType::Default => false,
    }
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

fn rewrite(func: AsyncFn, args: LockArgs) -> TokenStream {
    let AsyncFn {
        attrs,
        vis,
        sig,
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
    let value_var = Ident::new("__redlock_value", Span::mixed_site());
    let request_var = Ident::new("__redlock_request", Span::mixed_site());
    let fake_var = Ident::new("__redlock_fake_return", Span::mixed_site());

    // The key, built before the body runs so the body may move its arguments.
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
                let value = p.borrow_tokens(key.span);
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
    // The metrics' `lock` label: the template, placeholders and all.
    let label = args
        .key
        .as_ref()
        .map(KeyTemplate::as_written)
        .unwrap_or_default();
    let on_lost = match args.on_lost {
        OnLost::Cancel => quote!(#private::OnLost::Cancel),
        OnLost::Signal => quote!(#private::OnLost::Signal),
    };

    // The body, as a future whose output type is pinned to the function's
    // return type by an unreachable `return` (so `?` and type errors inside
    // the body resolve and point as they would without the macro).
    let (ret_ty, ret_span) = match &sig.output {
        ReturnType::Default => (quote!(()), sig.ident.span()),
        ReturnType::Type(_, ty) => (ty.to_token_stream(), ty.span()),
    };
    let fake_return = match &sig.output {
        ReturnType::Type(_, ty) if has_impl_trait(ty) => quote!(),
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
    let body = quote_spanned!(brace_span=> async move { #fake_return #body });

    // The conversions into the return type are spanned on it, so that a
    // return type that cannot take them is the error's place. (The error
    // binding shares that span: hygiene needs the same span at both ends.)
    let error_var = Ident::new("__redlock_error", ret_span);
    let from_error = spanned_call(
        quote!(#private::FromLockError::from_lock_error),
        quote!(#error_var),
        ret_span,
    );
    let call = match args.on_busy {
        OnBusy::Error => quote! {
            match match #private::request(#client_var, #key_var, #options_var) {
                ::core::result::Result::Ok(#request_var) => #private::LockRequest::run(#request_var, #body).await,
                ::core::result::Result::Err(#error_var) => ::core::result::Result::Err(#error_var),
            } {
                ::core::result::Result::Ok(#value_var) => #value_var,
                ::core::result::Result::Err(#error_var) => #from_error,
            }
        },
        OnBusy::Skip => {
            let (skipped, on_error) = if returns_result(&sig.output) {
                let skipped =
                    spanned_call(quote!(#private::SkipResult::skipped), quote!(), ret_span);
                (skipped, from_error)
            } else {
                let skipped = spanned_call(quote!(#private::Skipped::skipped), quote!(), ret_span);
                let after_error = spanned_call(
                    quote!(#private::skipped_after_error),
                    quote!(#error_var),
                    ret_span,
                );
                (skipped, after_error)
            };
            quote! {
                match match #private::request(#client_var, #key_var, #options_var) {
                    ::core::result::Result::Ok(#request_var) => #private::LockRequest::try_run(#request_var, #body).await,
                    ::core::result::Result::Err(#error_var) => ::core::result::Result::Err(#error_var),
                } {
                    ::core::result::Result::Ok(::core::option::Option::Some(#value_var)) => #value_var,
                    ::core::result::Result::Ok(::core::option::Option::None) => #skipped,
                    ::core::result::Result::Err(#error_var) => #on_error,
                }
            }
        }
    };

    let mut block = Group::new(
        Delimiter::Brace,
        quote! {
            #(#inner_attrs)*
            let #key_var = { #key };
            let #client_var = #client;
            let #options_var = #private::Options {
                ttl: #ttl,
                wait: #wait,
                renew: #renew,
                hold_at_least: #hold_at_least,
                on_lost: #on_lost,
                fair: #fair,
                label: #label,
            };
            #call
        },
    );
    // The user's own braces: the item keeps its span, so lints such as
    // `dead_code` still see a user-written function.
    block.set_span(brace_span);
    quote! {
        #(#attrs)*
        #vis #sig #block
    }
}
