//! The key template: `"order:<user_id>:<req.order_id>"` split into literal
//! text and placeholders, each placeholder a parameter of the function or a
//! field path on one.

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote_spanned;
use syn::LitStr;

/// The longest key the runtime accepts (`redlock_runtime::MAX_KEY_LEN`).
const MAX_KEY_LEN: usize = 1024;

/// A parsed `key = ".."`.
pub(crate) struct KeyTemplate {
    pub(crate) pieces: Vec<Piece>,
    /// The literal, where every error about the key points.
    pub(crate) span: Span,
}

/// Literal text, or a `<placeholder>`.
pub(crate) enum Piece {
    Text(String),
    Value(Placeholder),
}

/// `<root.field.0>`.
pub(crate) struct Placeholder {
    /// The parameter: an identifier or `self`, without `r#`.
    pub(crate) root: String,
    /// Fields (`name`, without `r#`) and tuple indices (`0`) after the root.
    pub(crate) path: Vec<String>,
}

impl Placeholder {
    /// `&root.field.0`, spanned on the key literal so that rustc's own
    /// errors (a missing `Display`, a missing field) point at the key.
    /// `root` is the argument's own identifier (`self` for the receiver):
    /// the reference resolves as the argument's name does, so a function
    /// and its attribute written by a `macro_rules!` from different
    /// hygiene contexts, or a raw identifier (`r#type`), still match.
    pub(crate) fn borrow_tokens(&self, span: Span, root: &Ident) -> TokenStream {
        let mut root = root.clone();
        root.set_span(span.resolved_at(root.span()));
        let path = self.path.iter().map(|member| match member.parse::<u32>() {
            Ok(index) => syn::Member::Unnamed(syn::Index { index, span }),
            Err(_) if is_keyword(member) => syn::Member::Named(Ident::new_raw(member, span)),
            Err(_) => syn::Member::Named(Ident::new(member, span)),
        });
        quote_spanned!(span=> &#root #(.#path)*)
    }

    /// As written, for messages: `req.user_id`.
    pub(crate) fn display(&self) -> String {
        let mut s = self.root.clone();
        for member in &self.path {
            s.push('.');
            s.push_str(member);
        }
        s
    }
}

impl KeyTemplate {
    /// The template as written, with `<` and `>` in the text doubled again:
    /// `order:<user_id>:<order_id>`.
    pub(crate) fn as_written(&self) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(&text.replace('<', "<<").replace('>', ">>")),
                Piece::Value(p) => {
                    out.push('<');
                    out.push_str(&p.display());
                    out.push('>');
                }
            }
        }
        out
    }

    pub(crate) fn parse(lit: &LitStr) -> syn::Result<KeyTemplate> {
        let text = lit.value();
        let span = lit.span();
        let err = |message: String| syn::Error::new(span, message);
        let mut errors: Option<syn::Error> = None;
        let mut push = |e: syn::Error| match &mut errors {
            Some(all) => all.combine(e),
            None => errors = Some(e),
        };

        if text.is_empty() {
            return Err(err(
                "`key` must not be empty: write the lock's name, such as \"order:<order_id>\""
                    .to_owned(),
            ));
        }

        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut chars = text.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match c {
                '<' if chars.peek().map(|&(_, c)| c) == Some('<') => {
                    chars.next();
                    literal.push('<');
                }
                '>' if chars.peek().map(|&(_, c)| c) == Some('>') => {
                    chars.next();
                    literal.push('>');
                }
                '>' => push(err(format!(
                    "unmatched `>` at byte {at} of the key: placeholders are written `<name>`; \
                     write `>>` for a literal `>`"
                ))),
                '<' => {
                    let mut inner = String::new();
                    let mut closed = false;
                    for (_, c) in chars.by_ref() {
                        if c == '>' {
                            closed = true;
                            break;
                        }
                        inner.push(c);
                    }
                    if !closed {
                        push(err(format!(
                            "unclosed placeholder `<{inner}` in the key: close it with `>`, or \
                             write `<<` for a literal `<`"
                        )));
                        break;
                    }
                    match placeholder(&inner) {
                        Ok(p) => {
                            if !literal.is_empty() {
                                pieces.push(Piece::Text(std::mem::take(&mut literal)));
                            }
                            pieces.push(Piece::Value(p));
                        }
                        Err(message) => push(err(message)),
                    }
                }
                c if c.is_control() => push(err(format!(
                    "the key contains the control character {c:?}: use printable text"
                ))),
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        let fixed: usize = pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.len(),
                Piece::Value(_) => 0,
            })
            .sum();
        if fixed > MAX_KEY_LEN {
            push(err(format!(
                "the key's text is {fixed} bytes long; a lock key is at most {MAX_KEY_LEN} bytes"
            )));
        }
        match errors {
            Some(e) => Err(e),
            None => Ok(KeyTemplate { pieces, span }),
        }
    }

    pub(crate) fn placeholders(&self) -> impl Iterator<Item = &Placeholder> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Value(v) => Some(v),
            Piece::Text(_) => None,
        })
    }
}

/// `user_id`, `req.user_id`, `self.tenant`, `pair.0`.
fn placeholder(inner: &str) -> Result<Placeholder, String> {
    if inner.is_empty() {
        return Err(
            "empty placeholder `<>` in the key: name an argument, such as `<user_id>`, \
                    or write `<<>>` for a literal `<>`"
                .to_owned(),
        );
    }
    let mut parts = inner.split('.');
    let written_root = parts.next().unwrap_or_default();
    let root = unraw(written_root);
    if !is_ident(root) || (root != written_root && !can_be_raw(root)) {
        return Err(format!(
            "`<{inner}>` is not a placeholder: write `<name>` or `<name.field>`, where `name` \
             is an argument of the function (no spaces or expressions)"
        ));
    }
    let mut path = Vec::new();
    for written in parts {
        let member = unraw(written);
        let index = !member.is_empty() && member.bytes().all(|b| b.is_ascii_digit());
        let field = is_ident(member) && can_be_raw(member);
        if !(field || index)
            || (index && (member != written || member.len() > 1 && member.starts_with('0')))
        {
            return Err(format!(
                "`<{inner}>` is not a placeholder: after the argument come field names or tuple \
                 indices, separated by dots, such as `<req.user_id>` or `<pair.0>`"
            ));
        }
        path.push(member.to_owned());
    }
    Ok(Placeholder {
        root: root.to_owned(),
        path,
    })
}

/// `r#type` → `type`: a raw identifier names what the plain one would.
fn unraw(s: &str) -> &str {
    s.strip_prefix("r#").unwrap_or(s)
}

/// Whether `s` is a keyword (`type`, `match`, ..): written `r#type` as an
/// identifier.
fn is_keyword(s: &str) -> bool {
    syn::parse_str::<Ident>(s).is_err()
}

/// The path keywords, which no field or argument is named after (and which
/// cannot be raw identifiers).
fn can_be_raw(s: &str) -> bool {
    !matches!(s, "self" | "Self" | "super" | "crate")
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c == '_' || c.is_alphabetic() => {}
        _ => return false,
    }
    s != "_" && chars.all(|c| c == '_' || c.is_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Vec<String>, String> {
        KeyTemplate::parse(&LitStr::new(s, Span::call_site()))
            .map(|k| {
                k.pieces
                    .iter()
                    .map(|p| match p {
                        Piece::Text(t) => format!("text:{t}"),
                        Piece::Value(v) => format!("value:{}", v.display()),
                    })
                    .collect()
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn splits_text_and_placeholders() {
        assert_eq!(
            parse("order:<user_id>:<req.order.0>").expect("a valid template"),
            [
                "text:order:",
                "value:user_id",
                "text::",
                "value:req.order.0"
            ]
        );
        assert_eq!(
            parse("<a><b>").expect("a valid template"),
            ["value:a", "value:b"]
        );
        assert_eq!(
            parse("job:nightly").expect("a valid template"),
            ["text:job:nightly"]
        );
        assert_eq!(parse("a<<b>>c").expect("a valid template"), ["text:a<b>c"]);
        assert_eq!(
            parse("<self.tenant>").expect("a valid template"),
            ["value:self.tenant"]
        );
        assert_eq!(
            parse("x:<r#type>:<item.r#ref>:<type>").expect("raw identifiers"),
            [
                "text:x:",
                "value:type",
                "text::",
                "value:item.ref",
                "text::",
                "value:type"
            ]
        );
    }

    #[test]
    fn rejects_malformed_templates() {
        for bad in [
            "",
            "order:<>",
            "order:<user id>",
            "order:<user_id",
            "order:>",
            "order:<1x>",
            "order:<a..b>",
            "order:<a.>",
            "order:<a.01>",
            "order:<a+b>",
            "order:<_>",
            "line\nbreak",
            "order:<r#self>",
            "order:<a.self>",
            "order:<a.r#0>",
            "order:<r#>",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
