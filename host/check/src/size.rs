//! Sizes as the command line writes them: `65536`, `64KiB`, `32MiB`, `1GiB`
//! (also `K`, `M`, `G`, `KB`, `MB`, `GB`, all powers of 1024).

/// Parses a byte count with an optional binary unit.
pub fn parse(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: usize =
        number.parse().map_err(|_| format!("{text:?} is not a size (try 65536, 64KiB, 32MiB)"))?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        other => return Err(format!("unknown unit {other:?} in {text:?} (use KiB, MiB or GiB)")),
    };
    value.checked_mul(1 << shift).ok_or_else(|| format!("{text:?} is too large"))
}

/// A byte count as the command line writes it: the largest binary unit that
/// divides it (`64MiB`, `1536KiB`), else bytes (`1000`).
pub fn format(bytes: usize) -> String {
    [(30, "GiB"), (20, "MiB"), (10, "KiB")]
        .into_iter()
        .find(|(shift, _)| bytes != 0 && bytes.is_multiple_of(1 << shift))
        .map_or_else(|| bytes.to_string(), |(shift, unit)| format!("{}{unit}", bytes >> shift))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bytes_and_binary_units() {
        assert_eq!(parse("65536"), Ok(65536));
        assert_eq!(parse("64KiB"), Ok(64 << 10));
        assert_eq!(parse("32MiB"), Ok(32 << 20));
        assert_eq!(parse("1g"), Ok(1 << 30));
        for bad in ["", "MiB", "1.5MiB", "-1", "3 apples", "99999999999999999999GiB"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_as_parsed() {
        for (bytes, text) in [
            (64 << 20, "64MiB"),
            (1 << 30, "1GiB"),
            (1536 << 10, "1536KiB"),
            (1000, "1000"),
            (0, "0"),
        ] {
            assert_eq!(format(bytes), text);
            assert_eq!(parse(text), Ok(bytes));
        }
    }
}
