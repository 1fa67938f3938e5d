//! RL.FIXED: a fixed window counter. Time is cut into windows of `window` µs aligned to the Unix
//! epoch shifted by `offset`, the window of `now` being `floor((now − offset) / window)` (the
//! tumbling windows of stream processors, offset included). Each window grants at most `limit`
//! units; denied requests do not count. `retry_after` and `reset_after` point at the window's end.
//!
//! State: the parameters, the end of the window the count belongs to (Unix µs) and the count.
//! Storing the end rather than the window's index keeps everything unsigned (with an offset the
//! first window starts before the epoch) and is the key's expiry as is. A count is current when
//! its end is the end of `now`'s window under the same window length and offset; otherwise the
//! window is fresh.
//!
//! Edge cases:
//! - An offset of a whole window or more shifts the windows exactly as its remainder does, so
//!   `offset` is reduced modulo `window` (`OFFSET 90m` on `1h` windows is `OFFSET 30m`).
//! - Changing the limit keeps the count (a lowered limit below the count denies until the
//!   window ends); a new window length or offset starts a fresh window.
//! - Window ends past `u64::MAX` µs (beyond year 584000) saturate; the count then stays in its
//!   window until that instant.
//! - Debt (RL.SETTLE above a reservation): the current window's count goes above the limit
//!   (at most [`MAX_PARAM`] in all). Every call is denied, `retry_after` the window's end, where
//!   the next window starts fresh and the debt is gone with the count. A reservation settled or
//!   given back in a later window than its own gives nothing back: its window's count no longer
//!   counts.
//!
//! Calendar windows (`day`, `week`, `month`, `quarter`, `year` in a time zone, `core::calendar`)
//! are computed when a window begins and kept in the state (its end, and its length in the
//! `offset` word), so a replica, an RDB or AOF load, or a build with newer time-zone data keeps
//! the boundaries the master computed; the time zone is only consulted again once the stored
//! window has ended. Their parameters take the `window` word (its top bit set, which no epoch
//! window length has). The codec writes them after a `window` of 0, which no epoch window has,
//! so epoch windows encode exactly as before: `limit`, 0, the calendar's unit, month, day and
//! time of day as one varint (`Calendar::spec_of_word`), the zone's name (length, ASCII bytes),
//! then the window's length, end and count.

use crate::core::calendar::{Calendar, TZDB_VERSION, Unit, ZoneId};
use crate::core::error::CoreError;
use crate::core::limiter::{self, Algorithm, InfoValue, Verdict};
use crate::core::param::{MAX_PARAM, MUST_BE_POSITIVE_DURATION, check_count, check_duration};
use crate::core::time::{MAX_SPAN, Micros};
use crate::core::varint::{self, Reader};

/// Validated parameters: `limit` units per window of `window` µs, shifted by `offset` µs; or
/// per calendar window (`window` is `CALENDAR` with the [`Calendar::word`], and `offset` the
/// length of the state's current window, 0 in a command's parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedParams {
    limit: u64,
    window: Micros,
    offset: Micros,
}

/// The bit of `window` that marks a calendar window (no epoch window is that long).
const CALENDAR: u64 = 1 << 63;

/// The longest calendar window kept (a year and a few days of clock changes), µs.
const MAX_CALENDAR_LEN: u64 = 370 * 86_400_000_000;

impl FixedParams {
    /// Validate the parameters; `offset` is reduced modulo `window`.
    ///
    /// # Errors
    /// [`CoreError::InvalidParam`] when `limit` or `window` is 0 or above [`MAX_PARAM`].
    pub fn new(limit: u64, window: Micros, offset: Micros) -> Result<Self, CoreError> {
        let limit = check_count(limit, "limit")?;
        let window = check_duration(window, "window")?;
        let offset = offset
            .checked_rem(window)
            .ok_or(CoreError::InvalidParam("window", MUST_BE_POSITIVE_DURATION))?;
        Ok(FixedParams {
            limit,
            window,
            offset,
        })
    }

    /// Validate the parameters of a calendar window.
    ///
    /// # Errors
    /// [`CoreError::InvalidParam`] when `limit` is 0 or above [`MAX_PARAM`].
    pub fn calendar(limit: u64, calendar: Calendar) -> Result<Self, CoreError> {
        Ok(FixedParams {
            limit: check_count(limit, "limit")?,
            window: CALENDAR | calendar.word(),
            offset: 0,
        })
    }

    /// The calendar window, if this is one.
    pub fn calendar_of(&self) -> Option<Calendar> {
        if self.is_calendar() {
            Calendar::from_word(self.window & !CALENDAR)
        } else {
            None
        }
    }

    fn is_calendar(&self) -> bool {
        self.window & CALENDAR != 0
    }

    /// Units per window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length in µs.
    pub fn window(&self) -> Micros {
        self.window
    }

    /// The offset in µs, less than the window.
    pub fn offset(&self) -> Micros {
        self.offset
    }

    /// Whether a count kept under `self` is still a count under `other`.
    fn same_windows(&self, other: &FixedParams) -> bool {
        self.window == other.window && (self.is_calendar() || self.offset == other.offset)
    }

    /// The end of the window holding `now` (exclusive), saturated to `u64::MAX`.
    pub fn window_end(&self, now: Micros) -> Micros {
        let window = u128::from(self.window);
        let now = u128::from(now);
        // (now − offset) mod window, never negative because offset < window.
        let end = now
            .checked_rem(window)
            .and_then(|r| r.checked_add(window))
            .and_then(|r| r.checked_sub(u128::from(self.offset)))
            .and_then(|r| r.checked_rem(window))
            .and_then(|into| window.checked_sub(into))
            .and_then(|rest| now.checked_add(rest));
        end.and_then(|e| u64::try_from(e).ok())
            .unwrap_or(Micros::MAX)
    }
}

/// RL.FIXED's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fixed {
    params: FixedParams,
    /// End of the window `count` belongs to (Unix µs, exclusive).
    end: Micros,
    /// Units granted in that window.
    count: u64,
}

impl Fixed {
    /// Units already granted under `params` in the window ending at `end` (0 in a fresh one).
    fn used(&self, params: &FixedParams, end: Micros) -> u64 {
        if self.params.same_windows(params) && self.end == end {
            self.count
        } else {
            0
        }
    }

    /// Whether the stored calendar window holds `now` (its start is `end − length`).
    fn holds(&self, now: Micros) -> bool {
        self.end != 0 && now < self.end && self.end.saturating_sub(self.params.offset) <= now
    }

    /// The length and end of the window of `params` holding `now`: an epoch window's, the
    /// stored calendar window while it holds `now`, else the calendar's.
    ///
    /// # Errors
    /// A calendar window beyond the calendar's years.
    fn window_at(&self, params: &FixedParams, now: Micros) -> Result<(u64, Micros), CoreError> {
        if !params.is_calendar() {
            return Ok((params.window, params.window_end(now)));
        }
        if self.params.window == params.window && self.holds(now) {
            return Ok((self.params.offset, self.end));
        }
        let calendar = params
            .calendar_of()
            .ok_or(CoreError::InvalidParam("window", MUST_BE_POSITIVE_DURATION))?;
        let (start, end) = calendar.window(now)?;
        let len = u64::try_from(i128::from(end).saturating_sub(i128::from(start)))
            .map_err(|_| CoreError::Overflow)?;
        Ok((len, end))
    }

    /// The stored calendar window as RL.INFO shows it at `now` (the window holding `now` once
    /// the stored one has ended): start and end in ms, length in ms.
    fn calendar_window(&self, calendar: &Calendar, now: Micros) -> Option<(i64, i64, i64)> {
        let (start, end) = if self.holds(now) {
            let start = i128::from(self.end).saturating_sub(i128::from(self.params.offset));
            (i64::try_from(start).ok()?, self.end)
        } else {
            calendar.window(now).ok()?
        };
        let end = i64::try_from(end).ok()?;
        Some((
            start.div_euclid(1000),
            end.div_euclid(1000),
            end.saturating_sub(start).div_euclid(1000),
        ))
    }
}

impl Algorithm for Fixed {
    type Params = FixedParams;

    fn fresh(params: &FixedParams) -> Self {
        Fixed {
            params: *params,
            end: 0,
            count: 0,
        }
    }

    fn params(&self) -> &FixedParams {
        &self.params
    }

    fn evaluate(
        &self,
        params: &FixedParams,
        now: Micros,
        cost: u64,
        best_effort: bool,
    ) -> Result<Verdict, CoreError> {
        let (_, end) = self.window_at(params, now)?;
        let used = self.used(params, end);
        let to_end = end.saturating_sub(now);
        let avail = params.limit.saturating_sub(used);
        let granted = limiter::grant(cost, avail, best_effort);
        // The next window is fresh, and the cost fits in a fresh window.
        let retry = limiter::retry(granted, cost, params.limit, || Ok(to_end))?;
        // What `commit` will count (checked here, so that `commit` cannot fail).
        let after = used.checked_add(granted).ok_or(CoreError::Overflow)?;
        Ok(Verdict {
            granted,
            limit: params.limit,
            remaining: avail.saturating_sub(granted),
            retry,
            reset_after: if after == 0 { 0 } else { to_end },
        })
    }

    fn commit(&mut self, params: &FixedParams, now: Micros, granted: u64) -> Result<(), CoreError> {
        let (len, end) = self.window_at(params, now)?;
        self.count = self
            .used(params, end)
            .checked_add(granted)
            .ok_or(CoreError::Overflow)?;
        self.end = end;
        self.params = *params;
        if params.is_calendar() {
            self.params.offset = len;
        }
        Ok(())
    }

    /// The current window's count, not below 0 (a past window's count no longer counts).
    fn refund(&mut self, now: Micros, units: u64) -> Result<u64, CoreError> {
        // A calendar count is current while its stored window holds `now`.
        let end = if self.params.is_calendar() {
            if self.holds(now) { self.end } else { 0 }
        } else {
            self.params.window_end(now)
        };
        let used = self.used(&self.params, end);
        let given = used.min(units);
        if given > 0 {
            self.count = used.saturating_sub(given);
            self.end = end;
        }
        Ok(given)
    }

    fn fresh_at(&self) -> Micros {
        if self.count == 0 { 0 } else { self.end }
    }

    /// FIXED remembers an id until the window of its first call ends.
    fn dedup_until(params: &FixedParams, now: Micros) -> Micros {
        match params.calendar_of() {
            Some(calendar) => calendar.window(now).map_or(now, |(_, end)| end),
            None => params.window_end(now),
        }
    }

    /// The end of the window just charged, as kept (no time-zone lookup).
    fn remember_until(&self, _params: &FixedParams, _now: Micros) -> Micros {
        self.end
    }

    /// An epoch window's length; a calendar window's current length: the period holding `now`
    /// (a 23 h day across a DST change, a 29-day February), or its unit's nominal length
    /// ([`Unit::nominal`]) for a period beyond the calendar's years, which no call reaches.
    fn window(params: &FixedParams, now: Micros) -> Micros {
        match params.calendar_of() {
            Some(calendar) => calendar
                .window(now)
                .ok()
                .and_then(|(start, end)| {
                    u64::try_from(i128::from(end).checked_sub(i128::from(start))?).ok()
                })
                .unwrap_or_else(|| calendar.unit().nominal()),
            None => params.window,
        }
    }

    fn describe(params: &FixedParams) -> Vec<(&'static str, u64)> {
        match params.calendar_of() {
            Some(calendar) => vec![
                ("limit", params.limit),
                ("offset_ms", u64::from(calendar.tod_ms())),
            ],
            None => vec![
                ("limit", params.limit),
                ("window_ms", params.window / 1000),
                ("offset_ms", params.offset / 1000),
            ],
        }
    }

    /// A calendar window's unit, zone, anchor, current window and time-zone data version.
    fn describe_more(&self, now: Micros) -> Vec<(&'static str, InfoValue)> {
        let Some(calendar) = self.params.calendar_of() else {
            return Vec::new();
        };
        let text = |s: &str| InfoValue::Text(s.to_string());
        let mut fields = vec![
            ("window", text(calendar.unit().name())),
            ("tz", InfoValue::Text(calendar.zone().name().into_owned())),
        ];
        if calendar.unit() != Unit::Day {
            fields.push(("anchor", InfoValue::Text(calendar.anchor())));
        }
        if let Some((start, end, len)) = self.calendar_window(&calendar, now) {
            fields.push(("window_ms", InfoValue::Int(len)));
            fields.push(("window_start_ms", InfoValue::Int(start)));
            fields.push(("window_end_ms", InfoValue::Int(end)));
        }
        fields.push(("tzdb_version", text(TZDB_VERSION)));
        fields
    }

    fn encode(&self, out: &mut Vec<u8>) {
        varint::put_u64(out, self.params.limit);
        if self.params.is_calendar() {
            // The word's fields as one varint, then the zone by name (ids are this build's).
            let word = self.params.window & !CALENDAR;
            varint::put_u64(out, 0);
            varint::put_u64(out, Calendar::spec_of_word(word));
            let zone = Calendar::zone_name_of_word(word);
            varint::put_u64(out, zone.len() as u64);
            out.extend_from_slice(zone.as_bytes());
        } else {
            varint::put_u64(out, self.params.window);
        }
        varint::put_u64(out, self.params.offset);
        varint::put_u64(out, self.end);
        varint::put_u64(out, self.count);
    }

    fn decode(input: &mut Reader<'_>) -> Option<Self> {
        let limit = input.u64()?;
        let window = input.u64()?;
        if window == 0 {
            return decode_calendar(limit, input);
        }
        let offset = input.u64()?;
        // A stored offset is already reduced: anything else is not our encoding.
        if offset >= window {
            return None;
        }
        let params = FixedParams::new(limit, window, offset).ok()?;
        let end = input.u64()?;
        let count = input.u64()?;
        Some(Fixed { params, end, count })
    }

    /// A count is at most a limit, and its window ends at most a window after a call; a
    /// calendar window lasts at most `MAX_CALENDAR_LEN`.
    fn valid_at(&self, last_update: Micros) -> bool {
        self.count <= MAX_PARAM
            && self.end <= last_update.saturating_add(MAX_SPAN)
            && (!self.params.is_calendar()
                || (self.params.offset <= MAX_CALENDAR_LEN && self.params.calendar_of().is_some()))
    }
}

/// Decode a calendar window's state (after its `limit` and the `window` of 0).
fn decode_calendar(limit: u64, input: &mut Reader<'_>) -> Option<Fixed> {
    let spec = input.u64()?;
    let len = usize::try_from(input.u64()?).ok()?;
    if len > 64 {
        return None;
    }
    let zone = ZoneId::parse(input.bytes(len)?)?;
    let calendar = Calendar::from_spec(spec, zone)?;
    let mut params = FixedParams::calendar(limit, calendar).ok()?;
    params.offset = input.u64()?;
    let end = input.u64()?;
    let count = input.u64()?;
    Some(Fixed { params, end, count })
}

#[cfg(test)]
mod tests {
    use crate::core::param::MAX_PARAM;
    use proptest::prelude::*;

    use super::*;
    use crate::core::dedup::DedupId;
    use crate::core::flow::Write;
    use crate::core::limiter::{Request, Retry};
    use crate::core::testkit::{self, GrantedRetry, Key, Model, T0};
    use crate::core::time::US_PER_SEC;
    use crate::core::{LimiterState, codec};

    /// `limit` per window of `period`, offset `extra` (within the window); one time in eight a
    /// calendar window of a unit, zone and anchor taken from `extra`.
    impl crate::core::testkit::Sample for Fixed {
        fn sample([limit, _, period, extra]: [u64; 4]) -> Option<FixedParams> {
            if period % 8 == 5 {
                let zones = [&b"UTC"[..], b"Europe/Paris", b"America/New_York", b"+05:30"];
                let zone = ZoneId::parse(zones[(extra % 4) as usize])?;
                let unit = Unit::from_tag(extra / 4 % 5 + 1)?;
                let (month, day) = match unit {
                    Unit::Day => (1, 1),
                    Unit::Week => (1, (extra / 32 % 7 + 1) as u8),
                    Unit::Month => (1, (extra / 32 % 31 + 1) as u8),
                    _ => ((extra / 32 % 12 + 1) as u8, (extra / 512 % 31 + 1) as u8),
                };
                let tod = (extra / 8192 % 24 * 3_600_000) as u32;
                return FixedParams::calendar(limit, Calendar::new(unit, month, day, tod, zone)?)
                    .ok();
            }
            FixedParams::new(limit, period, extra % period.max(1)).ok()
        }
    }

    const MINUTE: u64 = 60 * US_PER_SEC;

    #[test]
    fn fixed_counts_per_window_and_resets_at_its_end() {
        let params = FixedParams::new(3, US_PER_SEC, 0).unwrap();
        #[rustfmt::skip]
        let rows: &[testkit::Row] = &[
            // t µs       cost  BE     granted rem  retry µs  reset µs
            (0,           1,    false, 1,      2,   0,        1_000_000),
            (250_000,     2,    false, 2,      0,   0,        750_000),
            (500_000,     1,    false, 0,      0,   500_000,  500_000),
            (999_999,     1,    false, 0,      0,   1,        1),
            (1_000_000,   0,    false, 0,      3,   0,        0),
            (1_000_000,   4,    false, 0,      3,   -1,       0),
            (1_000_000,   4,    true,  3,      0,   -1,       1_000_000),
            (1_500_000,   2,    true,  0,      0,   500_000,  500_000),
            (3_700_000,   1,    false, 1,      2,   0,        300_000),
            // A clock step back is evaluated at the last update, in the same window.
            (3_000_000,   2,    false, 2,      0,   0,        300_000),
        ];
        testkit::run_table::<Fixed>(&params, params.limit(), rows);
    }

    #[test]
    fn fixed_windows_are_shifted_by_the_offset() {
        // T0 is 22:13:20 UTC; hourly windows at a quarter past end at 22:15.
        let quarter = FixedParams::new(2, 60 * MINUTE, 15 * MINUTE).unwrap();
        #[rustfmt::skip]
        let rows: &[testkit::Row] = &[
            // t µs              cost  BE     granted rem  retry µs        reset µs
            (0,                  2,    false, 2,      0,   0,              100 * US_PER_SEC),
            (99_999_999,         1,    false, 0,      0,   1,              1),
            (100_000_000,        1,    false, 1,      1,   0,              60 * MINUTE),
        ];
        testkit::run_table::<Fixed>(&quarter, quarter.limit(), rows);
        // An offset of a window or more shifts the windows as its remainder does.
        assert_eq!(FixedParams::new(2, 60 * MINUTE, 75 * MINUTE), Ok(quarter));
        assert_eq!(
            FixedParams::new(2, 60 * MINUTE, 60 * MINUTE)
                .unwrap()
                .offset(),
            0
        );
        // Windows before the offset (the first one starts before the epoch) end at the offset.
        let p = FixedParams::new(1, 100, 30).unwrap();
        assert_eq!(
            (p.window_end(0), p.window_end(29), p.window_end(30)),
            (30, 30, 130)
        );
        assert_eq!(p.window_end(Micros::MAX), Micros::MAX);
    }

    #[test]
    fn fixed_rejects_zero_parameters() {
        assert_eq!(
            FixedParams::new(0, 1, 0),
            Err(CoreError::InvalidParam(
                "limit",
                crate::core::MUST_BE_POSITIVE
            ))
        );
        assert_eq!(
            FixedParams::new(1, 0, 0),
            Err(CoreError::InvalidParam("window", MUST_BE_POSITIVE_DURATION))
        );
        assert!(FixedParams::new(MAX_PARAM, MAX_PARAM, u64::MAX).is_ok());
        assert!(FixedParams::new(MAX_PARAM + 1, 1, 0).is_err());
    }

    #[test]
    fn fixed_keeps_its_count_until_the_window_changes() {
        let three = FixedParams::new(3, US_PER_SEC, 0).unwrap();
        let five = FixedParams::new(5, US_PER_SEC, 0).unwrap();
        let one = FixedParams::new(1, US_PER_SEC, 0).unwrap();
        let shifted = FixedParams::new(3, US_PER_SEC, 250_000).unwrap();
        let longer = FixedParams::new(3, 2 * US_PER_SEC, 0).unwrap();
        let mut key = Key::default();
        assert_eq!(key.take::<Fixed>(&three, T0, 3).remaining, 0);
        // A raised limit keeps the 3 units used; a lowered one denies until the window ends.
        assert_eq!(key.peek::<Fixed>(&five, T0, 2).granted, 2);
        assert_eq!(key.peek::<Fixed>(&five, T0, 3).granted, 0);
        let v = key.peek::<Fixed>(&one, T0 + 1, 1);
        assert_eq!(
            (v.granted, v.remaining, v.retry),
            (0, 0, Retry::After(999_999))
        );
        // Another offset or window length starts fresh.
        assert_eq!(key.peek::<Fixed>(&shifted, T0, 3).granted, 3);
        assert_eq!(key.peek::<Fixed>(&longer, T0, 3).granted, 3);
        assert_eq!(key.take::<Fixed>(&five, T0 + 10, 2).remaining, 0);
        assert_eq!(key.take::<Fixed>(&longer, T0 + 20, 3).remaining, 0);
        assert_eq!(
            key.peek::<Fixed>(&longer, T0 + 20, 0).reset_after,
            2 * US_PER_SEC - 20
        );
    }

    #[test]
    fn fixed_remembers_dedup_ids_until_the_window_ends() {
        let p = FixedParams::new(5, US_PER_SEC, 0).unwrap();
        let mut key = Key::default();
        let req = |cost, now| Request {
            dedup: Some(DedupId::of(b"req-1")),
            ..Request::new(cost, now)
        };
        let first = key.call::<Fixed>(&p, &req(2, T0 + 100));
        assert_eq!(first.verdict.granted, 2);
        // The key lives until the window ends, which is also when the id is forgotten.
        assert_eq!(first.expires_at, T0 + US_PER_SEC);
        let again = key.call::<Fixed>(&p, &req(2, T0 + 999_999));
        assert!(matches!(again.write, Write::None));
        assert_eq!(
            (again.verdict.granted, again.verdict.remaining),
            (2, 3),
            "not charged twice"
        );
        let next_window = key.call::<Fixed>(&p, &req(2, T0 + US_PER_SEC));
        assert_eq!(
            (next_window.verdict.granted, next_window.verdict.remaining),
            (2, 3)
        );
        assert!(!matches!(next_window.write, Write::None));
    }

    /// The textbook counter: windows numbered `floor((t − offset) / window)` in signed
    /// arithmetic, one count for the window last written.
    #[derive(Debug, Default)]
    struct Windows {
        stored: Option<(u64, u64, i128, u64)>,
        last: u64,
    }

    impl Model for Windows {
        type Params = FixedParams;

        fn call(&mut self, p: &FixedParams, now: u64, cost: u64, be: bool, peek: bool) -> Verdict {
            let t = now.max(self.last);
            let (w, off) = (p.window(), p.offset());
            let index = (i128::from(t) - i128::from(off)).div_euclid(i128::from(w));
            let used = match self.stored {
                Some((sw, so, si, count)) if (sw, so, si) == (w, off, index) => count,
                _ => 0,
            };
            let end = (index + 1) * i128::from(w) + i128::from(off);
            let to_end = (end - i128::from(t)).min(i128::from(u64::MAX - t)) as u64;
            let avail = p.limit().saturating_sub(used);
            let granted = if cost <= avail {
                cost
            } else if be {
                avail
            } else {
                0
            };
            let retry = if granted == cost {
                Retry::Granted
            } else if cost > p.limit() {
                Retry::Never
            } else {
                Retry::After(to_end)
            };
            if granted > 0 && !peek {
                self.stored = Some((w, off, index, used + granted));
                self.last = t;
            }
            Verdict {
                granted,
                limit: p.limit(),
                remaining: avail - granted,
                retry,
                reset_after: if used + granted > 0 { to_end } else { 0 },
            }
        }
    }

    fn param_sets() -> Vec<FixedParams> {
        vec![
            FixedParams::new(3, US_PER_SEC, 0).unwrap(),
            FixedParams::new(5, US_PER_SEC, 0).unwrap(),
            FixedParams::new(3, US_PER_SEC, 250_000).unwrap(),
            FixedParams::new(3, 700_000, 0).unwrap(),
            FixedParams::new(2, US_PER_SEC, 1_250_000).unwrap(),
        ]
    }

    proptest! {
        #[test]
        fn fixed_matches_the_textbook_counter(
            start in T0..T0 + 10_000_000_000,
            steps in testkit::steps(1_000_000, 6, 5),
        ) {
            testkit::check_against_model::<Fixed, _>(
                &mut Windows::default(), &param_sets(), start, &steps, GrantedRetry::Zero);
        }

        #[test]
        fn fixed_grants_at_most_the_limit_in_any_window(
            start in T0..T0 + 10_000_000_000,
            offset in 0..3_000_000u64,
            steps in testkit::steps(1_000_000, 6, 1),
        ) {
            let p = FixedParams::new(3, US_PER_SEC, offset).unwrap();
            let h = testkit::check_against_model::<Fixed, _>(
                &mut Windows::default(), &[p], start, &steps, GrantedRetry::Zero);
            let mut per_window = std::collections::BTreeMap::new();
            for e in &h {
                let index = (i128::from(e.at) - i128::from(offset)).div_euclid(1_000_000);
                *per_window.entry(index).or_insert(0) += e.granted;
            }
            prop_assert!(per_window.values().all(|&n| n <= 3), "{per_window:?}");
        }

        #[test]
        fn fixed_survives_a_century_and_clock_steps_back(
            steps in testkit::steps(1_000_000, 6, 1),
        ) {
            let p = FixedParams::new(3, US_PER_SEC, 250_000).unwrap();
            testkit::check_century_jump::<Fixed>(&p, T0, &steps);
            testkit::check_clock_step_back::<Fixed>(&p, T0, &steps);
        }

        #[test]
        fn fixed_state_round_trips_through_the_codec(
            steps in testkit::steps(1_000_000, 6, 5),
        ) {
            testkit::check_codec_round_trip::<Fixed>(&param_sets(), &steps);
        }
    }

    #[test]
    fn fixed_codec_fixture() {
        let p = FixedParams::new(100, 60_000_000, 1_000).unwrap();
        let mut key = Key::default();
        key.take::<Fixed>(&p, 1_000_000, 7);
        let state = key.state.clone().unwrap();
        #[rustfmt::skip]
        let bytes: &[u8] = &[
            1, 4,                   // codec version, kind Fixed
            0xc0, 0x84, 0x3d,       // last update 1 000 000 µs
            100,                    // limit
            0x80, 0x8e, 0xce, 0x1c, // window 60 000 000 µs
            0xe8, 0x07,             // offset 1 000 µs
            0xe8, 0x95, 0xce, 0x1c, // window end 60 001 000 µs
            7,                      // count
            0,                      // no dedup ids
        ];
        assert_eq!(codec::encode(&state), bytes);
        assert_eq!(codec::decode(bytes), Some(state));
        // An offset not below the window is not an encoding we write.
        let mut bad = bytes.to_vec();
        bad.splice(10..12, [0x80, 0x8e, 0xce, 0x1c]);
        assert_eq!(codec::decode(&bad), None::<LimiterState>);
    }
}
