//! The statements that replace an `#[idempotent]` function's body: build
//! the key (and the fingerprint's text), get the client, then run the body
//! once per key through `__private::idempotent`, which converts a failure
//! into the function's error type. The call is spanned on the return type,
//! so an unmet bound (`T: Serialize`, `E: From<IdempotentError>`) is
//! reported there.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;

use crate::attr::LockArgs;
use crate::call::{Function, Vars, duration, key_block, spanned_call};

/// The statements; `key` and `client` are the blocks `call::locked` made.
pub(crate) fn statements(
    args: &LockArgs,
    func: Function<'_>,
    krate: &TokenStream,
    v: &Vars,
    key: TokenStream,
    client: TokenStream,
) -> TokenStream {
    let private = quote!(#krate::__private);
    let Vars {
        key: key_var,
        client: client_var,
        ..
    } = v;
    let fingerprint_var = Ident::new("__redlock_fingerprint", Span::mixed_site());
    let fingerprint = match &args.fingerprint {
        Some(template) => {
            let block = key_block(template, func.arguments, &private, &fingerprint_var);
            quote!(::core::option::Option::Some(#block))
        }
        None => quote!(::core::option::Option::None),
    };
    let some_or_none = |d: &Option<_>| match d {
        Some(d) => {
            let d = duration(d, &private);
            quote!(::core::option::Option::Some(#d))
        }
        None => quote!(::core::option::Option::None),
    };
    let (retention, lease, wait) = (
        some_or_none(&args.ttl),
        some_or_none(&args.lease),
        some_or_none(&args.wait),
    );
    let name = &func.name;
    let scope = match &args.scope {
        Some(lit) => quote!(#lit),
        None => quote!(::core::concat!(::core::module_path!(), "::", #name)),
    };
    let body = func.body;
    let run = spanned_call(
        quote!(#private::idempotent),
        quote! {
            #client_var,
            #key_var,
            #fingerprint_var,
            #private::IdempotentOptions {
                retention: #retention,
                lease: #lease,
                wait: #wait,
                scope: #scope,
            },
            #body
        },
        func.ret_span,
    );
    // `.await` spanned on the return type too, so an unmet bound is
    // reported once, there.
    let run = quote_spanned!(func.ret_span=> #run.await);
    quote! {
        let #key_var = #key;
        let #fingerprint_var = #fingerprint;
        let #client_var = #client;
        #run
    }
}
