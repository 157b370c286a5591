//! Small parsers shared by the XML and sysfs readers: hwloc bitmap strings,
//! Linux cpulists, and a tiny subset of C `sscanf` (hex fields) used to
//! read hwloc's PCI attributes the way hwloc itself does.

use idset::{IdSet, MAX_ID};

/// Parse an hwloc bitmap string (`hwloc_bitmap_sscanf` syntax) into a set.
///
/// The format is comma-separated 32-bit hexadecimal chunks, most significant
/// first (`0x00000003,0x0000ffff`); an empty chunk means zero (`0x1,,0x0`),
/// and a leading `0xf...f` chunk means "every higher bit is set".
/// Returns `None` when the string is malformed (hwloc then leaves the set
/// empty).  Bits above [`MAX_ID`] are dropped.
pub(crate) fn parse_hwloc_bitmap(s: &str) -> Option<IdSet> {
    let mut rest = s;
    let mut infinite = false;
    if let Some(after) = rest.strip_prefix("0xf...f") {
        if after.is_empty() {
            return Some(IdSet::from_range(0, MAX_ID));
        }
        rest = after.strip_prefix(',')?;
        infinite = true;
    }
    let nchunks = rest.bytes().filter(|&b| b == b',').count() + 1;
    // 64-bit words (as hwloc stores them on LP64), keyed by word index.
    let mut words: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    if !rest.is_empty() {
        for (i, chunk) in rest.split(',').enumerate() {
            // Chunk i (from the left) holds bits (nchunks-1-i)*32 .. +32.
            let value = strtoul_hex_whole(chunk)?;
            let base = (nchunks - 1 - i) as u64 * 32;
            if value == 0 || base > u64::from(MAX_ID) {
                continue;
            }
            // hwloc ORs the whole (possibly wider than 32 bits) value in at
            // the chunk's position within its 64-bit word, so an oversized
            // value spills into the chunk above, never past the word.
            let shift = base % 64;
            let shifted = if shift == 0 { value } else { value << shift };
            *words.entry(base / 64).or_insert(0) |= shifted;
        }
    }
    let mut set = IdSet::new();
    for (&w, &bitsv) in &words {
        let mut b = bitsv;
        while b != 0 {
            let lo = u64::from(b.trailing_zeros());
            let run = u64::from((b >> lo).trailing_ones());
            let first = w * 64 + lo;
            let last = first + run - 1;
            if first <= u64::from(MAX_ID) {
                set.insert_range(first as u32, last.min(u64::from(MAX_ID)) as u32);
            }
            b = if lo + run >= 64 {
                0
            } else {
                b & !(((1u64 << run) - 1) << lo)
            };
        }
    }
    if infinite {
        let lo = u64::try_from(nchunks).ok()?.saturating_mul(32);
        if lo <= u64::from(MAX_ID) {
            set.insert_range(lo as u32, MAX_ID);
        }
    }
    Some(set)
}

/// `strtoul(s, &end, 16)` where the whole of `s` must be consumed.
/// An empty string is zero (hwloc writes `,,` for zero chunks).
fn strtoul_hex_whole(s: &str) -> Option<u64> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'+') => (false, &t[1..]),
        Some(b'-') => (true, &t[1..]),
        _ => (false, t),
    };
    let digits = match t.get(..2) {
        Some("0x") | Some("0X") if t.len() > 2 => &t[2..],
        _ => t,
    };
    if digits.is_empty() {
        // strtoul consumed nothing: valid only if nothing at all was there.
        return if s.is_empty() { Some(0) } else { None };
    }
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut v: u64 = 0;
    for b in digits.bytes() {
        let d = u64::from(char::from(b).to_digit(16).unwrap_or(0));
        // strtoul saturates at ULONG_MAX
        v = v
            .checked_mul(16)
            .and_then(|x| x.checked_add(d))
            .unwrap_or(u64::MAX);
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Parse a Linux cpulist (`0-3,8,10-11`, as in `/sys/devices/system/cpu/online`
/// or `Cpus_allowed_list`).  Surrounding white space is ignored; an empty
/// list is the empty set.  Returns `None` if malformed.
pub(crate) fn parse_cpulist(s: &str) -> Option<IdSet> {
    let s = s.trim();
    let mut set = IdSet::new();
    if s.is_empty() {
        return Some(set);
    }
    for part in s.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        // Linux may print strided ranges ("0-15:2") in some files.
        let (range, stride) = match part.split_once(':') {
            Some((r, st)) => (r, st.parse::<u32>().ok().filter(|&v| v > 0)?),
            None => (part, 1),
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => {
                let v = range.parse::<u32>().ok()?;
                (v, v)
            }
        };
        if lo > hi || hi > MAX_ID {
            return None;
        }
        if stride == 1 {
            set.insert_range(lo, hi);
        } else {
            let mut id = lo;
            while id <= hi {
                set.insert(id);
                id = match id.checked_add(stride) {
                    Some(v) => v,
                    None => break,
                };
            }
        }
    }
    Some(set)
}

/// A directive of the tiny `sscanf` subset below.
#[derive(Clone, Copy)]
pub(crate) enum Scan {
    /// `%x` / `%NNx`: a hexadecimal number, at most `usize` characters (0 = unlimited).
    Hex(usize),
    /// A literal character that must match exactly.
    Lit(char),
    /// A blank in the format: skips any amount (including none) of white space.
    Space,
}

/// Run `sscanf(input, fmt)` for formats made of hex conversions, literals and
/// blanks, returning the converted values (as many as matched, like the C
/// return value).  Trailing input is ignored, as in C.
pub(crate) fn scanf_hex(input: &str, fmt: &[Scan]) -> Vec<u64> {
    let b = input.as_bytes();
    let mut pos = 0usize;
    let mut out = Vec::new();
    for d in fmt {
        match *d {
            Scan::Space => {
                while pos < b.len() && b[pos].is_ascii_whitespace() {
                    pos += 1;
                }
            }
            Scan::Lit(c) => {
                if b.get(pos).map(|&x| char::from(x)) != Some(c) {
                    return out;
                }
                pos += 1;
            }
            Scan::Hex(width) => {
                while pos < b.len() && b[pos].is_ascii_whitespace() {
                    pos += 1;
                }
                let limit = if width == 0 {
                    b.len()
                } else {
                    pos.saturating_add(width).min(b.len())
                };
                let mut p = pos;
                let mut neg = false;
                if p < limit && (b[p] == b'+' || b[p] == b'-') {
                    neg = b[p] == b'-';
                    p += 1;
                }
                if p + 2 < limit
                    && b[p] == b'0'
                    && (b[p + 1] == b'x' || b[p + 1] == b'X')
                    && b[p + 2].is_ascii_hexdigit()
                {
                    p += 2;
                }
                let start = p;
                let mut v: u64 = 0;
                while p < limit && b[p].is_ascii_hexdigit() {
                    let d = u64::from(char::from(b[p]).to_digit(16).unwrap_or(0));
                    v = v.wrapping_mul(16).wrapping_add(d);
                    p += 1;
                }
                if p == start {
                    return out;
                }
                out.push(if neg { v.wrapping_neg() } else { v });
                pos = p;
            }
        }
    }
    out
}

/// `sscanf(value, "%x:%02x:%02x.%01x")` == 4: hwloc's check of `pci_busid`.
pub(crate) fn valid_pci_busid(value: &str) -> bool {
    use Scan::*;
    scanf_hex(
        value,
        &[Hex(0), Lit(':'), Hex(2), Lit(':'), Hex(2), Lit('.'), Hex(1)],
    )
    .len()
        == 4
}

/// The PCI class hwloc 2.x reads from `pci_type` (`"%x [%04x:%04x] [%04x:%04x] %02x"`),
/// or 0 when the attribute does not match that format (hwloc then keeps the default).
pub(crate) fn pci_class_from_type(value: &str) -> u32 {
    use Scan::*;
    // `[%04x:%04x]`, twice: vendor:device, then subvendor:subdevice.
    let ids = [Lit('['), Hex(4), Lit(':'), Hex(4), Lit(']')];
    let fmt = [&[Hex(0), Space][..], &ids, &[Space], &ids, &[Space, Hex(2)]].concat();
    let v = scanf_hex(value, &fmt);
    if v.len() >= 6 {
        // %x stores into an unsigned int.
        v.first().map(|&c| c as u32).unwrap_or(0)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> IdSet {
        IdSet::parse(s).unwrap()
    }

    #[test]
    fn hwloc_bitmaps_and_cpulists() {
        type Parse = fn(&str) -> Option<IdSet>;
        let (bitmap, cpulist): (Parse, Parse) = (parse_hwloc_bitmap, parse_cpulist);
        for (parse, text, want) in [
            (bitmap, "0x00000001", "0"),
            (bitmap, "0x0000000f", "0-3"),
            (bitmap, "0x0", ""),
            (bitmap, "", ""),
            (bitmap, "0x00000001,0x00000000", "32"),
            // empty chunks are zero (corona.xml writes "0x00400000,,0x0")
            (bitmap, "0x00400000,,0x0", "86"),
            (bitmap, "0xffffffff,0xffffffff,0xffffffff", "0-95"),
            (bitmap, "0x00ffffff,,,0x00ffffff", "0-23,96-119"),
            (bitmap, "0xf...f", "0-2147483647"),
            (bitmap, "0xf...f,0x00000001", "0,32-2147483647"),
            // an oversized chunk spills into the chunk above it
            (bitmap, "0x100000001", "0,32"),
            (cpulist, "0-3,8,10-11\n", "0-3,8,10-11"),
            (cpulist, "", ""),
            (cpulist, "\n", ""),
            (cpulist, "0-6:2", "0,2,4,6"),
        ] {
            assert_eq!(parse(text), Some(set(want)), "{text:?}");
        }
        for (parse, text) in [
            (bitmap, "0xzz"),
            (bitmap, "0x1;"),
            (bitmap, "0xf...fg"),
            (cpulist, "3-1"),
            (cpulist, "a"),
            (cpulist, "0-"),
            (cpulist, "0-4:0"),
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }

    #[test]
    fn pci_attributes() {
        assert!(valid_pci_busid("0000:a3:00.0"));
        assert!(valid_pci_busid("0035:03:00.0"));
        assert!(!valid_pci_busid("0000:a3:00"));
        assert!(!valid_pci_busid("junk"));
        assert!(!valid_pci_busid("0000:g1:00.0"));
        for (text, class) in [
            ("0302 [10de:1db1] [10de:1212] a1", 0x302),
            ("0380 [1002:66a1] [1002:0834] 02", 0x380),
            ("1200 [1002:74a0] [1002:74a0] 00", 0x1200),
            // hwloc 3 adds a prog-if field; the 2.x format still matches its prefix
            ("0300 [10de:2330] [10de:16c1] a1 00", 0x300),
            ("0302", 0),
            ("", 0),
        ] {
            assert_eq!(pci_class_from_type(text), class, "{text:?}");
        }
    }

    #[test]
    fn scanf_subset() {
        use Scan::*;
        assert_eq!(
            scanf_hex(" 0x1f:2", &[Hex(0), Lit(':'), Hex(0)]),
            vec![0x1f, 2]
        );
        assert_eq!(scanf_hex("123", &[Hex(2)]), vec![0x12]);
        assert_eq!(scanf_hex("", &[Hex(0)]), Vec::<u64>::new());
        assert_eq!(scanf_hex("-", &[Hex(0)]), Vec::<u64>::new());
    }
}
