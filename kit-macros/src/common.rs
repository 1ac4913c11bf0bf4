//! Helpers shared by the macros.

use proc_macro2::TokenStream;
use quote::quote;

/// Collects errors so a macro reports all of them at once.
#[derive(Default)]
pub struct Errors {
    errors: Option<syn::Error>,
}

impl Errors {
    /// Records an error.
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.errors {
            Some(e) => e.combine(error),
            None => self.errors = Some(error),
        }
    }

    /// Records an error at a span.
    pub fn at(&mut self, span: proc_macro2::Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    /// True when no error was recorded.
    pub fn is_empty(&self) -> bool {
        self.errors.is_none()
    }

    /// The collected errors as `compile_error!` invocations, if any.
    pub fn into_result(self) -> Result<(), syn::Error> {
        match self.errors {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The path to the `kit` crate in generated code.
pub fn kit_path(custom: Option<&syn::Path>) -> TokenStream {
    match custom {
        Some(p) => quote!(#p),
        None => quote!(::kit),
    }
}

/// The closest candidate to `name` (edit distance ≤ 2), for "did you mean" hints.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (levenshtein(name, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}
