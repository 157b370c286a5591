//! Local time without reading the system clock or time zone database: the
//! caller supplies a [`LocalZone`].  Implements Python's
//! `datetime.fromtimestamp()` (microsecond rounding, naive local time) and
//! `datetime.strftime()` as CPython does it on glibc in the C locale (Python
//! expands `%f`, `%z`, `%Z` itself; glibc does the rest).

use crate::error::{PyError, PyResult};

/// The local time zone: its UTC offset at a given instant.
pub trait LocalZone {
    /// Offset east of UTC, in seconds, in effect at the UTC instant `t`
    /// (seconds since the epoch).
    fn utc_offset(&self, t: i64) -> i32;
    /// The zone abbreviation in effect at `t` (used by `%Z` for aware
    /// datetimes only).
    fn abbrev(&self, t: i64) -> String {
        let _ = t;
        String::new()
    }
}

/// A zone with a constant offset (UTC by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedZone {
    /// Seconds east of UTC.
    pub offset: i32,
    /// Abbreviation, e.g. `UTC`.
    pub name: String,
}

impl FixedZone {
    /// Coordinated Universal Time.
    pub fn utc() -> FixedZone {
        FixedZone {
            offset: 0,
            name: "UTC".into(),
        }
    }
    /// A fixed offset (seconds east of UTC) with an abbreviation.
    pub fn new(offset: i32, name: &str) -> FixedZone {
        FixedZone {
            offset,
            name: name.into(),
        }
    }
}

impl Default for FixedZone {
    fn default() -> Self {
        FixedZone::utc()
    }
}

impl LocalZone for FixedZone {
    fn utc_offset(&self, _t: i64) -> i32 {
        self.offset
    }
    fn abbrev(&self, _t: i64) -> String {
        self.name.clone()
    }
}

/// A broken-down local date and time (Python's naive `datetime` made by
/// `fromtimestamp`), remembering the instant it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalDateTime {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub micro: u32,
    /// Seconds since the epoch (UTC) of this time, whole seconds.
    pub unix: i64,
    /// UTC offset in effect, seconds east.
    pub offset: i32,
}

const DAY_NAMES: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Days since 1970-01-01 → (year, month, day) (proleptic Gregorian).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day) → days since 1970-01-01 (proleptic Gregorian).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

impl LocalDateTime {
    /// Broken-down local time of the whole second `unix` plus `micro`.
    pub fn from_unix(unix: i64, micro: u32, zone: &dyn LocalZone) -> LocalDateTime {
        let offset = zone.utc_offset(unix);
        let local = unix + i64::from(offset);
        let days = local.div_euclid(86_400);
        let secs = local.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        LocalDateTime {
            year,
            month,
            day,
            hour: (secs / 3600) as u32,
            minute: (secs % 3600 / 60) as u32,
            second: (secs % 60) as u32,
            micro,
            unix,
            offset,
        }
    }

    /// Python `datetime.fromtimestamp(t)`: round to microseconds (half to
    /// even), then convert to naive local time.
    pub fn from_timestamp(t: f64, zone: &dyn LocalZone) -> PyResult<LocalDateTime> {
        if t.is_nan() {
            return Err(PyError::value("Invalid value NaN (not a number)"));
        }
        if t.is_infinite() {
            return Err(PyError::Overflow(
                "cannot convert float infinity to integer".into(),
            ));
        }
        let int = t.trunc();
        let mut frac = ((t - int) * 1e6).round_ties_even();
        let mut int = int;
        if frac >= 1e6 {
            frac -= 1e6;
            int += 1.0;
        } else if frac < 0.0 {
            frac += 1e6;
            int -= 1.0;
        }
        if int.abs() > 1e14 {
            return Err(PyError::Overflow(
                "timestamp out of range for platform time_t".into(),
            ));
        }
        let dt = LocalDateTime::from_unix(int as i64, frac as u32, zone);
        if !(1..=9999).contains(&dt.year) {
            return Err(PyError::Value(format!("year {} is out of range", dt.year)));
        }
        Ok(dt)
    }

    /// Python `datetime.fromtimestamp(i)` for an integer timestamp.
    pub fn from_int_timestamp(t: i64, zone: &dyn LocalZone) -> PyResult<LocalDateTime> {
        if t.unsigned_abs() > 100_000_000_000_000 {
            return Err(PyError::Overflow(
                "timestamp out of range for platform time_t".into(),
            ));
        }
        let dt = LocalDateTime::from_unix(t, 0, zone);
        if !(1..=9999).contains(&dt.year) {
            return Err(PyError::Value(format!("year {} is out of range", dt.year)));
        }
        Ok(dt)
    }

    fn naive_key(&self) -> (i64, u32, u32, u32, u32, u32, u32) {
        (
            self.year,
            self.month,
            self.day,
            self.hour,
            self.minute,
            self.second,
            self.micro,
        )
    }

    /// Naive equality (wall-clock fields only), as Python compares naive
    /// datetimes.
    pub fn same_wall_time(&self, other: &LocalDateTime) -> bool {
        self.naive_key() == other.naive_key()
    }

    /// Day of week, 0 = Sunday.
    pub fn weekday_sun0(&self) -> u32 {
        let days = days_from_civil(self.year, self.month, self.day);
        ((days + 4).rem_euclid(7)) as u32
    }

    /// Day of year, 0-based.
    pub fn yday0(&self) -> u32 {
        (days_from_civil(self.year, self.month, self.day) - days_from_civil(self.year, 1, 1)) as u32
    }

    /// Python `str(datetime)`: `YYYY-MM-DD HH:MM:SS[.ffffff]`.
    pub fn py_str(&self) -> String {
        let mut s = format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        );
        if self.micro != 0 {
            s.push_str(&format!(".{:06}", self.micro));
        }
        s
    }

    /// Python `datetime.strftime(fmt)`.  `aware` selects whether `%z`/`%Z`
    /// expand (an aware datetime, as from `.astimezone()`) or vanish (naive).
    pub fn strftime(&self, fmt: &str, aware: bool, zone: &dyn LocalZone) -> String {
        // Python's own pass over %z, %Z, %f (and %:z).
        let mut pre = String::with_capacity(fmt.len() + 8);
        let chars: Vec<char> = fmt.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c != '%' {
                pre.push(c);
                i += 1;
                continue;
            }
            let Some(&n) = chars.get(i + 1) else {
                pre.push(c);
                break;
            };
            match n {
                'z' => {
                    if aware {
                        pre.push_str(&py_utcoffset(self.offset, ""));
                    }
                    i += 2;
                }
                ':' if chars.get(i + 2) == Some(&'z') => {
                    if aware {
                        pre.push_str(&py_utcoffset(self.offset, ":"));
                    }
                    i += 3;
                }
                'Z' => {
                    if aware {
                        pre.push_str(&zone.abbrev(self.unix).replace('%', "%%"));
                    }
                    i += 2;
                }
                'f' => {
                    pre.push_str(&format!("{:06}", self.micro));
                    i += 2;
                }
                _ => {
                    pre.push('%');
                    pre.push(n);
                    i += 2;
                }
            }
        }
        glibc_strftime(&pre, self)
    }
}

/// Python's `%z` text: `+HHMM[SS]` (with `sep` between fields for `%:z`).
fn py_utcoffset(offset: i32, sep: &str) -> String {
    let sign = if offset < 0 { '-' } else { '+' };
    let a = offset.unsigned_abs();
    let (h, m, s) = (a / 3600, a % 3600 / 60, a % 60);
    if s != 0 {
        format!("{sign}{h:02}{sep}{m:02}{sep}{s:02}")
    } else {
        format!("{sign}{h:02}{sep}{m:02}")
    }
}

/// ISO 8601 week-based year and week number.
fn iso_week(dt: &LocalDateTime) -> (i64, u32) {
    let wday = dt.weekday_sun0() as i64; // 0 = Sunday
    let yday = dt.yday0() as i64;
    // Monday-based weekday 0..6
    let mwday = (wday + 6) % 7;
    let mut year = dt.year;
    // Thursday of this week decides the year.
    let thursday_yday = yday - mwday + 3;
    let days_in_year = |y: i64| if is_leap(y) { 366 } else { 365 };
    if thursday_yday < 0 {
        year -= 1;
        let ty = thursday_yday + days_in_year(year);
        return (year, (ty / 7 + 1) as u32);
    }
    if thursday_yday >= days_in_year(year) {
        year += 1;
        let ty = thursday_yday - days_in_year(year - 1);
        return (year, (ty / 7 + 1) as u32);
    }
    (year, (thursday_yday / 7 + 1) as u32)
}

fn pad_num(
    v: i64,
    digits: usize,
    default_pad: char,
    flag: Option<char>,
    width: Option<usize>,
) -> String {
    let neg = v < 0;
    let s = v.unsigned_abs().to_string();
    let w = width.unwrap_or(digits);
    let padc = match flag {
        Some('-') => None,
        Some('_') => Some(' '),
        Some('0') => Some('0'),
        _ => Some(default_pad),
    };
    let body_len = s.len() + usize::from(neg);
    let mut out = String::new();
    if let Some(p) = padc {
        if p == '0' && neg {
            out.push('-');
        }
        for _ in body_len..w {
            out.push(p);
        }
        if p != '0' && neg {
            out.push('-');
        }
    } else if neg {
        out.push('-');
    }
    out.push_str(&s);
    out
}

fn pad_str(s: &str, flag: Option<char>, width: Option<usize>, upper: bool, swap: bool) -> String {
    let body = if upper || swap {
        s.to_uppercase()
    } else {
        s.to_string()
    };
    let len = body.chars().count();
    let w = width.unwrap_or(0);
    let padc = if flag == Some('0') { '0' } else { ' ' };
    let mut out = String::new();
    if flag != Some('-') {
        for _ in len..w {
            out.push(padc);
        }
    }
    out.push_str(&body);
    out
}

/// glibc `strftime` in the C locale for the conversions Python passes on.
fn glibc_strftime(fmt: &str, dt: &LocalDateTime) -> String {
    let chars: Vec<char> = fmt.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '%' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        let mut flag: Option<char> = None;
        let mut upper = false;
        let mut swap = false;
        while i < chars.len() && matches!(chars[i], '_' | '-' | '0' | '^' | '#') {
            match chars[i] {
                '^' => upper = true,
                '#' => swap = true,
                c => flag = Some(c),
            }
            i += 1;
        }
        let mut width: Option<usize> = None;
        while i < chars.len() && chars[i].is_ascii_digit() {
            let d = chars[i].to_digit(10).unwrap_or(0) as usize;
            width = Some(width.unwrap_or(0).saturating_mul(10).saturating_add(d));
            i += 1;
        }
        while i < chars.len() && matches!(chars[i], 'E' | 'O') {
            i += 1;
        }
        let Some(&conv) = chars.get(i) else {
            out.extend(&chars[start..]);
            break;
        };
        i += 1;
        let wday = dt.weekday_sun0();
        let hour12 = match dt.hour % 12 {
            0 => 12,
            h => h,
        };
        let sub = |f: &str| -> String {
            let s = glibc_strftime(f, dt);
            pad_str(&s, flag, width, upper, false)
        };
        let piece = match conv {
            'a' => pad_str(&DAY_NAMES[wday as usize][..3], flag, width, upper, swap),
            'A' => pad_str(DAY_NAMES[wday as usize], flag, width, upper, swap),
            'b' | 'h' => pad_str(
                &MONTH_NAMES[(dt.month - 1) as usize % 12][..3],
                flag,
                width,
                upper,
                swap,
            ),
            'B' => pad_str(
                MONTH_NAMES[(dt.month - 1) as usize % 12],
                flag,
                width,
                upper,
                swap,
            ),
            'c' => sub("%a %b %e %H:%M:%S %Y"),
            'C' => pad_num(dt.year.div_euclid(100), 2, '0', flag, width),
            'd' => pad_num(i64::from(dt.day), 2, '0', flag, width),
            'D' | 'x' => sub("%m/%d/%y"),
            'e' => pad_num(i64::from(dt.day), 2, ' ', flag, width),
            'F' => sub("%Y-%m-%d"),
            'g' => pad_num(iso_week(dt).0.rem_euclid(100), 2, '0', flag, width),
            'G' => pad_num(iso_week(dt).0, 1, '0', flag, width),
            'H' => pad_num(i64::from(dt.hour), 2, '0', flag, width),
            'I' => pad_num(i64::from(hour12), 2, '0', flag, width),
            'j' => pad_num(i64::from(dt.yday0() + 1), 3, '0', flag, width),
            'k' => pad_num(i64::from(dt.hour), 2, ' ', flag, width),
            'l' => pad_num(i64::from(hour12), 2, ' ', flag, width),
            'm' => pad_num(i64::from(dt.month), 2, '0', flag, width),
            'M' => pad_num(i64::from(dt.minute), 2, '0', flag, width),
            'n' => pad_str("\n", flag, width, false, false),
            't' => pad_str("\t", flag, width, false, false),
            'p' => {
                let s = if dt.hour >= 12 { "PM" } else { "AM" };
                if swap {
                    pad_str(&s.to_lowercase(), flag, width, false, false)
                } else {
                    pad_str(s, flag, width, upper, false)
                }
            }
            'P' => pad_str(
                if dt.hour >= 12 { "pm" } else { "am" },
                flag,
                width,
                upper,
                false,
            ),
            'r' => sub("%I:%M:%S %p"),
            'R' => sub("%H:%M"),
            's' => pad_num(dt.unix, 1, '0', flag, width),
            'S' => pad_num(i64::from(dt.second), 2, '0', flag, width),
            'T' | 'X' => sub("%H:%M:%S"),
            'u' => pad_num(
                i64::from(if wday == 0 { 7 } else { wday }),
                1,
                '0',
                flag,
                width,
            ),
            'U' => pad_num(i64::from((dt.yday0() + 7 - wday) / 7), 2, '0', flag, width),
            'V' => pad_num(i64::from(iso_week(dt).1), 2, '0', flag, width),
            'w' => pad_num(i64::from(wday), 1, '0', flag, width),
            'W' => pad_num(
                i64::from((dt.yday0() + 7 - (wday + 6) % 7) / 7),
                2,
                '0',
                flag,
                width,
            ),
            'y' => pad_num(dt.year.rem_euclid(100), 2, '0', flag, width),
            'Y' => pad_num(dt.year, 1, '0', flag, width),
            'z' => {
                let s = py_utcoffset(dt.offset, "");
                pad_str(&s, flag, width, false, false)
            }
            'Z' => pad_str("", flag, width, upper, swap),
            '%' => pad_str("%", flag, width, false, false),
            _ => chars[start..i].iter().collect(),
        };
        out.push_str(&piece);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc() -> FixedZone {
        FixedZone::utc()
    }

    #[test]
    fn civil_roundtrip() {
        for d in [-719_468i64, -1, 0, 1, 11_016, 18_605, 2_932_896] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(18_605), (2020, 12, 9));
    }

    #[test]
    fn fromtimestamp_rounds_like_python() {
        let z = utc();
        let dt = LocalDateTime::from_timestamp(1607544031.1368911, &z)
            .unwrap_or_else(|_| LocalDateTime::from_unix(0, 0, &z));
        assert_eq!(dt.py_str(), "2020-12-09 20:00:31.136891");
        let dt = LocalDateTime::from_timestamp(0.9999996, &z)
            .unwrap_or_else(|_| LocalDateTime::from_unix(5, 0, &z));
        assert_eq!(dt.py_str(), "1970-01-01 00:00:01");
        let dt = LocalDateTime::from_timestamp(-1.5, &z)
            .unwrap_or_else(|_| LocalDateTime::from_unix(5, 0, &z));
        assert_eq!(dt.py_str(), "1969-12-31 23:59:58.500000");
    }

    #[test]
    fn strftime_c_locale() {
        let z = FixedZone::new(-8 * 3600, "PST");
        let dt = LocalDateTime::from_timestamp(1607544031.1368911, &z)
            .unwrap_or_else(|_| LocalDateTime::from_unix(0, 0, &z));
        assert_eq!(dt.strftime("%b%d %R", false, &z), "Dec09 12:00");
        assert_eq!(dt.strftime("%FT%T", false, &z), "2020-12-09T12:00:31");
        assert_eq!(
            dt.strftime("%a %A %B %e %j %p %I %y %C", false, &z),
            "Wed Wednesday December  9 344 PM 12 20 20"
        );
        assert_eq!(dt.strftime("%z|%Z|%f", false, &z), "||136891");
        assert_eq!(dt.strftime("%z|%Z|%:z", true, &z), "-0800|PST|-08:00");
        assert_eq!(
            dt.strftime("%s %u %w %U %W %V %G %g", false, &z),
            "1607544031 3 3 49 49 50 2020 20"
        );
        assert_eq!(
            dt.strftime("%-d|%_m|%^a|%#b|%5Y|%%|%Q", false, &z),
            "9|12|WED|DEC|02020|%|%Q"
        );
        assert_eq!(dt.strftime("%c", false, &z), "Wed Dec  9 12:00:31 2020");
        assert_eq!(
            dt.strftime("%D %x %X %r", false, &z),
            "12/09/20 12/09/20 12:00:31 12:00:31 PM"
        );
    }

    #[test]
    fn iso_weeks() {
        let z = utc();
        // 2021-01-01 is a Friday in ISO week 2020-W53.
        let dt = LocalDateTime::from_unix(1_609_459_200, 0, &z);
        assert_eq!(dt.strftime("%G-W%V-%u", false, &z), "2020-W53-5");
        // 2018-12-31 is Monday of 2019-W01.
        let dt = LocalDateTime::from_unix(1_546_214_400, 0, &z);
        assert_eq!(dt.strftime("%G-W%V-%u", false, &z), "2019-W01-1");
    }
}
