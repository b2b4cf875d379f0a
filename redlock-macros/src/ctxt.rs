//! [`Ctxt`]: the errors found while parsing and checking, reported all at
//! once (serde's `Ctxt`), each spanned on the offending token.

use proc_macro2::Span;

/// Errors collected while parsing and checking, reported all at once.
#[derive(Default)]
pub(crate) struct Ctxt {
    errors: Option<syn::Error>,
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
