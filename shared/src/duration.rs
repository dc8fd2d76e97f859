//! Durations as PortPreview writes them everywhere, in what the relay
//! answers callers as in what the client prints: `300ms`, `1s`, `2m`, `7d`.

use std::time::Duration;

/// A duration as PortPreview writes them: a whole number of the largest
/// unit that fits exactly (`300ms`, `1s`, `90s`, `2m`, `36h`, `7d`).
pub fn format_duration(duration: Duration) -> String {
    const UNITS: [(u128, &str); 4] = [(86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1_000, "s")];
    let ms = duration.as_millis();
    if duration.is_zero() {
        return "0s".into();
    }
    if !duration.as_nanos().is_multiple_of(1_000_000) {
        return format!("{}µs", duration.as_micros());
    }
    UNITS
        .iter()
        .find(|(size, _)| ms >= *size && ms.is_multiple_of(*size))
        .map_or_else(|| format!("{ms}ms"), |(size, unit)| format!("{}{unit}", ms / size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_the_short_way() {
        let shown: Vec<String> = [
            Duration::from_millis(300),
            Duration::from_secs(1),
            Duration::from_millis(1_500),
            Duration::from_secs(90),
            Duration::from_secs(120),
            Duration::from_secs(36 * 3600),
            Duration::from_secs(7 * 86_400),
            Duration::ZERO,
        ]
        .into_iter()
        .map(format_duration)
        .collect();
        assert_eq!(shown, ["300ms", "1s", "1500ms", "90s", "2m", "36h", "7d", "0s"]);
    }
}
