//! What the attribute was put on: the function as written (its body kept
//! as raw tokens), its arguments' bindings, and its shape: an `async fn`,
//! or what `#[async_trait]` made of one (a plain `fn` returning a boxed
//! future whose body is `Box::pin(async move { .. })`); a plain `fn` that
//! another attribute rewrote is refused with a message saying which order
//! to use.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::ext::IdentExt as _;
use syn::parse::ParseStream;
use syn::{
    Attribute, FnArg, GenericArgument, Ident, Pat, PathArguments, ReturnType, Signature, Type,
    TypeParamBound, Visibility,
};

use crate::attr::Attr;
use crate::ctxt::Ctxt;

/// A function with its body kept as raw tokens (never parsed), so that an
/// error inside the body is rustc's to report, at its own place.
pub(crate) struct AsyncFn {
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) vis: Visibility,
    pub(crate) sig: Signature,
    pub(crate) brace_span: Span,
    pub(crate) inner_attrs: Vec<Attribute>,
    pub(crate) body: TokenStream,
}

impl AsyncFn {
    /// Parses the item `attr` was put on.
    pub(crate) fn parse(input: ParseStream<'_>, attr: Attr) -> syn::Result<Self> {
        let attr = attr.name();
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
                format!(
                    "`#[{attr}]` goes on an `async fn`: a free function, or a method in an `impl` \
                     block"
                ),
            ));
        }
        let sig: Signature = input.parse()?;
        if input.peek(syn::Token![;]) {
            return Err(syn::Error::new(
                sig.ident.span(),
                format!(
                    "`#[{attr}]` needs the function's body: put it on the method in the `impl` \
                     block, not on the trait's declaration"
                ),
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
pub(crate) enum Binding {
    /// `name: T` or `self`: usable in a placeholder, which refers to it
    /// through this identifier (the argument's own, hygiene and all).
    Whole(Ident),
    /// Bound inside a destructuring pattern: `(a, b): (u32, u32)`.
    InPattern(String),
}

/// The arguments' names (without `r#`), and how each is bound.
pub(crate) fn arguments(sig: &Signature) -> Vec<(String, Binding)> {
    let mut out = Vec::new();
    for arg in &sig.inputs {
        match arg {
            FnArg::Receiver(receiver) => out.push((
                "self".to_owned(),
                Binding::Whole(Ident::new("self", receiver.self_token.span)),
            )),
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(p) if p.subpat.is_none() => {
                    out.push((p.ident.unraw().to_string(), Binding::Whole(p.ident.clone())));
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
pub(crate) fn bound_names(pat: &Pat, out: &mut Vec<String>) {
    match pat {
        Pat::Ident(p) => {
            out.push(p.ident.unraw().to_string());
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

/// What the attribute was put on.
pub(crate) enum Shape {
    /// An `async fn`.
    Async,
    /// What `#[async_trait]` makes of an `async fn`.
    Boxed(Box<Boxed>),
}

/// `fn f(..) -> Pin<Box<dyn Future<Output = T> + ..>> { Box::pin(async move { body }) }`.
pub(crate) struct Boxed {
    /// The future's `Output`: what the `async fn` returned.
    pub(crate) output: Type,
    /// `Box::pin` (or `::alloc::boxed::Box::pin`), as written.
    pub(crate) pin_path: TokenStream,
    /// The parentheses of the call.
    pub(crate) paren_span: Span,
    /// `async move`, as written.
    pub(crate) async_move: TokenStream,
    /// The async block's braces.
    pub(crate) brace_span: Span,
    /// The async block's contents.
    pub(crate) body: TokenStream,
}

/// The function's shape; `None` (with the error recorded) for a plain
/// `fn` the attribute cannot take.
pub(crate) fn shape(func: &AsyncFn, attr: Attr, cx: &mut Ctxt) -> Option<Shape> {
    let sig = &func.sig;
    let held = attr.held();
    let attr = attr.name();
    if sig.asyncness.is_some() {
        return Some(Shape::Async);
    }
    if let Some(output) = boxed_future_output(&sig.output) {
        if let Some(boxed) = boxed_async_block(&func.body, output) {
            return Some(Shape::Boxed(Box::new(boxed)));
        }
        cx.error(
            sig.ident.span(),
            format!(
                "`#[{attr}]` needs an `async fn`; `{}` is a plain `fn` returning a \
                 boxed future, which it takes only when the body is `Box::pin(async move {{ .. \
                 }})` (what `#[async_trait]` writes for an `async fn`): write `async fn {}(..)`, \
                 or that body",
                sig.ident, sig.ident
            ),
        );
        return None;
    }
    if has_async_block(&func.body) {
        // `#[tokio::test]` leaves a `#[test]` behind.
        let test = func
            .attrs
            .iter()
            .any(|a| a.path().segments.last().is_some_and(|s| s.ident == "test"));
        let message = if test {
            format!(
                "`#[{attr}]` needs an `async fn`, and `{}` no longer is one: \
                 `#[tokio::test]` (or another test attribute) above `#[{attr}]` has already \
                 rewritten it into a plain `fn` that runs an `async` block. Attributes expand \
                 from the top down: move `#[{attr}]` above it",
                sig.ident
            )
        } else {
            format!(
                "`#[{attr}]` needs an `async fn`, and `{}` is a plain `fn` that runs \
                 an `async` block: when an attribute above `#[{attr}]` (such as \
                 `#[tokio::main]` or `#[tokio::test]`) rewrote it so, move \
                 `#[{attr}]` above that attribute (attributes expand from the top \
                 down); otherwise write `async fn {}(..)`",
                sig.ident, sig.ident
            )
        };
        cx.error(Span::call_site(), message);
        return None;
    }
    cx.error(
        sig.fn_token.span,
        format!(
            "`#[{attr}]` needs an `async fn`: {held} is taken with `.await` before the \
             body runs; write `async fn {}(..)`",
            sig.ident
        ),
    );
    None
}

/// `T` in `Pin<Box<dyn Future<Output = T> + ..>>` (paths as written: the
/// last segment's name counts).
pub(crate) fn boxed_future_output(output: &ReturnType) -> Option<&Type> {
    /// The first type argument of `Name<..>`.
    fn argument<'a>(ty: &'a Type, name: &str) -> Option<&'a Type> {
        let Type::Path(path) = ty else { return None };
        let last = path.path.segments.last()?;
        let PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        if path.qself.is_some() || last.ident != name {
            return None;
        }
        args.args.iter().find_map(|arg| match arg {
            GenericArgument::Type(ty) => Some(ty),
            _ => None,
        })
    }
    let ReturnType::Type(_, ty) = output else {
        return None;
    };
    let Type::TraitObject(object) = argument(argument(ty, "Pin")?, "Box")? else {
        return None;
    };
    object.bounds.iter().find_map(|bound| {
        let TypeParamBound::Trait(bound) = bound else {
            return None;
        };
        let last = bound.path.segments.last()?;
        let PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        if last.ident != "Future" {
            return None;
        }
        args.args.iter().find_map(|arg| match arg {
            GenericArgument::AssocType(assoc) if assoc.ident == "Output" => Some(&assoc.ty),
            _ => None,
        })
    })
}

/// A body that is `Box::pin(async move { .. })` and nothing else.
pub(crate) fn boxed_async_block(body: &TokenStream, output: &Type) -> Option<Boxed> {
    let tokens: Vec<TokenTree> = body.clone().into_iter().collect();
    let (TokenTree::Group(call), path) = tokens.split_last()? else {
        return None;
    };
    let is = |t: &TokenTree, s: &str| t.to_string() == s;
    let path_ok = path.len() >= 4
        && path.iter().all(|t| match t {
            TokenTree::Ident(_) => true,
            TokenTree::Punct(p) => p.as_char() == ':',
            _ => false,
        })
        && is(&path[path.len() - 4], "Box")
        && is(&path[path.len() - 1], "pin");
    if !path_ok || call.delimiter() != Delimiter::Parenthesis {
        return None;
    }
    let inner: Vec<TokenTree> = call.stream().into_iter().collect();
    let (TokenTree::Group(block), async_move) = inner.split_last()? else {
        return None;
    };
    let async_ok = match async_move {
        [a] => is(a, "async"),
        [a, m] => is(a, "async") && is(m, "move"),
        _ => false,
    };
    if !async_ok || block.delimiter() != Delimiter::Brace {
        return None;
    }
    Some(Boxed {
        output: output.clone(),
        pin_path: path.iter().cloned().collect(),
        paren_span: call.span(),
        async_move: async_move.iter().cloned().collect(),
        brace_span: block.span(),
        body: block.stream(),
    })
}

/// Whether the body runs an `async` block at its top level (what
/// `#[tokio::test]` and `#[tokio::main]` make of an `async fn`'s body).
pub(crate) fn has_async_block(body: &TokenStream) -> bool {
    let tokens: Vec<TokenTree> = body.clone().into_iter().collect();
    tokens.windows(2).any(|pair| match pair {
        [TokenTree::Ident(a), next] if a == "async" => match next {
            TokenTree::Group(g) => g.delimiter() == Delimiter::Brace,
            TokenTree::Ident(m) => m == "move",
            _ => false,
        },
        _ => false,
    })
}
