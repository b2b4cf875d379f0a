//! The rewrite: the user's `async fn`, with its body replaced by the
//! statements of `call.rs`, which run it holding the lock (or the permit).
//!
//! A method that `#[async_trait]` has already rewritten (a plain `fn`
//! returning `Pin<Box<dyn Future<Output = T> ..>>` whose body is
//! `Box::pin(async move { .. })`) is rewritten the same way inside its
//! `async move` block.

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt as _;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, Pat, ReturnType, Signature, Type};

use crate::attr::{self, Around, Attr, LockArgs, OnBusy, Take};
use crate::call::{self, Function};
use crate::ctxt::Ctxt;
use crate::key::KeyTemplate;
use crate::shape::{AsyncFn, Binding, Boxed, Shape, arguments, shape};

/// Entry point: never panics; on any error the original item is emitted
/// next to the errors (with its lints quieted, so that only the errors
/// show), and the rest of the crate still compiles.
pub(crate) fn expand(attr: Attr, args: TokenStream, item: TokenStream) -> TokenStream {
    let mut cx = Ctxt::default();
    let args = attr::parse(attr, args, &mut cx);
    let parsed = syn::parse::Parser::parse2(
        |input: syn::parse::ParseStream<'_>| AsyncFn::parse(input, attr),
        item.clone(),
    );
    let func = match parsed {
        Ok(func) => func,
        Err(e) => {
            cx.push(e);
            return with_errors(item, cx);
        }
    };
    let shape = shape(&func, attr, &mut cx);
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
    for key in args.keys.iter().chain(&args.fingerprint) {
        check_placeholders(key, sig, cx);
    }
    let returns_unit = match shape {
        Shape::Async => matches!(sig.output, ReturnType::Default),
        Shape::Boxed(boxed) => matches!(&boxed.output, Type::Tuple(t) if t.elems.is_empty()),
    };
    let take = match args.around {
        Around::Held(take) => take,
        Around::Once => {
            if returns_unit {
                cx.error(
                    sig.ident.span(),
                    format!(
                        "`{}` returns `()`, but `#[idempotent]` stores the function's value and \
                     replays it to duplicates: return `Result<T, E>` where `T: Serialize + \
                     DeserializeOwned` and `E: From<redlock_runtime::IdempotentError>`",
                        sig.ident
                    ),
                );
            }
            return;
        }
    };
    if args.on_busy == OnBusy::Error && returns_unit {
        let (failure, busy) = match take {
            Take::Permit { .. } => ("a failure to take a permit", "no permit is free"),
            _ => ("a lock failure", "another holder has the lock"),
        };
        cx.error(
            sig.ident.span(),
            format!(
                "`{}` returns `()`, so {failure} has nowhere to go: return `Result<T, E>` \
                 where `E: From<redlock_runtime::LockError>`, or add `on_busy = \"skip\"` to \
                 skip the body when {busy}",
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
    let fake_var = Ident::new("__redlock_fake_return", Span::mixed_site());
    let arguments = arguments(&sig);
    let name = sig.ident.unraw().to_string();

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
    let function = Function {
        arguments: &arguments,
        name,
        body,
        ret_span,
    };
    let locked = match args.around {
        Around::Held(take) => call::locked(&args, take, function),
        Around::Once => crate::once::statements(&args, function),
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
