//! The statements that replace an `#[idempotent]` function's body: build
//! the key (and the fingerprint's text), get the client (both as
//! `call.rs` does for a lock), then run the body
//! once per key through `__private::idempotent`, which converts a failure
//! into the function's error type. The call is spanned on the return type,
//! so an unmet bound (`T: Serialize`, `E: From<IdempotentError>`) is
//! reported there.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;

use crate::attr::LockArgs;
use crate::call::{
    Function, Vars, client_block, crate_path, duration, key_block, one_key, spanned_call,
};

/// The statements that replace the body (as `call::locked`'s do for a
/// lock).
pub(crate) fn statements(args: &LockArgs, func: Function<'_>) -> TokenStream {
    let krate = crate_path(args);
    let private = quote!(#krate::__private);
    let v = Vars::new();
    let Vars {
        key: key_var,
        client: client_var,
        ..
    } = &v;
    let key = one_key(args, func.arguments, &private, key_var);
    let client = client_block(args, &private);
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
