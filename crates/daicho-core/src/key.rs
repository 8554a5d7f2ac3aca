//! Title normalization and the dedupe key (M1).
//!
//! The key is `source + "|" + normalize_title(title)`. Normalization folds the spellings a
//! person would call the same: Unicode NFKC (full-width and half-width forms become one), lower
//! case, and whitespace, symbols and punctuation removed. The displayed title stays as written;
//! only the key is normalized.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// Unicode NFKC of `text`.
pub fn nfkc(text: &str) -> String {
    text.nfkc().collect()
}

/// Normalizes a title for the dedupe key (M1): NFKC, lower case, keeping only letters, numbers
/// and combining marks. Idempotent.
pub fn normalize_title(title: &str) -> String {
    title
        .nfkc()
        .flat_map(char::to_lowercase)
        .filter(|&c| c.is_alphanumeric() || is_combining_mark(c))
        // Lower-casing can decompose (İ → i̇); compose again so the function is idempotent.
        .nfkc()
        .collect()
}

/// The dedupe key of a row: `source|normalized title` (M1). The source is trimmed, not folded.
pub fn dedupe_key(source: &str, title: &str) -> String {
    let mut key = String::with_capacity(source.len() + 1 + title.len());
    key.push_str(source.trim());
    key.push('|');
    key.push_str(&normalize_title(title));
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn m1_width_variants_and_punctuation_share_one_key() {
        let a = dedupe_key("seed", "パーサー　実装！");
        let b = dedupe_key("seed", "ﾊﾟｰｻｰ実装");
        let c = dedupe_key("seed", "パーサー実装");
        assert_eq!(a, "seed|パーサー実装");
        assert_eq!(a, b);
        assert_eq!(b, c);
    }

    #[test]
    fn m1_case_blanks_and_symbols_are_folded() {
        assert_eq!(normalize_title("  Write THE Parser!! "), "writetheparser");
        assert_eq!(normalize_title("Ｗｒｉｔｅ－the_parser"), "writetheparser");
        assert_eq!(normalize_title("【夜間】 調査/記事"), "夜間調査記事");
        assert_ne!(dedupe_key("a", "x"), dedupe_key("b", "x"), "the source is part of the key");
    }

    proptest! {
        #[test]
        fn normalization_is_idempotent(title in "\\PC{0,40}") {
            let once = normalize_title(&title);
            prop_assert_eq!(normalize_title(&once), once.clone());
        }

        #[test]
        fn normalization_is_idempotent_on_japanese_and_width_forms(
            title in "[ァ-ヶｦ-ﾟＡ-Ｚａ-ｚ０-９ー　 !！？?・]{0,30}"
        ) {
            let once = normalize_title(&title);
            prop_assert_eq!(normalize_title(&once), once.clone());
        }
    }
}
