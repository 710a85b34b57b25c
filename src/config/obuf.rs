//! `client-output-buffer-limit <class> <hard> <soft> <soft-seconds> [<class> ...]`: the values, how
//! Redis 7.0 parses and prints them, and the rule that decides when a client is over its limit.
//!
//! Three classes, as in Redis: `normal`, `replica` (alias `slave`; CONFIG GET prints `slave`,
//! CONFIG REWRITE writes `replica`) and `pubsub`. `master` is refused, as Redis refuses it. The
//! defaults are Redis 7.0's: `normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60`.
//!
//! Parsing follows `setConfigClientOutputBufferLimitOption` to the byte, because CONFIG SET's
//! errors and CONFIG GET's echo are compared with redis-server 7.0.15 in the tests:
//! * the words come in fours, else "Wrong number of arguments in buffer limit configuration.";
//! * the class is matched case-insensitively, else "Invalid client class specified ...";
//! * the sizes are Redis's `memtoull` (digits then an optional unit among b/k/kb/m/mb/g/gb, any case;
//!   no digits reads as 0; too many digits saturate; the unit's product wraps);
//! * the seconds are `strtoll` (leading blanks and a sign allowed, saturating) stored in a C `int`,
//!   so 99999999999 reads back as 1215752191, and a negative result is an error;
//! * the whole value is checked before anything is applied.
//!
//! CONFIG SET splits its value on single spaces (Redis's `sdssplitlen(" ")`: two spaces make an
//! empty word); the config file and the command line give the words as `sdssplitargs` reads them,
//! and a single quoted word is split again the same way (`--client-output-buffer-limit "normal 0 0
//! 0"`). [`set_words`] takes already split words; the directive table's setter does the file's split.

/// One class's limits. 0 disables a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

impl OutputLimit {
    pub const NONE: OutputLimit = OutputLimit {
        hard: 0,
        soft: 0,
        soft_seconds: 0,
    };

    /// Redis's checkClientOutputBufferLimits for a client with `pending` bytes at unix second `now`.
    /// `soft_since` is the client's "above the soft limit since" second (0 = it was not): updated
    /// here. True when the client must be closed: at or above the hard limit, or at or above the
    /// soft limit continuously for more than `soft_seconds`.
    pub fn reached(&self, pending: u64, soft_since: &mut u64, now: u64) -> bool {
        let hard = self.hard > 0 && pending >= self.hard;
        let mut soft = self.soft > 0 && pending >= self.soft;
        if soft {
            if *soft_since == 0 {
                // The first time the soft limit is seen reached: start the clock.
                *soft_since = now.max(1);
                soft = false;
            } else if now.saturating_sub(*soft_since) <= self.soft_seconds {
                soft = false;
            }
        } else {
            *soft_since = 0;
        }
        hard || soft
    }

    /// Unix second at which a client above the soft limit since `soft_since` becomes closable
    /// (None when no soft limit applies).
    pub fn soft_deadline(&self, soft_since: u64) -> Option<u64> {
        (self.soft > 0 && soft_since > 0).then(|| soft_since + self.soft_seconds + 1)
    }
}

/// The limits of the three classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObufLimits {
    pub normal: OutputLimit,
    pub replica: OutputLimit,
    pub pubsub: OutputLimit,
}

impl Default for ObufLimits {
    /// Redis 7.0's `clientBufferLimitsDefaults`.
    fn default() -> Self {
        ObufLimits {
            normal: OutputLimit::NONE,
            replica: OutputLimit {
                hard: 256 << 20,
                soft: 64 << 20,
                soft_seconds: 60,
            },
            pubsub: OutputLimit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_seconds: 60,
            },
        }
    }
}

/// Hard limit for a MONITOR client when the normal class has none (64 MiB: twice the pubsub
/// class's default hard limit, which is the analogous stream of pushed output).
pub const MONITOR_FALLBACK_HARD: u64 = 64 << 20;

pub const WRONG_NUMBER: &str = "Wrong number of arguments in buffer limit configuration.";
pub const INVALID_CLASS: &str = "Invalid client class specified in buffer limit configuration.";
pub const BAD_VALUE: &str =
    "Error in hard, soft or soft_seconds setting in buffer limit configuration.";

impl ObufLimits {
    /// CONFIG GET's value (Redis's `getConfigClientOutputBufferLimitOption`).
    pub fn render(&self) -> String {
        let one = |name: &str, l: &OutputLimit| {
            format!("{name} {} {} {}", l.hard, l.soft, l.soft_seconds)
        };
        format!(
            "{} {} {}",
            one("normal", &self.normal),
            one("slave", &self.replica),
            one("pubsub", &self.pubsub)
        )
    }

    /// CONFIG REWRITE's lines, one per class, sizes in Redis's `rewriteConfigFormatMemory` form.
    pub fn rewrite_lines(&self, name: &str) -> Vec<String> {
        [
            ("normal", &self.normal),
            ("replica", &self.replica),
            ("pubsub", &self.pubsub),
        ]
        .iter()
        .map(|(class, l)| {
            format!(
                "{name} {class} {} {} {}",
                format_memory(l.hard),
                format_memory(l.soft),
                l.soft_seconds
            )
        })
        .collect()
    }

    /// The replica class as Redis applies it: a hard limit below `repl-backlog-size` would drop
    /// a replica that a partial resync just accepted, so the backlog size is used instead.
    pub fn replica_effective(&self, repl_backlog_size: u64) -> OutputLimit {
        let mut l = self.replica;
        if l.hard > 0 && l.hard < repl_backlog_size {
            l.hard = repl_backlog_size;
        }
        l
    }

    /// The limit for MONITOR clients, whose output comes from other clients' commands and so
    /// cannot be paused: the normal class, as in Redis; beyond Redis, with `normal 0 0 0` a
    /// hard limit of [`MONITOR_FALLBACK_HARD`], so that a monitor that stops reading cannot grow
    /// without bound.
    pub fn monitor(&self) -> OutputLimit {
        if self.normal == OutputLimit::NONE {
            OutputLimit {
                hard: MONITOR_FALLBACK_HARD,
                ..OutputLimit::NONE
            }
        } else {
            self.normal
        }
    }

    fn class_mut(&mut self, class: &str) -> Option<&mut OutputLimit> {
        match class.to_ascii_lowercase().as_str() {
            "normal" => Some(&mut self.normal),
            "replica" | "slave" => Some(&mut self.replica),
            "pubsub" => Some(&mut self.pubsub),
            _ => None,
        }
    }
}

/// Applies `<class> <hard> <soft> <seconds>` groups, all or nothing.
pub fn set_words(limits: &mut ObufLimits, words: &[&str]) -> Result<(), String> {
    if !words.len().is_multiple_of(4) {
        return Err(WRONG_NUMBER.into());
    }
    let mut updated = *limits;
    for w in words.chunks(4) {
        let Some(slot) = updated.class_mut(w[0]) else {
            return Err(INVALID_CLASS.into());
        };
        let (Some(hard), Some(soft), Some(secs)) = (memtoull(w[1]), memtoull(w[2]), seconds(w[3]))
        else {
            return Err(BAD_VALUE.into());
        };
        *slot = OutputLimit {
            hard,
            soft,
            soft_seconds: secs,
        };
    }
    *limits = updated;
    Ok(())
}

/// The words of a CONFIG SET value: split on every single space, as Redis's `sdssplitlen`.
pub fn config_set_words(value: &str) -> Vec<&str> {
    if value.is_empty() {
        return Vec::new();
    }
    value.split(' ').collect()
}

/// Redis's `memtoull`: digits, then an optional unit; `None` where Redis sets `err`.
pub fn memtoull(s: &str) -> Option<u64> {
    if s.starts_with('-') {
        return None;
    }
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = s.split_at(digits);
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    if digits >= 128 {
        return None;
    }
    // strtoull: no digits is 0, overflow saturates (Redis does not check ERANGE).
    let val = if num.is_empty() {
        0
    } else {
        num.parse::<u64>().unwrap_or(u64::MAX)
    };
    Some(val.wrapping_mul(mul))
}

/// `soft_seconds = strtoll(s, &end, 10)` into an `int`, refused when negative or not all consumed.
fn seconds(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let mut i = 0;
    // C isspace: space, \t, \n, \v, \f, \r.
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut negative = false;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        negative = b[i] == b'-';
        i += 1;
    }
    let digits_at = i;
    let mut v: i128 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        v = (v * 10 + (b[i] - b'0') as i128).min(i64::MAX as i128 + 1);
        i += 1;
    }
    if i == digits_at {
        // No conversion: strtoll leaves `end` at the start, which is '\0' only for "".
        return b.is_empty().then_some(0);
    }
    if i != b.len() {
        return None;
    }
    let v = if negative { -v } else { v };
    let ll = v.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    let int = ll as i32;
    (int >= 0).then_some(int as u64)
}

/// Redis's `rewriteConfigFormatMemory`.
pub fn format_memory(bytes: u64) -> String {
    const KB: u64 = 1024;
    const MB: u64 = 1024 * 1024;
    const GB: u64 = 1024 * 1024 * 1024;
    if bytes > 0 && bytes.is_multiple_of(GB) {
        format!("{}gb", bytes / GB)
    } else if bytes > 0 && bytes.is_multiple_of(MB) {
        format!("{}mb", bytes / MB)
    } else if bytes > 0 && bytes.is_multiple_of(KB) {
        format!("{}kb", bytes / KB)
    } else {
        bytes.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &str) -> Result<String, String> {
        let mut l = ObufLimits::default();
        set_words(&mut l, &config_set_words(v)).map(|_| l.render())
    }

    #[test]
    fn defaults_render_as_redis() {
        assert_eq!(
            ObufLimits::default().render(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
    }

    #[test]
    fn parses_as_redis() {
        // Each figure below is redis-server 7.0.15's answer to the same CONFIG SET.
        assert!(set("normal 1mb 2mb 3")
            .unwrap()
            .starts_with("normal 1048576 2097152 3 "));
        assert!(set("replica 1k 2kb 10")
            .unwrap()
            .contains("slave 1000 2048 10"));
        assert!(set("NORMAL 1MB 1Gb 0")
            .unwrap()
            .starts_with("normal 1048576 1073741824 0"));
        assert!(set("normal 1 1 99999999999")
            .unwrap()
            .starts_with("normal 1 1 1215752191"));
        assert!(set("normal mb 1 1").unwrap().starts_with("normal 0 1 1"));
        assert!(set("normal 1 1 +5").unwrap().starts_with("normal 1 1 5"));
        assert!(set("normal 18446744073709551616 0 0")
            .unwrap()
            .starts_with("normal 18446744073709551615 0 0"));
        assert_eq!(set(""), Ok(ObufLimits::default().render()));
        assert_eq!(set("normal 1 1"), Err(WRONG_NUMBER.into()));
        assert_eq!(set("normal 1 2 3 "), Err(WRONG_NUMBER.into()));
        assert_eq!(set("master 1 1 1"), Err(INVALID_CLASS.into()));
        assert_eq!(set("normal  1   2  3"), Err(INVALID_CLASS.into()));
        assert_eq!(set("normal 1 1 -1"), Err(BAD_VALUE.into()));
        assert_eq!(set("normal -1 1 1"), Err(BAD_VALUE.into()));
        assert_eq!(set("normal 1.5 1 1"), Err(BAD_VALUE.into()));
        assert_eq!(set("normal 1 1 2147483648"), Err(BAD_VALUE.into()));
        // All or nothing.
        let mut l = ObufLimits::default();
        assert!(set_words(&mut l, &["normal", "1", "1", "1", "replica", "x", "1", "1"]).is_err());
        assert_eq!(l, ObufLimits::default());
    }

    #[test]
    fn rewrite_formats_memory() {
        let l = ObufLimits::default();
        assert_eq!(
            l.rewrite_lines("client-output-buffer-limit"),
            [
                "client-output-buffer-limit normal 0 0 0",
                "client-output-buffer-limit replica 256mb 64mb 60",
                "client-output-buffer-limit pubsub 32mb 8mb 60"
            ]
        );
        assert_eq!(format_memory(1000), "1000");
        assert_eq!(format_memory(3 << 10), "3kb");
    }

    #[test]
    fn soft_limit_needs_more_than_its_seconds() {
        let l = OutputLimit {
            hard: 0,
            soft: 10,
            soft_seconds: 5,
        };
        let mut since = 0;
        assert!(!l.reached(20, &mut since, 100));
        assert_eq!(since, 100);
        assert!(!l.reached(20, &mut since, 105));
        assert!(l.reached(20, &mut since, 106));
        assert!(!l.reached(5, &mut since, 107));
        assert_eq!(since, 0);
        let hard = OutputLimit {
            hard: 10,
            ..OutputLimit::NONE
        };
        assert!(hard.reached(10, &mut since, 1));
        assert!(!hard.reached(9, &mut since, 1));
    }
}
