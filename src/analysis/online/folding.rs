//! Folding numbers out of names: `Train step 12/Layer 3` and `Train step 13/Layer 4` are one
//! range group, `Train step #/Layer #`. The summary groups range rows this way
//! ([`report::text::group`](crate::report::text::group), which re-exports these), and the
//! online aggregates key their range groups by it.
//!
//! A leaf of `online`: it imports nothing.

use std::borrow::Cow;

/// The marker a folded number becomes.
pub const NUMBER_MARK: char = '#';

/// `text` with each number replaced by [`NUMBER_MARK`]. A run of ASCII digits folds unless
/// an ASCII letter comes right before it: `Train step 12`, `layers.3.mlp` and `step_7`
/// become `Train step #`, `layers.#.mlp` and `step_#`, while `conv2d` and `gemm_fp16` stay
/// as they are (there the digits are part of a word, not a counter).
pub fn fold_numbers(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let foldable = |i: usize| bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric());
    if !(0..bytes.len()).any(foldable) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_ascii_digit() && foldable(i) {
            out.push(NUMBER_MARK);
            while chars.peek().is_some_and(|(_, d)| d.is_ascii_digit()) {
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}
