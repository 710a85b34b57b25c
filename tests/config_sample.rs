//! The sample `conf/hyperbloom.conf` cannot drift from the directive table: it must parse, name every
//! directive of `config::DIRECTIVES` on an active (uncommented) line, and set each one to its default,
//! so that the sample documents the defaults and starting with it changes nothing.

use hyperbloom::config::{Config, DIRECTIVES};

const SAMPLE_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/conf/hyperbloom.conf");

fn sample() -> String {
    std::fs::read_to_string(SAMPLE_PATH).expect("conf/hyperbloom.conf is readable")
}

/// First word of every non-comment, non-blank line.
fn active_names(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next())
        .map(|w| w.to_ascii_lowercase())
        .collect()
}

#[test]
fn sample_parses() {
    let mut config = Config::default();
    if let Err(e) = config.apply_text(&sample(), "conf/hyperbloom.conf") {
        panic!("conf/hyperbloom.conf does not parse:\n{e}");
    }
}

#[test]
fn sample_names_every_directive() {
    let names = active_names(&sample());
    let missing: Vec<&str> = DIRECTIVES
        .iter()
        .map(|d| d.name)
        .filter(|n| !names.iter().any(|x| x == n))
        .collect();
    assert!(
        missing.is_empty(),
        "conf/hyperbloom.conf lacks these directives of src/config/mod.rs DIRECTIVES: {missing:?}\n\
         add a line `<name> <default>` with a comment for each"
    );
}

#[test]
fn sample_names_each_directive_once() {
    let names = active_names(&sample());
    for d in DIRECTIVES {
        let n = names.iter().filter(|x| *x == d.name).count();
        assert!(n <= 1, "conf/hyperbloom.conf sets {} {n} times", d.name);
    }
}

#[test]
fn sample_values_are_the_defaults() {
    let mut config = Config::default();
    config
        .apply_text(&sample(), "conf/hyperbloom.conf")
        .expect("sample parses");
    let defaults = Config::default();
    for d in DIRECTIVES {
        assert_eq!(
            (d.get)(&config),
            (d.get)(&defaults),
            "conf/hyperbloom.conf sets `{}` to a value other than its default",
            d.name
        );
    }
}

#[test]
fn sample_documents_each_directive() {
    // Each active line follows a comment line explaining it.
    let text = sample();
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    for (i, line) in lines.iter().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let previous = if i > 0 { lines[i - 1] } else { "" };
        assert!(
            previous.starts_with('#'),
            "conf/hyperbloom.conf line {}: `{line}` has no comment above it",
            i + 1
        );
    }
}
