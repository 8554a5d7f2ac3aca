//! Cron expressions for the scheduler's roles (R1): the usual five fields (minute, hour, day of
//! month, month, day of week) with lists, ranges, steps, month and weekday names, `7` for Sunday,
//! and the `@hourly`, `@daily`/`@midnight`, `@weekly`, `@monthly`, `@yearly`/`@annually` macros.
//! Pure: the next time is computed on a civil (wall-clock) time the caller gives.

use jiff::ToSpan as _;
use jiff::civil::DateTime;

/// A parsed cron expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Whether day of month and day of week were both restricted (then either may match).
    either_day: bool,
    text: String,
}

const MONTHS: [&str; 12] =
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Cron {
    /// Parses an expression.
    ///
    /// # Errors
    ///
    /// Why the expression is not one: the wrong number of fields, a value out of range, a bad
    /// step or name.
    pub fn parse(text: &str) -> Result<Cron, String> {
        let expanded = match text.trim() {
            "@hourly" => "0 * * * *",
            "@daily" | "@midnight" => "0 0 * * *",
            "@weekly" => "0 0 * * 0",
            "@monthly" => "0 0 1 * *",
            "@yearly" | "@annually" => "0 0 1 1 *",
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "'{text}' is not a cron expression: 5 fields (minute hour day month weekday) expected, found {}",
                fields.len()
            ));
        }
        let field = |i: usize, lo: u32, hi: u32, names: &[&str]| {
            bits(fields[i], lo, hi, names).map_err(|e| format!("'{text}': {e}"))
        };
        let minutes = field(0, 0, 59, &[])?;
        let hours = field(1, 0, 23, &[])? as u32;
        let days = field(2, 1, 31, &[])? as u32;
        let months = field(3, 1, 12, &MONTHS)? as u16;
        let mut weekdays = field(4, 0, 7, &WEEKDAYS)?;
        if weekdays & (1 << 7) != 0 {
            weekdays |= 1; // 7 is Sunday too
        }
        let either_day = fields[2] != "*" && fields[4] != "*";
        Ok(Cron {
            minutes,
            hours,
            days,
            months,
            weekdays: (weekdays & 0x7f) as u8,
            either_day,
            text: text.trim().to_owned(),
        })
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn day_matches(&self, t: DateTime) -> bool {
        let dom = self.days & (1 << t.day()) != 0;
        let dow = self.weekdays & (1 << t.weekday().to_sunday_zero_offset()) != 0;
        if self.either_day { dom || dow } else { dom && dow }
    }

    /// The first matching minute strictly after `after`, within about five years; `None` for an
    /// expression that never matches then (e.g. 30 February).
    pub fn next_after(&self, after: DateTime) -> Option<DateTime> {
        let mut t = after.with().second(0).subsec_nanosecond(0).build().ok()?.checked_add(1.minute()).ok()?;
        let limit = after.checked_add(5.years()).ok()?;
        while t <= limit {
            if self.months & (1 << t.month()) == 0 {
                t = t.first_of_month().start_of_day().checked_add(1.month()).ok()?;
                continue;
            }
            if !self.day_matches(t) {
                t = t.start_of_day().checked_add(1.day()).ok()?;
                continue;
            }
            if self.hours & (1 << t.hour()) == 0 {
                t = t.with().minute(0).build().ok()?.checked_add(1.hour()).ok()?;
                continue;
            }
            if self.minutes & (1 << t.minute()) == 0 {
                t = t.checked_add(1.minute()).ok()?;
                continue;
            }
            return Some(t);
        }
        None
    }
}

/// The bit set of one field: `*`, `5`, `1-5`, `*/15`, `10-50/10`, names, comma lists.
fn bits(field: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u64, String> {
    let value = |s: &str| -> Result<u32, String> {
        let lower = s.to_ascii_lowercase();
        let base = if names.len() == 12 { 1 } else { 0 };
        if let Some(i) = names.iter().position(|n| *n == lower) {
            return Ok(i as u32 + base);
        }
        let v: u32 = s.parse().map_err(|_| format!("'{s}' is not a number or a name"))?;
        if v < lo || v > hi {
            return Err(format!("{v} is out of range {lo}-{hi}"));
        }
        Ok(v)
    };
    let mut set = 0u64;
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().map_err(|_| format!("bad step '{s}'"))?;
                if step == 0 {
                    return Err("a step of 0".into());
                }
                (r, step)
            }
            None => (part, 1),
        };
        let (from, to) = match range {
            "*" => (lo, hi),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                None if step > 1 => (value(r)?, hi),
                None => {
                    let v = value(r)?;
                    (v, v)
                }
            },
        };
        if from > to {
            return Err(format!("range {from}-{to} runs backwards"));
        }
        for v in (from..=to).step_by(step as usize) {
            set |= 1 << v;
        }
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    fn next(expr: &str, after: DateTime) -> DateTime {
        Cron::parse(expr).unwrap().next_after(after).unwrap()
    }

    #[test]
    fn r1_next_times() {
        let t = date(2026, 11, 30).at(5, 17, 42, 0); // a Monday
        assert_eq!(next("*/10 * * * *", t), date(2026, 11, 30).at(5, 20, 0, 0));
        assert_eq!(next("0 2 * * *", t), date(2026, 12, 1).at(2, 0, 0, 0));
        assert_eq!(next("30 3 * * sat", t), date(2026, 12, 5).at(3, 30, 0, 0));
        assert_eq!(next("0 0 1 jan *", t), date(2027, 1, 1).at(0, 0, 0, 0));
        assert_eq!(next("@hourly", t), date(2026, 11, 30).at(6, 0, 0, 0));
        assert_eq!(next("0 9 * * 7", t), date(2026, 12, 6).at(9, 0, 0, 0), "7 is Sunday");
        assert_eq!(
            next("0 9 15 * mon", t),
            date(2026, 11, 30).at(9, 0, 0, 0),
            "day or weekday: today is a Monday"
        );
        assert_eq!(
            next("0 9 15 * sun", t),
            date(2026, 12, 6).at(9, 0, 0, 0),
            "day or weekday: Sunday before the 15th"
        );
        assert_eq!(next("0 0 29 2 *", t), date(2028, 2, 29).at(0, 0, 0, 0));
        assert_eq!(next("17 5 * * *", t), date(2026, 12, 1).at(5, 17, 0, 0), "strictly after");
        assert_eq!(Cron::parse("0 0 30 2 *").unwrap().next_after(t), None);
    }

    #[test]
    fn r1_bad_expressions_say_why() {
        for (expr, why) in [
            ("* * * *", "5 fields"),
            ("60 * * * *", "out of range"),
            ("*/0 * * * *", "step of 0"),
            ("* * * foo *", "not a number or a name"),
            ("5-1 * * * *", "backwards"),
        ] {
            let err = Cron::parse(expr).unwrap_err();
            assert!(err.contains(why), "{expr}: {err}");
        }
    }
}
