//! Reading series back from a Prometheus text rendering, for the suites
//! that check what the `metrics` feature records.

/// The value of the series `name{labels..}` in `rendered` (Prometheus text
/// format), or 0 when absent. Every given label must match; others are
/// ignored. The first matching series counts.
///
/// # Panics
/// When a matching series' value is not a number.
pub fn series_value(rendered: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    for line in rendered.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (series_labels, number) = match rest.strip_prefix('{') {
            Some(rest) => match rest.split_once("} ") {
                Some(split) => split,
                None => continue,
            },
            None => match rest.strip_prefix(' ') {
                Some(number) => ("", number),
                None => continue, // a longer name
            },
        };
        if labels
            .iter()
            .all(|(k, v)| series_labels.contains(&format!("{k}=\"{v}\"")))
        {
            return number.trim().parse().expect("a number");
        }
    }
    0.0
}
