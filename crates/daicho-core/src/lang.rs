//! The language people read daicho's messages in: English, or Japanese (`DAICHO_LANG=ja`, or a
//! `ja` locale). Machine output (JSON, kinds, commands to type) stays the same in both.

/// A language of messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Lang {
    /// English.
    #[default]
    En,
    /// Japanese.
    Ja,
}

impl Lang {
    /// The language a locale name stands for (`ja_JP.UTF-8`, `ja` → Japanese; else English).
    pub fn of_locale(name: &str) -> Lang {
        if name.starts_with("ja") { Lang::Ja } else { Lang::En }
    }

    /// The text in this language.
    pub fn pick<'a>(self, en: &'a str, ja: &'a str) -> &'a str {
        match self {
            Lang::En => en,
            Lang::Ja => ja,
        }
    }

    /// Whether this is Japanese.
    pub fn is_ja(self) -> bool {
        self == Lang::Ja
    }
}
