//! No output of the library ever contains a Redis password (issue 12,
//! defect 7): `redact_url`, `target()`, `Debug` of the builder and the
//! client, configuration and connection errors, and logs, for every URL
//! form the client accepts and a password built around each printable
//! ASCII character, raw and percent-encoded.

use std::time::Duration;

use redlock_runtime::LockClient;
use redlock_runtime::redact_url;
use redlock_tests::LogCapture;

/// Markers that appear in no URL template: any of them in an output is a
/// (partial) leak.
const MARKERS: [&str; 3] = ["Zq", "Xw", "Vy"];

fn password(c: char) -> String {
    format!("Zq{c}Xw{c}Vy")
}

/// `redis://Zq:Xw:Vy@host` is the user `Zq` with the password `Xw:Vy`: the
/// user name is shown, as it should be.
fn is_user_name(form: &str, c: char) -> bool {
    form == "password as user" && c == ':'
}

fn percent_encoded(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Every URL form: `(description, url)`.
fn forms(pw: &str) -> Vec<(&'static str, String)> {
    let enc = percent_encoded(pw);
    vec![
        ("userinfo, no user", format!("redis://:{pw}@127.0.0.1:1")),
        (
            "userinfo with user and db",
            format!("redis://app:{pw}@127.0.0.1:1/0"),
        ),
        ("tls", format!("rediss://app:{pw}@127.0.0.1:1")),
        ("password as user", format!("redis://{pw}@127.0.0.1:1")),
        (
            "percent-encoded",
            format!("redis://app:{enc}@127.0.0.1:1/2"),
        ),
        (
            "unix, pass last",
            format!("redis+unix:///tmp/r.sock?db=0&pass={pw}"),
        ),
        (
            "unix, pass first",
            format!("unix:///tmp/r.sock?pass={pw}&db=1"),
        ),
        (
            "unix, password encoded",
            format!("redis+unix:///tmp/r.sock?password={enc}"),
        ),
        (
            "query password",
            format!("redis://127.0.0.1:1/?password={pw}"),
        ),
        ("no scheme", format!("app:{pw}@127.0.0.1:1")),
    ]
}

fn assert_clean(what: &str, url: &str, output: &str) {
    for marker in MARKERS {
        assert!(
            !output.contains(marker),
            "{what} leaks part of the password of {url:?}: {output}"
        );
    }
}

fn printable() -> impl Iterator<Item = char> {
    (0x20u8..=0x7e).map(char::from)
}

#[tokio::test]
async fn no_output_contains_a_password_for_any_url_form_or_character() {
    let mut checked = 0;
    for c in printable() {
        for (form, url) in forms(&password(c)) {
            if is_user_name(form, c) {
                continue;
            }
            let what = format!("[{form}, {c:?}]");
            assert_clean(&format!("{what} redact_url"), &url, &redact_url(&url));
            let builder = LockClient::builder().url(url.clone());
            assert_clean(
                &format!("{what} builder Debug"),
                &url,
                &format!("{builder:?}"),
            );
            match builder.build_unchecked() {
                Ok(client) => {
                    assert_clean(&format!("{what} target()"), &url, client.target());
                    assert_clean(
                        &format!("{what} client Debug"),
                        &url,
                        &format!("{client:?}"),
                    );
                }
                Err(e) => {
                    assert_clean(&format!("{what} error Display"), &url, &e.to_string());
                    assert_clean(&format!("{what} error Debug"), &url, &format!("{e:?}"));
                }
            }
            let nodes = [
                url.clone(),
                url.replace(":1", ":2"),
                url.replace(":1", ":3"),
            ];
            let redlock = LockClient::builder().redlock(nodes);
            assert_clean(
                &format!("{what} redlock builder"),
                &url,
                &format!("{redlock:?}"),
            );
            match redlock.build_unchecked() {
                Ok(client) => {
                    assert_clean(&format!("{what} redlock"), &url, &format!("{client:?}"))
                }
                Err(e) => assert_clean(
                    &format!("{what} redlock error"),
                    &url,
                    &format!("{e} {e:?}"),
                ),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 95 * 10 - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_errors_and_logs_carry_no_password() {
    let (logs, _guard) = LogCapture::start();
    for c in ['@', '#', '/', '?', ':', '%', '&', ' ', '"', '\\'] {
        for (form, url) in forms(&password(c)).into_iter().take(5) {
            if is_user_name(form, c) {
                continue;
            }
            let result = LockClient::builder()
                .url(url.clone())
                .connection_timeout(Duration::from_millis(100))
                .command_timeout(Duration::from_millis(100))
                .build()
                .await;
            if let Err(e) = result {
                assert_clean(
                    &format!("[{form}, {c:?}] connect error"),
                    &url,
                    &format!("{e} {e:?}"),
                );
            }
        }
    }
    assert_clean("logs", "all of them", &logs.text());
}

/// A wrong password over TLS is an authentication failure, not a TLS one,
/// fails at once, and leaks neither the password nor a certificate.
#[tokio::test(flavor = "current_thread")]
async fn a_wrong_password_over_tls_is_auth_and_leaks_nothing() {
    let tls = redlock_tests::TlsRedis::start(redlock_tests::ClientAuth::Off).await;
    redlock_tests::require_password(tls.server.url(), "right-secret").await;
    let url = tls.url().replace("rediss://", "rediss://:wrong-Zq9@");
    let (logs, _guard) = LogCapture::start();
    let started = std::time::Instant::now();
    let error = LockClient::builder()
        .url(&url)
        .tls_certificates(redlock_runtime::TlsCertificates::new().root_ca_pem(tls.ca_pem.clone()))
        .connection_timeout(Duration::from_secs(20))
        .build()
        .await
        .expect_err("a wrong password");
    assert!(
        matches!(
            error,
            redlock_runtime::LockError::Connect {
                failure: redlock_runtime::ConnectFailure::Auth,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "{error}");
    let logged = logs.text();
    // The capture works: the failed attempt is logged (at debug).
    assert!(logged.contains("connection attempt failed"), "{logged}");
    for text in [error.to_string(), format!("{error:?}"), logged] {
        assert!(!text.contains("wrong-Zq9"), "the password leaked: {text}");
        assert!(!text.contains("BEGIN"), "a certificate leaked: {text}");
    }
}
