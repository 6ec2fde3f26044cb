//! Durations as the command line writes them: `250ms`, `1s`, `30s`, `2m`.

use std::time::Duration;

/// The longest duration taken: ten years, longer than any bound a gate
/// needs, and far from where adding it to a clock's instant overflows.
pub const MAX: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Parses a number with a unit (`ms`, `s`, `m`), at most [`MAX`].
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 =
        number.parse().map_err(|_| format!("{text:?} is not a duration (try 250ms, 1s, 30s)"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "" => return Err(format!("{text:?} needs a unit: ms, s or m")),
        other => return Err(format!("unknown unit {other:?} in {text:?} (use ms, s or m)")),
    };
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| *d <= MAX)
        .ok_or_else(|| format!("{text:?} is out of range (at most ten years)"))
}

/// Formats for messages: `250ms`, `1s`, `1.5s`.
pub fn format(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_units_of_the_protocol() {
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        for bad in ["", "5", "s", "1h", "-1s", "1 s x", "9223372036854775807s", "315360001s"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(format(Duration::from_millis(250)), "250ms");
        assert_eq!(format(Duration::from_secs(30)), "30s");
    }
}
