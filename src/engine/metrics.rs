//! INFO's instantaneous figures, as Redis's `trackInstantaneousMetric` keeps them: every 100 ms
//! (in the cron) each running total is sampled as a rate per second since the last sample, and
//! the figure is the mean of the last 16 samples — the last 1.6 s at the default `hz 10`.

/// Samples averaged (Redis's `STATS_METRIC_SAMPLES`).
const SAMPLES: usize = 16;

/// Milliseconds between two samples (Redis's `run_with_period(100)`).
pub const PERIOD_MS: u64 = 100;

/// One running total's recent rates.
#[derive(Debug, Default, Clone)]
struct Metric {
    samples: [u64; SAMPLES],
    next: usize,
    last_ms: u64,
    last_total: u64,
}

impl Metric {
    fn sample(&mut self, now_ms: u64, total: u64) {
        let elapsed = now_ms.saturating_sub(self.last_ms);
        let rate = if self.last_ms == 0 || elapsed == 0 {
            0
        } else {
            total.saturating_sub(self.last_total) * 1000 / elapsed
        };
        self.samples[self.next] = rate;
        self.next = (self.next + 1) % SAMPLES;
        self.last_ms = now_ms;
        self.last_total = total;
    }

    fn mean(&self) -> u64 {
        self.samples.iter().sum::<u64>() / SAMPLES as u64
    }
}

/// Commands, bytes read and bytes written.
#[derive(Debug, Default, Clone)]
pub struct Instantaneous {
    commands: Metric,
    input: Metric,
    output: Metric,
}

impl Instantaneous {
    /// Takes a sample of the three totals at `now_ms`.
    pub fn sample(&mut self, now_ms: u64, commands: u64, input: u64, output: u64) {
        self.commands.sample(now_ms, commands);
        self.input.sample(now_ms, input);
        self.output.sample(now_ms, output);
    }

    /// When the last sample was taken (0: never).
    pub fn last_ms(&self) -> u64 {
        self.commands.last_ms
    }

    /// `instantaneous_ops_per_sec`.
    pub fn ops_per_sec(&self) -> u64 {
        self.commands.mean()
    }

    /// `instantaneous_input_kbps` and `instantaneous_output_kbps`.
    pub fn kbps(&self) -> (f64, f64) {
        (
            self.input.mean() as f64 / 1024.0,
            self.output.mean() as f64 / 1024.0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_figure_is_the_mean_rate_of_the_last_sixteen_samples() {
        let mut m = Instantaneous::default();
        m.sample(1_000, 0, 0, 0);
        assert_eq!(m.ops_per_sec(), 0);
        // 500 commands every 100 ms: 5,000 a second, once 16 samples hold it.
        for i in 1..=16 {
            m.sample(1_000 + i * 100, i * 500, i * 1024 * 10, 0);
        }
        assert_eq!(m.ops_per_sec(), 5_000);
        assert_eq!(m.kbps(), (100.0, 0.0));
        // Half the samples idle: half the figure.
        for i in 17..=24 {
            m.sample(1_000 + i * 100, 16 * 500, 16 * 10240, 0);
        }
        assert_eq!(m.ops_per_sec(), 2_500);
    }
}
