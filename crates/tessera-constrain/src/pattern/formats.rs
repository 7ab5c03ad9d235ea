//! `format` as an assertion, for the formats tool schemas use: each is a
//! regular language written out from its RFC (dates with their month lengths
//! and leap years, times with leap seconds only where UTC reads 23:59:60),
//! compiled once per process. Other formats are refused by the compiler.

use super::{Dfa, PatternError};
use std::sync::Arc;

/// The `format`s asserted (any other is refused unless lenient; OpenAPI's
/// number formats hold by construction).
pub const FORMATS: [&str; 9] = [
    "date-time",
    "date",
    "time",
    "email",
    "uuid",
    "uri",
    "ipv4",
    "ipv6",
    "hostname",
];

/// RFC 1123 host names are at most 253 characters.
const HOSTNAME_MAX: u32 = 253;

/// The table of a format and the longest string it allows (`None`: the format
/// is not one of [`FORMATS`]), compiled anew (a
/// [`PatternCache`](super::cache::PatternCache) keeps it).
pub(crate) fn format_pattern(name: &str) -> Option<Result<(Arc<Dfa>, u32), PatternError>> {
    let regex = regex_of(name)?;
    Some(Dfa::from_regex(&regex).map(|dfa| (Arc::new(dfa), max_len_of(name))))
}

/// The longest string format `name` allows.
pub(crate) fn max_len_of(name: &str) -> u32 {
    if name == "hostname" {
        HOSTNAME_MAX
    } else {
        u32::MAX
    }
}

fn regex_of(name: &str) -> Option<String> {
    Some(match name {
        "date-time" => format!("{}[Tt]{}", date(), time()),
        "date" => date(),
        "time" => time(),
        "email" => email(),
        "uuid" => "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}".into(),
        "uri" => uri(),
        "ipv4" => ipv4(),
        "ipv6" => ipv6(),
        "hostname" => hostname(),
        _ => return None,
    })
}

/// RFC 3339 `full-date`: days per month, February 29th in leap years only.
fn date() -> String {
    let leap_year = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)";
    let days = "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))";
    format!("(?:[0-9]{{4}}-{days}|{leap_year}-02-29)")
}

/// RFC 3339 `full-time`. A leap second (`:60`) is valid only at 23:59 UTC, so
/// each local minute with a `:60` carries the offsets that make it 23:59 UTC.
fn time() -> String {
    let frac = r"(?:\.[0-9]+)?";
    let hm = "(?:[01][0-9]|2[0-3]):[0-5][0-9]";
    let mut leap = Vec::with_capacity(1440);
    for local in 0..1440u32 {
        let behind = 1439 - local; // UTC is local plus this
        let ahead = (local + 1) % 1440; // UTC is local minus this
        let zulu = if local == 1439 { "|[Zz]" } else { "" };
        leap.push(format!(
            "{}:60{frac}(?:-{}|\\+{}{zulu})",
            clock(local),
            clock(behind),
            clock(ahead)
        ));
    }
    format!("(?:{hm}:[0-5][0-9]{frac}(?:[Zz]|[+-]{hm})|{})", leap.join("|"))
}

/// Minutes of the day as `HH:MM`.
fn clock(minutes: u32) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

fn ipv4() -> String {
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    format!(r"{octet}(?:\.{octet}){{3}}")
}

/// RFC 4291 text form (RFC 3986 `IPv6address`), zone identifiers excluded.
fn ipv6() -> String {
    let h = "[0-9A-Fa-f]{1,4}";
    let ls32 = format!("(?:{h}:{h}|{})", ipv4());
    let forms = [
        format!("(?:{h}:){{6}}{ls32}"),
        format!("::(?:{h}:){{5}}{ls32}"),
        format!("(?:{h})?::(?:{h}:){{4}}{ls32}"),
        format!("(?:(?:{h}:){{0,1}}{h})?::(?:{h}:){{3}}{ls32}"),
        format!("(?:(?:{h}:){{0,2}}{h})?::(?:{h}:){{2}}{ls32}"),
        format!("(?:(?:{h}:){{0,3}}{h})?::{h}:{ls32}"),
        format!("(?:(?:{h}:){{0,4}}{h})?::{ls32}"),
        format!("(?:(?:{h}:){{0,5}}{h})?::{h}"),
        format!("(?:(?:{h}:){{0,6}}{h})?::"),
    ];
    format!("(?:{})", forms.join("|"))
}

/// RFC 1123 host name: labels of 1 to 63 letters, digits and inner hyphens.
fn hostname() -> String {
    let label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    format!(r"{label}(?:\.{label})*")
}

/// RFC 5321 `Mailbox`: a dot-atom or quoted local part, at a host name or an
/// address literal.
fn email() -> String {
    let atext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
    let quoted = r#""(?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\[\x20-\x7E])*""#;
    let local = format!(r"(?:{atext}+(?:\.{atext}+)*|{quoted})");
    let domain = format!(r"(?:{}|\[{}\]|\[IPv6:{}\])", hostname(), ipv4(), ipv6());
    format!("{local}@{domain}")
}

/// RFC 3986 `URI` (absolute, with optional query and fragment).
fn uri() -> String {
    let unreserved = r"[A-Za-z0-9\-._~]";
    let pct = "%[0-9A-Fa-f]{2}";
    let sub_delims = r"[!$&'()*+,;=]";
    let pchar = format!("(?:{unreserved}|{pct}|{sub_delims}|[:@])");
    let userinfo = format!("(?:{unreserved}|{pct}|{sub_delims}|:)*");
    let ip_literal = format!(r"\[(?:{}|[Vv][0-9A-Fa-f]+\.(?:{unreserved}|{sub_delims}|:)+)\]", ipv6());
    let reg_name = format!("(?:{unreserved}|{pct}|{sub_delims})*");
    let authority = format!("(?:{userinfo}@)?(?:{ip_literal}|{}|{reg_name})(?::[0-9]*)?", ipv4());
    let segments = format!("(?:/{pchar}*)*");
    let hier = format!("(?://{authority}{segments}|/(?:{pchar}+{segments})?|{pchar}+{segments}|)");
    let tail = format!("(?:{pchar}|[/?])*");
    format!(r"[A-Za-z][A-Za-z0-9+\-.]*:{hier}(?:\?{tail})?(?:#{tail})?")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(format: &str, valid: &[&str], invalid: &[&str]) {
        let (dfa, _) = format_pattern(format).unwrap().unwrap();
        for text in valid {
            assert!(dfa.matches(text), "{format}: `{text}` should match");
        }
        for text in invalid {
            assert!(!dfa.matches(text), "{format}: `{text}` should not match");
        }
    }

    #[test]
    fn dates_know_month_lengths_and_leap_years() {
        check(
            "date",
            &["2020-02-29", "2000-02-29", "2021-12-31"],
            &["2021-02-29", "1900-02-29", "2020-04-31", "2020-13-01", "2020-1-01"],
        );
    }

    #[test]
    fn leap_seconds_only_at_midnight_utc() {
        check(
            "time",
            &[
                "23:59:60Z",
                "15:59:60-08:00",
                "00:29:60-23:30",
                "23:29:60+23:30",
                "08:30:06.5z",
            ],
            &["22:59:60Z", "23:59:60+01:00", "23:59:61Z", "12:00:00", "24:00:00Z"],
        );
    }

    #[test]
    fn addresses() {
        check("ipv4", &["192.168.0.1"], &["256.0.0.1", "087.10.0.1", "1.2.3"]);
        check(
            "ipv6",
            &["::1", "::", "1:2:3:4:5:6:7:8", "::ffff:192.168.0.1"],
            &["1::d6::42", "12345::", ":2:3:4:5:6:7:8"],
        );
        check("hostname", &["www.example.com", "a"], &["-a", "a-", "a_b", ""]);
        check(
            "email",
            &["joe.bloggs@example.com", "\"a b\"@x.org"],
            &["a..b@x.org", "2962"],
        );
        check(
            "uri",
            &["http://foo.bar/?baz=qux#quux", "urn:a:b"],
            &["//foo.bar", "abc", "http:// x"],
        );
    }
}
