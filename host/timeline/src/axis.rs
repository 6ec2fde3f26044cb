//! The time axis: which times get a tick, and how a tick reads (`250` ms,
//! `1.5` s, `2:30`).

/// The unit tick labels are written in, chosen by the run's length.
#[derive(Clone, Copy)]
pub(crate) enum TimeUnit {
    Millis,
    Seconds,
    Minutes,
}

impl TimeUnit {
    pub fn for_span(span_ms: f64) -> TimeUnit {
        if span_ms <= 3_000.0 {
            TimeUnit::Millis
        } else if span_ms <= 300_000.0 {
            TimeUnit::Seconds
        } else {
            TimeUnit::Minutes
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Millis => "ms",
            TimeUnit::Seconds => "s",
            TimeUnit::Minutes => "m:ss",
        }
    }

    pub fn format(self, at_ms: f64) -> String {
        match self {
            TimeUnit::Millis => format!("{at_ms:.0}"),
            TimeUnit::Seconds => {
                let text = format!("{:.2}", at_ms / 1000.0);
                text.trim_end_matches('0').trim_end_matches('.').to_owned()
            }
            TimeUnit::Minutes => {
                let secs = (at_ms / 1000.0).round() as u64;
                format!("{}:{:02}", secs / 60, secs % 60)
            }
        }
    }
}

/// The step between ticks: the smallest round one (1, 2, 2.5, 5 × 10ⁿ ms below
/// ten seconds; 10 s, 15 s, 30 s, 1, 2, 5, 10, 15, 30 minutes, then hours
/// above) that puts at most `most` ticks on `0..=end_ms`.
pub(crate) fn tick_step(end_ms: f64, most: usize) -> f64 {
    const CLOCK: [f64; 10] = [10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3, 1_800e3, 3_600e3];
    let fits = |step: f64| ((end_ms / step).floor() as usize) < most;
    let decimal = (0..4).flat_map(|power| [1.0, 2.0, 2.5, 5.0].map(|m| m * 10f64.powi(power)));
    let hours = (0..).flat_map(|power| [2.0, 5.0, 10.0].map(|m| m * 3_600e3 * 10f64.powi(power)));
    decimal.chain(CLOCK).chain(hours).find(|&step| fits(step)).unwrap_or(end_ms)
}

/// The ticks on `0..=end_ms`, `step` apart.
pub(crate) fn ticks(end_ms: f64, step: f64) -> impl Iterator<Item = f64> {
    (0..).map(move |n| n as f64 * step).take_while(move |&at| at <= end_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_ticks_read_naturally() {
        assert_eq!(TimeUnit::for_span(900.0).format(250.0), "250");
        assert_eq!(TimeUnit::for_span(9000.0).format(1500.0), "1.5");
        assert_eq!(TimeUnit::for_span(9000.0).format(2000.0), "2");
        assert_eq!(TimeUnit::for_span(900_000.0).format(150_000.0), "2:30");
    }

    #[test]
    fn ticks_are_round_and_at_most_twelve() {
        let at = |end: f64| ticks(end, tick_step(end, 12)).collect::<Vec<_>>();
        assert_eq!(at(100.0), (0..=10).map(|n| n as f64 * 10.0).collect::<Vec<_>>());
        assert_eq!(at(1137.0), (0..=11).map(|n| n as f64 * 100.0).collect::<Vec<_>>());
        assert_eq!(at(2400.0), (0..=9).map(|n| n as f64 * 250.0).collect::<Vec<_>>());
        assert_eq!(at(4000.0).len(), 9, "every 500 ms");
        assert_eq!(tick_step(200_000.0, 12), 30e3, "seconds step like a clock past ten seconds");
        assert_eq!(tick_step(2_000_000.0, 12), 300e3);
        assert_eq!(
            tick_step(10.0 * 86_400e3, 12),
            50.0 * 3_600e3,
            "days of run still get few ticks"
        );
        for end in [100.0, 333.0, 7_777.0, 65_000.0, 1e6, 1e9] {
            let n = at(end).len();
            assert!((5..=12).contains(&n), "{end}: {n} ticks");
        }
    }
}
